# Sourced by the H200 device scripts of the FlagGems hold-outs (flaggems_holdout_device.sh, kernel_seed_cost.sh):
# the carried wheels into /tmp/site (on PYTHONPATH), and one detached checkout per LABEL=REV of $REVS of the
# upstream bundle $CARRY/$BUNDLE, in /tmp/<prefix>_<LABEL>. Sets the array `checkouts` (--checkout LABEL=PATH ...,
# the recorders' arguments) and writes the bundle's log to $R/upstream_log.txt.
#   holdout_checkouts PREFIX
holdout_checkouts() {
  local prefix=$1 lr
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$CARRY"/whl/*.whl || return 1
  export PYTHONPATH=/tmp/site
  rm -rf "/tmp/${prefix}_up"
  git clone -q "$CARRY/$BUNDLE" "/tmp/${prefix}_up" || return 1
  checkouts=()
  for lr in $REVS; do
    rm -rf "/tmp/${prefix}_${lr%%=*}"
    git -C "/tmp/${prefix}_up" worktree add -q --detach "/tmp/${prefix}_${lr%%=*}" "${lr#*=}" || return 1
    checkouts+=(--checkout "${lr%%=*}=/tmp/${prefix}_${lr%%=*}")
  done
  git -C "/tmp/${prefix}_up" log --format='%H %s' > "$R/upstream_log.txt"
}
