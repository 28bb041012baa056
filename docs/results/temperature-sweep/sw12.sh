#!/bin/bash
# Temperature sweep: one 300-step GRPO stage from each small warm start (seeds 0-2), 800 held-out instances.
cd /work/main
run() { name=$1; s=$2; shift 2; out=/work/exp/sw12/$name-s$s; [ -s $out.json ] && return; echo "== $name s$s $(date +%T)";
  .venv/bin/mapf-lake bench lift --preset small --model runs/small-fixed-s$s/warm_start/model --seed $((s+1)) --steps 300 --validation 800 --json "$@" > $out.tmp 2>>$out.err && mv $out.tmp $out.json; }
for s in 0 1 2; do
  run base $s --set training.temperature=1.0
  run t050 $s --no-sft --set training.temperature=0.5
  run t075 $s --no-sft --set training.temperature=0.75
done
echo done $(date +%T)
