"""Alerts, their events and the threaded outbox in the store (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import inspect, select, text

from zlops.alerts.lifecycle import AlertError, AlertState, plan_night
from zlops.model import BaselinePoint, Comparison, Judgement, Summary, Verdict
from zlops.store import Store
from zlops.store import alerts as store_alerts
from zlops.store.migrate import alembic_config
from zlops.store.models import Notification


def _cmp(verdict: Verdict, base: float, head: float, case: str = "softmax_8192") -> Comparison:
    change = (head - base) / base * 100
    return Comparison("ops", "npu", case, "time", "ms", True, BaselinePoint("n1", "1" * 40, "ms", base, 1),
                      Summary(head, 1), Judgement(verdict, change, change, 2.0))


def _night(store: Store, run_key: str, comparisons: list[Comparison]) -> list[store_alerts.Applied]:
    with store.session() as s:
        open_alerts, done = store_alerts.night_state(s, "ops", run_key)
        steps = plan_night(comparisons, open_alerts, done=done, band_pct=2.0)
        return store_alerts.apply_steps(s, run_key, "ops", steps, band_pct=2.0)


def test_lifecycle_is_stored_and_each_run_applies_once(store: Store, make) -> None:
    for n in (2, 3, 4):
        store.upsert_run(make.run(f"n{n}", sha=n, day=n))
    (opened,) = _night(store, "n2", [_cmp(Verdict.REGRESSION, 4.0, 4.4)])
    a = opened.alert
    assert (a.state, a.opened_run, a.base_value, a.band_pct, a.first_head_sha) == (
        AlertState.CONFIRMED, "n2", 4.0, 2.0, make.sha(2))
    assert a.last_change_pct == pytest.approx(10.0) and opened.event_id is not None
    assert _night(store, "n2", [_cmp(Verdict.REGRESSION, 4.0, 4.4)]) == []  # a re-run changes nothing
    (same,) = _night(store, "n3", [_cmp(Verdict.UNCHANGED, 4.4, 4.42)])
    assert same.event_id is None and same.alert.state is AlertState.CONFIRMED and same.alert.last_run == "n3"
    (fixed,) = _night(store, "n4", [_cmp(Verdict.IMPROVED, 4.42, 4.0)])
    assert fixed.alert.state is AlertState.FIXED and fixed.alert.id == a.id
    assert _night(store, "n3", [_cmp(Verdict.UNCHANGED, 4.4, 4.42)]) == []  # an older run cannot reopen it
    events = store.alert_events(a.id)
    assert [(e["kind"], e["from_state"], e["to_state"], e["run_key"]) for e in events] == [
        ("opened", None, "confirmed", "n2"), ("state", "confirmed", "fixed", "n4")]
    assert [e.id for e, _ in store.run_alert_events("n4")] == [a.id]
    assert store.alerts(suite="ops", states={AlertState.CONFIRMED}) == []


def test_people_change_open_alerts_with_a_note(store: Store, make) -> None:
    store.upsert_run(make.run("n2", sha=2))
    (opened,) = _night(store, "n2", [_cmp(Verdict.REGRESSION, 4.0, 4.4)])
    before, after, event_id = store.set_alert_state(opened.alert.id, AlertState.ACKED, note="bisecting", actor="ana")
    assert (before.state, after.state, after.note) == (AlertState.CONFIRMED, AlertState.ACKED, "bisecting")
    assert store.alert_events(after.id)[-1] | {"at": None} == {
        "id": event_id, "at": None, "kind": "state", "from_state": "confirmed", "to_state": "acked",
        "change_pct": pytest.approx(10.0), "note": "bisecting", "actor": "ana", "announced": False, "run_key": None}
    store.set_alert_state(after.id, AlertState.WONTFIX, actor="ana")
    with pytest.raises(AlertError, match="already closed"):
        store.set_alert_state(after.id, AlertState.ACKED)
    with pytest.raises(AlertError, match="unknown alert #999"):
        store.alert(999)


def test_threads_replies_and_abandoned_messages(store: Store, make) -> None:
    store.upsert_run(make.run("n2", sha=2))
    (opened,) = _night(store, "n2", [_cmp(Verdict.REGRESSION, 4.0, 4.4)])
    root = store.queue_notification("n2", f"alert-{opened.alert.id}", "#perf", {"text": "new regression"})
    with store.session() as s:
        store_alerts.set_thread(s, [opened.alert.id], root)
    reply = store.queue_notification("n2", "reply", "#perf", {"text": "fixed"}, parent_id=root)
    assert store.queue_notification("n2", "reply", "#perf", {"text": "fixed"}, parent_id=root) == reply
    store.mark_notification(root, "sent", ts="1700000000.000100", channel_id="C0PERF")
    assert store.record_thread(root, "1700000000.000100", "C0PERF") == 1
    a = store.alert(opened.alert.id)
    assert (a.thread_notification_id, a.thread_ts, a.channel_id) == (root, "1700000000.000100", "C0PERF")
    assert store.known_channel_id("#perf") == "C0PERF"
    (item,) = store.outbox_items()
    assert (item.id, item.parent_id, item.status) == (reply, root, "pending")
    store.mark_notification(reply, "abandoned", error="its files are gone", attempted=False)
    assert store.outbox_items() == [] and store.pending_notifications() == []
    (gone,) = store.outbox_items(statuses=("abandoned",))
    assert (gone.attempts, gone.last_error) == (0, "its files are gone")


def test_upgrade_from_0002_keeps_the_outbox(store: Store, make) -> None:
    config = alembic_config()
    with store.engine.connect() as conn, conn.begin():
        config.attributes["connection"] = conn
        command.downgrade(config, "0002")
    assert "alerts" not in inspect(store.engine).get_table_names()
    store.upsert_run(make.run("n1"))
    with store.session() as s:  # a 0002-era row, written without the new columns
        s.execute(text("INSERT INTO notifications (run_id, kind, channel, payload, status, attempts, created_at) "
                       "SELECT id, 'summary', '#perf', '{\"text\": \"x\"}', 'failed', 2, :at FROM runs"),
                  {"at": make.when(0)})
    store.upgrade()
    (item,) = store.outbox_items()
    assert (item.kind, item.status, item.attempts, item.parent_id, item.ts) == ("summary", "failed", 2, None, None)
    store.mark_notification(item.id, "abandoned", error="stale")  # the new status is allowed now
    with store.session() as s:
        assert s.scalars(select(Notification.status)).all() == ["abandoned"]


def test_a_night_of_many_alerts_takes_the_statements_of_a_night_of_few(store: Store, make) -> None:
    """Opening, updating and closing N alerts, and reading what a night did to them, in a number of
    statements that does not grow with N (no statement per series)."""
    from sqlalchemy import event

    for prefix in ("a", "b"):
        for n in (2, 3):
            store.upsert_run(make.run(f"{prefix}{n}", sha=n, day=n))
    counts: dict[int, list[int]] = {}
    for prefix, size in (("a", 3), ("b", 30)):
        cases = [f"{prefix}_op{i:02d}" for i in range(size)]  # plan_night orders by case
        statements: list[str] = []

        def count(_conn: object, _cursor: object, sql: str, *_args: object, seen: list[str] = statements) -> None:
            seen.append(sql)

        event.listen(store.engine, "before_cursor_execute", count)
        try:
            opened = _night(store, f"{prefix}2", [_cmp(Verdict.REGRESSION, 4.0, 4.4 + i / 100, case)
                                                  for i, case in enumerate(cases)])
            after_open = len(statements)
            # night 3: the even ones are fixed, the odd ones stay (a silent update)
            moved = _night(store, f"{prefix}3", [_cmp(Verdict.IMPROVED if i % 2 == 0 else Verdict.UNCHANGED,
                                                      4.4, 4.0 if i % 2 == 0 else 4.41, case)
                                                 for i, case in enumerate(cases)])
            after_move = len(statements)
            read = store.run_alert_events(f"{prefix}3")
        finally:
            event.remove(store.engine, "before_cursor_execute", count)
        counts[size] = [after_open, after_move - after_open, len(statements) - after_move]
        assert [(a.alert.case, a.alert.state, a.event_id is not None) for a in opened] == [
            (case, AlertState.CONFIRMED, True) for case in cases]
        assert len({a.event_id for a in opened}) == size
        assert [(a.alert.case, a.alert.state, a.event_id is not None, a.alert.last_run) for a in moved] == [
            (case, AlertState.FIXED if i % 2 == 0 else AlertState.CONFIRMED, i % 2 == 0, f"{prefix}3")
            for i, case in enumerate(cases)]
        assert [a.alert.worst_worse_pct for a in moved] == pytest.approx([10.0 + i / 4 for i in range(size)])
        # the night's events, in order, with each alert as it is now
        assert [(a.case, a.state, e["to_state"]) for a, e in read] == [
            (case, AlertState.FIXED, "fixed") for case in cases[::2]]
        assert [e["id"] for _, e in read] == sorted(e["id"] for _, e in read)
    assert counts[3] == counts[30], counts


def test_a_suite_with_more_open_alerts_than_a_page_counts_them_all(store: Store, make) -> None:
    """The night's digest ("N still open") and the report's references read every open alert: a capped
    list (500, the CLI's page) silently dropped the oldest and the count went wrong."""
    from zlops.slack.announce import alert_digest

    for n in (2, 3):
        store.upsert_run(make.run(f"n{n}", sha=n, day=n))
    cases = [f"op{i:04d}" for i in range(520)]
    _night(store, "n2", [_cmp(Verdict.REGRESSION, 4.0, 4.4, case) for case in cases])
    _night(store, "n3", [_cmp(Verdict.UNCHANGED, 4.4, 4.41, case) for case in cases])
    digest, _ = alert_digest(store, run_key="n3", suite="ops")
    assert digest.still_open == 520 and len(digest.marks) == 520
    assert len(store.alerts(suite="ops", states={AlertState.CONFIRMED})) == 500   # a page, as asked
    assert len(store.alerts(suite="ops", states={AlertState.CONFIRMED}, limit=None)) == 520


def test_an_alert_measured_against_its_own_commit_keeps_the_real_range(store: Store, make) -> None:
    """Issue 22: the second night of the same code has its baseline on tonight's commit; the alert's range
    starts at the previous accepted commit, never ``x..x``; a new alert cleared as unmeasurable says why."""
    store.upsert_run(make.run("n3", sha=3, day=3))
    same = Comparison("ops", "npu", "softmax_8192", "time", "ms", True,
                      BaselinePoint("n2", make.sha(3), "ms", 4.0, 1), Summary(4.4, 1),
                      Judgement(Verdict.REGRESSION, 10.0, 10.0, 2.0))
    with store.session() as s:
        steps = plan_night([same], {}, band_pct=2.0)
        (opened,) = store_alerts.apply_steps(s, "n3", "ops", steps, band_pct=2.0, previous_sha=make.sha(1))
    assert opened.alert.commit_range == f"{make.sha(1)[:7]}..{make.sha(3)[:7]}"
    store.upsert_run(make.run("n4", sha=4, day=4))
    (watch,) = _night(store, "n4", [_cmp(Verdict.SUSPECT, 4.0, 4.4, case="gelu")])
    store.upsert_run(make.run("n5", sha=5, day=5))
    gone = _cmp(Verdict.UNMEASURABLE, 4.0, 4.3, case="gelu")
    gone = Comparison(**{**gone.__dict__, "judgement": Judgement(Verdict.UNMEASURABLE, 7.5, 7.5, 2.0, "bimodal")})
    (cleared,) = _night(store, "n5", [gone])
    assert cleared.alert.id == watch.alert.id and cleared.alert.state is AlertState.CLEARED
    assert store.alert_events(watch.alert.id)[-1]["note"] == (
        "not confirmed by the judge (unmeasurable: bimodal): closed quietly")
    assert _night(store, "n5", [gone]) == []   # a retry of the report step changes nothing
