"""The ``report`` task: text table, figures, markdown and HTML reports, the alert lifecycle, the Slack summary,
each stating the night's coverage per pool (:mod:`zlops.judge.coverage`, stored in the run meta for the next night).

``zlops report RUN`` re-renders a stored run through the same :func:`report` (``rerender=True``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops import __version__
from zlops.config.settings import Config
from zlops.errors import ZlopsError
from zlops.judge import coverage as cover
from zlops.judge import setup as judging
from zlops.model import CompareSummary, Comparison, RunRecord, RunStatus, Thresholds, is_canary
from zlops.progress import LogProgress, Progress
from zlops.report.markdown import markdown_report
from zlops.report.night_figures import RunFigures
from zlops.report.table import compare_table
from zlops.slack.notify import NotifyResult
from zlops.steps.canary import record as record_canary
from zlops.steps.context import RunContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportOutput:
    text: Path
    markdown: Path
    plots: tuple[Path, ...]
    slack: NotifyResult | None      # None: nothing was announced (a re-render)
    table: str
    html: Path | None = None
    figures: RunFigures | None = None
    #: what a terminal or a task log shows: the table when it has at most CONSOLE_ROWS rows, else counts
    #: per pool, the flagged series and the overall line (the full table is ``text``)
    console: str = ""

    def to_xcom(self) -> dict[str, Any]:
        return {"markdown": str(self.markdown), "plots": [str(p) for p in self.plots],
                "slack": self.slack.status if self.slack else None}


def report(ctx: RunContext, *, slack_client: Any = None, progress: Progress | None = None,
           rerender: bool = False) -> ReportOutput:
    """Text table, figures, markdown and HTML reports, the alert lifecycle and the Slack summary.

    Figures (:mod:`zlops.report.night_figures`) go to ``plots/``; a nightly run then updates its alerts
    and queues their thread messages (:func:`zlops.slack.announce.update_alerts`); :func:`zlops.slack.announce.announce`
    sends what the outbox holds, then the summary. With ``slack_client`` None (no token/connection
    configured) the payload is written to the run's artifacts instead. A Slack outage never fails the
    run: what was not sent stays in the outbox and goes out on the next run.

    Everything is rendered from what was stored at the run: its compare rows, the history as of the
    run (accepted runs started before it, on its commit's ancestor line) and the thresholds stored
    with it (today's config only when it stored none, said in ``rerender.txt``). ``rerender``
    (``zlops report RUN``) never touches the original artifacts, the alerts or Slack: it writes into a
    new version folder ``rerender-<n>/`` of the run's artifacts (the run folder itself only when the run
    was never rendered).
    """
    from zlops.alerts.lifecycle import OPEN_STATES, previous_commit
    from zlops.report.html import html_report
    from zlops.report.night_figures import draw_run_figures
    from zlops.slack.announce import alert_digest, announce, update_alerts
    from zlops.slack.summary import AlertDigest

    progress = progress or LogProgress()
    store = ctx.store
    with progress.step("report", suite=ctx.suite_name, commit=ctx.sha[:12]):
        run = store.get_run(ctx.run_key)
        if run is None:
            raise ZlopsError(f"unknown run {ctx.run_key}")
        stored = tuple(store.comparisons(ctx.run_key))
        # a recall canary's rows (zlops.judge.canary) page nobody: out of the tables, alerts and Slack, one line each
        summary = CompareSummary(ctx.run_key, ctx.suite_name, ctx.sha,
                                 tuple(c for c in stored if not is_canary(c.case)))
        canary_lines = record_canary(ctx, store, run, stored, save=not rerender) if run.kind == "nightly" else []
        shards = store.shards(ctx.run_key)
        out_dir = next_render_dir(ctx.run_dir) if rerender else ctx.run_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        setup, thresholds_note = run_setup(ctx.config, run)   # what the run was judged with, not today's config
        thresholds = setup.thresholds
        night_coverage, coverage_before = run_coverage(store, run, stored, thresholds, judge=setup.judge,
                                                       save=not rerender)
        coverage_lines = cover.pool_lines(night_coverage, coverage_before)
        run, baseline_line = with_promotion(ctx, run)
        tail = f"\nbaseline: {baseline_line}" if baseline_line else ""
        tail += "".join(f"\n{line}" for line in coverage_lines)
        tail += "".join(f"\n{line}" for line in canary_lines)
        table = compare_table(summary) + tail
        console = table if len(summary.comparisons) <= CONSOLE_ROWS else \
            compare_table(summary, max_rows=CONSOLE_ROWS) + tail + f"\nfull table: {out_dir / 'report.txt'}"
        if baseline_line:
            progress.note(f"baseline: {baseline_line}")
        text_path = out_dir / "report.txt"
        text_path.write_text(table + "\n", encoding="utf-8")
        ancestors, history_note = run_ancestors(ctx)
        if rerender:
            (out_dir / RERENDER_NOTE).write_text("\n".join((
                (f"re-rendered {datetime.now(timezone.utc).isoformat(timespec='seconds')} by zlops {__version__}; "
                "the original artifacts of the run are untouched"),
                (f"history: accepted runs started before {run.started_at.isoformat() if run.started_at else '?'}"
                f"{history_note}"), f"thresholds: {thresholds_note}")) + "\n", encoding="utf-8")
        band = thresholds.potential_pct
        channel = ctx.config.slack.channel if ctx.config.slack else "#perf-nightly"
        nightly = run.kind == "nightly"
        watched = store.alerts(suite=ctx.suite_name, states=OPEN_STATES, limit=None) if nightly and not rerender else []
        figures = draw_run_figures(store, run_key=ctx.run_key, suite=ctx.suite_name, summary=summary, shards=shards,
                                   out_dir=out_dir / "plots", band_pct=band,
                                   references={a.key: (a.base_value, a.unit, f"alert #{a.id} reference")
                                               for a in watched}, as_of=run.started_at, ancestors=ancestors)
        digest = AlertDigest()
        alert_lines: list[str] = []
        # where a change's commit range starts when its baseline is tonight's own commit
        # (zlops.alerts.lifecycle.change_range)
        previous_sha = previous_commit([(r.sha, r.started_at) for r in store.accepted_runs(ctx.suite_name)],
                                       head_sha=run.sha, before=run.started_at, ancestors=ancestors)
        if nightly:
            if not rerender:
                update_alerts(store, run=run, summary=summary, channel=channel, band_pct=band,
                              trends=figures.trends, previous_sha=previous_sha, config=ctx.config)
            digest, alert_lines = alert_digest(store, run_key=ctx.run_key, suite=ctx.suite_name)
        backends = {(s.pool, s.device): s.backend for s in shards}  # names the clock (CPU, SM, AI Core)
        telemetry = {k: {"backend": backends.get(k), **v["telemetry"]}
                     for k, v in store.shard_extras(ctx.run_key).items() if v.get("telemetry")}
        pcts = (thresholds.potential_pct, thresholds.regression_pct)
        md_path = out_dir / "report.md"
        md_path.write_text(markdown_report(summary, run=run, shards=shards, plots=figures.trends, thresholds=pcts,
                                           artifacts_root=out_dir, telemetry=telemetry, alerts=alert_lines,
                                           gang_busy=run_gang_busy(store, run), judge=setup.judge,
                                           canary=canary_lines, coverage=coverage_lines),
                           encoding="utf-8")
        html_path = out_dir / "report.html"
        html_path.write_text(html_report(summary, run=run, shards=shards, plots=figures.trends,
                                         overview=figures.overview(), thresholds=pcts, artifacts_root=out_dir,
                                         telemetry=telemetry, alerts=alert_lines, expected_pools=ctx.suite.pools,
                                         judge=setup.judge, canary=canary_lines, coverage=coverage_lines),
                             encoding="utf-8")
        if rerender:  # a re-render is a reading of the store: nothing is announced again
            return ReportOutput(text_path, md_path, tuple(figures.trends.values()),
                                None, table, html_path, figures, console)
        sent = announce(store, run=run, summary=summary, shards=shards, channel=channel, client=slack_client,
                        run_dir=ctx.run_dir, figures=figures, digest=digest, report_files=(md_path, html_path),
                        thresholds=pcts, judge=setup.judge, expected_pools=ctx.suite.pools,
                        previous_sha=previous_sha, coverage=cover.night_line(night_coverage, coverage_before))
    return ReportOutput(text_path, md_path, tuple(figures.trends.values()), sent.slack, table, html_path, figures,
                        console)


#: how many of the suite's latest nightly runs are read (once) for the previous night's coverage of each pool
COVERAGE_LOOKBACK = 14


def run_coverage(store: Any, run: RunRecord, stored: Sequence[Comparison], thresholds: Thresholds, *,
                 judge: str = "noise", save: bool) -> tuple[list[cover.Coverage], dict[str, cover.Coverage]]:
    """The night's coverage per pool (:func:`zlops.judge.coverage.pool_coverage` of its stored rows) and, per
    pool, the previous night's as stored in its run meta (one read of the suite's latest nightly runs, never
    per series). With ``save`` it is stored in this run's meta for the next night and the trust ledger."""
    night = cover.pool_coverage(stored, thresholds, judge=judge)
    earlier = [r for r in store.list_runs(suite=run.suite, kind="nightly", limit=COVERAGE_LOOKBACK + 1)
               if r.run_key != run.run_key and (run.started_at is None or r.started_at is None
                                                or r.started_at < run.started_at)]
    before = cover.previous((r.meta for r in earlier), run.suite)
    if save:
        store.update_run_meta(run.run_key, {cover.META_KEY: cover.to_meta(night)})
    return night, before


