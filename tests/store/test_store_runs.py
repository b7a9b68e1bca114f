"""Runs, shards and results: idempotent upserts, replacement, atomicity, keyed reads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select

from zlops.errors import StoreError
from zlops.model import RunRecord, RunStatus, ShardStatus
from zlops.store import Store, runs
from zlops.store.models import Result, Run, Shard


def _count(store: Store, model: type) -> int:
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_upsert_run_twice_keeps_one_row_and_merges(store: Store, make) -> None:
    store.upsert_run(make.run("n1", day=0, meta={"a": 1, "b": 1}, accepted=True))
    store.upsert_run(make.run("n1", day=3, finished_day=4, status=RunStatus.DONE,
                              meta={"b": 2, "c": 3}))
    store.upsert_run(make.run("n1", day=3, finished_day=4, status=RunStatus.DONE,
                              meta={"b": 2, "c": 3}))
    assert _count(store, Run) == 1
    got = store.get_run("n1")
    assert got is not None
    assert got.started_at == make.when(0)           # the first started_at is kept
    assert got.finished_at == make.when(4)
    assert got.status is RunStatus.DONE
    assert got.accepted is True                     # an upsert never revokes acceptance
    assert dict(got.meta) == {"a": 1, "b": 2, "c": 3}


def test_upsert_run_refuses_a_different_commit_under_the_same_key(store: Store, make) -> None:
    store.upsert_run(make.run("n1", sha=1))
    with pytest.raises(StoreError, match="sha"):
        store.upsert_run(make.run("n1", sha=2))
    got = store.get_run("n1")
    assert got is not None and got.sha == make.sha(1)


def test_run_without_start_gets_insert_time(store: Store, make) -> None:
    before = datetime.now(timezone.utc)
    store.upsert_run(make.run("n1", day=None))
    got = store.get_run("n1")
    assert got is not None and got.started_at is not None
    assert before - timedelta(seconds=1) <= got.started_at <= datetime.now(timezone.utc)


def test_datetimes_come_back_as_utc(store: Store, make) -> None:
    tokyo = timezone(timedelta(hours=9))
    store.upsert_run(RunRecord(
        run_key="n1", kind="nightly", suite="ops", sha=make.sha(1), branch="main",
        started_at=datetime(2026, 11, 1, 11, 0, tzinfo=tokyo),
        finished_at=datetime(2026, 11, 1, 3, 30)))  # naive: taken as UTC
    got = store.get_run("n1")
    assert got is not None
    assert got.started_at == datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)
    assert got.started_at.utcoffset() == timedelta(0)
    assert got.finished_at == datetime(2026, 11, 1, 3, 30, tzinfo=timezone.utc)


def test_unknown_runs(store: Store, make) -> None:
    assert store.get_run("nope") is None
    for call in (lambda: store.set_run_status("nope", RunStatus.DONE),
                 lambda: store.set_accepted("nope"),
                 lambda: store.record_shard("nope", make.shard(), [make.result()]),
                 lambda: store.shards("nope"),
                 lambda: store.shard_extras("nope"),
                 lambda: store.results("nope")):
        with pytest.raises(StoreError, match="unknown run 'nope'"):
            call()
    assert _count(store, Shard) == 0


def test_status_and_acceptance(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.set_run_status("n1", RunStatus.DONE, finished_at=make.when(1))
    store.set_accepted("n1")
    got = store.get_run("n1")
    assert got is not None
    assert (got.status, got.finished_at, got.accepted) == (RunStatus.DONE, make.when(1), True)
    store.set_run_status("n1", RunStatus.FAILED)  # finished_at untouched when not given
    store.set_accepted("n1", False)
    got = store.get_run("n1")
    assert got is not None
    assert (got.status, got.finished_at, got.accepted) == (RunStatus.FAILED, make.when(1), False)


def test_list_runs_newest_first_with_filters(store: Store, make) -> None:
    store.upsert_run(make.run("a", day=1))
    store.upsert_run(make.run("b", day=3, suite="other"))
    store.upsert_run(make.run("c", day=2, kind="pr"))
    store.upsert_run(make.run("d", day=4))
    assert [r.run_key for r in store.list_runs()] == ["d", "b", "c", "a"]
    assert [r.run_key for r in store.list_runs(suite="ops")] == ["d", "c", "a"]
    assert [r.run_key for r in store.list_runs(suite="ops", kind="nightly")] == ["d", "a"]
    assert [r.run_key for r in store.list_runs(limit=2)] == ["d", "b"]


def test_record_shard_twice_replaces_results(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.record_shard("n1", make.shard(device=0, status=ShardStatus.FAILED, error="boom"),
                       [make.result("a"), make.result("b")], telemetry={"power_w": 1})
    store.record_shard("n1", make.shard(device=0, results_file=Path("/tmp/r.json")),
                       [make.result("b", samples=(5.0, 6.0), dtype="f16"), make.result("c")],
                       identity={"driver": "24.1"})
    store.record_shard("n1", make.shard(device=0, results_file=Path("/tmp/r.json")),
                       [make.result("b", samples=(5.0, 6.0), dtype="f16"), make.result("c")],
                       identity={"driver": "24.1"})
    assert _count(store, Shard) == 1
    assert _count(store, Result) == 2
    (shard,) = store.shards("n1")
    assert (shard.status, shard.error, shard.results_file) == (ShardStatus.OK, None,
                                                               Path("/tmp/r.json"))
    assert shard.artifact_dir == Path("/tmp/art/npu/0")
    assert shard.duration_s == 300.0
    assert store.shard_extras("n1") == {("npu", 0): {"telemetry": None,
                                                     "identity": {"driver": "24.1"}}}
    got = store.results("n1")
    assert [(p, d, r.case, r.samples, dict(r.params)) for p, d, r in got] == [
        ("npu", 0, "b", (5.0, 6.0), {"dtype": "f16"}),
        ("npu", 0, "c", (1.0, 2.0, 3.0), {}),
    ]
    assert got[0][2] == make.result("b", samples=(5.0, 6.0), dtype="f16")


def test_results_are_ordered_by_pool_device(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.record_shard("n1", make.shard("npu", 1), [make.result("z"), make.result("a")])
    store.record_shard("n1", make.shard("cpu", 0), [make.result("m")])
    store.record_shard("n1", make.shard("npu", 0), [make.result("q")])
    assert [(p, d, r.case) for p, d, r in store.results("n1")] == [
        ("cpu", 0, "m"), ("npu", 0, "q"), ("npu", 1, "z"), ("npu", 1, "a")]
    assert [(s.pool, s.device) for s in store.shards("n1")] == [("cpu", 0), ("npu", 0), ("npu", 1)]


def test_record_shard_is_all_or_nothing(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.record_shard("n1", make.shard(device=0), [make.result("a", samples=(1.0,))],
                       telemetry={"t": 1})
    with pytest.raises(StoreError, match="n1"):
        store.record_shard("n1", make.shard(device=0, status=ShardStatus.TIMEOUT),
                           [make.result("x"), make.result("x")], telemetry={"t": 2})
    (shard,) = store.shards("n1")
    assert shard.status is ShardStatus.OK
    assert store.shard_extras("n1")[("npu", 0)]["telemetry"] == {"t": 1}
    assert [(r.case, r.samples) for _, _, r in store.results("n1")] == [("a", (1.0,))]
    # a brand-new shard whose results are refused leaves no shard row behind either
    with pytest.raises(StoreError):
        store.record_shard("n1", make.shard(device=7), [make.result("x"), make.result("x")])
    assert [s.device for s in store.shards("n1")] == [0]


def test_session_is_one_transaction(store: Store, make) -> None:
    with store.session() as s:
        runs.upsert_run(s, make.run("n1"))
        runs.record_shard(s, "n1", make.shard(), [make.result()])
    assert len(store.results("n1")) == 1
    with pytest.raises(RuntimeError), store.session() as s:
        runs.upsert_run(s, make.run("n2"))
        raise RuntimeError("caller failed after writing")
    assert store.get_run("n2") is None


def test_deleting_a_run_cascades_to_shards_and_results(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.record_shard("n1", make.shard(), [make.result()])
    with store.session() as s:
        s.execute(delete(Run).where(Run.run_key == "n1"))
    assert (_count(store, Shard), _count(store, Result)) == (0, 0)


def test_concurrent_writers_never_duplicate(db_url: str, make) -> None:
    # four workers (think: one Airflow task per device) racing on the same run and outbox keys
    stores = [Store.open(db_url, migrate=i == 0) for i in range(4)]
    barrier = threading.Barrier(len(stores))

    def work(device: int, s: Store) -> list[int]:
        barrier.wait()
        ids = []
        for _ in range(3):
            s.upsert_run(make.run("n1", meta={f"w{device}": True}))
            s.record_shard("n1", make.shard(device=device), [make.result("a"), make.result("b")])
            ids.append(s.queue_notification("n1", "summary", "#perf", {"from": device}))
        return ids

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            futures = [pool.submit(work, i, s) for i, s in enumerate(stores)]
            ids = {i for f in futures for i in f.result(timeout=60)}  # re-raises worker errors
        assert len(ids) == 1
        store = stores[0]
        assert (_count(store, Run), _count(store, Shard), _count(store, Result)) == (1, 4, 8)
        got = store.get_run("n1")
        assert got is not None and dict(got.meta) == {f"w{i}": True for i in range(4)}
    finally:
        for s in stores:
            s.dispose()
