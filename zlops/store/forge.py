"""The forge receiver's state in the store: the checks it opened and the deliveries it verified (migration 0012).

- ``forge_checks``: every "running" check zlops posts is written here first, so a check is never left running:
  :mod:`zlops.forge.lifecycle` closes what a compare did not (it raised, ran past its deadline, or the receiver
  running it restarted);
- ``forge_deliveries``: every verified delivery, by body digest (a byte-for-byte replay is found again) and the
  forge's delivery id, with the decision taken: the replay protection and the rate limits of
  :mod:`zlops.forge.guard` read it.

Session-level functions; the caller owns the transaction (``store.read`` / ``store.unit_of_work``). Writes are
idempotent: a claim or an open done twice finds the first row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from zlops.store.engine import dialect_insert
from zlops.store.models import ForgeCheckRow, ForgeDeliveryRow

#: ``forge_checks.state``: posted running / zlops is closing it (post pending) / finished
CHECK_STATES = ("open", "closing", "closed")


@dataclass(frozen=True)
class OpenCheck:
    """A check zlops opened (a row of ``forge_checks``)."""

    id: int
    channel: str
    suite: str
    name: str
    external_id: str
    head_sha: str
    pr: int | None
    ref: str
    run_id: str
    runner: str
    state: str
    opened_at: datetime
    deadline_at: datetime
    conclusion: str | None = None
    reason: str | None = None


def _check(row: ForgeCheckRow) -> OpenCheck:
    return OpenCheck(row.id, row.channel, row.suite, row.name, row.external_id, row.head_sha, row.pr, row.ref,
                     row.run_id, row.runner, row.state, row.opened_at, row.deadline_at, row.conclusion, row.reason)


def open_check(session: Session, *, channel: str, suite: str, name: str, external_id: str, head_sha: str,
               pr: int | None, ref: str, run_id: str, runner: str, now: datetime, deadline_at: datetime) -> int:
    """Record a check about to be posted running; the same (channel, check, commit, run) again returns its id."""
    new_id = session.execute(
        dialect_insert(session, ForgeCheckRow)
        .values(channel=channel, suite=suite, name=name, external_id=external_id, head_sha=head_sha, pr=pr, ref=ref,
                run_id=run_id, runner=runner, state="open", opened_at=now, deadline_at=deadline_at)
        .on_conflict_do_nothing(index_elements=["channel", "external_id", "head_sha", "run_id"])
        .returning(ForgeCheckRow.id)).scalar_one_or_none()
    if new_id is not None:
        return int(new_id)
    return int(session.scalars(select(ForgeCheckRow.id).where(
        ForgeCheckRow.channel == channel, ForgeCheckRow.external_id == external_id,
        ForgeCheckRow.head_sha == head_sha, ForgeCheckRow.run_id == run_id)).one())


def rename_run(session: Session, run_id: str, new_run_id: str) -> None:
    """The compare's run id as the trigger named it, where it chose another than the receiver asked for."""
    session.execute(update(ForgeCheckRow).where(ForgeCheckRow.run_id == run_id).values(run_id=new_run_id))


def checks(session: Session, *, ids: Collection[int] | None = None, run_id: str | None = None,
           states: Sequence[str] = ("open", "closing"), runner: str | None = None,
           due_before: datetime | None = None) -> list[OpenCheck]:
    """Checks in ``states`` (oldest first), narrowed to ``ids``, a compare run, a runner, or those still open
    past their deadline (``due_before``) plus every closing one."""
    query = select(ForgeCheckRow).where(ForgeCheckRow.state.in_(tuple(states))).order_by(ForgeCheckRow.id)
    if ids is not None:
        query = query.where(ForgeCheckRow.id.in_(tuple(ids)))
    if run_id is not None:
        query = query.where(ForgeCheckRow.run_id == run_id)
    if runner is not None:
        query = query.where(ForgeCheckRow.runner == runner)
    if due_before is not None:
        query = query.where(or_(ForgeCheckRow.state == "closing", ForgeCheckRow.deadline_at < due_before))
    return [_check(r) for r in session.scalars(query)]


