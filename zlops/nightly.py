"""The report step and :func:`run_nightly`, the whole nightly in one call (CLI and demo).

The DAG runs the same steps as separate tasks (see :mod:`zlops.airflow.tasks`); this module runs
them in order in one process, with the worktree cleaned up whatever happens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops import pipeline
from zlops.config import Config
from zlops.confirm import confirm
from zlops.errors import ZlopsError
from zlops.model import CompareSummary, RunStatus, ShardOutcome, ShardStatus
from zlops.nightly_figures import RunFigures
from zlops.notify import NotifyResult
from zlops.progress import LogProgress, Progress
from zlops.report.markdown import markdown_report
from zlops.report.table import compare_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportOutput:
    text: Path
    markdown: Path
    plots: tuple[Path, ...]
    slack: NotifyResult
    table: str
    html: Path | None = None
    figures: RunFigures | None = None


def report(ctx: pipeline.RunContext, *, slack_client: Any = None, progress: Progress | None = None) -> ReportOutput:
    """Text table, figures, markdown and HTML reports, the alert lifecycle and the Slack summary.

    Figures (:mod:`zlops.nightly_figures`) go to ``plots/``; a nightly run then updates its alerts
    and queues their thread messages (:func:`zlops.announce.update_alerts`); :func:`zlops.announce.announce`
    sends what the outbox holds, then the summary. With ``slack_client`` None (no token/connection
    configured) the payload is written to the run's artifacts instead. A Slack outage never fails the
    run: what was not sent stays in the outbox and goes out on the next run.
    """
    from zlops.alerts import OPEN_STATES
    from zlops.announce import alert_digest, announce, update_alerts
    from zlops.nightly_figures import draw_run_figures
    from zlops.report.html import html_report
    from zlops.slack_summary import AlertDigest

    progress = progress or LogProgress()
    store = pipeline.open_store(ctx.config)
    with progress.step("report", suite=ctx.suite_name, commit=ctx.sha[:12]):
        run = store.get_run(ctx.run_key)
        if run is None:
            raise ZlopsError(f"unknown run {ctx.run_key}")
        summary = CompareSummary(ctx.run_key, ctx.suite_name, ctx.sha, tuple(store.comparisons(ctx.run_key)))
        shards = store.shards(ctx.run_key)
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        table = compare_table(summary)
        text_path = ctx.run_dir / "report.txt"
        text_path.write_text(table + "\n", encoding="utf-8")
        thresholds = ctx.config.thresholds_value()
        band = thresholds.potential_pct
        channel = ctx.config.slack.channel if ctx.config.slack else "#perf-nightly"
        nightly = run.kind == "nightly"
        watched = store.alerts(suite=ctx.suite_name, states=OPEN_STATES) if nightly else []
        figures = draw_run_figures(store, run_key=ctx.run_key, suite=ctx.suite_name, summary=summary, shards=shards,
                                   out_dir=ctx.run_dir / "plots", band_pct=band,
                                   references={a.key: (a.base_value, a.unit, f"alert #{a.id} reference")
                                               for a in watched})
        digest = AlertDigest()
        alert_lines: list[str] = []
        if nightly:
            update_alerts(store, run=run, summary=summary, channel=channel, band_pct=band, trends=figures.trends)
            digest, alert_lines = alert_digest(store, run_key=ctx.run_key, suite=ctx.suite_name)
        telemetry = {k: v["telemetry"] for k, v in store.shard_extras(ctx.run_key).items() if v.get("telemetry")}
        pcts = (thresholds.potential_pct, thresholds.regression_pct)
        md_path = ctx.run_dir / "report.md"
        md_path.write_text(markdown_report(summary, run=run, shards=shards, plots=figures.trends, thresholds=pcts,
                                           artifacts_root=ctx.run_dir, telemetry=telemetry, alerts=alert_lines),
                           encoding="utf-8")
        html_path = ctx.run_dir / "report.html"
        html_path.write_text(html_report(summary, run=run, shards=shards, plots=figures.trends,
                                         overview=figures.overview(), thresholds=pcts, artifacts_root=ctx.run_dir,
                                         telemetry=telemetry, alerts=alert_lines, expected_pools=ctx.suite.pools),
                             encoding="utf-8")
        sent = announce(store, run=run, summary=summary, shards=shards, channel=channel, client=slack_client,
                        run_dir=ctx.run_dir, figures=figures, digest=digest, report_files=(md_path, html_path),
                        thresholds=pcts, judge=ctx.config.judge, expected_pools=ctx.suite.pools)
    return ReportOutput(text_path, md_path, tuple(figures.trends.values()), sent.slack, table, html_path, figures)


@dataclass(frozen=True)
class NightlyResult:
    run_key: str
    sha: str
    shards: tuple[ShardOutcome, ...]
    summary: CompareSummary
    report: ReportOutput
    accepted: bool

    @property
    def ok(self) -> bool:
        return any(s.status is ShardStatus.OK for s in self.shards)


def record_env_failure(ctx: pipeline.RunContext, error: str) -> None:
    store = pipeline.open_store(ctx.config)
    now = datetime.now(timezone.utc)
    for pool, backend, device in ctx.planned_shards():
        store.record_shard(ctx.run_key, ShardOutcome(
            pool=pool, device=device, backend=backend, status=ShardStatus.FAILED,
            artifact_dir=ctx.shard_dir(pool, device), exit_code=None, started_at=now, ended_at=now,
            error=f"worktree/environment failed: {error}"))


def run_nightly(config: Config, suite_name: str, *, sha: str | None = None, run_label: str | None = None,
                progress: Progress | None = None, slack_client: Any = None) -> NightlyResult:
    """fetch -> prepare -> run every device -> ingest -> compare -> report -> promote -> cleanup.

    Before fetching, what a dead zlops left on this host is settled (zlops.recovery). The run always
    ends in a final state: ``done``/``failed`` by promote; ``interrupted`` when zlops is told to stop
    (SIGTERM, SIGHUP, Ctrl-C: the benchmarks' process groups are ended first, artifacts are kept);
    ``failed`` when a step raised (the error is re-raised after the run is marked).
    """
    from zlops import proc
    from zlops.errors import Interrupted
    from zlops.recovery import owner_meta, recover

    progress = progress or LogProgress()
    label = run_label or "cli-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    run_key = pipeline.make_run_key("nightly", suite_name, label)
    for line in recover(config, suite=suite_name).lines():
        progress.note(line)
    ctx = pipeline.fetch(config, suite_name, run_key=run_key, sha=sha, progress=progress, owner=owner_meta())
    try:
        try:
            pipeline.prepare(ctx, progress=progress)
        except ZlopsError as exc:
            log.error("environment for %s failed: %s", ctx.sha[:12], exc)
            record_env_failure(ctx, str(exc))
        else:
            pipeline.run_all_devices(ctx, progress=progress)
        pipeline.ingest(ctx)
        summary = pipeline.compare(ctx, progress=progress)
        try:
            summary = confirm(ctx, summary, progress=progress)
        except (ZlopsError, ValueError) as exc:  # unconfirmed suspects stay suspects; the night goes on
            log.error("confirmation of tonight's suspects failed: %s", exc)
        out = report(ctx, slack_client=slack_client, progress=progress)
        accepted = pipeline.promote(ctx)
    except (KeyboardInterrupt, Interrupted) as exc:
        reason = "SIGINT" if isinstance(exc, KeyboardInterrupt) else exc.signame
        proc.interrupt_all(reason)
        _finish(ctx, RunStatus.INTERRUPTED, f"zlops was interrupted by {reason}; the benchmarks were ended")
        raise
    except BaseException as exc:
        proc.interrupt_all(f"the night failed: {type(exc).__name__}")
        _finish(ctx, RunStatus.FAILED, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        proc.clear_interrupt()
        try:
            pipeline.cleanup(ctx)
        except (OSError, ZlopsError) as exc:  # a stale worktree is swept by the next start
            log.error("cleanup of %s failed: %s", ctx.worktree, exc)
    shards = tuple(pipeline.open_store(config).shards(run_key))
    return NightlyResult(run_key, ctx.sha, shards, summary, out, accepted)


def _finish(ctx: pipeline.RunContext, status: RunStatus, reason: str) -> None:
    """Mark a run that could not finish normally; never raises (the original error matters more)."""
    import dataclasses

    try:
        store = pipeline.open_store(ctx.config)
        run = store.get_run(ctx.run_key)
        if run is None or run.status is not RunStatus.RUNNING:
            return
        now = datetime.now(timezone.utc)
        store.upsert_run(dataclasses.replace(run, status=status, finished_at=now, meta={
            status.value: {"reason": reason, "at": now.isoformat(timespec="seconds")}}))
    except Exception as exc:  # noqa: BLE001 - the store itself may be what failed
        log.error("cannot mark run %s %s: %s", ctx.run_key, status.value, exc)
