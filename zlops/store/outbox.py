"""The notification outbox: a message is stored before it is posted, so a failed post loses nothing.

A notifier queues (idempotent per run, kind and channel), tries to send, and marks the outcome;
whatever is still pending or failed is retried later from :func:`pending_notifications` (or, with
threads and uploads, :func:`outbox_items` and :mod:`zlops.slack.outbox`). The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.store.engine import dialect_insert
from zlops.store.models import NOTIFICATION_STATUSES, Notification, Run, utcnow
from zlops.store.runs import require_run

#: the outbox kind of a check on a pull request: delivered by zlops.forge, never by the Slack sender
FORGE_KIND = "forge-check"


@dataclass(frozen=True)
class OutboxItem:
    """One outbox message as the sender needs it (see :class:`~zlops.store.models.Notification`)."""

    id: int
    run_key: str
    kind: str
    channel: str
    payload: Mapping[str, Any]
    status: str
    attempts: int
    last_error: str | None
    created_at: datetime
    parent_id: int | None
    ts: str | None
    channel_id: str | None
    result: Mapping[str, Any] | None


def queue_notification(session: Session, run_key: str, kind: str, channel: str,
                       payload: Mapping[str, Any], *, parent_id: int | None = None) -> int:
    """Queue a message and return its id; queuing the same (run, kind, channel) again returns the
    same id. A message not yet sent takes the new payload; a sent one is left untouched.
    ``parent_id`` makes it a reply in that message's thread.
    """
    run = require_run(session, run_key)
    new_id = session.execute(
        dialect_insert(session, Notification)
        .values(run_id=run.id, kind=kind, channel=channel, payload=dict(payload),
                status="pending", attempts=0, created_at=utcnow(), parent_id=parent_id)
        .on_conflict_do_nothing(index_elements=["run_id", "kind", "channel"])
        .returning(Notification.id)
    ).scalar_one_or_none()
    if new_id is not None:
        return int(new_id)
    row = session.scalars(select(Notification).where(
        Notification.run_id == run.id, Notification.kind == kind, Notification.channel == channel,
    ).with_for_update()).one()
    if row.status != "sent":
        row.payload = dict(payload)
    return row.id


def mark_notification(session: Session, notification_id: int, status: str, *,
                      error: str | None = None, ts: str | None = None, channel_id: str | None = None,
                      result: Mapping[str, Any] | None = None, attempted: bool = True) -> None:
    """Record one delivery attempt: its outcome ``status``, and ``error`` when it failed.

    On success ``ts``/``channel_id`` keep Slack's answer (a reply needs them) and ``result`` what an
    upload returned. ``attempted=False`` records an outcome without counting an attempt
    (a message abandoned before it was tried).
    """
    if status not in NOTIFICATION_STATUSES:
        raise ValueError(f"mark_notification: status must be one of "
                         f"{', '.join(NOTIFICATION_STATUSES)}, got {status!r}")
    values: dict[str, Any] = {"status": status}
    if attempted:
        values["attempts"] = Notification.attempts + 1
    if error is not None:
        values["last_error"] = error
    if ts is not None:
        values["ts"] = ts
    if channel_id is not None:
        values["channel_id"] = channel_id
    if result is not None:
        values["result"] = dict(result)
    if status == "sent":
        values["sent_at"] = utcnow()
    updated = session.execute(update(Notification).where(Notification.id == notification_id)
                              .values(**values).returning(Notification.id)).scalar_one_or_none()
    if updated is None:
        raise StoreError(f"unknown notification id {notification_id}")


def pending_notifications(session: Session, *, run_key: str | None = None) -> list[dict[str, Any]]:
    """Messages still to deliver (pending or failed), oldest first."""
    query = (select(Notification, Run.run_key).join(Run, Run.id == Notification.run_id)
             .where(Notification.status.in_(("pending", "failed")))
             .order_by(Notification.created_at, Notification.id))
    if run_key is not None:
        query = query.where(Notification.run_id == require_run(session, run_key).id)
    return [{"id": n.id, "run_key": key, "kind": n.kind, "channel": n.channel,
             "payload": dict(n.payload), "attempts": n.attempts, "last_error": n.last_error}
            for n, key in session.execute(query)]


def outbox_items(session: Session, *, ids: list[int] | None = None,
                 statuses: tuple[str, ...] = ("pending", "failed"), run_key: str | None = None,
                 kinds: tuple[str, ...] | None = None, exclude_kinds: tuple[str, ...] = (),
                 channel: str | None = None) -> list[OutboxItem]:
    """Messages in ``statuses`` (default: still to deliver), oldest first; or exactly ``ids``.
    ``kinds`` / ``exclude_kinds`` / ``channel`` narrow them (each gateway flushes its own kinds)."""
    query = (select(Notification, Run.run_key).join(Run, Run.id == Notification.run_id)
             .order_by(Notification.created_at, Notification.id))
    query = query.where(Notification.id.in_(ids)) if ids is not None else query.where(
        Notification.status.in_(statuses))
    if run_key is not None:
        query = query.where(Run.run_key == run_key)
    if kinds is not None:
        query = query.where(Notification.kind.in_(kinds))
    if exclude_kinds:
        query = query.where(Notification.kind.not_in(exclude_kinds))
    if channel is not None:
        query = query.where(Notification.channel == channel)
    return [_item(n, key) for n, key in session.execute(query)]


def _item(n: Notification, run_key: str) -> OutboxItem:
    return OutboxItem(id=n.id, run_key=run_key, kind=n.kind, channel=n.channel, payload=dict(n.payload),
                      status=n.status, attempts=n.attempts, last_error=n.last_error, created_at=n.created_at,
                      parent_id=n.parent_id, ts=n.ts, channel_id=n.channel_id,
                      result=None if n.result is None else dict(n.result))


def known_channel_id(session: Session, channel: str) -> str | None:
    """The channel id Slack answered for ``channel`` (a ``#name``) on the newest sent message, if any."""
    return session.scalars(select(Notification.channel_id)
                           .where(Notification.channel == channel, Notification.channel_id.is_not(None))
                           .order_by(Notification.id.desc()).limit(1)).first()
