#!/usr/bin/env bash
# What `mapf-lake report` and `mapf-lake compare` print (and the PNGs report draws) for the recorded run folders,
# captured into OUT so that two captures, one before a change to curriculum/reports/ and one after, can be
# compared byte for byte:
#
#     docs/results/record-layer/report_identity.sh /tmp/report-before    # before the change
#     docs/results/record-layer/report_identity.sh /tmp/report-after     # after it
#     diff -r /tmp/report-before /tmp/report-after && echo identical
#
# Each case writes CASE.out (stdout), CASE.err (stderr, OUT spelt "$OUT") and CASE.rc (exit status); report's plots
# go to OUT/CASE/ (--plots), never into the run folders, which are only read. inputs.sha256 holds the digests of
# every record the commands read: if it differs between two captures, a run folder changed, not the code.
# The finished smol6 runs are listed by name (those with a final/ folder when the script was written: a
# background job writes the others).
set -u
OUT=${1:?usage: report_identity.sh OUT_FOLDER}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
mkdir -p "$OUT"

DEMO=(/work/exp/demo59/demo-fixed /work/exp/demo59/demo-gap-band /work/exp/demo59/demo-smollm2-engineer)
EX=(/work/exp/demo59/ex-grpo /work/exp/demo59/ex-grpo-random /work/exp/demo59/ex-per-stage)
SELF=(/work/exp/selfpilot/runs/smol-self)
SMOL=(/work/exp/smol6/runs/smol6-fixed-s701 /work/exp/smol6/runs/smol6-band-s701
      /work/exp/smol6/runs/smol6-smollm2-engineer-s701 /work/exp/smol6/runs/smol6-fixed-s702)
ALL=("${DEMO[@]}" "${EX[@]}" "${SELF[@]}" "${SMOL[@]}")

run() {  # run CASE ARGS...: one mapf-lake command, its outputs under OUT
    local name=$1
    shift
    (cd "$ROOT" && PYTHONPATH="$ROOT" "$PY" -m curriculum.cli "$@") >"$OUT/$name.out" 2>"$OUT/$name.err.raw"
    echo $? >"$OUT/$name.rc"
    sed "s|$OUT|\$OUT|g" "$OUT/$name.err.raw" >"$OUT/$name.err" && rm "$OUT/$name.err.raw"
}

for folder in "${ALL[@]}"; do
    for file in manifest.json run.yaml stage-*/stage.json stage-*/shared_from.txt untrained/summary.json \
                warm_start/summary.json final/table.json final/sampled.json; do
        [ -f "$folder/$file" ] && sha256sum "$folder/$file"
    done
done >"$OUT/inputs.sha256"

for folder in "${ALL[@]}"; do
    name=$(basename "$folder")
    run "report-$name" report "$folder" --plots "$OUT/report-$name"
    run "compare-$name" compare "$folder"
done
run report-demo report "${DEMO[@]}" --plots "$OUT/report-demo"
run report-smol report "${SMOL[@]}" --plots "$OUT/report-smol"
run report-all report "${ALL[@]}" --plots "$OUT/report-all"
for set in DEMO EX SMOL ALL; do
    declare -n runs=$set
    lower=${set,,}
    run "compare-$lower" compare "${runs[@]}"
    run "compare-$lower-json" compare --json "${runs[@]}"
    run "compare-$lower-mixed" compare --allow-mixed "${runs[@]}"
    run "compare-$lower-mixed-json" compare --allow-mixed --json "${runs[@]}"
done
run compare-smol-primary compare --primary band "${SMOL[@]}"
run compare-smol-primary-json compare --primary band --json "${SMOL[@]}"
run compare-demo-reference compare --reference gap-band --allow-mixed "${DEMO[@]}"
run compare-ex-reference-json compare --reference gap-band+per-stage --allow-mixed --json "${EX[@]}"
ls "$OUT" | wc -l
