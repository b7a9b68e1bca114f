"""The report step's trend figures read their histories from a real store: the same points as the per-series
path they replace (``Store.series_history`` per series, ``Store.shard_extras`` per night), in a number of
queries that does not grow with the number of flagged series."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from db_templates import Templates
from report_factories import T0, comparison
from sqlalchemy import event

from zlops.model import CaseResult, CompareSummary, RunRecord, RunStatus, ShardOutcome, ShardStatus, Verdict
from zlops.report.night_figures import draw_run_figures, telemetry_by_pool, trend_candidates
from zlops.store import Store

SUITE = "kernels"
POOLS = ("npu", "cuda")
NIGHTS = 14
TONIGHT = "nightly:kernels:tonight"
CASES = [f"op{i % 5}/case{i}" for i in range(36)]


def sha(n: int) -> str:
    return f"{n:040x}"


def when(day: float) -> datetime:
    return T0 + timedelta(days=day)


def _shard(pool: str, device: int, status: ShardStatus = ShardStatus.OK) -> ShardOutcome:
    return ShardOutcome(pool, device, "ascend" if pool == "npu" else "cuda", status,
                        Path(f"/nonexistent/{pool}/{device}"), 0 if status is ShardStatus.OK else 1, T0, T0)


def _night(store: Store, key: str, n: int, *, accepted: bool = True, sha_n: int | None = None,
           day: float | None = None) -> None:
    """A night of every case on both pools: npu on devices 0 and 1 (device 2 failed), cuda on device 0;
    case i is absent on the nights where n % (i % 4 + 2) == 0 (gaps of several lengths), and the
    newest cases exist from night 9 only (young series); each shard has its own clock and temperature."""
    store.upsert_run(RunRecord(key, "nightly", SUITE, sha(n if sha_n is None else sha_n), "main",
                               RunStatus.DONE if accepted else RunStatus.RUNNING, accepted=accepted,
                               started_at=when(n if day is None else day),
                               finished_at=when((n if day is None else day) + 0.1) if accepted else None))
    present = [i for i, _ in enumerate(CASES) if n % (i % 4 + 2) != 0 and (i < 30 or n >= 9)]
    for pool, devices in (("npu", (0, 1)), ("cuda", (0,))):
        for device in devices:
            results = [CaseResult(CASES[i], "latency", "us", True,
                                  tuple(100.0 + i + n + device + 0.1 * k for k in range(3))) for i in present]
            store.record_shard(key, _shard(pool, device), results,
                               telemetry={"sm_clock_median_mhz": 1500.0 + 10 * n + device, "temp_max_c": 60.0 + n})
        if pool == "npu":
            store.record_shard(key, _shard(pool, 2, ShardStatus.FAILED), [CaseResult(CASES[0], "latency", "us", True,
                                                                                      (999.0,))])


def _nights(url: str, folder: Path) -> None:
    s = Store.open(url)
    try:
        for n in range(1, NIGHTS + 1):
            _night(s, f"nightly:kernels:n{n}", n)
        _night(s, "nightly:kernels:unaccepted", 100, accepted=False)          # never history
        _night(s, "nightly:kernels:off-line", 7, sha_n=999, day=7.5)          # accepted, off the ancestor line
        _night(s, TONIGHT, NIGHTS + 1, accepted=False)
        _night(s, "nightly:kernels:later", NIGHTS + 2)                         # after the run: not in its history
    finally:
        s.dispose()


@pytest.fixture
def store(tmp_path: Path, db_templates: Templates) -> Iterator[Store]:
    """This test's own copy of the nights :func:`_nights` stored once per session."""
    template = db_templates.get("run-figures-nights", "sqlite", _nights)
    s = Store.open(db_templates.copy(template, sqlite_path=tmp_path / "zlops.db", pg=None))
    try:
        yield s
    finally:
        s.dispose()


ANCESTORS = frozenset(sha(n) for n in range(1, NIGHTS + 2))
FLAGGED = (Verdict.REGRESSION, Verdict.SUSPECT, Verdict.IMPROVED, Verdict.SEVERE)


def _summary(flagged: int) -> CompareSummary:
    """Tonight's compare rows: the first ``flagged`` series of each pool flagged, the rest unchanged."""
    rows = []
    for pool in POOLS:
        for i, case in enumerate(CASES):
            verdict = FLAGGED[i % len(FLAGGED)] if i < flagged else Verdict.UNCHANGED
            rows.append(comparison(pool, case, verdict, 100.0 + i, 120.0 + i + (i % 7)))
    return CompareSummary(TONIGHT, SUITE, sha(NIGHTS + 1), tuple(rows))


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[str, str, str], dict[str, Any]]]:
    """What each trend figure was given, in drawing order (the drawing itself is tested elsewhere)."""
    calls: list[tuple[tuple[str, str, str], dict[str, Any]]] = []

    def trend_plot(history: Any, c: Any, out_path: Path, **kw: Any) -> Path:
        calls.append(((c.pool, c.case, c.metric), {"history": list(history), **kw}))
        return out_path

    monkeypatch.setattr("zlops.report.plots.trend_plot", trend_plot)
    return calls


