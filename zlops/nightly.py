"""The report step and :func:`run_nightly`, the whole nightly in one call (CLI and demo).

The DAG runs the same steps as separate tasks (see :mod:`zlops.airflow.tasks`); this module runs
them in order in one process, with the worktree cleaned up whatever happens.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops import pipeline
from zlops.config import Config
from zlops.confirm import confirm
from zlops.errors import ZlopsError
from zlops.model import CompareSummary, ShardOutcome, ShardStatus, Verdict
from zlops.notify import NotifyResult, post_summary, slack_summary_payload
from zlops.progress import LogProgress, Progress
from zlops.report.markdown import markdown_report
from zlops.report.table import compare_table

log = logging.getLogger(__name__)

PLOTTED = (Verdict.REGRESSION, Verdict.POTENTIAL, Verdict.IMPROVED)


@dataclass(frozen=True)
class ReportOutput:
    text: Path
    markdown: Path
    plots: tuple[Path, ...]
    slack: NotifyResult
    table: str


def _plot_name(pool: str, case: str, metric: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{pool}__{case}__{metric}")[:150] + ".png"


def report(ctx: pipeline.RunContext, *, slack_client: Any = None, progress: Progress | None = None) -> ReportOutput:
    """Text table, markdown report, a trend PNG per flagged (or improved) series, and the Slack summary.

    With ``slack_client`` None (no token/connection configured) the Slack payload is written to the
    run's artifacts instead. A failed post is kept in the store's outbox and never fails the run.
    """
    from zlops.report.plots import trend_plot

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
        plots: dict[tuple[str, str, str], Path] = {}
        for c in summary.comparisons:
            if c.verdict not in PLOTTED:
                continue
            # tonight's point comes from the comparison itself; the history is what came before it
            history = [h for h in store.series_history(ctx.suite_name, c.pool, c.case, c.metric)
                       if h.run_key != ctx.run_key]
            out = ctx.run_dir / "plots" / _plot_name(c.pool, c.case, c.metric)
            plots[(c.pool, c.case, c.metric)] = trend_plot(history, c, out, band_pct=thresholds.potential_pct)
        telemetry = {k: v["telemetry"] for k, v in store.shard_extras(ctx.run_key).items() if v.get("telemetry")}
        md = markdown_report(summary, run=run, shards=shards, plots=plots,
                             thresholds=(thresholds.potential_pct, thresholds.regression_pct),
                             artifacts_root=ctx.run_dir, telemetry=telemetry)
        md_path = ctx.run_dir / "report.md"
        md_path.write_text(md, encoding="utf-8")
        channel = ctx.config.slack.channel if ctx.config.slack else "#perf-nightly"
        payload = slack_summary_payload(summary, run=run, shards=shards, channel=channel, report_path=str(md_path),
                                        thresholds=(thresholds.potential_pct, thresholds.regression_pct),
                                        judge=ctx.config.judge)
        note_id = store.queue_notification(ctx.run_key, "summary", channel, payload)
        result = post_summary(payload, slack_client, fallback_dir=ctx.run_dir)
        store.mark_notification(note_id, "sent" if result.status == "sent" else
                                ("pending" if result.status == "written" else "failed"), error=result.error)
    return ReportOutput(text_path, md_path, tuple(plots.values()), result, table)


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


def _record_env_failure(ctx: pipeline.RunContext, error: str) -> None:
    store = pipeline.open_store(ctx.config)
    now = datetime.now(timezone.utc)
    for pool, backend, device in ctx.planned_shards():
        store.record_shard(ctx.run_key, ShardOutcome(
            pool=pool, device=device, backend=backend, status=ShardStatus.FAILED,
            artifact_dir=ctx.shard_dir(pool, device), exit_code=None, started_at=now, ended_at=now,
            error=f"worktree/environment failed: {error}"))


def run_nightly(config: Config, suite_name: str, *, sha: str | None = None, run_label: str | None = None,
                progress: Progress | None = None, slack_client: Any = None) -> NightlyResult:
    """fetch -> prepare -> run every device -> ingest -> compare -> report -> promote -> cleanup."""
    progress = progress or LogProgress()
    label = run_label or "cli-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    run_key = pipeline.make_run_key("nightly", suite_name, label)
    ctx = pipeline.fetch(config, suite_name, run_key=run_key, sha=sha, progress=progress)
    try:
        try:
            pipeline.prepare(ctx, progress=progress)
        except ZlopsError as exc:
            log.error("environment for %s failed: %s", ctx.sha[:12], exc)
            _record_env_failure(ctx, str(exc))
        else:
            pipeline.run_all_devices(ctx, progress=progress)
        pipeline.ingest(ctx)
        summary = pipeline.compare(ctx, progress=progress)
        summary = confirm(ctx, summary, progress=progress)
        out = report(ctx, slack_client=slack_client, progress=progress)
        accepted = pipeline.promote(ctx)
    finally:
        pipeline.cleanup(ctx)
    shards = tuple(pipeline.open_store(config).shards(run_key))
    return NightlyResult(run_key, ctx.sha, shards, summary, out, accepted)
