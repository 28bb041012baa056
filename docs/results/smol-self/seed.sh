#!/usr/bin/env bash
# One seed of smol-self's comparison with its own fixed (README.md, "The comparison with bounded numbers"), whole,
# in one session: both arms, then the seed's compare file, the self arm's decisions and its report, written here:
#
#     MAPF_LAKE_MODELS=MODELS docs/results/smol-self/seed.sh 724 RUNS   # then 725, 726; rerun the line to resume
#
# Writes compare-sSEED.json, decisions-sSEED.json, report-self-sSEED.txt and time-sSEED.txt (the wall time and peak
# memory of both arms together, /usr/bin/time -v), each renamed into place once whole.
# Times each step on stderr; ../session.sh says what it shares with the other studies' scripts.
source "$(dirname "$0")/../session.sh"
unit seed.sh SEED "724 725 726" "$@"
seed=$value
out="$runs/s$seed"

step "seed $seed: fixed and self"
mkdir -p "$out"
/usr/bin/time -v -o "$out/time-v.txt" \
    "$lake" train --preset smol-self --compare --seeds 1 --set "seed=$seed" --name selfb --output-dir "$out" \
    --arm fixed --arm "self=engineer.spec=llm:self" --primary self
into "$here/time-s$seed.txt" grep -E "Elapsed|Maximum resident" "$out/time-v.txt"
step "compare file, decisions, report"
into "$here/compare-s$seed.json" "$lake" compare --json --primary self "$out/selfb-fixed" "$out/selfb-self"
"$py" "$here/../smollm2-small/decisions.py" "$out/selfb-self" --json "$here/decisions-s$seed.json" > /dev/null
into "$here/report-self-s$seed.txt" "$lake" report "$out/selfb-self"
step "done: seed $seed"
