#!/usr/bin/env bash
# benchmarks/demo_loop.sh N: N runs of the README's main command from a fresh clone, each in a fresh home; load average sampled every 10 s.
set -u
N=${1:-10}
src=${ZLOPS_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
root=/tmp/demo-runs
rm -rf $root; mkdir -p $root
git clone -q $src $root/clone
cd $root/clone
for i in $(seq 1 $N); do
  ( while true; do awk '{print $1}' /proc/loadavg >> $root/load.$i; sleep 10; done ) & sampler=$!
  t0=$(date +%s)
  bash scripts/demo.sh --home $root/home.$i > $root/run.$i.log 2>&1; rc=$?
  t1=$(date +%s)
  kill $sampler 2>/dev/null
  loads=$(sort -n $root/load.$i | sed -n '1p;$p' | tr '\n' ' ')
  echo "run $i rc=$rc wall=$((t1-t0))s load(min max)=$loads $(date -u +%H:%M:%S)" >> $root/summary.txt
  rm -rf $root/home.$i/worktrees $root/home.$i/envs 2>/dev/null
done
echo done >> $root/summary.txt
