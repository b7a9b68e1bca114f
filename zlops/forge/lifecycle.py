"""Every check zlops opens finishes: success, neutral or failure, never "running" forever.

The receiver writes a check to the store (``forge_checks``, :mod:`zlops.store.forge`) before it posts it running,
named by the compare run that answers it. Then one of these closes it:

- the compare concludes: :func:`concluded` (called where its check is queued,
  :func:`zlops.forge.prcompare.post_outcome`) marks it closed: the outbox posts the conclusion over "running";
- the compare raises (in the receiver's thread, in the Airflow task, or the trigger itself fails):
  :func:`finishing` / :func:`finish_run` post it neutral with the reason;
- the compare runs past ``forge.compare_timeout_s``, or the standalone receiver that ran it restarted (its
  thread died with it): :func:`settle`, run when ``zlops forge serve`` starts and every minute while it runs,
  and by every flush of checks (:func:`flush`: ``zlops alert flush``, the ``zlops_outbox`` DAG every 15 minutes,
  a compare's report), posts it neutral. Never on a delivery's path: the forge waits 10 s for its answer.

A closing post the forge did not take leaves the check ``closing``; the next :func:`settle` posts it again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from zlops.config.settings import Config, ForgeConfig
from zlops.forge.check import closed_check, external_id, running_check
from zlops.forge.deliver import SecretSource, channel_of, env_secrets, flush_checks, post_now
from zlops.redact import redact_text
from zlops.store import forge as rows

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from zlops.slack.outbox import FlushReport
    from zlops.store import Store

log = logging.getLogger(__name__)

#: who runs the compare of an opened check: the standalone receiver's own thread, or an Airflow DAG run
LOCAL, AIRFLOW = "local", "airflow"
RUNNERS = (LOCAL, AIRFLOW)
RESTARTED = "the zlops receiver that ran it restarted before it finished"


@dataclass
class SettleReport:
    """What a sweep did: checks closed (posted), and those whose closing post failed (kept ``closing``)."""

    closed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)

    def line(self) -> str:
        return f"forge checks left running: {len(self.closed)} closed, {len(self.failed)} to post again"


def _now(now: datetime | None) -> datetime:
    return now or datetime.now(timezone.utc)


def open_check(store: Store, forge: ForgeConfig, secrets: SecretSource, *, suite: str, head_sha: str, ref: str,
               who: str, pr: int | None, run_id: str, runner: str, now: datetime | None = None) -> int:
    """Record the check, then post it running (the record first: a crash between the two leaves a row that
    :func:`settle` closes, never an untracked running check). Returns the row's id."""
    if runner not in RUNNERS:
        raise ValueError(f"open_check: runner must be one of {', '.join(RUNNERS)}, got {runner!r}")
    at = _now(now)
    check_id = store.unit_of_work(
        rows.open_check, channel=channel_of(forge), suite=suite, name=forge.check_name,
        external_id=external_id(suite), head_sha=head_sha, pr=pr, ref=ref, run_id=run_id, runner=runner, now=at,
        deadline_at=at + timedelta(seconds=forge.compare_timeout_s))
    error = post_now(forge, running_check(suite=suite, name=forge.check_name, head_sha=head_sha, ref=ref, who=who,
                                          pr=pr), secrets)
    if error:
        log.warning("check %s on %s (run %s) not shown running: %s", forge.check_name, head_sha[:12], run_id, error)
    return check_id


def concluded(store: Store, *, channel: str, suite: str, head_sha: str, conclusion: str,
              run_id: str | None = None, now: datetime | None = None) -> list[int]:
    """A compare's conclusion for ``suite`` on ``head_sha`` is queued: the open checks it answers are closed.
    Those of the same run on another commit (the branch moved while it ran) are closed neutral, saying so."""
    at = _now(now)

    def close(session: Session) -> tuple[list[int], list[rows.OpenCheck]]:
        mine = [c for c in rows.checks(session, states=("open", "closing"))
                if c.channel == channel and c.external_id == external_id(suite)
                and (c.head_sha == head_sha or c.run_id == run_id)]
        same = [c.id for c in mine if c.head_sha == head_sha]
        moved = [c for c in mine if c.head_sha != head_sha]
        done = rows.mark_checks(session, same, "closed", now=at, from_states=("open", "closing"),
                                conclusion=conclusion)
        return done, moved

    done, moved = store.unit_of_work(close)
    for c in moved:
        store.unit_of_work(rows.mark_checks, [c.id], "closing", now=at, from_states=("open",), conclusion="neutral",
                           reason=f"the branch moved to {head_sha[:12]} while the compare ran; its conclusion is "
                                  f"on that commit")
    return done