def run_gang_busy(store: Any, run: RunRecord) -> dict[tuple[str, int], float] | None:
    """A campaign run's device-seconds per (pool, device) from its gang shards (None for other runs: their
    results are not read for it)."""
    if not run.meta.get("campaign"):
        return None
    from zlops.run.partition import gang_busy

    return gang_busy(store.results(run.run_key))


RERENDER_NOTE = "rerender.txt"
#: the most rows a terminal or task log gets as a full table (ReportOutput.console)
CONSOLE_ROWS = 200
#: files whose presence means the run was rendered before: a re-render then goes to a new folder
_RENDERED = ("report.md", "report.txt", "report.html", "plots")


def next_render_dir(run_dir: Path) -> Path:
    """Where a re-render of a run goes: the run folder when nothing was rendered there yet, else the
    first free ``rerender-<n>/`` in it (an earlier re-render is never overwritten either)."""
    if not any((run_dir / name).exists() for name in _RENDERED):
        return run_dir
    n = 1
    while (run_dir / f"rerender-{n}").exists():
        n += 1
    return run_dir / f"rerender-{n}"


def run_setup(config: Config, run: RunRecord) -> tuple[judging.JudgingSetup, str]:
    """The judging setup stored with the run at its compare (:func:`zlops.judge.setup.for_run`), and a note on
    its thresholds for the re-render note; today's config's when the run stored none, saying so."""
    setup, _ = judging.for_run(run.meta, config)
    t = setup.thresholds
    if isinstance(run.meta.get(judging.META_KEY), dict):
        return setup, f"stored with the run (meta judging): {t.potential_pct:g}% / {t.regression_pct:g}%"
    return setup, (f"the run stored none: today's config's {t.potential_pct:g}% / {t.regression_pct:g}% "
                   "(may differ from what the night used)")


