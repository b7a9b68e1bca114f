"""A campaign run's Schedule counts a gang shard on every device it held (zlops.run.partition.gang_busy).

Seen on the 2xH200 proof (tests/data/campaign_h200x2/noise_2026-12-01): the lane process of device 0 led
the P=2 shards, so device 1, held by them too, was shown ~35% idle."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from zlops.formats import parse_results
from zlops.model import ShardOutcome, ShardStatus
from zlops.run.partition import gang_busy, realized, schedule_section

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign_h200x2" / "noise_2026-12-01"
T0 = datetime(2026, 12, 1, 2, 10, tzinfo=timezone.utc)


def _night3() -> tuple[list[tuple[str, int, object]], dict[int, list[dict[str, object]]]]:
    results, lanes = [], {}
    for lane in (0, 1):
        for r in parse_results("zlops-json", DATA / f"night3-lane{lane}.results.json"):
            results.append(("h200", lane, r))
        lanes[lane] = json.loads((DATA / f"night3-lane{lane}.campaign.json").read_text())["shards"]
    return results, lanes


def test_gang_busy_counts_each_shard_once_on_every_device_it_held() -> None:
    results, lanes = _night3()
    want: dict[tuple[str, int], float] = {}
    for shards in lanes.values():          # the lanes' own records of their shards
        for s in shards:
            if s["status"] == "ok":
                for d in s["devices"]:
                    want[("h200", d)] = want.get(("h200", d), 0.0) + float(s["duration_s"])
    busy = gang_busy(results)
    assert busy.keys() == want.keys() == {("h200", 0), ("h200", 1)}
    for key in want:
        assert busy[key] == pytest.approx(want[key])
    p2 = sum(float(s["duration_s"]) for shards in lanes.values() for s in shards if s["p"] == 2)
    assert busy[("h200", 1)] >= p2 > 0          # device 1 is busy for every P=2 shard, whichever lane led it


def test_the_schedule_of_a_campaign_run_uses_the_gangs_not_the_lane_processes() -> None:
    results, _ = _night3()
    busy = gang_busy(results)
    window = max(busy.values()) + 2.0
    # the lane processes: device 0's lane spans the night, device 1's only its own P=1 shards
    shards = [ShardOutcome("h200", 0, "cuda", ShardStatus.OK, Path("/x/0"), 0, T0, T0 + timedelta(seconds=window)),
              ShardOutcome("h200", 1, "cuda", ShardStatus.OK, Path("/x/1"), 0, T0, T0 + timedelta(seconds=10.0))]
    lanes_only = realized(shards)["h200"]
    assert lanes_only.devices[1].busy_s == pytest.approx(10.0)
    gangs = realized(shards, busy)["h200"]
    assert [d.busy_s for d in gangs.devices] == pytest.approx([busy[("h200", 0)], busy[("h200", 1)]])
    assert gangs.devices[1].idle_s < lanes_only.devices[1].idle_s
    text = "\n".join(schedule_section(None, shards, busy))
    assert f"| 1 | gang shards | - | {busy[('h200', 1)]:.1f} s |" in text
    assert "campaign lanes of gang shards" in text and "a P=2 shard counts on both devices" in text
    assert "every device ran the whole suite" not in text


def test_results_without_a_gang_leave_the_schedule_alone() -> None:
    shard = ShardOutcome("cpu", 0, "cpu", ShardStatus.OK, Path("/x"), 0, T0, T0 + timedelta(seconds=4))
    other = ShardOutcome("cpu", 1, "cpu", ShardStatus.OK, Path("/y"), 0, T0, T0 + timedelta(seconds=8))
    assert gang_busy([]) == {}
    assert realized([shard, other], {}) == realized([shard, other])
