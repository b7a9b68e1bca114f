"""The compare step at scale: a constant number of store queries whatever the number of series, and compare
rows that keep each side's median and count (the raw samples stay in the results table)."""

from __future__ import annotations

import statistics

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event, inspect, text

import zlops.host.gitops as gitops
from zlops.config.settings import Config, parse_config
from zlops.identity import build_identity
from zlops.judge.compare import pool_results
from zlops.judge.evidence import caliber_walls, judge_inputs
from zlops.model import (
    CaseResult,
    Comparison,
    Figures,
    Judgement,
    RunRecord,
    RunStatus,
    ShardOutcome,
    ShardStatus,
    Summary,
    Verdict,
)
from zlops.steps.compare import compare as compare_step
from zlops.steps.context import RunContext, open_store
from zlops.store import Store

SUITE = "ops"
POOLS = ("npu", "cpu")
T0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


def sha(n: int) -> str:
    return f"{n:040x}"


def _config(tmp_path: Path, url: str) -> Config:
    return parse_config({
        "home": str(tmp_path / "home"), "database": url, "judge": "noise", "noise": {"window": 10},
        "allow_caliber_mismatch": True,
        "pools": {"npu": {"backend": "cpu", "devices": [0]}, "cpu": {"backend": "cpu", "devices": [1]}},
        "suites": {SUITE: {"repo": str(tmp_path / "none.git"), "branch": "main", "install": [], "command": ["true"],
                           "format": "zlops-json", "pools": list(POOLS)}}}, source="test.yaml")


def _store_nights(store: Store, series: int, nights: int, *, slow: set[int],
                  identity: Callable[[int], dict[str, Any]] | None = None) -> None:
    """``nights`` accepted nights of ``series`` series (half per pool), then tonight's run, where the
    series of ``slow`` are 20% slower."""
    rng = np.random.default_rng(5)
    level = rng.lognormal(0, 1, series) * 10
    per_pool = series // len(POOLS)

    def night(key: str, n: int, accepted: bool, factor: dict[int, float]) -> None:
        when = T0 + timedelta(days=n)
        store.upsert_run(RunRecord(key, "nightly", SUITE, sha(n), "main", RunStatus.DONE if accepted else
                                   RunStatus.RUNNING, accepted=accepted, started_at=when,
                                   finished_at=when + timedelta(hours=1) if accepted else None))
        values = level[:, None] * rng.lognormal(0, 0.003, (series, 10))
        for p, pool in enumerate(POOLS):
            store.record_shard(key, ShardOutcome(pool=pool, device=p, backend="cpu", status=ShardStatus.OK,
                                                 artifact_dir=Path("/tmp/art"), exit_code=0, started_at=None,
                                                 ended_at=None),
                               [CaseResult(f"op_{i % 7}/case_{i}", "latency", "us", True,
                                           tuple((values[i] * factor.get(i, 1.0)).tolist()))
                                for i in range(p * per_pool, (p + 1) * per_pool)],
                               identity=None if identity is None else identity(n))
        if accepted:
            store.save_series_points(key, pool_results(store.results(key)))

    for n in range(1, nights + 1):
        night(f"nightly:{SUITE}:n{n}", n, True, {})
    night(f"nightly:{SUITE}:tonight", nights + 1, False, {i: 1.2 for i in slow})


@pytest.fixture
def ancestry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """git replaced by the synthetic ancestry (every night's commit is an ancestor of the next)."""
    monkeypatch.setattr(gitops, "ensure_mirror", lambda repo, path: gitops.Mirror(path, repo))
    monkeypatch.setattr(gitops, "ancestors", lambda mirror, commit, max_count=None:
                        [sha(n) for n in range(int(commit, 16), 0, -1)])
    yield


def _compare(tmp_path: Path, url: str, series: int, nights: int = 12) -> tuple[Store, int, list]:
    config = _config(tmp_path, url)
    store = open_store(config)  # the store compare uses (cached per process): its queries are counted
    _store_nights(store, series, nights, slow=set(range(0, series, 4)))
    ctx = RunContext(config, SUITE, f"nightly:{SUITE}:tonight", sha(nights + 1))
    counter = {"n": 0}

    def count(*_args: object) -> None:
        counter["n"] += 1

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        summary = compare_step(ctx)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    return store, counter["n"], list(summary.comparisons)


@pytest.mark.usefixtures("ancestry")
def test_compare_takes_a_constant_number_of_queries_whatever_the_number_of_series(tmp_path: Path) -> None:
    counts = {}
    for series in (8, 120):
        store, queries, rows = _compare(tmp_path / f"s{series}", f"sqlite:///{tmp_path}/s{series}.db", series)
        store.dispose()
        assert len(rows) == series
        flagged = [c for c in rows if c.verdict is Verdict.SUSPECT]
        # every 4th series is 20% slower tonight: a suspect, whose change-point search reads its history
        # (one query for all of them, so their number grows with S as well)
        assert {c.case for c in flagged} == {f"op_{i % 7}/case_{i}" for i in range(0, series, 4)}
        counts[series] = queries
    assert 0 < counts[8] == counts[120] < 70, counts


