"""Series reads: baseline candidates and series history (accepted runs, ok shards, pooled devices)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zlops.model import BaselinePoint, ShardStatus
from zlops.store import Store

LAT = "latency"


def _nightly(store: Store, make, key: str, *, sha: int, day: float, accepted: bool = True,
             suite: str = "ops", kind: str = "nightly", base: float = 10.0) -> None:
    """A run with pool npu devices 0 and 1 ok, device 2 failed, and pool cpu device 0 ok."""
    store.upsert_run(make.run(key, sha=sha, day=day, finished_day=day + 0.1, accepted=accepted,
                              suite=suite, kind=kind))
    store.record_shard(key, make.shard("npu", 1), [make.result("add", LAT, (base + 2,)),
                                                   make.result("mul", LAT, (base + 3,))])
    store.record_shard(key, make.shard("npu", 0), [make.result("add", LAT, (base, base + 1))])
    store.record_shard(key, make.shard("npu", 2, ShardStatus.FAILED),
                       [make.result("add", LAT, (999.0,))])
    store.record_shard(key, make.shard("cpu", 0), [make.result("add", LAT, (base * 10,), unit="ms")])


def test_baseline_candidates(store: Store, make) -> None:
    _nightly(store, make, "old", sha=1, day=1, base=10)
    _nightly(store, make, "new", sha=2, day=2, base=20)
    _nightly(store, make, "unaccepted", sha=3, day=3, accepted=False)
    _nightly(store, make, "off-history", sha=4, day=4)
    _nightly(store, make, "other-suite", sha=2, day=5, suite="other")
    _nightly(store, make, "a-pr", sha=2, day=6, kind="pr")
    _nightly(store, make, "tonight", sha=2, day=7)

    got = store.baseline_candidates("ops", shas=[make.sha(n) for n in (1, 2, 3, 5)],
                                    exclude_run_key="tonight")
    old = make.when(1.1)
    new = make.when(2.1)
    assert got == [
        ("cpu", "add", LAT, BaselinePoint("new", make.sha(2), "ms", 200.0, 1), new),
        ("npu", "add", LAT, BaselinePoint("new", make.sha(2), "us", 21.0, 3), new),
        ("npu", "mul", LAT, BaselinePoint("new", make.sha(2), "us", 23.0, 1), new),
    ]  # one candidate per series, its newest, as median and count: no raw sample is loaded
    # without the exclusion tonight's accepted run is the newest candidate; kind selects PR runs
    assert got[0][3].run_key == "new"
    assert store.baseline_candidates("ops", shas={make.sha(2)})[0][3].run_key == "tonight"
    assert {c[3].run_key for c in store.baseline_candidates("ops", shas={make.sha(2)},
                                                            kind="pr")} == {"a-pr"}
    assert store.baseline_candidates("ops", shas=[]) == []
    # the older run is the candidate where the newer one is off the ancestry
    assert {c[3].run_key for c in store.baseline_candidates("ops", shas=[make.sha(1)])} == {"old"}
    assert old < new


def test_baseline_candidates_fall_back_per_series_within_the_window(store: Store, make) -> None:
    _nightly(store, make, "n1", sha=1, day=1, base=10)
    _nightly(store, make, "n2", sha=2, day=2, base=20)
    store.upsert_run(make.run("n3", sha=3, day=3, finished_day=3.1, accepted=True))
    store.record_shard("n3", make.shard("npu", 0), [make.result("add", LAT, (30.0,))])
    shas = [make.sha(n) for n in (1, 2, 3)]
    got = {(c[0], c[1]): c[3] for c in store.baseline_candidates("ops", shas=shas)}
    # npu/mul is not in n3: its newest point is n2's; cpu has no shard in n3 either
    assert got == {("npu", "add"): BaselinePoint("n3", make.sha(3), "us", 30.0, 1),
                   ("npu", "mul"): BaselinePoint("n2", make.sha(2), "us", 23.0, 1),
                   ("cpu", "add"): BaselinePoint("n2", make.sha(2), "ms", 200.0, 1)}
    # a window of one run per pool: npu/mul had no point in npu's newest run (n3)
    narrow = {(c[0], c[1]): c[3].run_key for c in store.baseline_candidates("ops", shas=shas, window=1)}
    assert narrow == {("npu", "add"): "n3", ("cpu", "add"): "n2"}


def test_baseline_candidates_with_thousands_of_shas(store: Store, make) -> None:
    _nightly(store, make, "n1", sha=7, day=1)
    shas = [make.sha(n) for n in range(1000, 6000)] + [make.sha(7)]
    got = store.baseline_candidates("ops", shas=shas)
    assert {c[3].run_key for c in got} == {"n1"}
    assert len(got) == 3


def test_series_history(store: Store, make) -> None:
    for day in range(5):
        _nightly(store, make, f"n{day}", sha=day + 1, day=day, base=float(day))
    _nightly(store, make, "unaccepted", sha=9, day=2.5, accepted=False, base=50)
    _nightly(store, make, "tonight", sha=10, day=9, accepted=False, base=90)

    got = store.series_history("ops", "npu", "add", LAT, limit=3)
    assert [(p.run_key, p.samples, p.when) for p in got] == [
        ("n2", (2.0, 3.0, 4.0), make.when(2)),
        ("n3", (3.0, 4.0, 5.0), make.when(3)),
        ("n4", (4.0, 5.0, 6.0), make.when(4)),
    ]
    assert got[0].sha == make.sha(3) and got[0].unit == "us" and got[0].median == 3.0

    with_tonight = store.series_history("ops", "npu", "add", LAT, limit=3,
                                        include_run_key="tonight")
    assert [p.run_key for p in with_tonight] == ["n3", "n4", "tonight"]
    assert with_tonight[-1].samples == (90.0, 91.0, 92.0)

    everything = store.series_history("ops", "npu", "add", LAT)
    assert [p.run_key for p in everything] == ["n0", "n1", "n2", "n3", "n4"]
    assert [p.samples for p in store.series_history("ops", "cpu", "add", LAT, limit=1)] == [(40.0,)]
    assert store.series_history("ops", "npu", "nope", LAT) == []
    assert store.series_history("ops", "npu", "add", LAT, kind="pr") == []
    with pytest.raises(ValueError, match="limit"):
        store.series_history("ops", "npu", "add", LAT, limit=0)


def test_history_skips_runs_whose_series_only_failed(store: Store, make) -> None:
    store.upsert_run(make.run("n1", day=1, accepted=True))
    store.record_shard("n1", make.shard("npu", 0, ShardStatus.FAILED), [make.result("add", LAT)])
    store.upsert_run(make.run("n2", day=2, accepted=True))
    store.record_shard("n2", make.shard("npu", 0), [make.result("add", LAT, (4.0,))])
    assert [p.run_key for p in store.series_history("ops", "npu", "add", LAT, limit=1)] == ["n2"]
    assert [c[3].run_key for c in store.baseline_candidates("ops", shas=[make.sha(1)])] == ["n2"]


def _gappy_store(store: Store, make) -> None:
    """Twelve nights of npu (devices 0 and 1, device 2 failed) and cpu: ``add`` every night, ``mul`` only on
    even nights (a series with gaps), ``div`` from night 9 on (a young series, fewer points than the
    limit); an unaccepted night, a PR run and another suite's night in between."""
    for day in range(12):
        store.upsert_run(make.run(f"n{day}", sha=day + 1, day=day, finished_day=day + 0.1, accepted=True))
        store.record_shard(f"n{day}", make.shard("npu", 1), [make.result("add", LAT, (day + 2.0,))]
                           + ([make.result("mul", LAT, (day + 3.0, day + 4.0))] if day % 2 == 0 else []))
        store.record_shard(f"n{day}", make.shard("npu", 0), [make.result("add", LAT, (float(day), day + 1.0))]
                           + ([make.result("div", LAT, (day + 5.0,))] if day >= 9 else []))
        store.record_shard(f"n{day}", make.shard("npu", 2, ShardStatus.FAILED), [make.result("add", LAT, (999.0,))])
        store.record_shard(f"n{day}", make.shard("cpu", 0), [make.result("add", LAT, (day * 10.0,), unit="ms")])
    _nightly(store, make, "unaccepted", sha=50, day=4.5, accepted=False, base=50)
    _nightly(store, make, "a-pr", sha=51, day=5.5, kind="pr", base=51)
    _nightly(store, make, "other-suite", sha=52, day=6.5, suite="other", base=52)
    _nightly(store, make, "tonight", sha=60, day=20, accepted=False, base=90)


