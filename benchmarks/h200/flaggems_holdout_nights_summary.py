"""What each live night of benchmarks/h200/flaggems_holdout_nights.sh decided, read back from zlops' own store.

    python benchmarks/h200/flaggems_holdout_nights_summary.py CONFIG NIGHTS_TSV OUT_DIR

NIGHTS_TSV: one line per night run so far (index, label, sha, run id, wall seconds, exit code). Writes into
OUT_DIR, per night, ``night<N>-<label>.json``: the run's meta (with its A/B cost), every loud verdict (improved,
potential, regression, severe), suspect, unmeasurable and A/B-judged row with its figures and note, the slowed
shape's rows and the night's alert events; and ``nights.json``: all nights and the alerts at the end. Prints the
verdict table. GPU serials and UUIDs are removed from everything written. tests/stats/test_h200_holdout_live.py
re-derives issue 22's Done-when figures from ``nights.json``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

SLOWED_CASE = os.environ.get("ZL_SLOWED_CASE", "mean/float16/(1024x1024x1024, 1)")   # hold-out 2: sum/...
LOUD = {"improved", "potential", "regression", "severe"}   # issue 22's "verdicts"
_SECRET_KEY = re.compile(r"uuid|serial|board_id|part_number", re.I)
_GPU_UUID = re.compile(r"GPU-[0-9a-fA-F-]{8,}|MIG-[0-9a-fA-F-]{8,}")


def scrub(value: Any) -> Any:
    """The value with GPU identifiers (keys naming a uuid/serial, GPU-... strings) removed."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not _SECRET_KEY.search(str(k))}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        return _GPU_UUID.sub("GPU-<removed>", value)
    return value


def row(c: Any) -> dict[str, Any]:
    j = c.judgement
    return {"case": c.case, "metric": c.metric, "verdict": c.verdict.value, "change_pct": j.change_pct,
            "worse_pct": j.worse_pct, "threshold_pct": j.threshold_pct, "note": j.note,
            "figures": None if j.figures is None else j.figures.to_dict(),
            "head": None if c.head is None else [c.head.median, c.head.n],
            "base": None if c.base is None else [c.base.median, c.base.n]}


def main() -> int:
    from zlops.config.settings import load_config
    from zlops.steps.context import open_store

    config_path, nights_tsv, out_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out_dir.mkdir(parents=True, exist_ok=True)
    config = load_config(config_path)
    store = open_store(config)
    runs = {r.run_key: r for r in store.list_runs(suite="flaggems")}
    nights: list[dict[str, Any]] = []
    for line in nights_tsv.read_text().splitlines():
        if not line.strip():
            continue
        index, label, sha, run_id, wall_s, rc = line.split("\t")
        run = next((r for k, r in runs.items() if k.endswith(run_id) or run_id in k), None)
        night: dict[str, Any] = {"night": int(index), "label": label, "sha": sha, "run_id": run_id,
                                 "wall_s": float(wall_s), "rc": int(rc), "run_key": None}
        if run is not None:
            rows = list(store.comparisons(run.run_key))
            events = [{"case": a.case, "metric": a.metric, "to_state": e.get("to_state"),
                       "announced": bool(e.get("announced"))} for a, e in store.run_alert_events(run.run_key)]
            night.update({
                "run_key": run.run_key, "accepted": run.accepted,
                "meta": run.meta or {},
                "verdict_counts": dict(Counter(c.verdict.value for c in rows)),
                "series": len(rows),
                "loud": [row(c) for c in rows if c.verdict.value in LOUD],
                "suspects": [row(c) for c in rows if c.verdict.awaiting_confirmation],
                "unmeasurable": [row(c) for c in rows if c.verdict.value == "unmeasurable"],
                "slowed": [row(c) for c in rows if c.case == SLOWED_CASE],
                # every row an A/B judged (cleared, confirmed, inconclusive ...): its CI, threshold and note
                "ab_rows": [row(c) for c in rows
                            if c.figures is not None and c.figures.reference_label.startswith("A/B")],
                "alert_events": events,
            })
        night = scrub(night)
        nights.append(night)
        (out_dir / f"night{index}-{label}.json").write_text(json.dumps(night, indent=1, default=str) + "\n")
    from zlops.alerts.explain import attribution_texts

    stored = list(store.alerts(suite="flaggems", states=None, limit=None))
    kernels = store.read(attribution_texts, stored, config)   # issue 25's line per alert (suites with kernels:)
    alerts = [{"id": a.id, "case": a.case, "metric": a.metric, "state": a.state.value, "kernels": kernels.get(a.id)}
              for a in stored]
    (out_dir / "nights.json").write_text(json.dumps(scrub({"nights": nights, "alerts_at_end": alerts}), indent=1,
                                                    default=str) + "\n")
    for n in nights:   # the verdict table (verdicts.txt)
        ab = ((n.get("meta") or {}).get("ab") or {}).get("h200") or {}
        print(f"night {n['night']} {n['label']} ({n['sha'][:7]}): wall {n['wall_s']:.0f} s, exit {n['rc']}, "
              f"{n.get('series', 0)} series {n.get('verdict_counts')}")
        print(f"  A/B: runs {ab.get('runs', 0)}, {ab.get('seconds', 0)} s, estimated {ab.get('est_s', '-')} s, "
              f"budget {ab.get('budget_s', '-')} s ({ab.get('budget_basis', '-')}), suspects {ab.get('suspects', '-')}"
              f", outcomes {ab.get('outcomes', '-')}, stopped: {ab.get('stopped', '-')}")
        for r in n.get("loud", []):
            print(f"  LOUD {r['case']} {r['metric']} {r['verdict']} {r['change_pct']:+.2f}%: {r['note'][:240]}")
        for r in n.get("slowed", []):
            print(f"  slowed {r['metric']}: {r['verdict']} "
                  f"{'' if r['change_pct'] is None else format(r['change_pct'], '+.2f') + '%'}: {r['note'][:240]}")
    for a in alerts:
        print(f"alert #{a['id']} {a['case']} {a['metric']}: {a['state']}")
        if a["kernels"]:
            print(f"  kernels: {a['kernels']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
