#!/usr/bin/env bash
# One seed of smol-self's comparison with its own fixed, whole, in one session (README.md, "The comparison"): both
# arms, then the seed's compare file, the self arm's decisions and its report, written into this folder:
#
#     MAPF_LAKE_MODELS=MODELS docs/results/smol-self/seed.sh 722 RUNS     # then 723; rerun the same line to resume
#
# Writes compare-sSEED.json, decisions-sSEED.json and report-self-sSEED.txt (each renamed into place once whole).
# Times each step on stderr; ../session.sh says what it shares with the other studies' scripts.
source "$(dirname "$0")/../session.sh"
unit seed.sh SEED "721 722 723" "$@"
seed=$value
out="$runs/s$seed"

step "seed $seed: fixed and self"
"$lake" train --preset smol-self --compare --seeds 1 --set "seed=$seed" --name self3 --output-dir "$out" \
    --arm fixed --arm "self=engineer.spec=llm:self" --primary self
step "compare file, decisions, report"
into "$here/compare-s$seed.json" "$lake" compare --json --primary self "$out/self3-fixed" "$out/self3-self"
"$py" "$here/../smollm2-small/decisions.py" "$out/self3-self" --json "$here/decisions-s$seed.json" > /dev/null
into "$here/report-self-s$seed.txt" "$lake" report "$out/self3-self"
step "done: seed $seed"
