"""Delivering a PR compare's check to the forge through the store's outbox, as Slack messages are.

:func:`zlops.forge.prcompare.post_outcome` builds the check from the compare (:mod:`zlops.forge.check`),
queues it in the outbox (kind ``forge-check``, channel ``<kind>:<repo>``; idempotent per run) and flushes
it with :func:`flush_checks` (this module knows the outbox and the forge, not the compare). A post the
forge does not take now stays ``failed`` in the outbox and is sent by the next flush: the
``zlops_outbox`` DAG every 15 minutes, ``zlops alert flush``, the next compare. :func:`flush_checks`:

- oldest first, under the store's outbox lock (the one Slack's flush holds);
- a check superseded by a newer one for the same commit and suite (a re-run) is abandoned, never
  posted over the newer one;
- a transient failure (5xx, 429, no connection) stops that forge's deliveries until the next flush;
  a refusal (401, 404, 422) is recorded on the message and the flush goes on;
- without a token (no connection, no env variable) the check waits in the outbox;
- older than a week: abandoned (stale news), like Slack's.

:func:`zlops.forge.lifecycle.flush` is what the flushers call: first the checks zlops opened that no compare
concluded are closed, then this.

Secrets come from a :data:`SecretSource`: :func:`env_secrets` (CLI, standalone receiver) or the
Airflow connection (zlops.airflow.forge). They are never logged; errors carry method, path, status.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from zlops.config.settings import Config, ForgeConfig
from zlops.forge.check import CheckReport
from zlops.forge.client import ForgeError, client_for
from zlops.redact import redact_text
from zlops.store.outbox import FORGE_KIND

if TYPE_CHECKING:
    from zlops.slack.outbox import FlushReport
    from zlops.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ForgeSecrets:
    """A forge's token and webhook secret (either may be missing); shown as *** in a repr."""

    token: str | None = None
    webhook_secret: str | None = None

    def __repr__(self) -> str:
        return (f"ForgeSecrets(token={'***' if self.token else None}, "
                f"webhook_secret={'***' if self.webhook_secret else None})")


SecretSource = Callable[[ForgeConfig], ForgeSecrets]


def env_secrets(forge: ForgeConfig, environ: Mapping[str, str] | None = None) -> ForgeSecrets:
    """The token and webhook secret from ``forge.token_env`` / ``forge.webhook_secret_env``."""
    env = os.environ if environ is None else environ
    return ForgeSecrets((env.get(forge.token_env) or "").strip() or None,
                        (env.get(forge.webhook_secret_env) or "").strip() or None)


def channel_of(forge: ForgeConfig) -> str:
    """The outbox channel of a forge repository."""
    return f"{forge.kind}:{forge.repo}"


@dataclass(frozen=True)
class ForgeResult:
    """What happened to a compare's check: ``sent``, ``written`` (no token: waiting) or ``failed`` (kept)."""

    status: str
    check: CheckReport
    notification_id: int
    error: str | None = None
    posted: Mapping[str, Any] | None = None


def flush_checks(store: Store, config: Config, secrets: SecretSource = env_secrets, *,
                 now: datetime | None = None) -> FlushReport:
    """Send the checks the outbox holds (see the module docstring)."""
    from zlops.slack.outbox import FlushReport

    report = FlushReport()
    with store.outbox_lock() as held:
        if not held:
            report.waiting = [i.id for i in store.outbox_items(kinds=(FORGE_KIND,))]
            report.stopped = "another flush is running"
            return report
        _flush(store, config, secrets, report, now or datetime.now(timezone.utc))
    return report


def _flush(store: Store, config: Config, secrets: SecretSource, report: FlushReport, now: datetime) -> None:
    from zlops.slack.outbox import MAX_AGE

    down: dict[str, str] = {}
    tokens: dict[str, str | None] = {}
    newest: dict[tuple[str, str, str], int] = {}
    for item in store.outbox_items(kinds=(FORGE_KIND,), statuses=("pending", "failed", "sent")):
        p = item.payload
        key = (item.channel, str(p.get("head_sha")), str(p.get("external_id")))
        newest[key] = max(newest.get(key, 0), item.id)

    def abandon(item: Any, reason: str) -> None:
        log.warning("forge check #%d (run %s) abandoned: %s", item.id, item.run_key, reason)
        store.mark_notification(item.id, "abandoned", error=reason, attempted=False)
        report.abandoned.append(item.id)

    for item in store.outbox_items(kinds=(FORGE_KIND,)):
        if item.channel in down:
            report.waiting.append(item.id)
            continue
        if item.created_at < now - MAX_AGE:
            abandon(item, f"stale: queued {item.created_at:%Y-%m-%d %H:%M} UTC, more than {MAX_AGE.days} days ago")
            continue
        try:
            check = CheckReport.from_payload(dict(item.payload))
        except (ValueError, TypeError, KeyError) as exc:
            abandon(item, f"unreadable payload: {exc}")
            continue
        later = newest.get((item.channel, check.head_sha, check.external_id), item.id)
        if later > item.id:
            abandon(item, f"superseded by #{later} (a later compare of the same commit)")
            continue
        suite = config.suites.get(check.suite)
        forge = suite.forge if suite is not None else None
        if forge is None or channel_of(forge) != item.channel:
            abandon(item, f"suite {check.suite} has no forge section for {item.channel} any more")
            continue
        if item.channel not in tokens:
            tokens[item.channel] = secrets(forge).token
        token = tokens[item.channel]
        if not token:
            report.waiting.append(item.id)
            log.info("no token for %s (connection %s, $%s): check #%d waits in the outbox", item.channel,
                     forge.conn_id, forge.token_env, item.id)
            continue
        try:
            posted = client_for(forge, token).post_check(check)
        except ForgeError as exc:
            error = redact_text(str(exc), [token])
            store.mark_notification(item.id, "failed", error=error)
            report.failed.append(item.id)
            if exc.transient:
                down[item.channel] = error
                report.stopped = error
            log.warning("forge check #%d (%s, run %s) to %s failed, kept in the outbox: %s", item.id,
                        check.conclusion, item.run_key, item.channel, error)
            continue
        store.mark_notification(item.id, "sent", result=posted.as_dict())
        report.sent.append(item.id)
        log.info("forge check #%d (%s: %s) posted to %s on %s via %s", item.id, check.name, check.conclusion,
                 item.channel, check.head_sha[:12], posted.via)


def post_now(forge: ForgeConfig, check: CheckReport, secrets: SecretSource) -> str | None:
    """Post a check directly, not through the outbox (the receiver's "running" and "refused" checks,
    which belong to no run yet); returns the error, or None when it was posted. Never raises."""
    token = secrets(forge).token
    if not token:
        return f"no token for {channel_of(forge)}"
    try:
        client_for(forge, token).post_check(check)
    except ForgeError as exc:
        error = redact_text(str(exc), [token])
        log.warning("forge check %s to %s not posted: %s", check.name, channel_of(forge), error)
        return error
    return None
