"""The forge receiver's state in the store (zlops.store.forge), on SQLite and PostgreSQL: a delivery claimed once
(by body, or by delivery id), forgotten after its window; decisions counted per PR and per commenter; a check
opened once, closed once (a second closer finds nothing to move)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from zlops.store import Store
from zlops.store import forge as rows

NOW = datetime(2026, 12, 6, 5, 0, tzinfo=timezone.utc)


def _claim(store: Store, body_sha: str, delivery: str | None, at: datetime = NOW) -> tuple[int | None, object]:
    return store.unit_of_work(rows.claim_delivery, forge="github", delivery=delivery, body_sha=body_sha, now=at,
                              forget_before=at - timedelta(days=2))


def test_a_delivery_is_claimed_once_by_body_or_by_id_and_forgotten_after_its_window(store: Store) -> None:
    first, earlier = _claim(store, "a" * 64, "d-1")
    assert first is not None and earlier is None
    store.unit_of_work(rows.decide_delivery, first, decision="triggered", outcome="triggered ...",
                       repo="acme/kernels", pr=5, actor="alice")
    again, seen = _claim(store, "a" * 64, "d-2")            # the same body under another id
    assert again is None and seen.decision == "triggered" and seen.delivery == "d-1"  # type: ignore[attr-defined]
    assert _claim(store, "b" * 64, "d-1")[0] is None          # the same id with another body
    assert store.unit_of_work(rows.claim_delivery, forge="gitlab", delivery="d-1", body_sha="a" * 64, now=NOW,
                              forget_before=NOW - timedelta(days=2))[0] is not None   # another forge
    later = NOW + timedelta(days=3)
    assert _claim(store, "a" * 64, "d-1", at=later)[0] is not None   # past the window: forgotten


def test_decisions_are_counted_per_pr_and_per_commenter_in_a_window(store: Store) -> None:
    for i, (pr, who, decision) in enumerate([(5, "alice", "triggered"), (5, "carol", "triggered"),
                                             (6, "alice", "refused-permission"), (5, "alice", "limited")]):
        row, _ = _claim(store, f"{i:064d}", None)
        store.unit_of_work(rows.decide_delivery, row, decision=decision, outcome="", repo="acme/kernels", pr=pr,
                           actor=who)
    since = NOW - timedelta(hours=1)
    count = store.read(rows.count_decisions, forge="github", decisions=("triggered",), since=since,
                       repo="ACME/kernels", pr=5)
    assert count == 2
    assert store.read(rows.count_decisions, forge="github", decisions=("triggered", "refused-permission"),
                      since=since, repo="acme/kernels", actor="alice") == 2
    assert store.read(rows.count_decisions, forge="github", decisions=("triggered",),
                      since=NOW + timedelta(minutes=1), repo="acme/kernels") == 0


def test_a_check_is_opened_once_and_closed_once(store: Store) -> None:
    fields = dict(channel="github:acme/kernels", suite="ops", name="zlops", external_id="zlops:ops",
                  head_sha="c" * 40, pr=5, ref="feature/x", run_id="forge__1", runner="local", now=NOW,
                  deadline_at=NOW + timedelta(hours=6))
    first = store.unit_of_work(rows.open_check, **fields)
    assert store.unit_of_work(rows.open_check, **fields) == first
    (opened,) = store.read(rows.checks, run_id="forge__1")
    assert opened.state == "open" and opened.deadline_at == NOW + timedelta(hours=6)
    assert store.read(rows.checks, due_before=NOW + timedelta(hours=1)) == []
    assert [c.id for c in store.read(rows.checks, due_before=NOW + timedelta(hours=7))] == [first]
    moved = store.unit_of_work(rows.mark_checks, [first], "closing", now=NOW, from_states=("open",),
                               conclusion="neutral", reason="it timed out")
    assert moved == [first]
    assert store.unit_of_work(rows.mark_checks, [first], "closing", now=NOW, from_states=("open",)) == []
    assert store.unit_of_work(rows.mark_checks, [first], "closed", now=NOW, from_states=("closing",)) == [first]
    assert store.read(rows.checks) == []
    with pytest.raises(ValueError, match="state must be one of open, closing, closed"):
        store.unit_of_work(rows.mark_checks, [first], "gone", now=NOW, from_states=("closed",))
