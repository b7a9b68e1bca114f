"""The recall canaries' nights in the store (zlops.store.canaries), on SQLite and PostgreSQL: the schedule's
clock, idempotent writes, and the ledger's window read in one query."""

from __future__ import annotations

from typing import Any

import pytest

from sqlalchemy import event
from sqlalchemy.engine import Engine

from zlops.errors import StoreError
from zlops.store import Store
from zlops.store.canaries import (
    canary_clock,
    case_results,
    replace_case_results,
    save_canary_nights,
    suite_canary_nights,
    window_canary_nights,
)


def _night(night: int, *, active: bool = False, verdict: str | None = None, pool: str = "npu") -> dict[str, Any]:
    return {"pool": pool, "case": "add [canary]", "metric": "latency", "source_case": "add", "night": night,
            "active": active, "episode": night if active else None, "planted_pct": 5.0 if active else 0.0,
            "verdict": verdict, "source_verdict": "unchanged" if verdict else None, "change_pct": None, "how": None}


def test_the_clock_counts_earlier_canary_nights_and_a_rewrite_replaces(store: Store, make: Any) -> None:
    for i in range(4):
        store.upsert_run(make.run(f"nightly:ops:n{i}", day=i))
    store.upsert_run(make.run("nightly:other:n0", suite="other", day=0.5))
    assert store.read(canary_clock, "nightly:ops:n0") == 0
    store.unit_of_work(save_canary_nights, "nightly:ops:n0", [_night(0), _night(0, pool="cuda")])
    store.unit_of_work(save_canary_nights, "nightly:other:n0", [_night(0)])
    store.unit_of_work(save_canary_nights, "nightly:ops:n1", [_night(1)])
    # n2 wrote nothing (its source was not measured): it is no night of the canary
    assert store.read(canary_clock, "nightly:ops:n3") == 2
    assert store.read(canary_clock, "nightly:ops:n1") == 1   # its own rows are not counted: a retry agrees
    # a retried write (the report step after the ingest's) replaces the run's rows, never adds
    store.unit_of_work(save_canary_nights, "nightly:ops:n1", [_night(1, verdict="unchanged")])
    store.unit_of_work(save_canary_nights, "nightly:ops:n1", [_night(1, verdict="unchanged")])
    # the planting run again after the night was judged keeps what the judge said
    store.unit_of_work(save_canary_nights, "nightly:ops:n1", [_night(1)], keep_judged=True)
    rows = store.read(window_canary_nights, make.when(-1), make.when(9), suite="ops")
    assert [(r["run_key"], r["pool"], r["night"], r["verdict"]) for r in rows] == [   # by start, night, write
        ("nightly:ops:n0", "npu", 0, None), ("nightly:ops:n0", "cuda", 0, None),
        ("nightly:ops:n1", "npu", 1, "unchanged")]
    assert rows[0]["suite"] == "ops" and rows[0]["at"] == make.when(0)
    assert len(store.read(window_canary_nights, make.when(-1), make.when(9))) == 4       # every suite
    assert len(store.read(window_canary_nights, make.when(0.5), make.when(9), suite="ops")) == 1
    assert [r["night"] for r in store.read(suite_canary_nights, "ops", from_night=1, until=make.when(1))] == [1]


def test_the_window_read_is_one_query_whatever_its_size(store: Store, make: Any) -> None:
    for i in range(12):
        store.upsert_run(make.run(f"nightly:ops:n{i}", day=i))
        store.unit_of_work(save_canary_nights, f"nightly:ops:n{i}", [_night(i, active=i % 4 == 0, verdict="unchanged")])
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        counts = []
        for days in (2, 12):
            seen.clear()
            store.read(window_canary_nights, make.when(0), make.when(days), suite="ops")
            counts.append(len([s for s in seen if s.lstrip().upper().startswith("SELECT")]))
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert counts == [1, 1]


def test_planting_replaces_one_case_of_a_shard_and_leaves_the_others(store: Store, make: Any) -> None:
    store.upsert_run(make.run("nightly:ops:n0"))
    store.record_shard("nightly:ops:n0", make.shard(), [make.result("add"), make.result("mul")])
    canary = make.result("add [canary]", samples=(1.1, 2.2, 3.3))
    for _ in range(2):   # a retry writes the same row again
        store.unit_of_work(replace_case_results, "nightly:ops:n0", "npu", 0, "add [canary]", [canary])
    assert sorted(r.case for _, _, r in store.results("nightly:ops:n0")) == ["add", "add [canary]", "mul"]
    got = store.read(case_results, "nightly:ops:n0", ("add", "add [canary]"))
    assert [(p, d, r.case, r.samples) for p, d, r in got] == [("npu", 0, "add", (1.0, 2.0, 3.0)),
                                                              ("npu", 0, "add [canary]", (1.1, 2.2, 3.3))]
    store.unit_of_work(replace_case_results, "nightly:ops:n0", "npu", 0, "add [canary]", [])
    assert sorted(r.case for _, _, r in store.results("nightly:ops:n0")) == ["add", "mul"]
    with pytest.raises(StoreError, match="no shard cuda/0"):
        store.unit_of_work(replace_case_results, "nightly:ops:n0", "cuda", 0, "add [canary]", [canary])
