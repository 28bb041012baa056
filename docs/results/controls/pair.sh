#!/usr/bin/env bash
# One seed pair of the controls, whole, in one session (README.md, "How the runs are split"): commands 1-3 with
# --seeds 2, then the pair's compare files and its two second draws, written into this folder:
#
#     docs/results/controls/pair.sh 601 RUNS     # then 603, then 605; rerun the same line to resume
#
# Writes all-arms-sA-B.json (the seven arms), replay-self-sA-B.json and second-draw-sA.json, second-draw-sB.json,
# each through a temporary file renamed into place. Times each step on stderr; ../session.sh says what it shares
# with the other studies' scripts.
source "$(dirname "$0")/../session.sh"
unit pair.sh FIRST_SEED "601 603 605" "$@"
first=$value
second=$((first + 1))
arms=(fixed gap-band band-replay band-first-only band-no-remedy band-no-lengths band-no-plan-first)
common=(--preset small --compare --seeds 2 --set "seed=$first" --output-dir "$runs/controls")
folders() {  # folders SEED...: the seven arms' run folders of those seeds
    for arm in "${arms[@]}"; do for seed in "$@"; do echo "$runs/controls/small-$arm-s$seed"; done; done
}

step "command 1: fixed and gap-band, seeds $first-$second"
"$lake" train "${common[@]}" --arm fixed --arm gap-band --primary gap-band
step "command 2: the five controls"
"$lake" train "${common[@]}" $(printf -- '--arm %s ' "${arms[@]}")
step "command 3: replay-self"
"$lake" train "${common[@]}" --arm gap-band \
    --arm "replay-self=engineer.spec=replay-decisions;engineer.options.pairing=same;engineer.plan_first=true"
step "compare files"
mapfile -t all < <(folders "$first" "$second")
into "$here/all-arms-s$first-$second.json" "$lake" compare --json "${all[@]}"
into "$here/replay-self-s$first-$second.json" "$lake" compare --json --reference gap-band --primary replay-self \
    "$runs"/controls/small-{gap-band,replay-self}-s{"$first","$second"}
for seed in "$first" "$second"; do
    step "second draw, seed $seed"
    mapfile -t seven < <(folders "$seed")
    "$py" "$here/../protocol3/second_draw.py" "${seven[@]}" --per-cell 1000 --work "$runs/controls/second-draw" \
        --json "$here/second-draw-s$seed.json"
done
step "done: seeds $first-$second"
