"""A recall canary on a collective campaign (zlops.judge.canary through the campaign's gang shards and its
same-gang A/B): the canary is planted from one campaign series, its A/B re-runs the source's shard, and the
planted slowdown is confirmed without an alert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaign_upstream import CampaignUpstream, campaign_config, timings

from zlops.config.settings import parse_config
from zlops.model import Verdict
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow

SOURCE = "allreduce/4KiB/p1/ring/nccl"


def test_a_campaign_canary_is_confirmed_by_an_ab_of_its_sources_shard(tmp_path: Path) -> None:
    up = CampaignUpstream(tmp_path / "up")
    grid = {"cases": ["allreduce"], "p": [1], "variants": ["ring"], "stacks": ["nccl"]}
    base = timings(cases=["allreduce"], ps=[1], variants=["ring"], stacks=["nccl"])
    noise = tmp_path / "noise.json"
    noise.write_text(json.dumps({"jitter": 0.0}))
    data = campaign_config(tmp_path / "home", up.path, devices=[0], locks_dir=tmp_path / "locks", grid=grid,
                           env={"CAMPAIGN_NOISE": str(noise)})
    suite = data["suites"]["coll"]  # type: ignore[index]
    suite["campaign"]["ratios"] = []
    suite["canary"] = {"case": SOURCE, "metric": "execute_s", "slowdown_pct": 10, "every_nights": 2,
                       "hold_nights": 1}
    data["judge"] = "noise"
    config = parse_config(data)
    nights = [run_nightly(config, "coll", sha=up.commit(base, f"night {i}"), run_label=f"n{i}") for i in range(3)]
    store = open_store(config)
    rows = {(c.case, c.metric): c for c in store.comparisons(nights[2].run_key)}
    canary = rows[(SOURCE + " [canary]", "execute_s")]
    assert canary.verdict is Verdict.SEVERE and "confirmed by A/B" in canary.judgement.note, canary.judgement.note
    assert canary.figures is not None and all(h == pytest.approx(1.1e-3) for h in canary.figures.runs_head)
    assert rows[(SOURCE, "execute_s")].verdict is Verdict.UNCHANGED
    assert store.get_run(nights[2].run_key).meta["ab"]["cpu2"]["shards"] == ["allreduce/4KiB/p1/ring/nccl"]
    assert store.alerts(suite="coll") == []
    assert any(line.startswith("canary cpu2/") and "confirmed on night 2" in line
               for line in nights[2].report.table.splitlines())
