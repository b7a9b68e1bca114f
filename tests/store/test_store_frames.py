"""Columnar series reads (history, verdicts, baselines), series points and their summary figures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import event, text

from zlops.errors import StoreError
from zlops.judge.compare import pool_results
from zlops.model import Comparison, Judgement, ShardStatus, Summary, Verdict
from zlops.stats.noise import robust_relative_spread
from zlops.store import Store
from zlops.store.frames import HISTORY_COLUMNS, VERDICT_COLUMNS
from zlops.store.points import SeriesPoint, pool_device_results, series_points, spread_pct, spreads

LAT = "latency"


# --- summary figures ------------------------------------------------------------------------------

def test_spread_matches_the_noise_models_definition() -> None:
    rng = np.random.default_rng(4)
    samples = [tuple(rng.lognormal(0, 0.05, n).tolist()) for n in (2, 3, 4, 7, 7, 7, 30, 101)]
    got = spreads(samples)
    for s, g in zip(samples, got, strict=True):
        assert g == pytest.approx(robust_relative_spread(s), rel=1e-12)
    assert spread_pct([1.0]) is None                    # one sample has no spread
    assert spread_pct([1.0, 0.0, 2.0]) is None          # a log needs positive samples
    assert spreads([(1.0, -1.0), (1.0, 1.0)]) == [None, 0.0]
    assert spreads([]) == []


def test_pooling_matches_compare(make) -> None:
    rows = [("npu", 1, make.result("add", LAT, (3.0, 4.0))), ("npu", 0, make.result("add", LAT, (1.0,))),
            ("npu", 2, make.result("add", LAT, (0.005,), unit="ms")), ("cpu", 0, make.result("add", LAT))]
    assert pool_device_results(rows) == pool_results(rows)
    assert pool_device_results(rows)[("npu", "add", LAT)].samples == pytest.approx((1.0, 3.0, 4.0, 5.0))


# --- ingest and series points --------------------------------------------------------------------------

def _night(store: Store, make, key: str, *, sha: int, day: float, accepted: bool = True, cases: int = 2,
           base: float = 10.0, pools: tuple[str, ...] = ("npu", "cpu"), points: bool = True,
           verdict: Verdict | None = None) -> None:
    """A run with two npu devices and one cpu device, its series points saved as the compare step does."""
    store.upsert_run(make.run(key, sha=sha, day=day, finished_day=day + 0.1, accepted=accepted))
    for pool in pools:
        devices = (0, 1) if pool == "npu" else (0,)
        for d in devices:
            store.record_shard(key, make.shard(pool, d), [
                make.result(f"c{i}", LAT, (base + i + d, base + i + d + 0.5, base + i + d + 1.0))
                for i in range(cases)])
    if points:
        store.save_series_points(key, pool_results(store.results(key)))
    if verdict is not None:
        store.save_comparisons(key, [
            Comparison("ops", pool, f"c{i}", LAT, "us", True, None, Summary(1.0, 1),
                       Judgement(verdict if i == 0 else Verdict.UNCHANGED, None, None, None, ""))
            for pool in pools for i in range(cases)])


def test_ingest_writes_the_summary_figures(store: Store, make) -> None:
    store.upsert_run(make.run("r", accepted=True))
    store.record_shard("r", make.shard(), [make.result("a", LAT, (1.0, 2.0, 4.0)), make.result("b", LAT, (5.0,))])
    with store.engine.connect() as conn:
        rows = conn.execute(text('SELECT "case", median, n, spread_pct FROM results ORDER BY "case"')).all()
    assert rows[0][:3] == ("a", 2.0, 3)
    assert rows[0][3] == pytest.approx(robust_relative_spread([1.0, 2.0, 4.0]))
    assert tuple(rows[1]) == ("b", 5.0, 1, None)


def test_save_series_points_replaces_and_refuses_repeats(store: Store, make) -> None:
    _night(store, make, "r", sha=1, day=1)
    with store.engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM series_points")).scalar()
        npu = conn.execute(text("SELECT median, n, spread_pct, unit FROM series_points JOIN series "
                                "ON series.id = series_id WHERE pool = 'npu' AND \"case\" = 'c0'")).one()
    assert count == 4
    pooled = (10.0, 10.5, 11.0, 11.0, 11.5, 12.0)  # devices 0 and 1 pooled in device order
    assert (npu[0], npu[1], npu[3]) == (11.0, 6, "us")
    assert npu[2] == pytest.approx(robust_relative_spread(pooled))
    # a retry leaves the same rows; plain rows and SeriesPoint values are accepted
    assert store.save_series_points("r", pool_results(store.results("r"))) == 4
    assert store.save_series_points("r", [SeriesPoint("npu", "x", LAT, "us", True, 2.0, 3, None),
                                          {"pool": "cpu", "case": "y", "metric": LAT, "unit": "ms",
                                           "lower_is_better": True, "median": 1, "n": 1}]) == 2
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM series_points")).scalar() == 2
    with pytest.raises(StoreError, match="given twice"):
        store.save_series_points("r", [SeriesPoint("npu", "x", LAT, "us", True, 2.0, 3, None)] * 2)
    with pytest.raises(StoreError, match="lacks median"):
        store.save_series_points("r", [{"pool": "npu", "case": "x", "metric": LAT, "unit": "us",
                                        "lower_is_better": True, "n": 3}])
    with pytest.raises(StoreError, match="unknown run"):
        store.save_series_points("nope", [])
    with store.engine.connect() as conn:  # the refused writes changed nothing
        assert conn.execute(text("SELECT count(*) FROM series_points")).scalar() == 2


def test_recording_a_shard_drops_its_pools_points(store: Store, make) -> None:
    _night(store, make, "r", sha=1, day=1)
    store.record_shard("r", make.shard("npu", 1), [make.result("c0", LAT, (99.0,))])
    with store.engine.connect() as conn:
        pools = conn.execute(text("SELECT DISTINCT pool FROM series_points JOIN series "
                                  "ON series.id = series_id")).scalars().all()
    assert pools == ["cpu"]
    # the history read summarizes the re-recorded pool from its raw results meanwhile
    frame = store.history_frame("ops", ancestors=[make.sha(1)], window=5)
    npu = frame[(frame["pool"] == "npu") & (frame["case"] == "c0")]
    assert npu["median"].tolist() == [10.75] and npu["n"].tolist() == [4]  # 10, 10.5, 11 + 99


def _stored(store: Store) -> list[tuple[object, ...]]:
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            'SELECT run_id, pool, "case", metric, unit, median, n, spread_pct FROM series_points JOIN series '
            'ON series.id = series_id ORDER BY run_id, pool, "case", metric')).all()]


def test_refreshing_a_run_s_points_stores_what_the_compare_step_would(store: Store, make) -> None:
    """After its results were replaced (a rescore), a run's points are summarized again from them: the
    rows the compare step's pooling gives (an INVALID shard is evidence, not history), and the figures
    the history read gave meanwhile from the raw results."""
    _night(store, make, "r", sha=1, day=1)
    written = _stored(store)
    assert store.refresh_series_points("r") == 4 and _stored(store) == written  # nothing changed: same rows
    store.record_shard("r", make.shard("npu", 1), [make.result("c0", LAT, (99.0,))])
    store.record_shard("r", make.shard("cpu", 0, status=ShardStatus.INVALID), [make.result("c0", LAT, (1.0,))])
    assert _stored(store) == []  # re-recording dropped both pools' points
    meanwhile = store.history_frame("ops", ancestors=[make.sha(1)], window=5)
    assert store.refresh_series_points("r") == 2
    ok = [(p, d, r) for p, d, r in store.results("r") if p == "npu"]
    assert [r[1:] for r in _stored(store)] == [(p.pool, p.case, p.metric, p.unit, p.median, p.n, p.spread_pct)
                                               for p in series_points(pool_device_results(ok))]
    assert _stored(store)[0][1:7] == ("npu", "c0", LAT, "us", 10.75, 4)  # 10, 10.5, 11 (device 0) + 99
    after = store.history_frame("ops", ancestors=[make.sha(1)], window=5)
    pd.testing.assert_frame_equal(after, meanwhile)


# --- history_frame ---------------------------------------------------------------------------------

def test_history_frame_window_ancestors_exclusion_and_order(store: Store, make) -> None:
    for day in range(6):
        _night(store, make, f"n{day}", sha=day + 1, day=day, base=10.0 + day)
    _night(store, make, "unaccepted", sha=20, day=2.5, accepted=False)
    _night(store, make, "off-history", sha=21, day=3.5)
    _night(store, make, "tonight", sha=22, day=9)
    store.upsert_run(make.run("other-suite", sha=3, suite="other", day=4, finished_day=4.1, accepted=True))
    store.record_shard("other-suite", make.shard("npu", 0), [make.result("c0", LAT)])
    ancestors = [make.sha(n) for n in (1, 2, 3, 4, 5, 6, 20, 22)]

    frame = store.history_frame("ops", ancestors=ancestors, window=3, exclude_run_key="tonight")
    assert list(frame.columns) == HISTORY_COLUMNS
    assert len(frame) == 2 * 2 * 3  # 2 pools x 2 cases x the newest 3 runs
    c0 = frame[(frame["pool"] == "npu") & (frame["case"] == "c0")]
    assert c0["run_key"].tolist() == ["n3", "n4", "n5"]  # oldest first
    assert c0["sha"].tolist() == [make.sha(4), make.sha(5), make.sha(6)]
    assert c0["median"].tolist() == [14.0, 15.0, 16.0]  # devices pooled: 13, 13.5, 14, 14, 14.5, 15
    assert c0["n"].tolist() == [6, 6, 6]
    assert c0["spread_pct"].iloc[0] == pytest.approx(robust_relative_spread([13, 13.5, 14, 14, 14.5, 15]))
    assert c0["finished_at"].iloc[0] == pd.Timestamp(make.when(3.1))
    assert str(frame["finished_at"].dtype).startswith("datetime64") and frame["n"].dtype == np.int64
    assert set(frame["unit"]) == {"us"} and frame["lower_is_better"].all()
    # series are consecutive and sorted
    keys = list(zip(frame["pool"], frame["case"], frame["metric"], strict=True))
    assert keys == sorted(keys)

    # without the exclusion tonight is the newest; pools narrows; an unknown suite or no ancestors: empty
    with_tonight = store.history_frame("ops", ancestors=ancestors, window=2)
    assert with_tonight[with_tonight["pool"] == "cpu"]["run_key"].tolist() == ["n5", "tonight"] * 2
    assert set(store.history_frame("ops", ancestors=ancestors, window=2, pools=["cpu"])["pool"]) == {"cpu"}
    for empty in (store.history_frame("nope", ancestors=ancestors, window=3),
                  store.history_frame("ops", ancestors=[], window=3)):
        assert list(empty.columns) == HISTORY_COLUMNS and len(empty) == 0
    with pytest.raises(ValueError, match="window"):
        store.history_frame("ops", ancestors=ancestors, window=0)


def test_history_frame_window_is_per_pool(store: Store, make) -> None:
    _night(store, make, "a", sha=1, day=1, pools=("npu", "cpu"))
    _night(store, make, "b", sha=2, day=2, pools=("npu",))
    _night(store, make, "c", sha=3, day=3, pools=("npu",))
    store.upsert_run(make.run("d", sha=4, day=4, finished_day=4.1, accepted=True))  # cpu failed
    store.record_shard("d", make.shard("cpu", 0, ShardStatus.FAILED))
    frame = store.history_frame("ops", ancestors=[make.sha(n) for n in range(1, 5)], window=1)
    assert sorted(set(zip(frame["pool"], frame["run_key"], strict=True))) == [("cpu", "a"), ("npu", "c")]


def test_history_from_raw_results_equals_history_from_points(store: Store, make) -> None:
    for day in range(3):
        _night(store, make, f"p{day}", sha=day + 1, day=day, base=5.0 + day)
        _night(store, make, f"r{day}", sha=day + 11, day=day + 0.5, base=5.0 + day, points=False)
    both = store.history_frame("ops", ancestors=[make.sha(n) for n in (1, 2, 3, 11, 12, 13)], window=10)
    from_points = both[both["run_key"].str.startswith("p")].reset_index(drop=True)
    from_raw = both[both["run_key"].str.startswith("r")].reset_index(drop=True)
    cols = ["pool", "case", "metric", "unit", "lower_is_better", "median", "n", "spread_pct"]
    pd.testing.assert_frame_equal(from_points[cols], from_raw[cols])


def _count_queries(store: Store):
    counter = {"n": 0}

    def count(*_args: object) -> None:
        counter["n"] += 1

    event.listen(store.engine, "before_cursor_execute", count)
    return counter, lambda: event.remove(store.engine, "before_cursor_execute", count)


@pytest.mark.parametrize("with_points", [True, False])
def test_reads_take_a_constant_number_of_queries(db_url: str, make, with_points: bool) -> None:
    counts = []
    for cases in (2, 40):
        store = Store.open(db_url.replace("zlops.db", f"zlops{cases}.db") if db_url.startswith("sqlite") else db_url)
        try:
            suite_prefix = f"s{cases}"
            for day in range(6):
                key = f"{suite_prefix}-n{day}"
                _night(store, make, key, sha=day + 1, day=day, cases=cases, points=with_points or day % 2 == 0,
                       verdict=Verdict.REGRESSION if day == 3 else Verdict.UNCHANGED)
            ancestors = [make.sha(n) for n in range(1, 7)]
            counter, stop = _count_queries(store)
            frame = store.history_frame("ops", ancestors=ancestors, window=4, exclude_run_key="tonight")
            runs = sorted(set(frame["run_key"]))
            verdicts = store.verdict_frame(runs, verdicts=[Verdict.REGRESSION])
            base = store.baseline_frame("ops", ancestors=ancestors, window=4)
            samples = store.run_samples(base["run_key"].iloc[0])
            stop()
            assert len(frame) == 2 * cases * 4 and len(samples) == 2 * cases
            assert verdicts["run_key"].unique().tolist() == [f"{suite_prefix}-n3"] and len(verdicts) == 2
            counts.append(counter["n"])
            with store.engine.begin() as conn:  # the postgres database is shared by both sizes
                conn.execute(text("DELETE FROM runs"))
        finally:
            store.dispose()
    assert counts[0] == counts[1], counts


# --- verdicts, baselines, raw samples ------------------------------------------------------------------

def test_verdict_frame(store: Store, make) -> None:
    _night(store, make, "a", sha=1, day=1, verdict=Verdict.REGRESSION)
    _night(store, make, "b", sha=2, day=2, verdict=Verdict.IMPROVED)
    _night(store, make, "c", sha=3, day=3)  # no compare table
    frame = store.verdict_frame(["b", "a", "c", "unknown"])
    assert list(frame.columns) == VERDICT_COLUMNS
    assert frame["run_key"].tolist() == ["b"] * 4 + ["a"] * 4  # run_keys order, then series
    changes = store.verdict_frame(["a", "b"], verdicts=[Verdict.REGRESSION, "improved"])
    assert list(zip(changes["run_key"], changes["pool"], changes["case"], changes["verdict"], strict=True)) == [
        ("a", "cpu", "c0", "regression"), ("a", "npu", "c0", "regression"),
        ("b", "cpu", "c0", "improved"), ("b", "npu", "c0", "improved")]
    assert len(store.verdict_frame([])) == 0 and len(store.verdict_frame(["a"], verdicts=[])) == 0


def test_baseline_frame_and_run_samples(store: Store, make) -> None:
    _night(store, make, "a", sha=1, day=1)
    _night(store, make, "b", sha=2, day=2, pools=("npu",))
    _night(store, make, "tonight", sha=3, day=3)
    base = store.baseline_frame("ops", ancestors=[make.sha(n) for n in (1, 2, 3)], window=30,
                                exclude_run_key="tonight")
    assert base[["pool", "run_key", "sha"]].values.tolist() == [["cpu", "a", make.sha(1)],
                                                                ["npu", "b", make.sha(2)]]
    assert base["finished_at"].tolist() == [pd.Timestamp(make.when(1.1)), pd.Timestamp(make.when(2.1))]
    samples = store.run_samples("b", ["npu"])
    assert samples[("npu", "c1", LAT)] == (11.0, 11.5, 12.0, 12.0, 12.5, 13.0)
    # only the series asked for (a trend's whiskers), in one query
    assert store.run_samples("b", keys=[("npu", "c1", LAT), ("cpu", "c1", LAT)]) == {
        ("npu", "c1", LAT): (11.0, 11.5, 12.0, 12.0, 12.5, 13.0)}
    assert store.run_samples("b", keys=[]) == {}
    assert set(store.run_samples("a")) == {(p, f"c{i}", LAT) for p in ("npu", "cpu") for i in range(2)}
    assert store.run_samples("a", []) == {}
    with pytest.raises(StoreError, match="unknown run"):
        store.run_samples("nope")
    assert len(store.baseline_frame("ops", ancestors=[make.sha(9)], window=30)) == 0


def test_nan_spread_round_trips(store: Store, make) -> None:
    store.upsert_run(make.run("r", accepted=True, finished_day=0.5))
    store.record_shard("r", make.shard("npu", 0), [make.result("one", LAT, (2.0,))])
    store.save_series_points("r", pool_results(store.results("r")))
    frame = store.history_frame("ops", ancestors=[make.sha(1)], window=3)
    assert frame["n"].tolist() == [1] and math.isnan(frame["spread_pct"].iloc[0])


def test_a_unit_change_is_a_new_series_row_and_both_stay_in_the_history(store: Store, make) -> None:
    for day, unit in ((1, "us"), (2, "ms")):
        key = f"n{day}"
        store.upsert_run(make.run(key, sha=day, day=day, finished_day=day + 0.1, accepted=True))
        store.record_shard(key, make.shard("npu", 0), [make.result("a", LAT, (2.0, 3.0), unit=unit)])
        store.save_series_points(key, pool_results(store.results(key)))
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM series")).scalar() == 2
    frame = store.history_frame("ops", ancestors=[make.sha(1), make.sha(2)], window=5)
    assert list(zip(frame["run_key"], frame["unit"], strict=True)) == [("n1", "us"), ("n2", "ms")]
    # the series rows are per suite: another suite's run makes its own
    store.upsert_run(make.run("o1", sha=1, suite="other", day=1, finished_day=1.1, accepted=True))
    store.record_shard("o1", make.shard("npu", 0), [make.result("a", LAT, (2.0, 3.0))])
    store.save_series_points("o1", pool_results(store.results("o1")))
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM series")).scalar() == 3
    assert store.history_frame("other", ancestors=[make.sha(1)], window=5)["run_key"].tolist() == ["o1"]
