"""Runs, shards and their results: session-level reads and idempotent writes.

Every function takes the caller's :class:`~sqlalchemy.orm.Session` and neither commits nor rolls
back: the caller owns the transaction (:meth:`zlops.store.Store.session`, or one of the ``Store``
convenience methods, each of which is one transaction). Writes are keyed upserts, so repeating a
call (an Airflow retry) leaves the same rows as calling it once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.model import CaseResult, RunRecord, RunStatus, ShardOutcome, ShardStatus
from zlops.store.engine import dialect_insert
from zlops.store.models import Result, Run, SeriesPointRow, SeriesRow, Shard, utcnow
from zlops.store.points import spreads

log = logging.getLogger(__name__)

#: Fields that identify what a run measured; an upsert may not change them under the same key.
_RUN_IDENTITY = ("kind", "suite", "sha")


def require_run(session: Session, run_key: str) -> Run:
    """The row of ``run_key``; StoreError when there is none."""
    row = session.scalars(select(Run).where(Run.run_key == run_key)).one_or_none()
    if row is None:
        raise StoreError(f"unknown run {run_key!r}: store the run with upsert_run() first")
    return row


def _record(row: Run) -> RunRecord:
    return RunRecord(run_key=row.run_key, kind=row.kind, suite=row.suite, sha=row.sha,
                     branch=row.branch, status=RunStatus(row.status), accepted=row.accepted,
                     started_at=row.started_at, finished_at=row.finished_at, meta=dict(row.meta))


def upsert_run(session: Session, run: RunRecord) -> None:
    """Insert ``run``, or update the row with its ``run_key``.

    On update: the first ``started_at`` is kept, ``meta`` is merged (new keys win), ``finished_at``
    changes only when given, and acceptance is never revoked (that is :func:`set_accepted`'s job).
    A different kind, suite or sha under an existing key is a conflicting write (StoreError).
    A run stored without ``started_at`` gets the time of its insert.
    """
    inserted = session.execute(
        dialect_insert(session, Run)
        .values(run_key=run.run_key, kind=run.kind, suite=run.suite, sha=run.sha,
                branch=run.branch, status=run.status.value, accepted=run.accepted,
                started_at=run.started_at or utcnow(), finished_at=run.finished_at,
                meta=dict(run.meta))
        .on_conflict_do_nothing(index_elements=["run_key"])
        .returning(Run.id)
    ).scalar_one_or_none()
    if inserted is not None:
        return
    row = session.scalars(select(Run).where(Run.run_key == run.run_key).with_for_update()).one()
    for name in _RUN_IDENTITY:
        if getattr(row, name) != getattr(run, name):
            raise StoreError(f"run {run.run_key!r} is stored with {name}={getattr(row, name)!r}; "
                             f"refusing to change it to {getattr(run, name)!r} (use a new run_key)")
    row.branch = run.branch
    row.status = run.status.value
    row.accepted = row.accepted or run.accepted
    if run.finished_at is not None:
        row.finished_at = run.finished_at
    row.meta = {**row.meta, **run.meta}


def get_run(session: Session, run_key: str) -> RunRecord | None:
    row = session.scalars(select(Run).where(Run.run_key == run_key)).one_or_none()
    return None if row is None else _record(row)


def set_run_status(session: Session, run_key: str, status: RunStatus, *,
                   finished_at: datetime | None = None) -> None:
    values: dict[str, Any] = {"status": RunStatus(status).value}
    if finished_at is not None:
        values["finished_at"] = finished_at
    _update_run(session, run_key, values)


def update_run_meta(session: Session, run_key: str, values: Mapping[str, Any]) -> None:
    """Merge ``values`` into the run's meta (top-level keys replaced; idempotent)."""
    row = require_run(session, run_key)
    row.meta = {**(row.meta or {}), **dict(values)}


def set_accepted(session: Session, run_key: str, accepted: bool = True) -> None:
    _update_run(session, run_key, {"accepted": bool(accepted)})


def _update_run(session: Session, run_key: str, values: Mapping[str, Any]) -> None:
    updated = session.execute(update(Run).where(Run.run_key == run_key).values(**values)
                              .returning(Run.id)).scalar_one_or_none()
    if updated is None:
        raise StoreError(f"unknown run {run_key!r}: store the run with upsert_run() first")


def list_runs(session: Session, *, suite: str | None = None, kind: str | None = None,
              limit: int = 50) -> list[RunRecord]:
    """Runs, newest started first."""
    query = select(Run).order_by(Run.started_at.desc(), Run.id.desc()).limit(limit)
    if suite is not None:
        query = query.where(Run.suite == suite)
    if kind is not None:
        query = query.where(Run.kind == kind)
    return [_record(row) for row in session.scalars(query)]


def shard_statuses(session: Session, run_keys: Sequence[str]) -> dict[str, list[ShardStatus]]:
    """The statuses of each run's shards (one query; a run without shards maps to an empty list)."""
    out: dict[str, list[ShardStatus]] = {key: [] for key in run_keys}
    if run_keys:
        rows = session.execute(select(Run.run_key, Shard.status).join(Shard, Shard.run_id == Run.id)
                               .where(Run.run_key.in_(list(run_keys))))
        for key, status in rows:
            out[key].append(ShardStatus(status))
    return out


def accepted_runs(session: Session, suite: str, *, kind: str = "nightly") -> list[RunRecord]:
    """Every accepted (baseline) run of ``suite``/``kind``, newest started first."""
    query = (select(Run).where(Run.suite == suite, Run.kind == kind, Run.accepted.is_(True))
             .order_by(Run.started_at.desc(), Run.id.desc()))
    return [_record(row) for row in session.scalars(query)]


def record_shard(session: Session, run_key: str, outcome: ShardOutcome,
                 results: Sequence[CaseResult] = (), *, telemetry: Mapping[str, Any] | None = None,
                 identity: Mapping[str, Any] | None = None) -> None:
    """Upsert the shard row of (run, pool, device) and REPLACE its result rows.

    The shard row ends up exactly as this call describes it (telemetry and identity included); each
    result row gets its summary figures (median, n, spread_pct). The run's pooled series points of
    that pool are dropped (they no longer match the results); the compare step writes them again.
    Run it inside one transaction (the Store method does): a failure part-way, such as two results
    with the same (case, metric), raises StoreError and the rollback keeps the previous rows.
    """
    run = require_run(session, run_key)
    values: dict[str, Any] = {
        "backend": outcome.backend,
        "status": ShardStatus(outcome.status).value,
        "exit_code": outcome.exit_code,
        "started_at": outcome.started_at,
        "ended_at": outcome.ended_at,
        "artifact_dir": str(outcome.artifact_dir),
        "error": outcome.error,
        "results_file": None if outcome.results_file is None else str(outcome.results_file),
        "telemetry": None if telemetry is None else dict(telemetry),
        "identity": None if identity is None else dict(identity),
    }
    stmt = dialect_insert(session, Shard).values(run_id=run.id, pool=outcome.pool,
                                                  device=outcome.device, **values)
    shard_id = session.execute(stmt.on_conflict_do_update(
        index_elements=["run_id", "pool", "device"],
        set_={name: stmt.excluded[name] for name in values},
    ).returning(Shard.id)).scalar_one()
    session.execute(delete(Result).where(Result.shard_id == shard_id))
    pool_series = select(SeriesRow.id).where(SeriesRow.suite == run.suite, SeriesRow.pool == outcome.pool)
    session.execute(delete(SeriesPointRow).where(SeriesPointRow.run_id == run.id,
                                                 SeriesPointRow.series_id.in_(pool_series)))
    log.debug("shard %s/%s of run %s stored as %s with %d results", outcome.pool, outcome.device,
              run_key, values["status"], len(results))
    if not results:
        return
    spread = spreads([r.samples for r in results])
    rows = [{"shard_id": shard_id, "case": r.case, "metric": r.metric, "unit": r.unit,
             "lower_is_better": r.lower_is_better, "median": r.median, "n": len(r.samples),
             "spread_pct": s, "samples": list(r.samples), "params": dict(r.params)}
            for r, s in zip(results, spread, strict=True)]
    try:
        session.execute(insert(Result), rows)
    except IntegrityError as exc:
        raise StoreError(f"results of run {run_key!r} shard {outcome.pool}/{outcome.device} "
                         f"were refused (a (case, metric) pair repeated?): {exc.orig}") from exc


def shards(session: Session, run_key: str) -> list[ShardOutcome]:
    """The shards of a run, ordered by pool then device."""
    run = require_run(session, run_key)
    rows = session.scalars(select(Shard).where(Shard.run_id == run.id)
                           .order_by(Shard.pool, Shard.device))
    return [ShardOutcome(pool=s.pool, device=s.device, backend=s.backend,
                         status=ShardStatus(s.status), artifact_dir=Path(s.artifact_dir),
                         exit_code=s.exit_code, started_at=s.started_at, ended_at=s.ended_at,
                         error=s.error,
                         results_file=None if s.results_file is None else Path(s.results_file))
            for s in rows]


def shard_extras(session: Session, run_key: str) -> dict[tuple[str, int], dict[str, Any]]:
    """(pool, device) -> {"telemetry": ..., "identity": ...} of every shard of a run."""
    run = require_run(session, run_key)
    rows = session.execute(select(Shard.pool, Shard.device, Shard.telemetry, Shard.identity)
                           .where(Shard.run_id == run.id).order_by(Shard.pool, Shard.device))
    return {(pool, device): {"telemetry": telemetry, "identity": identity}
            for pool, device, telemetry, identity in rows}


def pool_identities(session: Session, run_keys: Sequence[str],
                    ) -> list[tuple[str, datetime | None, str, dict[str, Any] | None]]:
    """(run_key, started_at, pool, identity of the pool's first ok shard) of ``run_keys``, newest run first.

    What the caliber walls of a window of nights need, in one query per 500 runs (never per run).
    """
    keys = list(dict.fromkeys(run_keys))
    seen: dict[tuple[str, str], tuple[datetime | None, dict[str, Any] | None]] = {}
    for start in range(0, len(keys), 500):
        rows = session.connection().execute(
            select(Run.run_key, Run.started_at, Shard.pool, Shard.identity)
            .join(Shard, Shard.run_id == Run.id)
            .where(Run.run_key.in_(keys[start:start + 500]), Shard.status == ShardStatus.OK.value)
            .order_by(Run.run_key, Shard.pool, Shard.device))
        for run_key, started_at, pool, identity in rows:
            seen.setdefault((run_key, pool), (started_at, identity))
    out = [(rk, when, pool, identity) for (rk, pool), (when, identity) in seen.items()]
    out.sort(key=lambda r: r[1] or datetime.min.replace(tzinfo=timezone.utc), reverse=True)
    return out


def results(session: Session, run_key: str) -> list[tuple[str, int, CaseResult]]:
    """(pool, device, result) of every result of a run; per shard in the order they were recorded."""
    run = require_run(session, run_key)
    rows = session.connection().execute(  # columns, not ORM objects: a night is 10^4-10^5 results
        select(Shard.pool, Shard.device, Result.case, Result.metric, Result.unit, Result.lower_is_better,
               Result.samples, Result.params)
        .join(Result, Result.shard_id == Shard.id)
        .where(Shard.run_id == run.id)
        .order_by(Shard.pool, Shard.device, Result.id))
    return [(pool, device, CaseResult(case=case, metric=metric, unit=unit, lower_is_better=bool(lower),
                                      samples=tuple(samples), params=dict(params or {})))
            for pool, device, case, metric, unit, lower, samples, params in rows]