def finish_run(store: Store, config: Config, secrets: SecretSource, run_id: str, *, reason: str,
               now: datetime | None = None) -> SettleReport:
    """Close, neutral with ``reason``, every check of compare ``run_id`` still open (the compare raised)."""
    at = _now(now)
    ids = [c.id for c in store.read(rows.checks, run_id=run_id, states=("open",))]
    moved = store.unit_of_work(rows.mark_checks, ids, "closing", now=at, from_states=("open",),
                               conclusion="neutral", reason=reason)
    return _post_closing(store, config, secrets, moved, at)


def settle(store: Store, config: Config, secrets: SecretSource, *, restarted: str | None = None,
           now: datetime | None = None) -> SettleReport:
    """Close the checks left running: past their deadline, or (``restarted``: the runner that just started)
    those its previous life opened; and post again the closing ones a forge did not take."""
    at = _now(now)
    due = store.read(rows.checks, due_before=at)
    timed_out = [c.id for c in due if c.state == "open"]
    for c in due:
        if c.state == "open":
            minutes = max(1, round((c.deadline_at - c.opened_at).total_seconds() / 60))
            store.unit_of_work(rows.mark_checks, [c.id], "closing", now=at, from_states=("open",),
                               conclusion="neutral", reason=f"it did not conclude within {minutes} minutes "
                                                            "(forge.compare_timeout_s)")
    if restarted is not None:
        left = [c.id for c in store.read(rows.checks, runner=restarted, states=("open",)) if c.id not in timed_out]
        store.unit_of_work(rows.mark_checks, left, "closing", now=at, from_states=("open",), conclusion="neutral",
                           reason=RESTARTED)
    closing = [c.id for c in store.read(rows.checks, states=("closing",))]
    return _post_closing(store, config, secrets, closing, at)


def flush(store: Store, config: Config, secrets: SecretSource = env_secrets, *,
          now: datetime | None = None) -> FlushReport:
    """What every flusher of checks calls (``zlops alert flush``, the ``zlops_outbox`` DAG, a compare's report):
    the sweep of checks left running (:func:`settle`), then the outbox's checks
    (:func:`zlops.forge.deliver.flush_checks`)."""
    settle(store, config, secrets, now=now)
    return flush_checks(store, config, secrets, now=now)


def _post_closing(store: Store, config: Config, secrets: SecretSource, ids: list[int],
                  now: datetime) -> SettleReport:
    report = SettleReport()
    for c in store.read(rows.checks, ids=ids, states=("closing",)) if ids else []:
        suite = config.suites.get(c.suite)
        forge = suite.forge if suite is not None else None
        reason = c.reason or "it did not conclude"
        if forge is None or channel_of(forge) != c.channel:
            store.unit_of_work(rows.mark_checks, [c.id], "closed", now=now, from_states=("closing",),
                               error=f"suite {c.suite} has no forge section for {c.channel} any more")
            continue
        check = closed_check(suite=c.suite, name=c.name, head_sha=c.head_sha, ref=c.ref, reason=reason, pr=c.pr)
        error = post_now(forge, check, secrets)
        if error:
            store.unit_of_work(rows.mark_checks, [c.id], "closing", now=now, from_states=("closing",), error=error)
            report.failed.append(c.id)
            log.warning("check %s on %s (run %s) left running: closing it failed, the next sweep posts it again: "
                        "%s", c.name, c.head_sha[:12], c.run_id, error)
            continue
        store.unit_of_work(rows.mark_checks, [c.id], "closed", now=now, from_states=("closing",))
        report.closed.append(c.id)
        log.info("check %s on %s (run %s) closed neutral: %s", c.name, c.head_sha[:12], c.run_id, reason)
    return report


def failure_reason(exc: BaseException, secrets: list[str] | None = None) -> str:
    """One line for a check: the exception's type and message (secrets redacted, cut at 300 characters)."""
    name = type(exc).__name__
    text = " ".join(str(exc).split()) or "no message"
    if name in ("AirflowTaskTimeout", "TimeoutError"):
        what = f"it timed out ({text})"
    elif isinstance(exc, KeyboardInterrupt) or name in ("AirflowTaskTerminated", "SystemExit"):
        what = f"it was stopped ({name})"
    else:
        what = f"{name}: {text}"
    what = redact_text(what, secrets or [])
    return what if len(what) <= 300 else what[:297] + "..."


@contextmanager
def finishing(store: Store, config: Config, secrets: SecretSource, run_id: str) -> Iterator[None]:
    """Run a compare's body; when it raises (a timeout included: Airflow's is a BaseException), close its
    checks neutral with the reason, then let the exception go on."""
    try:
        yield
    except BaseException as exc:
        reason = failure_reason(exc)
        log.error("PR compare %s failed: %s", run_id, reason)
        try:
            finish_run(store, config, secrets, run_id, reason=reason)
        except Exception as inner:  # noqa: BLE001 - the compare's own error is the one to raise
            log.error("PR compare %s: its checks could not be closed now (%s); the next sweep closes them",
                      run_id, inner)
        raise