def run_ancestors(ctx: RunContext) -> tuple[frozenset[str] | None, str]:
    """The commits of the run's ancestor line (its history's commits), or None with a note when the
    mirror cannot say (then the history is limited by time only)."""
    from zlops.errors import GitError
    from zlops.host import gitops

    try:
        mirror = gitops.mirror_of(ctx.suite.repo, ctx.mirror_path)
        return frozenset(gitops.ancestors(mirror, ctx.sha, max_count=ctx.config.baseline_depth)), \
            f" on the ancestor line of {ctx.sha[:12]}"
    except GitError as exc:
        return None, f" (the ancestor line is unknown here: {exc}; runs of other lines may show)"


def with_promotion(ctx: RunContext, run: RunRecord) -> tuple[RunRecord, str]:
    """The run with its promotion decision in ``meta["promotion"]`` (the report says whether and why
    it becomes the baseline), and that decision as a line. A finished run keeps the decision its
    promote step stored; a running one (the report step comes before promotion) gets a preview."""
    from zlops.judge.promotion import decide

    if run.kind != "nightly":
        return run, ""
    stored = run.meta.get("promotion")
    if run.status is RunStatus.RUNNING or not isinstance(stored, dict):
        stored = decide(ctx).to_json()
        run = replace(run, meta={**run.meta, "promotion": stored})
    verdict = "promoted to baseline" if stored.get("accepted") else "not promoted"
    return run, f"{verdict}: {stored.get('reason', '')}"
