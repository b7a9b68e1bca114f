"""The trust ledger's read of the nights' stored coverage (zlops.store.ledger.window_run_meta): one key of each
nightly run's meta in a window, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from zlops.model import RunRecord, RunStatus
from zlops.store import Store
from zlops.store.ledger import window_run_meta

SHA = "4" * 40
T0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


def test_one_meta_key_of_the_windows_nightly_runs_oldest_first(store: Store) -> None:
    coverage = {"schema_version": 1, "pools": {"cuda": {"total": 3, "at": [{"pct": 2.0, "watched": 1},
                                                                          {"pct": 5.0, "watched": 2}]}}}
    for n, (kind, suite, meta) in enumerate((
            ("nightly", "kernels", {"coverage": coverage, "partition": {"big": list(range(50))}}),
            ("nightly", "kernels", {"ab": {"cuda": 1}}),                       # reported before coverage was stored
            ("pr", "kernels", {"coverage": {"schema_version": 1, "pools": {}}}),   # not a nightly
            ("nightly", "other", {"coverage": {"schema_version": 1, "pools": {}}}),
            ("nightly", "kernels", {"coverage": {**coverage, "pools": {}}}))):
        store.upsert_run(RunRecord(f"r{n}", kind, suite, SHA, "main", RunStatus.DONE,
                                   started_at=T0 + timedelta(days=n), meta=meta))
    read = store.read(window_run_meta, T0, T0 + timedelta(days=10), "coverage", suite="kernels")
    assert read == [coverage, {**coverage, "pools": {}}]
    assert len(store.read(window_run_meta, T0, T0 + timedelta(days=10), "coverage")) == 3
    assert store.read(window_run_meta, T0 + timedelta(days=1), T0 + timedelta(days=4), "coverage",
                      suite="kernels") == []
