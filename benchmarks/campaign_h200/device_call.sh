#!/bin/bash
# One device call of the 2xH200 campaign proof, run from the repository root on the device:
#   bash benchmarks/campaign_h200/device_call.sh NIGHT [run_nights.py args...]
# NIGHT 1 starts a fresh home; 2 or 3 resume the home an earlier call left on the same warm machine
# (--resume), or, when the machine was handed back in between (the home is gone), run nights 1,NIGHT
# in this call with a smaller A/B budget. zlops' dependencies come from the wheels in $WHEELS (the
# device has no network); CODE is where zlops, suites and this folder are (default: the checkout).
set -u
n=$1; shift
PY=${PY:-python3}
CODE=${CODE:-$PWD}
WHEELS=${WHEELS:-.devcarry/whl}
if [ -z "${SKIP_PIP:-}" ] && [ ! -d /tmp/site/pydantic ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl || exit 3
fi
# NVLink multicast stays off (docs/campaigns.md): the lent hosts' GPUs are shared
export PYTHONPATH=$CODE:/tmp/site${EXTRA_PATH:+:$EXTRA_PATH} PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
home=${ZH:-/tmp/zh}/home
if [ "$n" = 1 ]; then args="--nights 1"
elif [ -f "$home/zlops.json" ]; then args="--nights $n --resume"
else echo "cold machine: no $home, running nights 1,$n"; args="--nights 1,$n --ab-budget-s 560"; fi
mkdir -p "$OUT"
set -o pipefail
timeout "${LIMIT:-570}" $PY "$CODE/benchmarks/campaign_h200/run_nights.py" --home "$home" --out "$OUT" \
  --sizes "${SIZES:-67108864}" $args "$@" 2>&1 | tee "$OUT/night$n.log"
rc=$?
cp "$home/nights.json" "$OUT/" 2>/dev/null
echo "rc=$rc"
exit $rc
