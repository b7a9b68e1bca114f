"""Partitioning a suite's cases over a pool's devices: LPT, the lower bound, weights scaled by rounds,
realized makespan and idle time, the config, and a partitioned nightly end to end (two nights)."""

from __future__ import annotations

import json
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from sharded_upstream import ShardedUpstream, sharded_suite

from zlops.config.settings import ConfigError, parse_config
from zlops.model import CaseResult, ShardOutcome, ShardStatus
from zlops.run.partition import (
    Plan,
    estimate_weights,
    hash_partition,
    lower_bound,
    lpt,
    make_plan,
    realized,
    schedule_section,
    shard_case_seconds,
)

REPO = Path(__file__).resolve().parents[1]
SEED = json.loads((REPO / "benchmarks" / "data" / "seed_partition_batch.json").read_text())


def _makespan(weights: dict[str, float], assignment: dict[int, tuple[str, ...]]) -> float:
    return max(sum(weights[c] for c in cases) for cases in assignment.values())


# --- LPT and the lower bound --------------------------------------------------------------------

def test_lpt_gives_the_heaviest_first_to_the_least_loaded_device() -> None:
    weights = {"a": 7.0, "b": 5.0, "c": 4.0, "d": 3.0, "e": 3.0, "f": 2.0}
    got = lpt(weights, [0, 1, 2])
    assert got == {0: ("a", "f"), 1: ("b", "e"), 2: ("c", "d")}
    assert _makespan(weights, got) == 9.0 == pytest.approx(lower_bound(weights.values(), 3) + 1)
    assert lpt(weights, [0, 1, 2]) == got  # deterministic
    assert lpt({"x": 1.0, "y": 1.0}, [5, 3]) == {5: ("x",), 3: ("y",)}  # ties by name, then device order


def test_every_device_is_in_the_plan_even_without_a_case() -> None:
    assert lpt({"only": 3.0}, [0, 1, 2]) == {0: ("only",), 1: (), 2: ()}
    with pytest.raises(ValueError, match="at least one device"):
        lpt({"a": 1.0}, [])
    with pytest.raises(ValueError, match="unique"):
        lpt({"a": 1.0}, [0, 0])


def test_lower_bound_is_the_heaviest_case_or_the_ideal_share() -> None:
    assert lower_bound([70.6, 10.0, 10.0], 8) == 70.6
    assert lower_bound([10.0] * 16, 8) == 20.0
    assert lower_bound([], 4) == 0.0
    with pytest.raises(ValueError):
        lower_bound([1.0], 0)


def test_the_seed_shaped_batch_lpt_reaches_the_floor_hash_does_not() -> None:
    """The seed: hash partition 120 min, longest-first 70, topk 70.6 against an ideal share of 45.4."""
    minutes = SEED["minutes_at_rounds"]
    devices = list(range(SEED["devices"]))
    assert sum(minutes.values()) / len(devices) == pytest.approx(45.4)
    assert max(minutes.values()) == minutes["topk"] == 70.6
    assert lower_bound(minutes.values(), len(devices)) == 70.6
    got = lpt(minutes, devices)
    assert _makespan(minutes, got) == pytest.approx(70.6)
    assert got[0] == ("topk",)  # the heaviest case alone: partitioning cannot beat it, only not wait for it
    # the blind hash: one draw, and its spread over 500 re-draws of the hash
    draws = [_makespan(minutes, hash_partition(list(minutes), devices, salt=str(i))) for i in range(500)]
    assert statistics.median(draws) > 1.3 * 70.6
    assert min(draws) >= 70.6 - 1e-9
    idle_card = sum(any(not c for c in hash_partition(list(minutes), devices, salt=str(i)).values())
                    for i in range(500))
    assert idle_card > 50  # "and leaves a card idle": about one draw in five here


def test_weights_are_per_round_durations_times_tonights_rounds() -> None:
    """One measured round of topk is 70.6/6 min; six rounds cost six times that, not 11.8 min."""
    rounds = SEED["rounds"]
    per_round = {case: m * 60 / rounds for case, m in SEED["minutes_at_rounds"].items()}
    weights, source = estimate_weights(per_round, list(per_round), rounds)
    assert source == "measured"
    assert weights["topk"] / 60 == pytest.approx(70.6)
    unscaled, _ = estimate_weights(per_round, list(per_round), 1)
    assert round(unscaled["topk"] / 60, 1) == 11.8  # the seed's wrong figure, when the rounds are forgotten
    plan = make_plan("musa", list(per_round), list(range(8)), per_round, rounds)
    assert plan.makespan / 60 == pytest.approx(70.6) and plan.lower_bound / 60 == pytest.approx(70.6)
    assert plan.total / 60 == pytest.approx(363.2)
    assert plan.summary() == ("pool musa: 24 cases over 8 devices by LPT (measured weights, 6 rounds): "
                              "predicted makespan 70.6 min against the lower bound 70.6 min (1.000x); "
                              "heaviest case topk 70.6 min")
    twice = make_plan("musa", list(per_round), list(range(8)), per_round, 2 * rounds)
    assert twice.makespan == pytest.approx(2 * plan.makespan)


