"""The notification outbox: idempotent queueing, attempts and status transitions."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from zlops.errors import StoreError
from zlops.store import Store
from zlops.store.models import Notification, Run


def _row(store: Store, notification_id: int) -> Notification:
    with store.session() as s:
        row = s.get(Notification, notification_id)
        assert row is not None
        return row


def test_queue_is_idempotent(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    first = store.queue_notification("n1", "summary", "#perf", {"text": "v1"})
    again = store.queue_notification("n1", "summary", "#perf", {"text": "v2"})
    other = store.queue_notification("n1", "summary", "#perf-oncall", {"text": "v1"})
    assert first == again != other
    pending = store.pending_notifications()
    assert pending == [
        {"id": first, "run_key": "n1", "kind": "summary", "channel": "#perf",
         "payload": {"text": "v2"}, "attempts": 0, "last_error": None},
        {"id": other, "run_key": "n1", "kind": "summary", "channel": "#perf-oncall",
         "payload": {"text": "v1"}, "attempts": 0, "last_error": None},
    ]


def test_status_transitions(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    nid = store.queue_notification("n1", "summary", "#perf", {"text": "hi"})
    store.mark_notification(nid, "failed", error="ratelimited")
    (item,) = store.pending_notifications(run_key="n1")
    assert (item["attempts"], item["last_error"]) == (1, "ratelimited")
    assert _row(store, nid).status == "failed"

    store.mark_notification(nid, "sent")
    assert store.pending_notifications() == []
    row = _row(store, nid)
    assert (row.status, row.attempts, row.sent_at is not None) == ("sent", 2, True)

    # queuing again after delivery neither resends nor rewrites the delivered message
    assert store.queue_notification("n1", "summary", "#perf", {"text": "changed"}) == nid
    row = _row(store, nid)
    assert (row.status, row.payload) == ("sent", {"text": "hi"})
    assert store.pending_notifications() == []


def test_bad_marks_and_unknown_keys(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    nid = store.queue_notification("n1", "summary", "#perf", {})
    with pytest.raises(ValueError, match="pending, sent, failed"):
        store.mark_notification(nid, "delivered")
    with pytest.raises(StoreError, match="unknown notification"):
        store.mark_notification(nid + 1000, "sent")
    with pytest.raises(StoreError, match="unknown run"):
        store.queue_notification("nope", "summary", "#perf", {})
    with pytest.raises(StoreError, match="unknown run"):
        store.pending_notifications(run_key="nope")
    assert _row(store, nid).attempts == 0


def test_pending_is_oldest_first_and_filtered_by_run(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.upsert_run(make.run("n2"))
    ids = [store.queue_notification("n2", "summary", "#a", {}),
           store.queue_notification("n1", "summary", "#a", {}),
           store.queue_notification("n2", "regressions", "#a", {})]
    assert [p["id"] for p in store.pending_notifications()] == ids
    assert [p["id"] for p in store.pending_notifications(run_key="n2")] == [ids[0], ids[2]]


def test_a_run_with_undelivered_messages_cannot_be_deleted(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.queue_notification("n1", "summary", "#perf", {})
    with pytest.raises(IntegrityError), store.session() as s:
        s.execute(delete(Run).where(Run.run_key == "n1"))
    with store.session() as s:
        assert s.scalars(select(Run.run_key)).all() == ["n1"]
