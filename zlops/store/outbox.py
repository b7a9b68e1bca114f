"""The notification outbox: a message is stored before it is posted, so a failed post loses nothing.

A notifier queues (idempotent per run, kind and channel), tries to send, and marks the outcome;
whatever is still pending or failed is retried later from :func:`pending_notifications`.
The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.store.engine import dialect_insert
from zlops.store.models import NOTIFICATION_STATUSES, Notification, Run, utcnow
from zlops.store.runs import require_run


def queue_notification(session: Session, run_key: str, kind: str, channel: str,
                       payload: Mapping[str, Any]) -> int:
    """Queue a message and return its id; queuing the same (run, kind, channel) again returns the
    same id. A message not yet sent takes the new payload; a sent one is left untouched.
    """
    run = require_run(session, run_key)
    new_id = session.execute(
        dialect_insert(session, Notification)
        .values(run_id=run.id, kind=kind, channel=channel, payload=dict(payload),
                status="pending", attempts=0, created_at=utcnow())
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
                      error: str | None = None) -> None:
    """Record one delivery attempt: its outcome ``status``, and ``error`` when it failed."""
    if status not in NOTIFICATION_STATUSES:
        raise ValueError(f"mark_notification: status must be one of "
                         f"{', '.join(NOTIFICATION_STATUSES)}, got {status!r}")
    values: dict[str, Any] = {"status": status, "attempts": Notification.attempts + 1}
    if error is not None:
        values["last_error"] = error
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
