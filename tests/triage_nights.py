"""Eight stored nights of a suite on three backends (npu/ascend, cuda, musa), written through zlops' own
store API and alert lifecycle, for the triage pages' tests (tests/airflow) and the store reads behind them
(tests/store).

``softmax_8192`` (time, ms) regresses by about 12% at night 5 on npu and musa (confirmed; npu's with a
same-device A/B: its Figures hold the A/B runs, a CI and a p-value, and its note names the change point),
and stays put on cuda. Every shard keeps a telemetry summary. The lifecycle (:func:`zlops.slack.announce.update_alerts`)
opens the alerts and queues their thread announcement in the outbox; the npu thread is then marked sent,
as a Slack flush would.

:func:`build` stores them through the store API; :func:`copy_nights` gives a test its own copy of what
:func:`build` (or another builder on top of it) stored once per session (tests/db_templates.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml
from db_templates import PgDatabases, Templates

from zlops.config.settings import Config, load_config
from zlops.model import (
    BaselinePoint,
    CaseResult,
    CompareSummary,
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
from zlops.slack.announce import update_alerts
from zlops.steps.context import open_store
from zlops.store import Store
from zlops.store.points import pool_device_results

SUITE = "ops"
POOLS = {"npu": "ascend", "cuda": "cuda", "musa": "musa"}
CASES = ("softmax_8192", "matmul_bf16")
REGRESSED = {"npu": 1.12, "musa": 1.13}  # pool -> factor from night 5 on (softmax_8192)
T0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)
NIGHTS = 8
BAD_NIGHT = 5


def sha(n: int) -> str:
    return f"{n + 1:02x}" * 20


def run_key(n: int) -> str:
    return f"nightly:{SUITE}:scheduled__2026-11-{n + 1:02d}T02:00:00+00:00"


def _samples(pool: str, case: str, night: int) -> tuple[float, ...]:
    base = {"softmax_8192": 2.0, "matmul_bf16": 5.0}[case] * (1.0 + 0.1 * list(POOLS).index(pool))
    factor = REGRESSED.get(pool, 1.0) if case == "softmax_8192" and night >= BAD_NIGHT else 1.0
    wiggle = (0.997, 1.0, 1.004, 0.999, 1.002)
    return tuple(round(base * factor * w * (1 + 0.001 * night), 6) for w in wiggle)


@dataclass(frozen=True)
class Nights:
    config: Config
    config_path: Path
    store: Store
    alerts: dict[str, int]   # pool -> id of softmax_8192's alert
    thread_root: int         # the npu alert's announcement (sent)


def _config(tmp: Path, database: str | None) -> Config:
    data: dict[str, object] = {
        "home": str(tmp / "home"),
        "pools": {pool: {"backend": backend, "devices": [0]} for pool, backend in POOLS.items()},
        "suites": {SUITE: {"repo": str(tmp / "upstream"), "branch": "main", "command": ["true"],
                           "format": "zlops-json", "pools": list(POOLS)}},
        "thresholds": {"potential_pct": 2, "regression_pct": 5},
        "slack": {"channel": "#perf"},
    }
    if database:
        data["database"] = database
    path = tmp / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


def _comparison(pool: str, case: str, night: int, head: tuple[float, ...], base: tuple[float, ...]) -> Comparison:
    ref, value = statistics.median(base), statistics.median(head)
    ab = pool == "npu" and case == "softmax_8192" and night == BAD_NIGHT
    figures = Figures(reference=ref, reference_label="A/B base, 4 runs" if ab else "median of the last nights",
                      value=value, value_label="A/B head, 4 runs" if ab else f"tonight, {len(head)} samples",
                      lower_is_better=True, unit="ms", threshold_pct=2.0, noise_pct=0.3,
                      ci_pct=(9.1, 14.8) if ab else None, p_value=0.0008 if ab else None,
                      runs_base=(ref * 0.999, ref, ref * 1.001, ref) if ab else (),
                      runs_head=(value * 0.998, value, value * 1.002, value) if ab else ())
    worse = figures.worse_pct
    verdict = Verdict.REGRESSION if worse > 5 else Verdict.UNCHANGED
    note = (f"A/B confirmed; change point: the series first settled beyond 2% at {sha(BAD_NIGHT)[:7]} "
            "(1 night(s) before tonight); start bisecting there") if verdict is Verdict.REGRESSION else ""
    return Comparison(SUITE, pool, case, "time", "ms", True,
                      BaselinePoint.of_samples(run_key(night - 1), sha(night - 1), "ms", base), Summary.of(head),
                      Judgement(verdict, None, None, 2.0, note, figures))


def build(tmp: Path, *, database: str | None = None) -> Nights:
    """Store the nights (see the module docstring) and return where they are (``database``: a store URL,
    default the config's SQLite file)."""
    config = _config(tmp, database)
    store = open_store(config)
    alerts: dict[str, int] = {}
    for night in range(NIGHTS):
        when = T0 + timedelta(days=night)
        run = RunRecord(run_key(night), "nightly", SUITE, sha(night), "main", RunStatus.DONE, True, when,
                        when + timedelta(minutes=40),
                        {"airflow": {"dag_id": f"zlops_nightly_{SUITE}", "run_id": run_key(night).split(":", 2)[2]}})
        store.upsert_run(run)
        rows = []
        for pool, backend in POOLS.items():
            results = [CaseResult(case, "time", "ms", True, _samples(pool, case, night)) for case in CASES]
            outcome = ShardOutcome(pool, 0, backend, ShardStatus.OK, tmp / "artifacts" / pool, 0, when,
                                   when + timedelta(minutes=30))
            store.record_shard(run.run_key, outcome, results, telemetry={
                "sm_clock_median_mhz": 1800.0 - 10 * night, "temp_max_c": 60.0 + night})
            rows += [(pool, 0, r) for r in results]
        comparisons = [] if night == 0 else [
            _comparison(pool, case, night, _samples(pool, case, night), _samples(pool, case, night - 1))
            for pool in POOLS for case in CASES]
        store.save_comparisons(run.run_key, comparisons)
        store.save_series_points(run.run_key, pool_device_results(rows))
        if comparisons:
            summary = CompareSummary(run.run_key, SUITE, run.sha, tuple(comparisons))
            for a in update_alerts(store, run=run, summary=summary, channel="#perf", band_pct=2.0, trends={}):
                alerts.setdefault(a.alert.pool, a.alert.id)
    root = store.alert(alerts["npu"]).thread_notification_id
    assert root is not None
    store.mark_notification(root, "sent", ts="1764554400.000100", channel_id="C0PERF")
    store.record_thread(root, "1764554400.000100", "C0PERF")
    return Nights(config, tmp / "zlops.yaml", store, alerts, root)


def _template_builder(build_nights: Callable[..., Nights]) -> Callable[[str, Path], tuple[dict[str, int], int]]:
    def fill(url: str, folder: Path) -> tuple[dict[str, int], int]:
        nights = build_nights(folder, database=url)
        nights.store.dispose()  # the template is copied next: no connection may stay open on it
        return dict(nights.alerts), nights.thread_root
    return fill


def copy_nights(tmp: Path, templates: Templates, *, backend: str = "sqlite", pg: PgDatabases | None = None,
                key: str = "nights", build_nights: Callable[..., Nights] = build) -> Nights:
    """This test's own copy of the nights ``build_nights(folder, database=url)`` stored (:func:`build` unless
    told; ``key`` names another builder's template), with a config under ``tmp`` as :func:`build` writes it:
    on SQLite the file is the config's default store (``home/zlops.db``), on PostgreSQL a database of
    ``pg`` (then named in the config). The nights are stored once per session; a test only copies them."""
    template = templates.get(key, backend, _template_builder(build_nights))
    database = None
    url = templates.copy(template, sqlite_path=tmp / "home" / "zlops.db", pg=pg)
    if backend != "sqlite":
        database = url
    config = _config(tmp, database)
    assert config.database_url == url, (config.database_url, url)
    alerts, thread_root = template.meta
    return Nights(config, tmp / "zlops.yaml", open_store(config), dict(alerts), thread_root)
