"""Replay of the campaign recorded on 2 real H200s (tests/data/campaign_h200x2/PROVENANCE.md): NCCL and a
hand-written ring all-reduce of 64 MiB at P = 1, 2, variants ring and tree (NCCL_ALGO), night 1 on the
first commit and night 3 on the commit that adds a scratch all-reduce to nccl/tree at P > 1.

The lanes' results files are parsed as ingest parses them; the derived series (strong-scaling
efficiency, nccl/ring ratio) must reproduce the values the nights stored, and the real slowdown must be
in the data: nccl/tree at P=2 twice as slow, its efficiency at P=2 down ~44%, the ring variant not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.campaign import scaling
from zlops.config.settings import parse_config
from zlops.formats import parse_results

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign_h200x2"
NIGHTS = {1: 0, 3: 1}   # night label -> index in nights.json


def _night(n: int) -> list:  # type: ignore[type-arg]
    return [r for lane in (0, 1) for r in parse_results("zlops-json", DATA / f"night{n}-lane{lane}.results.json")]


def _derived(n: int) -> dict[tuple[str, str], float]:
    campaign = parse_config(json.loads((DATA / "zlops.json").read_text())).suites["collectives"].campaign
    assert campaign is not None
    return {(r.case, r.metric): r.samples[0] for r in scaling.derive(_night(n), campaign.ratios)}


@pytest.mark.parametrize("night", [1, 3])
def test_the_h200_derived_series_replay_to_the_stored_values(night: int) -> None:
    derived = _derived(night)
    stored = {(r["case"], r["metric"]): r["head"] for r in json.loads((DATA / "nights.json").read_text())[NIGHTS[night]]["rows"]
              if scaling.derived_kind(r["metric"]) and r["head"] is not None}
    assert derived and derived.keys() == stored.keys()
    for key, value in derived.items():
        assert value == pytest.approx(stored[key], rel=1e-12), key


def test_the_real_slowdown_is_in_the_recorded_h200_data() -> None:
    t1 = {r.case: r.median for r in _night(1) if r.metric == "execute_s"}
    t3 = {r.case: r.median for r in _night(3) if r.metric == "execute_s"}
    assert len(t1) == len(t3) == 8   # 1 case x 1 size x P {1,2} x {ring, tree} x {nccl, ring}, every shard measured
    assert t3["allreduce/64MiB/p2/tree/nccl"] / t1["allreduce/64MiB/p2/tree/nccl"] == pytest.approx(2.0, rel=0.05)
    assert t3["allreduce/64MiB/p2/ring/nccl"] / t1["allreduce/64MiB/p2/ring/nccl"] == pytest.approx(1.0, abs=0.05)
    e1, e3 = _derived(1), _derived(3)
    key = ("allreduce/64MiB/tree/nccl", "efficiency_p2")
    assert (e3[key] / e1[key] - 1) * 100 == pytest.approx(-44.5, abs=1.0)
    # what zlops said about it that night, in scaling terms
    report = (DATA / "night3.report.md").read_text()
    assert "efficiency at P=2 fell 44.5%" in report
