"""Named report queries: each runs unchanged on SQLite and PostgreSQL and returns the right rows."""

from __future__ import annotations

import pytest

from zlops.errors import StoreError
from zlops.model import BaselinePoint, Comparison, Judgement, Summary, Verdict
from zlops.store import Store
from zlops.store.queries import load_query, query_names, run_query


def _flag(case: str, verdict: Verdict, worse: float | None) -> Comparison:
    return Comparison(suite="ops", pool="npu", case=case, metric="latency", unit="us",
                      lower_is_better=True, base=BaselinePoint("n0", "0" * 40, "us", 1.0, 1),
                      head=Summary(1.1, 1),
                      judgement=Judgement(verdict, worse, worse, 5.0, ""))


def test_query_names_and_loading() -> None:
    assert query_names() == ["latest_runs", "open_regressions", "series_history"]
    assert ":run_key" in load_query("open_regressions")
    for bad in ("nope", "../env", "latest_runs.sql", ""):
        with pytest.raises(StoreError, match="latest_runs, open_regressions, series_history"):
            load_query(bad)


def test_latest_runs(store: Store, make) -> None:
    store.upsert_run(make.run("ops-1", day=1, accepted=True))
    store.record_shard("ops-1", make.shard("npu", 0), [make.result("a"), make.result("b")])
    store.upsert_run(make.run("ops-2", day=2))
    store.record_shard("ops-2", make.shard("npu", 0), [make.result("a")])
    store.record_shard("ops-2", make.shard("npu", 1, make.shard().status.FAILED))
    store.upsert_run(make.run("ops-pr", day=3, kind="pr"))
    store.upsert_run(make.run("mm-1", day=0, suite="matmul"))
    with store.session() as s:
        rows = run_query(s, "latest_runs", {"kind": "nightly"})
    assert [(r["suite"], r["run_key"], r["shards"], r["ok_shards"], r["results"]) for r in rows] == [
        ("matmul", "mm-1", 0, 0, 0),
        ("ops", "ops-2", 2, 1, 1),
    ]
    assert not rows[1]["accepted"]


def test_open_regressions(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.save_comparisons("n1", [
        _flag("ok", Verdict.UNCHANGED, 0.5),
        _flag("pot-small", Verdict.POTENTIAL, 2.5),
        _flag("reg-small", Verdict.REGRESSION, 6.0),
        _flag("pot-big", Verdict.POTENTIAL, 4.0),
        _flag("reg-big", Verdict.REGRESSION, 30.0),
        _flag("better", Verdict.IMPROVED, -8.0),
    ])
    store.upsert_run(make.run("n2"))
    store.save_comparisons("n2", [_flag("elsewhere", Verdict.REGRESSION, 99.0)])
    with store.engine.connect() as conn:
        rows = run_query(conn, "open_regressions", {"run_key": "n1"})
    assert [(r["case"], r["verdict"], r["worse_pct"]) for r in rows] == [
        ("reg-big", "regression", 30.0),
        ("reg-small", "regression", 6.0),
        ("pot-big", "potential", 4.0),
        ("pot-small", "potential", 2.5),
    ]


def test_series_history_query(store: Store, make) -> None:
    for day in range(4):
        store.upsert_run(make.run(f"n{day}", sha=day + 1, day=day, accepted=day != 2))
        store.record_shard(f"n{day}", make.shard("npu", 0), [make.result("add", samples=(day,))])
        store.record_shard(f"n{day}", make.shard("npu", 1), [make.result("add", samples=(day, 9))])
    with store.session() as s:
        rows = run_query(s, "series_history", {"suite": "ops", "kind": "nightly", "pool": "npu",
                                               "case_name": "add", "metric": "latency",
                                               "limit": 2})
    assert [(r["run_key"], r["device"], r["median"], r["n"]) for r in rows] == [
        ("n3", 0, 3.0, 1), ("n3", 1, 6.0, 2),
        ("n1", 0, 1.0, 1), ("n1", 1, 5.0, 2),
    ]
