"""Bulk reads behind the trust ledger (zlops.triage.trust): a window's alerts, their events, its verdict counts,
its nights' stored coverage (its recall canaries' nights: :func:`zlops.store.canaries.window_canary_nights`).

Four queries for any window (the alerts' events in IN lists cut into :data:`~zlops.store.frames.CHUNK`s):
the alerts opened in ``[since, until)``, every event of those alerts up to ``until`` (in order), the
number of compare rows per verdict of the nightly runs started in the window, and those runs' coverage as
their report stored it in the run meta. The caller owns the transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from zlops.model import CANARY_MARK
from zlops.store.frames import chunks
from zlops.store.models import AlertEvent, AlertRow, ComparisonRow, Run


def window_alerts(session: Session, since: datetime, until: datetime, *, suite: str | None = None
                  ) -> list[dict[str, Any]]:
    """The alerts opened in ``[since, until)``, oldest first: id, suite, pool, case, metric, opened_at."""
    query = (select(AlertRow.id, AlertRow.suite, AlertRow.pool, AlertRow.case, AlertRow.metric, AlertRow.opened_at)
             .where(AlertRow.opened_at >= since, AlertRow.opened_at < until).order_by(AlertRow.opened_at, AlertRow.id))
    if suite is not None:
        query = query.where(AlertRow.suite == suite)
    return [dict(row._mapping) for row in session.execute(query)]


def window_events(session: Session, alert_ids: list[int], until: datetime) -> list[dict[str, Any]]:
    """Every event of ``alert_ids`` before ``until``, in the order written: alert_id, at, kind, to_state,
    actor, by_person (an event without a nightly run is a person's change)."""
    out: list[dict[str, Any]] = []
    for chunk in chunks(sorted(set(alert_ids))):
        rows = session.execute(select(AlertEvent.id, AlertEvent.alert_id, AlertEvent.at, AlertEvent.kind,
                                      AlertEvent.to_state, AlertEvent.actor, AlertEvent.run_id)
                               .where(AlertEvent.alert_id.in_(chunk), AlertEvent.at < until))
        out += [{"id": r.id, "alert_id": r.alert_id, "at": r.at, "kind": r.kind, "to_state": r.to_state,
                 "actor": r.actor, "by_person": r.run_id is None} for r in rows]
    out.sort(key=lambda e: e["id"])
    return out


def window_verdicts(session: Session, since: datetime, until: datetime, *, suite: str | None = None
                    ) -> tuple[dict[str, int], int]:
    """(verdict -> compare rows, nightly runs) of the nightly runs started in ``[since, until)``: one query,
    one row per (run, verdict), a run without a compare table once with no verdict; a recall canary's rows
    are not counted."""
    query = (select(Run.id, ComparisonRow.verdict, func.count(ComparisonRow.id))
             .outerjoin(ComparisonRow, ComparisonRow.run_id == Run.id)
             .where(Run.kind == "nightly", Run.started_at >= since, Run.started_at < until,
                    # a recall canary's rows (zlops.judge.canary) are zlops' own, not series people measure
                    or_(ComparisonRow.case.is_(None), ~ComparisonRow.case.endswith(CANARY_MARK, autoescape=True)))
             .group_by(Run.id, ComparisonRow.verdict))
    if suite is not None:
        query = query.where(Run.suite == suite)
    counts: dict[str, int] = {}
    runs: set[int] = set()
    for run_id, verdict, n in session.execute(query):
        runs.add(run_id)
        if verdict is not None:
            counts[str(verdict)] = counts.get(str(verdict), 0) + int(n)
    return counts, len(runs)


def window_run_meta(session: Session, since: datetime, until: datetime, key: str, *, suite: str | None = None
                    ) -> list[Any]:
    """The value of one run meta ``key`` of each nightly run started in ``[since, until)`` that holds it, oldest
    first: one query (the trust ledger's coverage, stored by the report step: zlops.judge.coverage)."""
    query = (select(Run.meta[key]).where(Run.kind == "nightly", Run.started_at >= since, Run.started_at < until)
             .order_by(Run.started_at, Run.id))   # that key only: a run's meta also holds its plans and A/B costs
    if suite is not None:
        query = query.where(Run.suite == suite)
    return [value for value in session.scalars(query) if value is not None]


def newest_nightly(session: Session, until: datetime, *, suite: str | None = None) -> str | None:
    """The run key of the newest nightly run started before ``until`` (what a digest is filed under)."""
    query = select(Run.run_key).where(Run.kind == "nightly", Run.started_at < until)
    if suite is not None:
        query = query.where(Run.suite == suite)
    return session.scalars(query.order_by(Run.started_at.desc(), Run.id.desc()).limit(1)).first()
