"""Hold-out 4 on the H200 (tests/data/flaggems_h200/holdout4_2026-12-03/PROVENANCE.md): FlagGems min, argmin and
div_tensor, never run by zlops before, production defaults, nights of unchanged code on two leases.

What the record shows, re-derived here from the nights' JSON (what the store held after each night):
- no loud verdict (improved, potential, regression, severe) and no confirmed alert in seven nights of unchanged code;
- every A/B that ran said `inconclusive` for every suspect (none `unchanged` without a decision);
- lease 1 (before A/B runs were seeded): the A/B's first pair took 50.2 and 55.2 s (each side compiled and
  autotuned every kernel: argmin's split-K kernel has dozens of autotune variants), the six runs after it
  23.1-29.1 s: +30.1% over the estimate, outside issue 22's 30%;
- lease 2 (zlops e02e4c8, each A/B run seeded from the nights' shard caches): first pair 28.2 and 30.2 s, the
  A/B 242.5 s against 224.7 s estimated (+7.9%), within the 300 s floor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REC = Path(__file__).resolve().parents[1] / "data" / "flaggems_h200" / "holdout4_2026-12-03"
LOUD = {"improved", "potential", "regression", "severe"}


def _nights(lease: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((REC / lease / "json").glob("night*-*.json"))]


@pytest.mark.parametrize("lease", ["lease1", "lease2"])
def test_no_loud_verdict_and_no_confirmed_alert_on_unchanged_code(lease: str) -> None:
    nights = _nights(lease)
    assert [n["label"] for n in nights] == (["A", "A", "D1", "D1"] if lease == "lease1" else ["A", "A", "D1"])
    for n in nights:
        assert not LOUD & set(n["verdict_counts"]), (n["night"], n["verdict_counts"])
        assert not n["loud"]
        events = n["alert_events"]
        assert all(e["to_state"] in ("new", "cleared") and not e["announced"] for e in events), n["night"]


def _ab(lease: str, night: int) -> dict:
    (n,) = [n for n in _nights(lease) if n["night"] == night]
    return n["meta"]["ab"]["h200"]


def test_unseeded_ab_runs_paid_a_cold_first_pair_and_missed_the_estimate() -> None:
    ab = _ab("lease1", 3)
    runs = [s for _, s in ab["observed"]]
    assert [round(s, 1) for s in runs[:2]] == [50.2, 55.2] and max(runs[2:]) < 30
    assert ab["outcomes"] == {"inconclusive": 11}
    assert ab["seconds"] / ab["est_s"] - 1 == pytest.approx(0.301, abs=0.001)   # outside 30%
    assert ab["seconds"] <= ab["budget_s"]


def test_seeded_ab_runs_cost_what_they_were_estimated_to() -> None:
    ab = _ab("lease2", 3)
    runs = [s for _, s in ab["observed"]]
    rest = sorted(runs[2:])
    assert max(runs[:2]) < 1.1 * rest[len(rest) // 2]   # the first pair is no longer cold
    assert abs(ab["seconds"] / ab["est_s"] - 1) < 0.30 and ab["seconds"] / ab["est_s"] - 1 == pytest.approx(0.079, abs=0.001)
    assert ab["seconds"] <= ab["budget_s"] == 300.0
    assert ab["outcomes"] == {"inconclusive": 14}