@pytest.mark.usefixtures("ancestry")
def test_compare_rows_keep_medians_not_raw_samples(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/z.db"
    store, _, rows = _compare(tmp_path, url, 8, nights=6)
    try:
        columns = {c["name"] for c in inspect(store.engine).get_columns("comparisons")}
        assert {"base_median", "base_n", "head_median", "head_n"} <= columns
        assert not {"base_samples", "head_samples"} & columns
        saved = {(c.pool, c.case): c for c in store.comparisons(f"nightly:{SUITE}:tonight")}
        results = pool_results(store.results(f"nightly:{SUITE}:tonight"))
        for c in rows:
            got = saved[(c.pool, c.case)]
            tonight = results[(c.pool, c.case, c.metric)]
            assert got.head == Summary.of(tonight.samples) == Summary(tonight.median, 10)
            # the baseline is the newest night's figure from its series points: median of its 10 samples
            assert got.base is not None and got.base.run_key == f"nightly:{SUITE}:n6" and got.base.n == 10
            assert got.base.median == pool_results(store.results(got.base.run_key))[(c.pool, c.case, c.metric)].median
            # what the renderings print: the verdict's figures, one place
            assert got.figures is not None and got.base_value == got.figures.reference
            assert got.head_value == got.figures.value == pytest.approx(tonight.median)
        with store.engine.connect() as conn:
            stored = conn.execute(text("SELECT head_median, head_n FROM comparisons")).all()
        assert len(stored) == len(rows) and all(n == 10 for _, n in stored)
    finally:
        store.dispose()


@pytest.mark.usefixtures("ancestry")
def test_history_stops_at_caliber_walls_and_level_changes_and_keeps_ab_runs(tmp_path: Path) -> None:
    """What the judge reads of a series' past (series_histories over the window's frame): nothing
    at or before the newest night measured on another caliber, nothing before its last confirmed change,
    and the per-run values of its A/Bs as processes."""
    config = _config(tmp_path, f"sqlite:///{tmp_path}/w.db")
    store = open_store(config)

    def identity(n: int) -> dict[str, Any]:  # the driver changed after night 3
        return build_identity(backend_identity={"backend": "cpu", "driver": "A" if n <= 3 else "B", "timer": "wall"},
                              rounds=10, pins={})

    _store_nights(store, 4, 8, slow=set(), identity=identity)
    # night 6 confirmed a change of npu/case_0; night 7 ran an A/B of npu/case_1 that cleared its suspect
    a, b = "op_0/case_0", "op_1/case_1"
    for night, case, verdict, figures in (
            (6, a, Verdict.REGRESSION, None),
            (7, b, Verdict.UNCHANGED, Figures(1.0, "A/B base, 2 runs", 1.0, "A/B head, 2 runs",
                                              runs_base=(1.0, 1.01), runs_head=(0.99, 1.0)))):
        store.save_comparisons(f"nightly:{SUITE}:n{night}", [Comparison(
            SUITE, "npu", case, "latency", "us", True, None, Summary(1.0, 1),
            Judgement(verdict, 0.0, 0.0, 2.0, figures=figures))])
    ctx = RunContext(config, SUITE, f"nightly:{SUITE}:tonight", sha(9))
    head = pool_results(store.results(ctx.run_key))
    window = store.compare_window(SUITE, ancestors=[sha(n) for n in range(9, 0, -1)], history_window=11,
                                  keys=head.keys(), exclude_run_key=ctx.run_key)
    inputs = judge_inputs(ctx, store, head, window.baselines, {sha(n) for n in range(1, 10)},
                                   frame=window.history)
    medians = {(p, c): {rk: m for rk, m in zip(g["run_key"], g["median"], strict=True)}
               for (p, c), g in window.history.groupby(["pool", "case"])}
    nights = {key: [float(v) for v in values] for key, values in inputs.history.items()}
    npu_a = [medians[("npu", a)][f"nightly:{SUITE}:n{n}"] for n in (6, 7, 8)]
    assert nights[("npu", a, "latency")] == npu_a                 # from its confirmed change on (night 6)
    assert len(nights[("npu", b, "latency")]) == 5                # nights 4-8: the wall is night 3
    assert len(nights[("cpu", "op_2/case_2", "latency")]) == 5
    level = statistics.median(nights[("npu", b, "latency")])   # each A/B side about its median, at the level
    assert list(inputs.processes[("npu", b, "latency")]) == pytest.approx(
        [1.0 / 1.005 * level, 1.01 / 1.005 * level, 0.99 / 0.995 * level, 1.0 / 0.995 * level])
    assert ("npu", b, "latency") not in inputs.ab_noise   # 4 runs: too few for an A/B noise estimate
    assert not inputs.processes[("npu", a, "latency")]
    # without identities tonight there is no wall: every night of the window counts
    assert caliber_walls(store, {f"nightly:{SUITE}:n{n}" for n in range(1, 8)},
                                  {"npu": [{"identity": None}]}) == {}
    assert caliber_walls(store, {f"nightly:{SUITE}:n{n}" for n in range(1, 8)},
                                  {"npu": [{"identity": identity(8)}], "cpu": [{"identity": identity(1)}]}) == {
        "npu": f"nightly:{SUITE}:n3", "cpu": f"nightly:{SUITE}:n7"}
