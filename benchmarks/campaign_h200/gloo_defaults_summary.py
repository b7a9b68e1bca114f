"""The figures of the gloo campaign under the production defaults, from what its runs recorded.

    python benchmarks/campaign_h200/gloo_defaults_summary.py [tests/data/campaign_gloo_cpu_defaults]

Per run and night: the commit, the verdict counts, announced verdicts, alerts by state, the load
(1-minute average before and after) and other processes' CPU during the night's shards; per A/B: the
shards, runs and pairs, realised against estimated device-seconds, the budget, the outcomes and why it
stopped; per run: what the slowed shard's series got on the slowdown's nights. docs/evidence/gloo_defaults.md
quotes this output; tests/campaign/test_gloo_defaults_replay.py checks the same record.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

ANNOUNCED = ("potential", "regression", "severe", "improved")
#: per planted slowdown (the subject's first word): the series it moves (the slowed shard's time, wall time and
#: bandwidth, its efficiency and its ratio), ``{size}`` the run's size label; runs 1-3 slowed tree/nccl at P=2 (1 MiB),
#: runs 7 (the hold-out, 1 MiB) and 8 (the same change at 4 MiB on a quiet host) ring/ring
SLOWED = {
    "tree:": [("allreduce/{size}/p2/tree/nccl", "execute_s"), ("allreduce/{size}/p2/tree/nccl", "wall_s"),
              ("allreduce/{size}/p2/tree/nccl", "bw_execute"), ("allreduce/{size}/tree/nccl", "efficiency_p2"),
              ("allreduce/{size}/p2/tree", "ratio_nccl_over_ring")],
    "ring:": [("allreduce/{size}/p2/ring/ring", "execute_s"), ("allreduce/{size}/p2/ring/ring", "wall_s"),
              ("allreduce/{size}/p2/ring/ring", "bw_execute"), ("allreduce/{size}/ring/ring", "efficiency_p2"),
              ("allreduce/{size}/p2/ring", "ratio_nccl_over_ring")],
}


def size_label(run_dir: Path) -> str:
    """The run's one grid size as the case names spell it (``1MiB``, ``4MiB``: zlops.campaign.plan.size_label)."""
    [size] = json.loads((run_dir / "zlops.json").read_text())["suites"]["collectives"]["campaign"]["grid"]["sizes"]
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def summarize(data: Path) -> list[str]:
    out: list[str] = []
    for run_dir in sorted(p for p in data.glob("run*") if p.is_dir()):
        nights = json.loads((run_dir / "nights.json").read_text())
        label = size_label(run_dir)
        prefix = f"allreduce/{label}/"
        out.append(f"## {run_dir.name}")
        out.append("| night | commit | s | verdicts | announced | alerts | load before/after | "
                   "foreign CPU % (median, max) |")
        out.append("|---|---|---:|---|---|---|---|---|")
        slowed_from, slowed = next((i, [(case.format(size=label), metric)
                                        for case, metric in SLOWED[n["subject"].split()[0]]])
                                   for i, n in enumerate(nights) if n["subject"].split()[0] in SLOWED)
        for n in nights:
            counts = Counter(r["verdict"] for r in n["rows"])
            loud = [f"{r['case']} {r['metric']} {r['verdict']}" for r in n["rows"] if r["verdict"] in ANNOUNCED]
            alerts = Counter(a["state"] for a in n["alerts"])
            fc = n.get("foreign_cpu_pct", {}).get("night") or []
            foreign = f"{statistics.median(fc):.0f}, {max(fc):.0f}" if fc else "-"
            out.append(f"| {n['night']} | {n['subject'][:40]} | {n['seconds']:.0f} | "
                       f"{', '.join(f'{k} {v}' for k, v in sorted(counts.items()))} | {'; '.join(loud) or 'none'} | "
                       f"{', '.join(f'{k} {v}' for k, v in sorted(alerts.items())) or 'none'} | "
                       f"{n['load_before'][0]:.1f} / {n['load_after'][0]:.1f} | {foreign} |")
        out.append("")
        out.append("| night | A/B shards | runs (pairs) | device-s realised / estimated (off) | budget | outcomes | "
                   "stopped |")
        out.append("|---|---|---|---|---|---|---|")
        for n in nights:
            ab = n["ab"].get("h200")
            if not ab:
                continue
            if not ab.get("runs"):
                why = ab.get("stopped") or ab.get("error")
                out.append(f"| {n['night']} | - | 0 | - | {ab.get('budget_s')} | - | {why} |")
                continue
            off = (ab["seconds"] / ab["est_s"] - 1) * 100 if ab.get("est_s") else None
            shards = ", ".join(s.replace(prefix, "") for s in ab.get("shards", []))
            out.append(f"| {n['night']} | {shards} | {ab['runs']} ({ab.get('pairs')}) | {ab['seconds']:.0f} / "
                       f"{ab.get('est_s', 0):.0f} ({_pct(off)}) | {ab['budget_s']:.0f} | {ab.get('outcomes')} | "
                       f"{ab['stopped']} |")
        out.append("")
        out.append("| slowed series | " + " | ".join(f"night {n['night']}" for n in nights[slowed_from:]) + " |")
        out.append("|---|" + "---|" * len(nights[slowed_from:]))
        for key in slowed:
            cells = []
            for n in nights[slowed_from:]:
                r = next((r for r in n["rows"] if (r["case"], r["metric"]) == key), None)
                if r is None:
                    cells.append("missing")
                    continue
                thr = f", threshold {r['threshold_pct']:.0f}%" if r.get("threshold_pct") else ""
                cells.append(f"{r['verdict']} {_pct(r['change_pct'])}{thr}")
            out.append(f"| {key[0].replace(prefix, '')} {key[1]} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def main() -> int:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parents[2] / "tests" / "data" / "campaign_gloo_cpu_defaults"
    print("\n".join(summarize(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
