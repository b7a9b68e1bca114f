"""Bisections, their steps and their alerts: session-level reads and writes (the caller owns the transaction).

Idempotent: a bisection is unique per (suite, pool, good, bad) and a step per (bisection, kind, sha),
so an Airflow retry or a rerun of ``zlops bisect`` finds what the first attempt stored and adds no row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from zlops.bisect.search import (
    Bisection,
    Outcome,
    State,
    StepKind,
    StepRecord,
    Target,
    evidence_from_json,
    evidence_to_json,
)
from zlops.store.engine import dialect_insert
from zlops.store.models import BisectionAlert, BisectionRow, BisectionStep, utcnow


def _targets_json(targets: Sequence[Target]) -> list[dict[str, Any]]:
    return [{"case": t.case, "metric": t.metric, "unit": t.unit, "lower_is_better": t.lower_is_better}
            for t in targets]


def _bisection(session: Session, row: BisectionRow, alert_ids: Sequence[int] | None = None) -> Bisection:
    """The bisection of ``row``; its alerts are read unless given (``alert_ids``, ascending)."""
    alerts = alert_ids if alert_ids is not None else session.scalars(
        select(BisectionAlert.alert_id).where(BisectionAlert.bisection_id == row.id)
        .order_by(BisectionAlert.alert_id)).all()
    return Bisection(id=row.id, suite=row.suite, pool=row.pool, device=row.device, good_sha=row.good_sha,
                     bad_sha=row.bad_sha, commits=tuple(row.commits),
                     targets=tuple(Target(str(t["case"]), str(t["metric"]), str(t.get("unit") or ""),
                                          bool(t.get("lower_is_better", True))) for t in row.targets),
                     state=State(row.state), reason=row.reason, culprit_sha=row.culprit_sha,
                     culprit_subject=row.culprit_subject, culprit_author=row.culprit_author,
                     candidates=tuple(row.candidates), alert_ids=tuple(alerts))


def open_bisection(session: Session, *, suite: str, pool: str, device: int, commits: Sequence[str],
                   targets: Sequence[Target], alert_ids: Sequence[int]) -> Bisection:
    """The bisection of this range and pool (made when new), with ``alert_ids`` linked to it.

    Targets of a newly linked alert join while the bisection has not measured anything yet."""
    good, bad = commits[0], commits[-1]
    now = utcnow()
    session.execute(dialect_insert(session, BisectionRow).values(
        suite=suite, pool=pool, device=device, good_sha=good, bad_sha=bad, commits=list(commits),
        targets=_targets_json(targets), state=State.RUNNING.value, reason="", candidates=[], created_at=now,
        updated_at=now).on_conflict_do_nothing(index_elements=["suite", "pool", "good_sha", "bad_sha"]))
    row = session.scalars(select(BisectionRow).where(
        BisectionRow.suite == suite, BisectionRow.pool == pool, BisectionRow.good_sha == good,
        BisectionRow.bad_sha == bad).with_for_update()).one()
    known = {(t["case"], t["metric"]) for t in row.targets}
    extra = [t for t in targets if t.key not in known]
    if extra and not steps(session, row.id):
        row.targets = [*row.targets, *_targets_json(extra)]
    for alert_id in alert_ids:
        session.execute(dialect_insert(session, BisectionAlert).values(alert_id=alert_id, bisection_id=row.id)
                        .on_conflict_do_nothing(index_elements=["alert_id"]))
    return _bisection(session, row)


def get_bisection(session: Session, bisection_id: int) -> Bisection | None:
    row = session.get(BisectionRow, bisection_id)
    return None if row is None else _bisection(session, row)


def bisection_of_alert(session: Session, alert_id: int) -> Bisection | None:
    bid = session.scalar(select(BisectionAlert.bisection_id).where(BisectionAlert.alert_id == alert_id))
    return None if bid is None else get_bisection(session, bid)


def bisections_of_alerts(session: Session, alert_ids: Collection[int]) -> dict[int, Bisection]:
    """alert id -> the bisection it belongs to (an alert in none is absent): three queries per 500 alerts,
    never one per alert (the nightly's bisect requests and a bisection's group look at every open alert)."""
    ids = sorted(set(alert_ids))
    links: dict[int, int] = {}
    for start in range(0, len(ids), 500):
        links.update({int(a): int(b) for a, b in session.execute(
            select(BisectionAlert.alert_id, BisectionAlert.bisection_id)
            .where(BisectionAlert.alert_id.in_(ids[start:start + 500])))})
    bids = sorted(set(links.values()))
    members: dict[int, list[int]] = {}
    found: dict[int, Bisection] = {}
    for start in range(0, len(bids), 500):
        chunk = bids[start:start + 500]
        for alert_id, bid in session.execute(select(BisectionAlert.alert_id, BisectionAlert.bisection_id)
                                             .where(BisectionAlert.bisection_id.in_(chunk))
                                             .order_by(BisectionAlert.alert_id)):
            members.setdefault(int(bid), []).append(int(alert_id))
        for row in session.scalars(select(BisectionRow).where(BisectionRow.id.in_(chunk))):
            found[row.id] = _bisection(session, row, members.get(row.id, []))
    return {alert_id: found[bid] for alert_id, bid in links.items() if bid in found}


def culprits_of_alerts(session: Session, alert_ids: Sequence[int]) -> dict[int, str]:
    """alert id -> the culprit sha its bisection found (state ``found``), in one query (the alerts inbox)."""
    if not alert_ids:
        return {}
    rows = session.execute(
        select(BisectionAlert.alert_id, BisectionRow.culprit_sha)
        .join(BisectionRow, BisectionRow.id == BisectionAlert.bisection_id)
        .where(BisectionAlert.alert_id.in_(list(alert_ids)), BisectionRow.state == "found",
               BisectionRow.culprit_sha.is_not(None)))
    return {int(a): str(sha) for a, sha in rows}


def steps(session: Session, bisection_id: int) -> list[StepRecord]:
    """The stored steps of a bisection, in the order they were decided."""
    rows = session.scalars(select(BisectionStep).where(BisectionStep.bisection_id == bisection_id)
                           .order_by(BisectionStep.id)).all()
    return [StepRecord(StepKind(r.kind), r.sha, r.base_sha, r.position, Outcome(r.outcome), r.pairs, r.seconds,
                       r.builds, evidence_from_json(r.evidence), r.note) for r in rows]


def save_step(session: Session, bisection_id: int, step: StepRecord) -> None:
    """Store a decided step; a step already stored (same kind and commit) is left as it is."""
    session.execute(dialect_insert(session, BisectionStep).values(
        bisection_id=bisection_id, kind=step.kind.value, sha=step.sha, base_sha=step.base_sha,
        position=step.position, outcome=step.outcome.value, pairs=step.pairs, seconds=step.seconds,
        builds=step.builds, evidence=evidence_to_json(step.evidence), note=step.note[:2000], at=utcnow(),
    ).on_conflict_do_nothing(index_elements=["bisection_id", "kind", "sha"]))
    session.execute(update(BisectionRow).where(BisectionRow.id == bisection_id).values(updated_at=utcnow()))


def set_state(session: Session, bisection_id: int, state: State, *, reason: str, culprit: tuple[str, str, str] | None,
              candidates: Sequence[str]) -> None:
    """Record where a bisection stands; ``culprit`` is (sha, subject, author)."""
    values: dict[str, Any] = {"state": state.value, "reason": reason[:2000], "candidates": list(candidates),
                              "updated_at": utcnow(), "finished_at": utcnow() if state.finished else None}
    if culprit is not None:
        values.update(culprit_sha=culprit[0], culprit_subject=culprit[1][:2000], culprit_author=culprit[2][:250])
    session.execute(update(BisectionRow).where(BisectionRow.id == bisection_id).values(**values))


def spent(session: Session, pool: str, since: datetime) -> tuple[int, float]:
    """Builds and device seconds the bisections of ``pool`` spent since ``since`` (the night's budget)."""
    row = session.execute(select(func.coalesce(func.sum(BisectionStep.builds), 0),
                                 func.coalesce(func.sum(BisectionStep.seconds), 0.0))
                          .join(BisectionRow, BisectionRow.id == BisectionStep.bisection_id)
                          .where(BisectionRow.pool == pool, BisectionStep.at >= since)).one()
    return int(row[0]), float(row[1])


def culprits(session: Session, suite: str) -> list[Bisection]:
    """The suite's bisections that found (or named) a culprit, newest first."""
    rows = session.scalars(select(BisectionRow).where(
        BisectionRow.suite == suite, BisectionRow.culprit_sha.is_not(None),
        BisectionRow.state.in_([State.FOUND.value, State.UNVERIFIED.value])).order_by(BisectionRow.id.desc())).all()
    return [_bisection(session, r) for r in rows]


def with_culprit(session: Session, suite: str, sha: str) -> list[Bisection]:
    """The suite's bisections whose verified culprit is ``sha`` (oldest first): one group, one message."""
    rows = session.scalars(select(BisectionRow).where(
        BisectionRow.suite == suite, BisectionRow.culprit_sha == sha, BisectionRow.state == State.FOUND.value)
        .order_by(BisectionRow.id)).all()
    return [_bisection(session, r) for r in rows]
