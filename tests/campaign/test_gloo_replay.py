"""Replay of a recorded campaign: three nightlies of the real harness (suites/collectives/bench.py)
on gloo, P = 1, 2 on 2 CPU "devices" (tests/data/campaign_gloo_cpu/PROVENANCE.md).

The lanes' results files are parsed as ingest parses them and the derived series computed again: they
must reproduce the efficiency and ratio values the nights stored and judged. Night 3 recorded a real
correctness failure (the slowing commit re-reduced the output), which must stay a failed shard, never a
timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.campaign import scaling
from zlops.config.settings import parse_config
from zlops.formats import parse_results

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign_gloo_cpu"


def _night(n: int) -> list:  # type: ignore[type-arg]
    out = []
    for lane in (0, 1):
        path = DATA / f"night{n}-lane{lane}.results.json"
        out += parse_results("zlops-json", path)
    return out


@pytest.mark.parametrize("night", [1, 2, 3])
def test_derived_series_replay_to_the_stored_values(night: int) -> None:
    config = parse_config(json.loads((DATA / "zlops.json").read_text()))
    campaign = config.suites["collectives"].campaign
    assert campaign is not None
    derived = {(r.case, r.metric): r.samples[0] for r in scaling.derive(_night(night), campaign.ratios)}
    stored = {(r["case"], r["metric"]): r["head"] for r in json.loads((DATA / "nights.json").read_text())[night - 1]["rows"]
              if scaling.derived_kind(r["metric"]) and r["head"] is not None}
    assert derived and derived.keys() == stored.keys()
    for key, value in derived.items():
        assert value == pytest.approx(stored[key], rel=1e-12), key
    for (case, metric), value in derived.items():  # E(2) = t(1) * 1 / (t(2) * 2), from the measured rows
        if metric == "efficiency_p2":
            stem, variant, stack = case.rsplit("/", 2)
            t = {r.case: r.median for r in _night(night) if r.metric == "execute_s"}
            assert value == pytest.approx(t[f"{stem}/p1/{variant}/{stack}"] / (2 * t[f"{stem}/p2/{variant}/{stack}"]))


def test_night3_correctness_failure_is_a_failed_shard_not_a_timing() -> None:
    shards = json.loads((DATA / "night3-lane0.campaign.json").read_text())["shards"]
    bad = [s for s in shards if s["status"] != "ok"]
    assert [s["series_case"] for s in bad] == ["allreduce/1MiB/p2/tree/nccl"]
    assert not any(r.case == "allreduce/1MiB/p2/tree/nccl" for r in _night(3))
    rows = json.loads((DATA / "nights.json").read_text())[2]["rows"]
    assert not any(r["case"] == "allreduce/1MiB/p2/tree/nccl" and r["verdict"] not in ("missing", "failed")
                   for r in rows)
