"""Series reads: baseline candidates and series history (accepted runs, ok shards, pooled devices)."""

from __future__ import annotations

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