def _draw(store: Store, tmp_path: Path, summary: CompareSummary, **kw: Any) -> Any:
    shards = [_shard("npu", 0), _shard("npu", 1), _shard("npu", 2, ShardStatus.FAILED), _shard("cuda", 0)]
    return draw_run_figures(store, run_key=TONIGHT, suite=SUITE, summary=summary, shards=shards,
                            out_dir=tmp_path / "plots", band_pct=2.0, as_of=when(NIGHTS + 1), **kw)


def _old_path(store: Store, c: Any, ancestors: frozenset[str] | None) -> tuple[list[Any], list[Any]]:
    """The history and telemetry strip of one trend as the report step read them before: one
    ``series_history`` per series and one ``shard_extras`` per night."""
    history = [h for h in store.series_history(SUITE, c.pool, c.case, c.metric, before=when(NIGHTS + 1))
               if h.run_key != TONIGHT and (ancestors is None or h.sha in ancestors)]
    telemetry = [telemetry_by_pool(store.shard_extras(h.run_key)).get(c.pool, (None, None)) for h in history]
    if c.head is not None:
        telemetry.append(telemetry_by_pool(store.shard_extras(TONIGHT)).get(c.pool, (None, None)))
    return history, telemetry


@pytest.mark.parametrize("ancestors", [ANCESTORS, None])
def test_trend_figures_draw_what_the_per_series_reads_gave(store: Store, tmp_path: Path, drawn: list[Any],
                                                           ancestors: frozenset[str] | None) -> None:
    summary = _summary(36)
    references = {("npu", CASES[35], "latency"): (130.0, "us", "alert #7 reference")}
    figures = _draw(store, tmp_path, summary, ancestors=ancestors, references=references)
    expected = trend_candidates(summary, references)
    assert [key for key, _ in drawn] == [(c.pool, c.case, c.metric) for c in expected]   # same figures, same order
    assert len(drawn) == 60 and set(figures.trends) == {key for key, _ in drawn}
    samples = store.run_samples(TONIGHT, keys=[key for key, _ in drawn])
    for c, (key, got) in zip(expected, drawn, strict=True):
        history, telemetry = _old_path(store, c, ancestors)
        assert got["history"] == history, key
        assert got["telemetry"] == telemetry, key
        assert got["tonight"] == samples.get(key) and got["reference"] == references.get(key)
    # the store's answer has what it should: gaps, young series, devices pooled, nothing after the run
    by_key = {key: got["history"] for key, got in drawn}
    gappy = by_key[("npu", CASES[1], "latency")]                 # absent every third night
    nights = [f"nightly:kernels:n{n}" for n in range(1, NIGHTS + 1) if n % 3]
    if ancestors is None:
        nights.insert(nights.index("nightly:kernels:n8"), "nightly:kernels:off-line")
    assert [h.run_key for h in gappy] == nights
    assert gappy[-1].samples == (115.0, 115.1, 115.2, 116.0, 116.1, 116.2)   # device 0 then 1; 2 failed
    young = by_key[("npu", CASES[35], "latency")]
    assert [h.run_key for h in young] == [f"nightly:kernels:n{n}" for n in range(9, NIGHTS + 1) if n % 5]
    on_line = ancestors is not None
    assert any(h.run_key == "nightly:kernels:off-line" for h in by_key[("cuda", CASES[1], "latency")]) is not on_line
    assert not any(h.run_key in (TONIGHT, "nightly:kernels:later", "nightly:kernels:unaccepted")
                   for history in by_key.values() for h in history)


def test_trend_figures_take_the_same_queries_for_3_or_36_flagged_series(store: Store, tmp_path: Path,
                                                                      drawn: list[Any]) -> None:
    counts = {}
    for flagged in (3, 36):
        statements: list[str] = []

        def count(_conn: object, _cursor: object, sql: str, *_args: object, seen: list[str] = statements) -> None:
            seen.append(sql)

        event.listen(store.engine, "before_cursor_execute", count)
        try:
            _draw(store, tmp_path / str(flagged), _summary(flagged), ancestors=ANCESTORS)
        finally:
            event.remove(store.engine, "before_cursor_execute", count)
        counts[flagged] = len(statements)
    assert len(drawn) == 6 + 60
    # tonight's samples, the runs, one batch of results, the nights' telemetry (BEGIN/ROLLBACK aside)
    assert counts[3] == counts[36] <= 10, counts
