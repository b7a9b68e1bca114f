#!/usr/bin/env bash
# Issue 22's hold-out recording on the H200 (device side): unpack the trimmed FlagGems upstream of
# flaggems_holdout_upstream.sh, check out A (master~2) and S (master) and record interleaved fresh processes
# with flaggems_holdout_record.py; everything lands in $OUT/holdout_<TAG>.tar.gz.
#
#   OUT=/tmp/out TAG=c1 bash benchmarks/h200/flaggems_holdout_device.sh --phase cold --phase pairs:6 ...
# (the arguments go to the recorder). Inputs, carried in .devcarry/: flaggems_holdout.bundle and whl/*.whl
# (sqlalchemy, which flag_gems needs beyond the image's torch and triton).
set -uo pipefail
REPO=$PWD
CARRY=${CARRY:-$REPO/.devcarry}
TAG=${TAG:-rec}
R=$OUT/holdout_$TAG
mkdir -p "$R"
# BUNDLE (default flaggems_holdout.bundle, in CARRY) and REVS (LABEL=REV ..., default "A=master~2 S=master"):
# the upstream and the commits recorded; the second hold-out runs BUNDLE=flaggems_holdout2.bundle with
# REVS="A=master~3 S=master~1" (and "S=master~1 K=master" for its kernel change).
BUNDLE=${BUNDLE:-flaggems_holdout.bundle}
REVS=${REVS:-"A=master~2 S=master"}
. "$(dirname "$0")/holdout_checkouts.sh"
holdout_checkouts fg || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
  python3 -c 'import sqlalchemy; print("sqlalchemy", sqlalchemy.__version__)'; nproc; uname -r
  nvidia-smi -q | grep -v -i -E 'serial|uuid|pdi|board id|part number' ; } > "$R/env.txt" 2>&1
python3 "$(dirname "$0")/flaggems_holdout_record.py" "${checkouts[@]}" \
  --out "$R" "$@" 2>&1 | tee "$R/driver.txt"
(date -u; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv) >> "$R/env_end.txt" 2>&1
rm -rf "$R/.plugin"
tar czf "$OUT/holdout_$TAG.tar.gz" -C "$OUT" "holdout_$TAG" && rm -rf "$R"
