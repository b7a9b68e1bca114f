"""Regression alerts and their history: session-level reads and writes (the caller owns the transaction).

The lifecycle rules are pure (:mod:`zlops.alerts.lifecycle`); this module only stores what they decided:
:func:`apply_steps` writes one night's :class:`~zlops.alerts.lifecycle.Step` list, :func:`set_alert_state`
a person's change. Idempotency comes from :func:`night_state`: a series already evaluated at a run
(or a later one) is reported as done, so the plan for a re-run report step is empty.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, bindparam, insert, or_, select, update
from sqlalchemy.orm import Session, aliased

from zlops.alerts.lifecycle import (
    OPEN_STATES,
    Alert,
    AlertError,
    AlertState,
    EventKind,
    SeriesKey,
    Step,
    check_human_transition,
)
from zlops.alerts.lifecycle import reference_value as _reference
from zlops.store.models import AlertEvent, AlertRow, Run, utcnow
from zlops.store.runs import require_run

_OPEN = tuple(s.value for s in OPEN_STATES)
#: alert ids per IN (...) list
IDS = 500


@dataclass(frozen=True)
class Applied:
    """A step as written: the alert after it, and the event it recorded (None for a silent update)."""

    alert: Alert
    step: Step
    event_id: int | None


def _alerts_query() -> Select:  # unparameterised: SQLAlchemy 2.0 and 2.1 type its columns differently
    opened, last = aliased(Run), aliased(Run)
    return (select(AlertRow, opened.run_key, last.run_key)
            .join(opened, opened.id == AlertRow.opened_run_id)
            .join(last, last.id == AlertRow.last_run_id))


def _alert(row: AlertRow, opened_key: str, last_key: str) -> Alert:
    return Alert(id=row.id, suite=row.suite, pool=row.pool, case=row.case, metric=row.metric, unit=row.unit,
                 lower_is_better=row.lower_is_better, state=AlertState(row.state), opened_run=opened_key,
                 last_run=last_key, base_value=row.base_value, band_pct=row.band_pct,
                 first_base_sha=row.first_base_sha, first_head_sha=row.first_head_sha,
                 last_head_sha=row.last_head_sha, last_change_pct=row.last_change_pct,
                 worst_worse_pct=row.worst_worse_pct, thread_notification_id=row.thread_notification_id,
                 thread_ts=row.thread_ts, channel_id=row.channel_id, note=row.note, opened_at=row.opened_at,
                 updated_at=row.updated_at)


def night_state(session: Session, suite: str, run_key: str) -> tuple[dict[SeriesKey, Alert], set[SeriesKey]]:
    """The open alerts of ``suite`` by series, and the series already evaluated at ``run_key`` or later."""
    run = require_run(session, run_key)
    rows = session.execute(_alerts_query().where(AlertRow.suite == suite).where(
        or_(AlertRow.state.in_(_OPEN), AlertRow.last_run_id >= run.id)).order_by(AlertRow.id))
    open_alerts: dict[SeriesKey, Alert] = {}
    done: set[SeriesKey] = set()
    for row, opened_key, last_key in rows:
        alert = _alert(row, opened_key, last_key)
        if row.last_run_id >= run.id:
            done.add(alert.key)
        if alert.state.is_open:
            open_alerts[alert.key] = alert
    return open_alerts, done


def apply_steps(session: Session, run_key: str, suite: str, steps: Sequence[Step], *,
                band_pct: float, previous_sha: str | None = None) -> list[Applied]:
    """Write one night's steps: new alerts, state changes, updates and their events.

    In bulk, never a statement per step (a night that moved thousands of series has thousands of steps):
    the alerts the steps change are read and locked in IN lists of :data:`IDS`, the new ones inserted,
    the changed ones updated and the events inserted each in one executemany, and the alerts as they
    now are read back in IN lists. A step that cannot be written (no baseline, an unknown alert) raises
    AlertError before anything is written. A new alert's commit range starts at its baseline's commit, or at
    ``previous_sha`` when the baseline is tonight's own commit (:func:`zlops.alerts.lifecycle.change_range`).
    """
    run = require_run(session, run_key)
    now = utcnow()
    changed = sorted({step.alert_id for step in steps if step.alert_id is not None})
    worst_of: dict[int, float | None] = {}
    for start in range(0, len(changed), IDS):  # locked: a person's change of one waits for this night's
        rows = session.execute(select(AlertRow.id, AlertRow.worst_worse_pct)
                               .where(AlertRow.id.in_(changed[start:start + IDS])).with_for_update())
        worst_of.update({alert_id: worst for alert_id, worst in rows})
    new_rows: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for step in steps:
        c = step.comparison
        if step.alert_id is None:
            base = _reference(c)
            if base is None or c.base is None:
                raise AlertError(f"cannot open an alert for {c.pool}/{c.case}/{c.metric}: it has no baseline")
            new_rows.append(dict(
                suite=suite, pool=c.pool, case=c.case, metric=c.metric, unit=c.unit,
                lower_is_better=c.lower_is_better, state=step.to_state.value, opened_run_id=run.id,
                last_run_id=run.id, base_value=base, band_pct=band_pct,
                first_base_sha=previous_sha if previous_sha and c.base.sha == run.sha else c.base.sha,
                first_head_sha=run.sha, last_head_sha=run.sha, last_change_pct=step.change_pct,
                worst_worse_pct=step.worse_pct, note="", opened_at=now, updated_at=now))
            continue
        if step.alert_id not in worst_of:
            raise AlertError(f"unknown alert #{step.alert_id}")
        worst = worst_of[step.alert_id]
        if step.worse_pct is not None and (worst is None or step.worse_pct > worst):
            worst = step.worse_pct
        values: dict[str, Any] = {"id": step.alert_id, "state": step.to_state.value, "last_run_id": run.id,
                                  "last_head_sha": run.sha, "last_change_pct": step.change_pct,
                                  "worst_worse_pct": worst, "updated_at": now}
        if step.from_state is not step.to_state and not step.to_state.is_open:
            values["closed_at"] = now
        updates.append(values)
    # RETURNING is matched to the steps by series and by alert, not by parameter order (SQLite keeps that
    # order only one row per statement): one step per series and alert, as plan_night makes them
    if (len({(r["pool"], r["case"], r["metric"]) for r in new_rows}) < len(new_rows)
            or len(changed) < len(updates)):
        raise AlertError("two steps of one night for the same series or alert")
    opened = {(pool, case, metric): int(alert_id) for alert_id, pool, case, metric in session.execute(
        insert(AlertRow).returning(AlertRow.id, AlertRow.pool, AlertRow.case, AlertRow.metric), new_rows)} \
        if new_rows else {}
    for closing in (False, True):  # one executemany per set of columns (the ORM's would be a statement a row here)
        group = [values for values in updates if ("closed_at" in values) is closing]
        if group:
            table = AlertRow.__table__
            columns = [name for name in group[0] if name != "id"]
            session.connection().execute(
                update(table).where(table.c.id == bindparam("b_id"))
                .values({name: bindparam(f"b_{name}", type_=table.c[name].type) for name in columns}),
                [{f"b_{name}": value for name, value in values.items()} for values in group])
    alert_ids = [step.alert_id if step.alert_id is not None else
                 opened[(step.comparison.pool, step.comparison.case, step.comparison.metric)] for step in steps]
    events = [_event_row(alert_id, run_id=run.id, kind=step.event, from_state=step.from_state, to_state=step.to_state,
                         change_pct=step.change_pct, note=step.note, actor="zlops", announced=step.announce)
              for alert_id, step in zip(alert_ids, steps, strict=True) if step.event is not None]
    event_ids = {int(alert_id): int(event_id) for event_id, alert_id in session.execute(
        insert(AlertEvent).returning(AlertEvent.id, AlertEvent.alert_id), events)} if events else {}
    alerts = alerts_by_id(session, alert_ids)
    return [Applied(alerts[alert_id], step, event_ids.get(alert_id) if step.event is not None else None)
            for alert_id, step in zip(alert_ids, steps, strict=True)]


def alerts_by_id(session: Session, alert_ids: Collection[int]) -> dict[int, Alert]:
    """The alerts of ``alert_ids`` as they are now (an unknown id is absent), in IN lists of :data:`IDS`."""
    ordered = sorted(set(alert_ids))
    out: dict[int, Alert] = {}
    for start in range(0, len(ordered), IDS):
        # populate_existing: rows this session loaded before a bulk update are read again, not reused
        rows = session.execute(_alerts_query().where(AlertRow.id.in_(ordered[start:start + IDS]))
                               .execution_options(populate_existing=True))
        for row, opened_key, last_key in rows:
            out[row.id] = _alert(row, opened_key, last_key)
    return out


def _event_row(alert_id: int, *, run_id: int | None, kind: EventKind, from_state: AlertState | None,
               to_state: AlertState, change_pct: float | None, note: str, actor: str, announced: bool,
               ) -> dict[str, Any]:
    return {"alert_id": alert_id, "run_id": run_id, "at": utcnow(), "kind": kind.value,
            "from_state": None if from_state is None else from_state.value, "to_state": to_state.value,
            "change_pct": change_pct, "note": note, "actor": actor[:100], "announced": announced}


def _event(session: Session, alert_id: int, *, run_id: int | None, kind: EventKind, from_state: AlertState | None,
           to_state: AlertState, change_pct: float | None, note: str, actor: str, announced: bool) -> int:
    return int(session.execute(insert(AlertEvent).values(_event_row(
        alert_id, run_id=run_id, kind=kind, from_state=from_state, to_state=to_state, change_pct=change_pct,
        note=note, actor=actor, announced=announced)).returning(AlertEvent.id)).scalar_one())


def get_alert(session: Session, alert_id: int) -> Alert:
    found = session.execute(_alerts_query().where(AlertRow.id == alert_id)).one_or_none()
    if found is None:
        raise AlertError(f"unknown alert #{alert_id}; list them with `zlops alert list`")
    row, opened_key, last_key = found
    return _alert(row, opened_key, last_key)


def list_alerts(session: Session, *, suite: str | None = None,
                states: Collection[AlertState] | None = None, limit: int | None = 500) -> list[Alert]:
    """Alerts, newest opened first; ``states`` None means every state."""
    query = _alerts_query().order_by(AlertRow.id.desc()).limit(limit)
    if suite is not None:
        query = query.where(AlertRow.suite == suite)
    if states is not None:
        query = query.where(AlertRow.state.in_([s.value for s in states]))
    return [_alert(row, opened_key, last_key) for row, opened_key, last_key in session.execute(query)]


def set_alert_state(session: Session, alert_id: int, to: AlertState, *, note: str = "",
                    actor: str = "someone") -> tuple[Alert, Alert, int]:
    """A person's change (acked, expected, false_positive, wontfix): (before, after, event id).

    The event is marked announced when the alert has a thread (the reply is queued by the caller).
    """
    before = get_alert(session, alert_id)
    check_human_transition(before, to)
    now = utcnow()
    values: dict[str, Any] = {"state": to.value, "updated_at": now}
    if note:
        values["note"] = note
    if not to.is_open:
        values["closed_at"] = now
    # compare-and-set: of two people (or two retries of one request) changing it at once, one wins
    changed = session.execute(update(AlertRow).where(AlertRow.id == alert_id, AlertRow.state == before.state.value)
                              .values(**values).returning(AlertRow.id)).scalar_one_or_none()
    if changed is None:
        now_state = get_alert(session, alert_id).state.value
        raise AlertError(f"alert #{alert_id} was changed meanwhile (now {now_state}); look again before changing it")
    event_id = _event(session, alert_id, run_id=None, kind=EventKind.STATE, from_state=before.state, to_state=to,
                      change_pct=before.last_change_pct, note=note, actor=actor,
                      announced=before.thread_notification_id is not None)
    return before, get_alert(session, alert_id), event_id


def set_thread(session: Session, alert_ids: Collection[int], notification_id: int) -> None:
    """The alerts whose announcement is ``notification_id`` (their thread's first message)."""
    session.execute(update(AlertRow).where(AlertRow.id.in_(list(alert_ids)))
                    .values(thread_notification_id=notification_id))


def record_thread(session: Session, notification_id: int, ts: str, channel_id: str | None) -> int:
    """Keep Slack's ts and channel id on the alerts announced by ``notification_id``; returns how many."""
    result = session.execute(update(AlertRow).where(AlertRow.thread_notification_id == notification_id)
                             .values(thread_ts=ts, channel_id=channel_id).returning(AlertRow.id))
    return len(result.all())


def alert_events(session: Session, alert_id: int) -> list[dict[str, Any]]:
    """The history of one alert, oldest first."""
    get_alert(session, alert_id)
    rows = session.execute(select(AlertEvent, Run.run_key).outerjoin(Run, Run.id == AlertEvent.run_id)
                           .where(AlertEvent.alert_id == alert_id).order_by(AlertEvent.id))
    return [{"id": e.id, "at": e.at, "kind": e.kind, "from_state": e.from_state, "to_state": e.to_state,
             "change_pct": e.change_pct, "note": e.note, "actor": e.actor, "announced": e.announced,
             "run_key": key} for e, key in rows]


def run_events(session: Session, run_key: str) -> list[tuple[Alert, dict[str, Any]]]:
    """What the nightly did to alerts at ``run_key``: (the alert now, the event), in order."""
    run = require_run(session, run_key)
    events = session.scalars(select(AlertEvent).where(AlertEvent.run_id == run.id).order_by(AlertEvent.id)).all()
    alerts = alerts_by_id(session, {e.alert_id for e in events})  # one read for all, not one per event
    return [(alerts[e.alert_id], {"id": e.id, "kind": e.kind, "from_state": e.from_state, "to_state": e.to_state,
                                  "change_pct": e.change_pct, "note": e.note, "announced": e.announced})
            for e in events]