def test_history_measured_at_other_rounds_is_brought_to_tonights() -> None:
    """An earlier night at 6 rounds took 70.6 min for topk: 11.77 min a round; tonight at 3 rounds, 35.3."""
    night = [CaseResult("topk", "time", "ms", True, (1.0,) * 6, {"duration_s": 70.6 * 60}),
             CaseResult("add", "time", "ms", True, (1.0,) * 6, {"duration_s": 2.4 * 60})]
    per_round = shard_case_seconds(night, wall_s=None, rounds=6)
    assert per_round["topk"] / 60 == pytest.approx(70.6 / 6)
    weights, _ = estimate_weights(per_round, ["topk", "add"], 3)
    assert weights["topk"] / 60 == pytest.approx(35.3)


def test_case_seconds_from_duration_params_else_the_shard_wall_time() -> None:
    rows = [CaseResult("a", "time", "ms", True, (1.0,), {"duration_s": 30.0}),
            CaseResult("a", "bandwidth", "GB/s", False, (1.0,), {"duration_s": 30.0}),  # one run, two metrics
            CaseResult("b", "time", "ms", True, (1.0,), {}),
            CaseResult("c", "time", "ms", True, (1.0,), {"duration_s": "fast"})]  # not a number: ignored
    got = shard_case_seconds(rows, wall_s=50.0, rounds=2)
    assert got == {"a": 15.0, "b": 5.0, "c": 5.0}  # (50 - 30) / 2 cases / 2 rounds
    assert shard_case_seconds(rows, wall_s=None, rounds=2) == {"a": 15.0}
    assert shard_case_seconds(rows[2:], wall_s=8.0, rounds=4) == {"b": 1.0, "c": 1.0}


def test_no_history_means_equal_weights_and_a_split_by_count() -> None:
    weights, source = estimate_weights({}, ["a", "b", "c", "d", "e"], 5)
    assert source == "equal" and set(weights.values()) == {1.0}
    plan = make_plan("p", ["a", "b", "c", "d", "e"], [0, 1], {}, 5)
    assert sorted(len(c) for c in plan.assignments.values()) == [2, 3]
    assert "3 cases against the lower bound 2.5 cases" in plan.summary()
    mixed, source = estimate_weights({"a": 2.0, "b": 4.0}, ["a", "b", "new"], 2)
    assert source == "mixed" and mixed == {"a": 4.0, "b": 8.0, "new": 6.0}  # a new case weighs the mean