def mark_checks(session: Session, ids: Collection[int], state: str, *, now: datetime, from_states: Sequence[str],
                conclusion: str | None = None, reason: str | None = None, error: str | None = None) -> list[int]:
    """Move the checks still in ``from_states`` to ``state``; returns the ids moved (a check another process
    closed first is left as it is)."""
    if state not in CHECK_STATES:
        raise ValueError(f"mark_checks: state must be one of {', '.join(CHECK_STATES)}, got {state!r}")
    if not ids:
        return []
    values: dict[str, object] = {"state": state, "error": error}
    if conclusion is not None:
        values["conclusion"] = conclusion
    if reason is not None:
        values["reason"] = reason
    if state == "closed":
        values["closed_at"] = now
    moved = session.execute(update(ForgeCheckRow).where(ForgeCheckRow.id.in_(tuple(ids)),
                                                        ForgeCheckRow.state.in_(tuple(from_states)))
                            .values(**values).returning(ForgeCheckRow.id)).scalars().all()
    return sorted(int(i) for i in moved)


# -- deliveries -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """A delivery received before: when, and what was decided then."""

    received_at: datetime
    decision: str
    delivery: str | None


def claim_delivery(session: Session, *, forge: str, delivery: str | None, body_sha: str, now: datetime,
                   forget_before: datetime) -> tuple[int | None, Seen | None]:
    """Record a verified delivery: (its row id, None), or (None, the earlier one) when the same body, or the same
    delivery id, was received since ``forget_before``. Rows older than that are deleted first."""
    session.execute(delete(ForgeDeliveryRow).where(ForgeDeliveryRow.received_at < forget_before))
    match = [ForgeDeliveryRow.body_sha == body_sha]
    if delivery:
        match.append(ForgeDeliveryRow.delivery == delivery)
    earlier = session.scalars(select(ForgeDeliveryRow).where(ForgeDeliveryRow.forge == forge, or_(*match))
                              .order_by(ForgeDeliveryRow.id).limit(1)).first()
    if earlier is not None:
        return None, Seen(earlier.received_at, earlier.decision, earlier.delivery)
    new_id = session.execute(
        dialect_insert(session, ForgeDeliveryRow)
        .values(forge=forge, delivery=delivery, body_sha=body_sha, received_at=now, decision="received")
        .on_conflict_do_nothing(index_elements=["forge", "body_sha"])
        .returning(ForgeDeliveryRow.id)).scalar_one_or_none()
    if new_id is None:   # the same body claimed by a concurrent request a moment ago
        return None, Seen(now, "received", delivery)
    return int(new_id), None


def decide_delivery(session: Session, delivery_id: int, *, decision: str, outcome: str, repo: str | None = None,
                    pr: int | None = None, actor: str | None = None) -> None:
    """What the receiver decided about a claimed delivery (and whose request it was)."""
    session.execute(update(ForgeDeliveryRow).where(ForgeDeliveryRow.id == delivery_id)
                    .values(decision=decision[:32], outcome=outcome, repo=repo, pr=pr,
                            actor=None if actor is None else actor[:200]))


def count_decisions(session: Session, *, forge: str, decisions: Collection[str], since: datetime,
                    repo: str | None = None, pr: int | None = None, actor: str | None = None,
                    exclude_id: int | None = None) -> int:
    """How many deliveries since ``since`` were decided one of ``decisions`` (narrowed to a repo, PR, actor)."""
    query = select(func.count(ForgeDeliveryRow.id)).where(
        ForgeDeliveryRow.forge == forge, ForgeDeliveryRow.decision.in_(tuple(decisions)),
        ForgeDeliveryRow.received_at >= since)
    if repo is not None:
        query = query.where(func.lower(ForgeDeliveryRow.repo) == repo.lower())
    if pr is not None:
        query = query.where(ForgeDeliveryRow.pr == pr)
    if actor is not None:
        query = query.where(ForgeDeliveryRow.actor == actor)
    if exclude_id is not None:
        query = query.where(ForgeDeliveryRow.id != exclude_id)
    return int(session.scalar(query) or 0)
