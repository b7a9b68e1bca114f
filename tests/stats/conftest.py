"""Shared inputs of the statistics tests: the real H200 A/A noise (tests/data/noise/PROVENANCE.md)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

NOISE_FILE = Path(__file__).resolve().parents[1] / "data" / "noise" / "h200_aa_2026-11-29.jsonl"


def load_real_noise() -> dict[str, list[float]]:
    """``{"case/timer": [night 1 .. night 16]}`` of the real A/A file (timers do_bench_ms, graph_ms)."""
    nights: dict[str, dict[int, float]] = defaultdict(dict)
    for line in NOISE_FILE.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        for timer in ("do_bench_ms", "graph_ms"):
            if rec.get(timer) is not None:
                nights[f"{rec['case']}/{timer}"][rec["night"]] = float(rec[timer])
    return {key: [v[n] for n in sorted(v)] for key, v in sorted(nights.items())}


def cv_pct(values: list[float]) -> float:
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return var ** 0.5 / mean * 100.0


@pytest.fixture(scope="session")
def real_noise() -> dict[str, list[float]]:
    return load_real_noise()


@pytest.fixture(scope="session")
def quiet_series(real_noise: dict[str, list[float]]) -> dict[str, list[float]]:
    """Real series whose A/A coefficient of variation is below 1% (the issue's 'noise below 1%')."""
    return {k: v for k, v in real_noise.items() if cv_pct(v) < 1.0}