@pytest.fixture
def gappy(stored: Callable[..., Store], make) -> Store:
    """This test's own copy of a store that :func:`_gappy_store` filled once per session and backend."""
    return stored("gappy", lambda s: _gappy_store(s, make))


KEYS = [("npu", "add", LAT), ("npu", "mul", LAT), ("npu", "div", LAT), ("cpu", "add", LAT), ("cpu", "mul", LAT),
        ("npu", "nope", LAT), ("gpu", "add", LAT)]


@pytest.mark.parametrize("limit", [1, 3, 5, 60])
@pytest.mark.parametrize("before_day", [None, 7.5])
def test_series_histories_equal_series_history_of_each_series(gappy: Store, make, limit: int,
                                                              before_day: float | None) -> None:
    store = gappy
    before = None if before_day is None else make.when(before_day)
    got = store.series_histories("ops", KEYS, limit=limit, before=before)
    for key in KEYS:
        one = store.series_history("ops", *key, limit=limit, before=before)
        assert got.get(key, []) == one, (key, limit, before_day)
    assert ("npu", "nope", LAT) not in got and ("gpu", "add", LAT) not in got
    if limit == 3 and before_day is None:  # the gaps: mul's 3 newest points span 6 nights, div has 3
        assert [p.run_key for p in got[("npu", "mul", LAT)]] == ["n6", "n8", "n10"]
        assert [p.samples for p in got[("npu", "add", LAT)]][-1] == (11.0, 12.0, 13.0)  # device order, no failed one
        assert [p.run_key for p in got[("npu", "div", LAT)]] == ["n9", "n10", "n11"]
    with_tonight = store.series_histories("ops", KEYS[:1], limit=limit, include_run_key="tonight")
    assert with_tonight[KEYS[0]] == store.series_history("ops", *KEYS[0], limit=limit, include_run_key="tonight")
    assert store.series_histories("ops", KEYS, kind="pr", limit=limit) == {
        k: store.series_history("ops", *k, kind="pr", limit=limit) for k in (("npu", "add", LAT), ("npu", "mul", LAT),
                                                                            ("cpu", "add", LAT))}


