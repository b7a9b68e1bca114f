"""The whole nightly in one process: :func:`run_nightly` (``zlops nightly``, the demo).

The DAG runs the same steps (:mod:`zlops.steps`, one module per task) as separate Airflow tasks;
this runs them in order, with the worktree cleaned up whatever happens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from zlops.config.settings import Config
from zlops.errors import DatabaseUnavailable, ZlopsError, os_error_line
from zlops.judge.confirm import confirm
from zlops.model import CompareSummary, RunStatus, ShardOutcome, ShardStatus, is_canary
from zlops.progress import LogProgress, Progress
from zlops.redact import redact_text
from zlops.steps.cleanup import cleanup
from zlops.steps.compare import compare
from zlops.steps.context import RunContext, make_run_key
from zlops.steps.fetch import fetch
from zlops.steps.ingest import ingest
from zlops.steps.prepare import prepare, record_env_failure
from zlops.steps.promote import promote as promote_run
from zlops.steps.report import ReportOutput, report
from zlops.steps.run_device import measured_shard, run_all_devices

log = logging.getLogger(__name__)


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


def run_nightly(config: Config, suite_name: str, *, sha: str | None = None, run_label: str | None = None,
                progress: Progress | None = None, slack_client: Any = None, promote: bool = False,
                replace: bool = False) -> NightlyResult:
    """fetch -> prepare -> run every device -> ingest -> compare -> report -> promote -> cleanup.

    ``promote`` accepts the run as a baseline although it is older than the current one on the
    branch line, off it, or a caliber break (a backfill; :mod:`zlops.judge.promotion`). Re-using a run
    label re-runs that run: shards it already measured are ingested from their artifacts (no
    environment is built when all were); a completed, accepted run needs ``replace``.

    Before fetching, what a dead zlops left on this host is settled (zlops.run.recovery). The run always
    ends in a final state: ``done``/``failed`` by promote; ``interrupted`` when zlops is told to stop
    (SIGTERM, SIGHUP, Ctrl-C: the benchmarks' process groups are ended first, artifacts are kept);
    ``failed`` when a step raised (the error is re-raised after the run is marked).
    """
    from zlops.run.recovery import own_run, owner_meta, recover

    progress = progress or LogProgress()
    label = run_label or "cli-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    run_key = make_run_key("nightly", suite_name, label)
    with own_run(config, run_key):  # one live process per run id: a second one is refused (RunOwned)
        for line in recover(config, suite=suite_name).lines():
            progress.note(line)
        ctx = fetch(config, suite_name, run_key=run_key, sha=sha, progress=progress, promote=promote,
                    replace=replace, owner=owner_meta())
        return _night(ctx, label, progress=progress, slack_client=slack_client)


def _night(ctx: RunContext, label: str, *, progress: Progress, slack_client: Any) -> NightlyResult:
    """Everything after fetch, ending the run in a final state whatever happens (see run_nightly)."""
    from zlops.errors import Interrupted
    from zlops.host import proc

    run_key, suite_name = ctx.run_key, ctx.suite_name
    try:
        measured = all(measured_shard(ctx, p, d) for p, _, d in ctx.planned_shards())
        try:
            if not measured:
                prepare(ctx, progress=progress)
        except ZlopsError as exc:
            log.error("environment for %s failed: %s", ctx.sha[:12], exc)
            record_env_failure(ctx, str(exc))
        else:
            run_all_devices(ctx, progress=progress)
        ingest(ctx)
        summary = compare(ctx, progress=progress)
        try:
            summary = confirm(ctx, summary, progress=progress)
        except DatabaseUnavailable:
            raise
        except (ZlopsError, ValueError) as exc:  # unconfirmed suspects stay suspects; the night goes on
            log.error("confirmation of tonight's suspects failed: %s", exc)
        # a recall canary's rows (zlops.judge.canary) never fail a night nor count in its overall line
        summary = CompareSummary(summary.run_key, summary.suite, summary.sha,
                                 tuple(c for c in summary.comparisons if not is_canary(c.case)))
        out = report(ctx, slack_client=slack_client, progress=progress)
        accepted = promote_run(ctx)
    except DatabaseUnavailable as exc:  # one line still, saying how the night is finished
        proc.interrupt_all("the database is unavailable")
        _cleanup(ctx)  # first: on a full disk the worktree's space is what lets the run be marked failed
        if exc.transient:  # the database may come back: the run is finished by running it again
            raise DatabaseUnavailable(f"{exc}; what run {run_key} measured is kept in {ctx.run_dir}: run "
                                      f"`zlops nightly --suite {suite_name} --run-id {label}` again once the "
                                      "database is back to finish it", transient=True) from exc
        marked = _finish(ctx, RunStatus.FAILED, str(exc))
        raise DatabaseUnavailable(f"{exc}; run {run_key} " + (
            "marked failed" if marked else "could not be marked failed (the next start marks it interrupted)")
            + f"; what it measured is kept in {ctx.run_dir}", transient=False) from exc
    except (KeyboardInterrupt, Interrupted) as exc:
        reason = "SIGINT" if isinstance(exc, KeyboardInterrupt) else exc.signame
        proc.interrupt_all(reason)
        _finish(ctx, RunStatus.INTERRUPTED, f"zlops was interrupted by {reason}; the benchmarks were ended")
        raise
    except BaseException as exc:
        proc.interrupt_all(f"the night failed: {type(exc).__name__}")
        _cleanup(ctx)  # first: on a full disk the worktree's space is what lets the run be marked failed
        why = os_error_line(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        _finish(ctx, RunStatus.FAILED, redact_text(why))
        raise
    finally:
        proc.clear_interrupt()
        _cleanup(ctx)
    shards = tuple(ctx.store.shards(run_key))
    return NightlyResult(run_key, ctx.sha, shards, summary, out, accepted)


def _cleanup(ctx: RunContext) -> None:
    """Remove the run's worktree; never raises (a stale worktree is swept by the next start)."""
    try:
        cleanup(ctx)
    except (OSError, ZlopsError) as exc:
        log.error("cleanup of %s failed: %s", ctx.worktree, exc)


def _finish(ctx: RunContext, status: RunStatus, reason: str) -> bool:
    """Mark a run that could not finish normally; never raises (the original error matters more).
    True when the run is in a final state now."""
    import dataclasses

    try:
        store = ctx.store
        run = store.get_run(ctx.run_key)
        if run is None or run.status is not RunStatus.RUNNING:
            return run is not None
        now = datetime.now(timezone.utc)
        store.upsert_run(dataclasses.replace(run, status=status, finished_at=now, meta={
            status.value: {"reason": reason, "at": now.isoformat(timespec="seconds")}}))
        return True
    except Exception as exc:  # noqa: BLE001 - the store itself may be what failed
        log.error("cannot mark run %s %s: %s", ctx.run_key, status.value, exc)
        return False
