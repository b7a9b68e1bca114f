"""The store reads behind the triage pages agree with the per-run reads, on SQLite and PostgreSQL; a person's
change is a compare-and-set."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from db_templates import Templates
from triage_nights import CASES, NIGHTS, POOLS, SUITE, Nights, copy_nights, run_key

from zlops.alerts.lifecycle import AlertError, AlertState
from zlops.store import alerts as store_alerts
from zlops.store import pages
from zlops.triage.actions import change_alert


@pytest.fixture
def nights(backend: str, tmp_path: Path, request: pytest.FixtureRequest, db_templates: Templates) -> Nights:
    """This test's own copy of the stored nights, on each backend."""
    if backend == "sqlite":
        return copy_nights(tmp_path, db_templates)
    return copy_nights(tmp_path, db_templates, backend="postgresql", pg=request.getfixturevalue("pg_databases"))


def test_one_series_reads_agree_with_the_whole_suite_and_per_run_reads(nights: Nights) -> None:
    store = nights.store
    shas = {r.sha for r in store.accepted_runs(SUITE)}
    whole = store.history_frame(SUITE, ancestors=shas, window=5)
    one = store.history_frame(SUITE, ancestors=shas, window=5, only=[("softmax_8192", "time")])
    expected = whole[whole["case"] == "softmax_8192"].reset_index(drop=True)
    pd.testing.assert_frame_equal(one, expected)
    assert len(one) == 5 * len(POOLS)
    assert len(store.history_frame(SUITE, ancestors=shas, window=5, only=[("nosuch", "time")])) == 0
    keys = [run_key(n) for n in range(NIGHTS)]
    samples = store.read(pages.series_samples, keys, "matmul_bf16", "time")
    rows = store.read(pages.series_comparisons, keys, "matmul_bf16", "time", pools=["cuda"])
    for key in keys:
        per_run = store.run_samples(key)
        for pool in POOLS:
            assert samples[(key, pool)] == ("ms", per_run[(pool, "matmul_bf16", "time")])
        stored = [c for c in store.comparisons(key) if (c.pool, c.case) == ("cuda", "matmul_bf16")]
        assert ([rows[(key, "cuda")]] if (key, "cuda") in rows else []) == stored
    assert {p for _, p in rows} == {"cuda"}
    telemetry = store.read(pages.run_telemetry, keys)
    assert all(telemetry[k] == store.shard_extras(k) for k in keys)
    assert store.read(pages.suite_pools, SUITE, CASES[0], "time") == sorted(POOLS)
    assert store.read(pages.pool_backends, keys) == POOLS
    opened = store.read(pages.opening_comparisons, list(nights.alerts.values()))
    assert {c.pool for c in opened.values()} == {"npu", "musa"} and all(c.verdict.value == "regression"
                                                                        for c in opened.values())


def test_a_change_made_meanwhile_is_refused_not_doubled(nights: Nights, monkeypatch: pytest.MonkeyPatch) -> None:
    alert_id = nights.alerts["npu"]
    stale = nights.store.alert(alert_id)  # what a second request read before the first one committed
    change_alert(nights.store, alert_id, AlertState.ACKED, note="first", actor="ana")
    monkeypatch.setattr(store_alerts, "get_alert", lambda session, aid: stale)
    with pytest.raises(AlertError, match="changed meanwhile"), nights.store.session() as s:
        store_alerts.set_alert_state(s, alert_id, AlertState.WONTFIX, actor="bo")
    monkeypatch.undo()
    events = nights.store.alert_events(alert_id)
    assert [(e["actor"], e["to_state"]) for e in events] == [("zlops", "confirmed"), ("ana", "acked")]
    with pytest.raises(AlertError, match="note: at most 2000"):
        change_alert(nights.store, alert_id, AlertState.WONTFIX, note="x" * 2001, actor="ana")
    with pytest.raises(AlertError, match="needs the name"):
        change_alert(nights.store, alert_id, AlertState.WONTFIX, actor="  ")