def test_plan_round_trips_through_the_run_meta_and_checks_itself() -> None:
    plan = make_plan("h200", ["a", "b", "c"], [0, 1], {"a": 3.0, "b": 2.0, "c": 1.0}, 2)
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["predicted_makespan_s"] == 6.0 and data["lower_bound_s"] == 6.0
    assert Plan.from_dict(data) == plan
    with pytest.raises(ValueError, match="plan_version"):
        Plan.from_dict({**data, "plan_version": 99})
    with pytest.raises(ValueError, match="exactly once"):
        Plan("p", "lpt", {0: ("a",)}, {"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="unknown partition strategy"):
        make_plan("p", ["a"], [0], {}, 1, strategy="random")


# --- realized makespan and idle time ------------------------------------------------------------

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=timezone.utc)


def _shard(device: int, start_s: float | None, end_s: float | None, status: ShardStatus = ShardStatus.OK,
           pool: str = "h200") -> ShardOutcome:
    return ShardOutcome(pool=pool, device=device, backend="cuda", status=status, artifact_dir=Path("/x"),
                        exit_code=0, started_at=None if start_s is None else T0 + timedelta(seconds=start_s),
                        ended_at=None if end_s is None else T0 + timedelta(seconds=end_s))


def test_realized_makespan_and_idle_time_per_device() -> None:
    got = realized([_shard(0, 0, 100), _shard(1, 10, 60), _shard(2, None, None, ShardStatus.SKIPPED),
                    _shard(0, 5, 15, pool="cpu")])
    h200 = got["h200"]
    assert h200.makespan_s == 100.0
    assert [(d.device, d.busy_s, d.idle_s) for d in h200.devices] == [(0, 100.0, 0.0), (1, 50.0, 50.0),
                                                                     (2, 0.0, 100.0)]
    assert h200.idle_s == 150.0 and h200.idle_share == pytest.approx(0.5)
    assert got["cpu"].makespan_s == 10.0 and got["cpu"].idle_s == 0.0


def test_schedule_section_shows_predicted_against_realized() -> None:
    plan = make_plan("h200", ["a", "b", "c"], [0, 1], {"a": 30.0, "b": 20.0, "c": 25.0}, 2)
    lines = "\n".join(schedule_section({"h200": plan.to_dict()}, [_shard(0, 0, 62), _shard(1, 0, 90)]))
    assert "## Schedule" in lines
    # a (60 s) on device 0, then c (50 s) and b (40 s) on device 1; the bound is the share, 150 s / 2
    assert "predicted makespan 90.0 s against the lower bound 75.0 s (1.200x); heaviest case a 60.0 s" in lines
    assert "Realized makespan 90.0 s (1.20x the predicted lower bound); device idle time 28.0 s (16%" in lines
    assert "| 0 | 1 | 60.0 s | 62.0 s | 28.0 s |" in lines
    plain = "\n".join(schedule_section(None, [_shard(0, 0, 10), _shard(1, 0, 4)]))
    assert "every device ran the whole suite; realized makespan 10.0 s, device idle time 6.0 s" in plain
    assert schedule_section(None, []) == []
    assert schedule_section(None, [_shard(0, 0, 10)]) == []  # one device waits for nobody


# --- config: hosts and partition ----------------------------------------------------------------

def _config(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "pools": {"ga": {"backend": "cpu", "devices": [0, 1], "host": "hostA"},
                  "gb": {"backend": "cpu", "devices": [0, 1], "host": "hostB"}},
        "suites": {"ops": sharded_suite(Path("/up"), ["ga", "gb"], cases=["a", "b", "c"])},
    }
    data.update(extra)
    return data


def test_hosts_route_pools_to_their_queues() -> None:
    cfg = parse_config(_config(hosts={"hostA": {"queue": "gpu_a", "labels": ["nvidia-h200"]}, "hostB": {}}))
    assert cfg.queue_of("ga") == "gpu_a" and cfg.queue_of("gb") == "hostB"
    assert cfg.host_queues() == {"gpu_a": 2, "hostB": 2}
    # without a hosts section, a pool's host is its queue (the behaviour before hosts existed)
    assert parse_config(_config()).queue_of("gb") == "hostB"


def test_host_errors_say_what_to_write() -> None:
    with pytest.raises(ConfigError, match=r"pools.gb.host: host 'hostB' is not defined under hosts \(defined: hostA\)"):
        parse_config(_config(hosts={"hostA": {}}))
    with pytest.raises(ConfigError, match="both use the Celery queue 'q'"):
        parse_config(_config(hosts={"hostA": {"queue": "q"}, "hostB": {"queue": "q"}}))
    same_host = _config()
    same_host["pools"]["gb"]["host"] = "hostA"
    with pytest.raises(ConfigError, match="cpu device 0 on host hostA is already in pool 'ga'"):
        parse_config(same_host)


def test_partition_config_is_checked_against_the_command() -> None:
    suite = sharded_suite(Path("/up"), ["ga"], cases=["a", "b"])
    base = {"pools": {"ga": {"backend": "cpu", "devices": [0]}}}
    assert parse_config({**base, "suites": {"ops": suite}}).suites["ops"].partition.cases == ["a", "b"]
    no_placeholder = {**suite, "command": ["python", "bench.py", "--out", "{results}"]}
    with pytest.raises(ConfigError, match=r"must pass the shard's cases with \{cases\} or \{cases_file\}"):
        parse_config({**base, "suites": {"ops": no_placeholder}})
    no_partition = {k: v for k, v in suite.items() if k != "partition"}
    with pytest.raises(ConfigError, match=r"command uses \{cases\} but the suite has no partition section"):
        parse_config({**base, "suites": {"ops": no_partition}})
    with pytest.raises(ConfigError, match="contains a comma; pass the cases with"):
        parse_config({**base, "suites": {"ops": {**suite, "partition": {"cases": ["a,b"]}}}})
    with_file = {**suite, "command": ["python", "bench.py", "--case-file", "{cases_file}"],
                 "partition": {"cases": ["a,b"]}}
    assert parse_config({**base, "suites": {"ops": with_file}})
    with pytest.raises(ConfigError, match="exactly one of cases"):
        parse_config({**base, "suites": {"ops": {**suite, "partition": {}}}})
    with pytest.raises(ConfigError, match="case names repeat"):
        parse_config({**base, "suites": {"ops": {**suite, "partition": {"cases": ["a", "a"]}}}})


def test_the_runner_passes_the_share_as_cases_and_cases_file(tmp_path: Path) -> None:
    from zlops.run.runner import ShardSpec, render_command

    cfg = parse_config({"pools": {"ga": {"backend": "cpu", "devices": [0]}}, "suites": {"ops": {
        **sharded_suite(Path("/up"), ["ga"], cases=["a", "b"]),
        "command": ["bench", "--cases", "{cases}", "--file", "{cases_file}"]}}})
    spec = ShardSpec(run_key="r", suite_name="ops", suite=cfg.suites["ops"], sha="0" * 40, pool="ga", backend="cpu",
                     device=0, worktree=tmp_path, venv=tmp_path, artifact_dir=tmp_path / "a", cases=("b", "a"))
    assert render_command(spec) == ["bench", "--cases", "b,a", "--file", str(tmp_path / "a" / "cases.txt")]
    from dataclasses import replace
    assert render_command(replace(spec, cases=None))[:3] == ["bench", "--cases", ""]  # '' = every case


def test_run_shard_writes_the_cases_file_the_command_reads(tmp_path: Path) -> None:
    import sys

    from zlops.run.runner import ShardSpec, run_shard

    cfg = parse_config({"pools": {"ga": {"backend": "cpu", "devices": [0]}}, "suites": {"ops": {
        **sharded_suite(Path("/up"), ["ga"], cases=["a", "b"]),
        "command": [sys.executable, "-c", "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])",
                    "{cases_file}", "{results}"]}}})
    spec = ShardSpec(run_key="r", suite_name="ops", suite=cfg.suites["ops"], sha="0" * 40, pool="ga", backend="cpu",
                     device=0, worktree=tmp_path, venv=tmp_path / "venv", artifact_dir=tmp_path / "a", cases=("b", "a"))
    out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=1)
    assert out.status is ShardStatus.OK, out.error
    assert (tmp_path / "a" / "results.json").read_text() == "b\na\n"
    assert json.loads((tmp_path / "a" / "manifest.json").read_text())["cases"] == ["b", "a"]


