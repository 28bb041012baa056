#!/bin/bash
# Continue the temperature sweep without the SFT peer after seed 0 and without T=0.75.
cd /work/main
while [ ! -s /work/exp/sw12/base-s0.json ]; do sleep 15; done
pkill -f sw12.sh; sleep 2; pkill -f "bench lift --preset small --model runs/small-fixed-s0/warm_start/model --seed 1 --steps 300 --validation 800 --json --no-sft --set training.temperature=0.75"; pkill -f "training.temperature=0.5"; sleep 5
rm -f /work/exp/sw12/t050-s0.tmp /work/exp/sw12/t050-s0.err
run() { name=$1; s=$2; shift 2; out=/work/exp/sw12/$name-s$s; [ -s $out.json ] && return; echo "== $name s$s $(date +%T)";
  .venv/bin/mapf-lake bench lift --preset small --model runs/small-fixed-s$s/warm_start/model --seed $((s+1)) --steps 300 --validation 800 --json --no-sft "$@" > $out.tmp 2>>$out.err && mv $out.tmp $out.json; }
run t050 0 --set training.temperature=0.5
for s in 1 2; do
  run base $s --set training.temperature=1.0
  run t050 $s --set training.temperature=0.5
done
echo done $(date +%T)