def test_series_histories_look_back_at_most_depth_runs_of_the_pool(gappy: Store) -> None:
    store = gappy
    # mul is on even nights: its 3 newest points need 6 runs; a depth of 4 runs finds two of them
    assert [p.run_key for p in store.series_histories("ops", [("npu", "mul", LAT)], limit=3, depth=4)[
        ("npu", "mul", LAT)]] == ["n8", "n10"]
    assert store.series_histories("ops", [], limit=3) == {}
    with pytest.raises(ValueError, match="limit"):
        store.series_histories("ops", KEYS, limit=0)


def test_series_histories_take_a_constant_number_of_queries(store: Store, make) -> None:
    from sqlalchemy import event

    for day in range(6):
        store.upsert_run(make.run(f"n{day}", sha=day + 1, day=day, finished_day=day + 0.1, accepted=True))
        store.record_shard(f"n{day}", make.shard("npu", 0),
                           [make.result(f"op{i}", LAT, (float(day + i),)) for i in range(40)])
    counts = []
    for n in (2, 40):
        statements: list[str] = []

        def count(_conn: object, _cursor: object, sql: str, *_args: object, seen: list[str] = statements) -> None:
            seen.append(sql)

        event.listen(store.engine, "before_cursor_execute", count)
        try:
            got = store.series_histories("ops", [("npu", f"op{i}", LAT) for i in range(n)], limit=4)
        finally:
            event.remove(store.engine, "before_cursor_execute", count)
        assert len(got) == n and all(len(h) == 4 for h in got.values())
        counts.append(len([s for s in statements if s.lstrip().upper().startswith("SELECT")]))
    assert counts[0] == counts[1] <= 3, counts  # the runs, then one batch of results