# --- a partitioned nightly, twice: equal weights, then measured ones --------------------------------

@pytest.mark.slow
def test_partitioned_nightly_measures_every_case_once_and_learns_the_weights(tmp_path: Path) -> None:
    from zlops.run.partition import Plan
    from zlops.steps.context import open_store
    from zlops.steps.nightly import run_nightly

    up = ShardedUpstream(tmp_path / "upstream")
    timings = {"heavy": 5.0, "mid": 3.0, "l1": 1.0, "l2": 1.0, "l3": 1.0, "l4": 1.0}
    durations = {"heavy": 0.6, "mid": 0.3, "l1": 0.05, "l2": 0.05, "l3": 0.05, "l4": 0.05}
    up.commit_cases(timings, durations)
    data = {"home": str(tmp_path / "home"), "judge": "simple", "device_wait_s": 5,
            "contention": {"gate": False},  # scripted timings; the CI host's load is not what is judged
            "pools": {"local": {"backend": "cpu", "devices": [0, 1, 2]}},
            "suites": {"fake": sharded_suite(up.path, ["local"], rounds=2)}}  # list_command: bench.py --list
    (tmp_path / "zlops.yaml").write_text(yaml.safe_dump(data))
    config = parse_config(data)

    first = run_nightly(config, "fake", run_label="n1")
    store = open_store(config)
    plan1 = Plan.from_dict(store.get_run(first.run_key).meta["partition"]["local"])
    assert plan1.source == "equal" and sorted(len(c) for c in plan1.assignments.values()) == [2, 2, 2]
    by_device: dict[int, list[str]] = {}
    for _, device, res in store.results(first.run_key):
        by_device.setdefault(device, []).append(res.case)
    assert sorted(c for cases in by_device.values() for c in cases) == sorted(timings)  # each case once
    assert {d: sorted(c) for d, c in by_device.items()} == {d: sorted(c) for d, c in plan1.assignments.items()}
    assert all(s.status is ShardStatus.OK for s in first.shards) and first.accepted

    second = run_nightly(config, "fake", run_label="n2")
    plan2 = Plan.from_dict(store.get_run(second.run_key).meta["partition"]["local"])
    assert plan2.source == "measured"
    assert plan2.weights["heavy"] == pytest.approx(0.6 * 2, rel=0.3)  # per-round duration x 2 rounds
    assert plan2.cases_of(0) == ("heavy",)  # the heaviest alone; the rest share the other two devices
    assert plan2.makespan == pytest.approx(plan2.lower_bound)
    verdicts = {c.case: c.verdict.value for c in second.summary.comparisons}
    assert set(verdicts) == set(timings) and set(verdicts.values()) == {"unchanged"}
    lines = "\n".join(schedule_section(store.get_run(second.run_key).meta["partition"], store.shards(second.run_key)))
    assert "Pool `local`: 6 cases over 3 devices by LPT (measured weights, 2 rounds)" in lines
    assert "Realized makespan" in lines
    report = second.report.markdown.read_text()  # the run report carries the same section
    assert "## Schedule" in report and "by LPT (measured weights, 2 rounds)" in report
