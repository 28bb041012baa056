#!/usr/bin/env bash
# One seed of the evidence-size study, whole, in one session (README.md, "How the runs are split"): the seed's fixed
# and lookahead runs, then the measurement of its lookahead run, written into this folder:
#
#     docs/results/evidence-size/seed.sh 801 RUNS     # then 802, then 803; rerun the same line to resume
#
# Writes part-sSEED.json (evidence_size.py's figures for this seed's run; --join pools the three). Times each step on
# stderr; ../session.sh says what it shares with the other studies' scripts.
source "$(dirname "$0")/../session.sh"
unit seed.sh SEED "801 802 803" "$@"
seed=$value

step "seed $seed: fixed and lookahead"
"$lake" train --preset small --compare --seeds 1 --set "seed=$seed" --name "esize-s$seed" --output-dir "$runs" \
    --arm fixed --arm "lookahead=engineer.spec=lookahead"
step "the measurement"
"$py" "$here/evidence_size.py" "$runs/esize-s$seed-lookahead" --per-side 1000 --sizes 400,800,1600,3200 \
    --resamples 2000 --work "$runs/evidence-size" --json "$here/part-s$seed.json"
step "done: seed $seed"
