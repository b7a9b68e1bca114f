#!/usr/bin/env bash
# Issue 16's proof on a real H200: one bisection through `zlops bisect` over a real first-parent range of
# a real kernel suite (the trimmed FlagGems of tests/data/flaggems_h200/PROVENANCE.md).
#
#   OUT=/tmp/out CARRY=/path/to/.devcarry bash benchmarks/h200/bisect_flaggems.sh
#
# 1. The range (made here with git, fixed dates, so its SHAs are the same on every machine):
#    good end A (the bundle's master~2, FlagGems as fetched), then 8 first-parent commits:
#      1 B (the bundle's master~1, README only), 2-5 docs-only commits, 6 the bundle's "abs: compute twice"
#      (cherry-picked: the abs Triton kernel launches twice), 7-8 docs-only commits = the bad end.
# 2. Nights through `zlops nightly` (production judge, -m abs only): A, A, A, then the bad end twice. The
#    1G-element abs shapes (0.02-0.07% between processes) double: a clear step confirms them SEVERE on the
#    second bad night, and the alerts open.
# 3. `zlops bisect` of the first confirmed alert (the others of the range join it), on the same device.
#    One FlagGems process costs ~18 s (12-14 s of it before anything is measured), so the 600 s call
#    affords ~20 processes for the bisection: `statistic: median, min_pairs/max_pairs: 2` (the default
#    rank CI of the shift needs 4 + 4 runs at 95%; docs/evidence/h200_bisect/README.md says why this is
#    enough here). 8 commits: reproduce + 3 steps + verify = 5 A/Bs x 4 processes.
# Everything lands in $OUT/h200_bisect.tar.gz: reports, alert list, `zlops bisect` and `zlops alert show`
# output, the stored bisection and steps (JSON, every run's value), the outbox (the thread reply), walls.
#
# Inputs beside this checkout (the device tool sends /work/main's tree; carry them):
#   $CARRY/flaggems.bundle, $CARRY/whl/*.whl   as benchmarks/h200/flaggems_nights.sh
# Knobs: BUDGET_S (585): the bisection gets what is left of it less 25 s (its device-time budget pauses it
# before the call's limit; a paused bisection is recorded as such).
set -uo pipefail
REPO=$PWD
OUT=${OUT:-/tmp/zlops-bisect}
CARRY=${CARRY:-$REPO/.devcarry}
BUDGET_S=${BUDGET_S:-585}
E=$OUT/h200_bisect
HOME_Z=/tmp/zb
UP=/tmp/flaggems_bisect_upstream
mkdir -p "$E"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if [ -d "$CARRY/whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$CARRY"/whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$REPO PATH=/tmp/site/bin:$PATH
fi
rm -rf "$UP" "$HOME_Z"
bash "$REPO/benchmarks/h200/bisect_range.sh" "$CARRY/flaggems.bundle" "$UP" > "$E/range.txt" || exit 1
GOOD=$(git -C "$UP" rev-parse master~8)
BAD=$(git -C "$UP" rev-parse master)
git -C "$UP" log --first-parent -9 --format="%H %an %ad %s" master > "$E/upstream_log.txt"
cat > "$E/zlops.yaml" <<YAML
home: $HOME_Z
pools:
  h200: {backend: cuda, devices: [0]}
suites:
  flaggems:
    repo: $UP
    branch: master
    install: []
    system_site_packages: true
    command: ["python", "-m", "pytest", "{worktree}/benchmark", "-m", "{cases}", "--level", "core",
              "--dtypes", "float16", "--record", "log", "--warmup", "100", "--iter", "100",
              "-p", "no:cacheprovider", "-q", "-s"]
    select: {token: "^([^/]+)/", join: " or ", every: "abs"}
    results_glob: "result*.log"
    results_name: flaggems_record.log
    format: flaggems-record
    pools: [h200]
    rounds: 1
    timeout_s: 600
    env: {PYTHONPATH: "/tmp/site"}
noise: {ab_pairs: 0}
bisect: {statistic: median, min_pairs: 2, max_pairs: 2, extend_pairs: 2, builds_per_night: 16,
         device_s_per_night: 100000}
YAML
python3 -m zlops.cli config check "$E/zlops.yaml" > "$E/config_check.txt" 2>&1 || { cat "$E/config_check.txt"; exit 1; }
(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv;
 python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)') > "$E/env.txt" 2>&1
n=0
for sha in "$GOOD" "$GOOD" "$GOOD" "$BAD" "$BAD"; do
  label=$([ "$sha" = "$GOOD" ] && echo good || echo bad)
  start=$SECONDS
  python3 -m zlops.cli --plain nightly --config "$E/zlops.yaml" --sha "$sha" --run-id "night-$n-$label" \
    > "$E/night$n-$label.txt" 2>&1 || echo "night $n exit $?" >> "$E/night$n-$label.txt"
  echo "night $n ($label ${sha:0:7}) wall $((SECONDS - start)) s" | tee -a "$E/walls.txt"
  RUN=$(ls -d "$HOME_Z"/artifacts/flaggems/*night-$n-$label* 2>/dev/null | head -1)
  [ -n "$RUN" ] && cp "$RUN/report.txt" "$E/night$n-$label.report.txt" 2>/dev/null
  n=$((n+1))
done
python3 -m zlops.cli alert list --config "$E/zlops.yaml" > "$E/alerts.txt" 2>&1
ALERT=$(python3 - "$E/zlops.yaml" <<'PY'
import sys
from zlops.alerts.lifecycle import AlertState
from zlops.config.settings import load_config
from zlops.steps.context import open_store
store = open_store(load_config(sys.argv[1]))
confirmed = sorted(store.alerts(suite="flaggems", states={AlertState.CONFIRMED}), key=lambda a: a.id)
# the 1G-element latency first: the clearest series
confirmed.sort(key=lambda a: (not ("1073741824" in a.case and a.metric == "latency"), a.id))
print(confirmed[0].id if confirmed else "")
PY
)
echo "alert to bisect: ${ALERT:-none}" | tee -a "$E/walls.txt"
if [ -n "$ALERT" ]; then
  left=$((BUDGET_S - SECONDS - 25))
  start=$SECONDS
  timeout "$left" python3 -m zlops.cli --plain bisect --config "$E/zlops.yaml" "$ALERT" > "$E/bisect.txt" 2>&1
  echo "bisect exit $? wall $((SECONDS - start)) s (limit $left s)" | tee -a "$E/walls.txt" "$E/bisect.txt"
  python3 -m zlops.cli alert show --config "$E/zlops.yaml" "$ALERT" > "$E/alert_show.txt" 2>&1
fi
python3 - "$E/zlops.yaml" "${ALERT:-0}" > "$E/bisection.json" <<'PY'
import json, sys
from zlops.bisect.search import evidence_to_json
from zlops.config.settings import load_config
from zlops.steps.context import open_store
store = open_store(load_config(sys.argv[1]))
aid = int(sys.argv[2])
b = store.bisection_of_alert(aid) if aid else None
out = {"alert": aid, "bisection": None, "steps": [], "outbox": []}
if b is not None:
    out["bisection"] = {"id": b.id, "state": b.state.value, "reason": b.reason, "culprit_sha": b.culprit_sha,
                        "culprit_subject": b.culprit_subject, "culprit_author": b.culprit_author,
                        "commits": list(b.commits), "targets": [t.__dict__ for t in b.targets],
                        "alert_ids": list(b.alert_ids), "candidates": list(b.candidates), "pool": b.pool,
                        "device": b.device}
    out["steps"] = [{"kind": s.kind.value, "sha": s.sha, "base_sha": s.base_sha, "position": s.position,
                     "outcome": s.outcome.value, "pairs": s.pairs, "seconds": s.seconds, "builds": s.builds,
                     "note": s.note, "evidence": evidence_to_json(s.evidence)} for s in store.bisection_steps(b.id)]
out["outbox"] = [{"id": i.id, "kind": i.kind, "parent_id": i.parent_id, "payload": i.payload}
                 for i in store.outbox_items(statuses=("pending", "failed", "sent"))
                 if i.kind.startswith(("alert-", "culprit-", "bisect-")) and not i.kind.endswith("-figures")]
print(json.dumps(out, indent=1, default=str))
PY
ident=$(ls "$HOME_Z"/artifacts/flaggems/*/h200/0/run_identity.json 2>/dev/null | head -1)
[ -n "$ident" ] && cp "$ident" "$E/run_identity.json"
echo "total wall ${SECONDS} s" >> "$E/walls.txt"
tar czf "$OUT/h200_bisect.tar.gz" -C "$OUT" h200_bisect && rm -rf "$E"
