"""A recorded gloo campaign run of ``tests/data/campaign_gloo_cpu_defaults/<run>/`` (record.py --compact): its nights
and their rows, read once per run, and the series the ring-eighth slowdown moves."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from zlops.model import Verdict

DATA = Path(__file__).resolve().parent / "data" / "campaign_gloo_cpu_defaults"
ANNOUNCED = frozenset({Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED})


def ring_eighth_series(size: str) -> list[tuple[str, str]]:
    """What ``run_nights.py --slow ring-eighth`` moves at ``size`` ("4MiB"): the ring stack's ring variant at P=2 (its
    timings and bandwidth) and the rows that follow it (its efficiency at P=2, the P=2 nccl/ring ratio)."""
    shard = f"allreduce/{size}/p2/ring/ring"
    return [(shard, "execute_s"), (shard, "wall_s"), (shard, "bw_execute"),
            (f"allreduce/{size}/ring/ring", "efficiency_p2"), (f"allreduce/{size}/p2/ring", "ratio_nccl_over_ring")]


@cache
def nights(run: str) -> list[dict[str, Any]]:
    return json.loads((DATA / run / "nights.json").read_text())


def row(run: str, night: int, case: str, metric: str) -> dict[str, Any]:
    [r] = [r for n in nights(run) if n["night"] == night for r in n["rows"] if (r["case"], r["metric"]) == (case, metric)]
    return r
