#!/usr/bin/env bash
# Issue 25's seeded kernel cache on the H200 (device side): what `kernels: triton` costs a real FlagGems
# process with no inventory (the host's warm shared cache), with the shard's own empty cache, and with that
# cache seeded from last night's (zlops.kernels.seed), in rounds of the three, by kernel_seed_cost.py.
# Unpacks the FlagGems upstream bundle, checks out P (last night) and T (tonight); everything lands in
# $OUT/kernel_seed_<TAG>.tar.gz.
#
#   OUT=/tmp/out TAG=s1 bash benchmarks/h200/kernel_seed_cost.sh [--rounds 4] [--budget-s 540] ...
# (the arguments go to kernel_seed_cost.py). Inputs, carried in .devcarry/: the upstream bundle (BUNDLE,
# default flaggems_holdout.bundle: its master~1 is docs-only, master changes mean.py, so T recompiles the
# kernels that change moved or touched and takes the rest from the seed) and whl/*.whl (sqlalchemy, which
# flag_gems needs beyond the image's torch and triton). REVS="P=REV T=REV" picks the two commits
# (default "P=master~1 T=master"; "P=master T=master" measures a night with no kernel change; with
# BUNDLE=flaggems_holdout2.bundle, "P=master~1 T=master" is S -> K: a change of sum's non-inner kernel source).
set -uo pipefail
REPO=$PWD
CARRY=${CARRY:-$REPO/.devcarry}
TAG=${TAG:-seed}
R=$OUT/kernel_seed_$TAG
mkdir -p "$R"
BUNDLE=${BUNDLE:-flaggems_holdout.bundle}
REVS=${REVS:-"P=master~1 T=master"}
. "$(dirname "$0")/holdout_checkouts.sh"
holdout_checkouts fgs || exit 1
git -C "$REPO" rev-parse HEAD > "$R/zlops_commit.txt" 2>/dev/null || true
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
  nproc; uname -r; cat /proc/loadavg; df -h /tmp | tail -1 ; } > "$R/env.txt" 2>&1
# the driver imports zlops' kernels package from this checkout (standard library only; not on the benchmark
# processes' PYTHONPATH: they get the seed's cache manager, zlops/kernels/seedhook, through the provider)
python3 "$REPO/benchmarks/h200/kernel_seed_cost.py" "${checkouts[@]}" \
  --out "$R" "$@" 2>&1 | tee "$R/driver.txt"
(date -u; cat /proc/loadavg; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv) >> "$R/env_end.txt" 2>&1
tar czf "$OUT/kernel_seed_$TAG.tar.gz" -C "$OUT" "kernel_seed_$TAG" && rm -rf "$R"
