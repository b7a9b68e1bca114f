"""Bulk reads behind the triage pages (zlops.triage.series): one series over a window of nights, in a few queries.

Each read takes the window's run keys at once (IN lists cut into :data:`~zlops.store.frames.CHUNK`s), so
a page costs a number of queries that does not grow with the number of nights: the raw samples of one
(case, metric) per run and pool (pooled over the pool's devices exactly as the compare step pools them),
the compare rows of that (case, metric) per run and pool (verdict and :class:`~zlops.model.Figures`),
the shard telemetry summaries per run, the people's latest changes of a set of alerts, and the compare
rows that opened them. The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from zlops.model import Comparison, ShardStatus
from zlops.store.comparisons import comparison_from_row
from zlops.store.frames import chunks
from zlops.store.models import AlertEvent, AlertRow, ComparisonRow, Result, Run, SeriesRow, Shard
from zlops.store.points import pool_samples

RunPool = tuple[str, str]  # (run_key, pool)


def series_samples(session: Session, run_keys: Sequence[str], case: str, metric: str, *,
                   pools: Collection[str] | None = None) -> dict[RunPool, tuple[str, tuple[float, ...]]]:
    """(run_key, pool) -> (unit, raw samples) of one (case, metric), pooled over the pool's ok shards
    (devices in order, converted to the first device's unit: ``compare.pool_results``' rule)."""
    out: dict[RunPool, tuple[str, tuple[float, ...]]] = {}
    for chunk in chunks(list(dict.fromkeys(run_keys))):
        query = (select(Run.run_key, Shard.pool, Shard.device, Result.case, Result.metric, Result.unit,
                        Result.lower_is_better, Result.samples)
                 .join(Shard, Shard.run_id == Run.id).join(Result, Result.shard_id == Shard.id)
                 .where(Run.run_key.in_(chunk), Shard.status == ShardStatus.OK.value,
                        Result.case == case, Result.metric == metric)
                 .order_by(Run.run_key, Shard.pool, Shard.device, Result.id))
        if pools is not None:
            query = query.where(Shard.pool.in_(sorted(pools)))
        by_run: dict[str, list[Any]] = {}
        for run_key, *row in session.execute(query):
            by_run.setdefault(run_key, []).append(tuple(row))
        for run_key, rows in by_run.items():
            for (pool, _case, _metric), (unit, _lower, samples) in pool_samples(rows).items():
                out[(run_key, pool)] = (unit, tuple(samples))
    return out


def series_comparisons(session: Session, run_keys: Sequence[str], case: str, metric: str, *,
                       pools: Collection[str] | None = None) -> dict[RunPool, Comparison]:
    """(run_key, pool) -> the stored compare row of one (case, metric): verdict, note and Figures."""
    out: dict[RunPool, Comparison] = {}
    columns = ComparisonRow.__table__.c
    for chunk in chunks(list(dict.fromkeys(run_keys))):
        query = (select(Run.run_key, Run.suite, ComparisonRow).join(ComparisonRow, ComparisonRow.run_id == Run.id)
                 .where(Run.run_key.in_(chunk), ComparisonRow.case == case, ComparisonRow.metric == metric))
        if pools is not None:
            query = query.where(ComparisonRow.pool.in_(sorted(pools)))
        for run_key, suite, row in session.execute(query):
            out[(run_key, row.pool)] = comparison_from_row(suite, {c.name: getattr(row, c.name) for c in columns})
    return out


def run_telemetry(session: Session, run_keys: Sequence[str]) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    """run_key -> {(pool, device): {"telemetry": ..., "identity": ...}} (as ``Store.shard_extras``), in bulk."""
    out: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for chunk in chunks(list(dict.fromkeys(run_keys))):
        rows = session.execute(select(Run.run_key, Shard.pool, Shard.device, Shard.telemetry, Shard.identity)
                               .join(Shard, Shard.run_id == Run.id).where(Run.run_key.in_(chunk))
                               .order_by(Run.run_key, Shard.pool, Shard.device))
        for run_key, pool, device, telemetry, identity in rows:
            out.setdefault(run_key, {})[(pool, device)] = {"telemetry": telemetry, "identity": identity}
    return out


def people_changes(session: Session, alert_ids: Collection[int]) -> dict[int, dict[str, Any]]:
    """alert id -> its newest change made by a person (an event without a run): actor, state, note, at."""
    out: dict[int, dict[str, Any]] = {}
    ids = sorted(set(alert_ids))
    for chunk in chunks(ids):
        newest = (select(AlertEvent.alert_id, func.max(AlertEvent.id).label("event_id"))
                  .where(AlertEvent.alert_id.in_(chunk), AlertEvent.run_id.is_(None))
                  .group_by(AlertEvent.alert_id).subquery())
        rows = session.scalars(select(AlertEvent).join(newest, newest.c.event_id == AlertEvent.id))
        for e in rows:
            out[e.alert_id] = {"id": e.id, "actor": e.actor, "to_state": e.to_state, "note": e.note, "at": e.at}
    return out


def opening_comparisons(session: Session, alert_ids: Collection[int]) -> dict[int, Comparison]:
    """alert id -> the compare row of the night that opened it (its verdict, note and figures)."""
    out: dict[int, Comparison] = {}
    columns = ComparisonRow.__table__.c
    for chunk in chunks(sorted(set(alert_ids))):
        rows = session.execute(
            select(AlertRow.id, AlertRow.suite, ComparisonRow)
            .join(ComparisonRow, (ComparisonRow.run_id == AlertRow.opened_run_id) & (ComparisonRow.pool == AlertRow.pool)
                  & (ComparisonRow.case == AlertRow.case) & (ComparisonRow.metric == AlertRow.metric))
            .where(AlertRow.id.in_(chunk)))
        for alert_id, suite, row in rows:
            out[alert_id] = comparison_from_row(suite, {c.name: getattr(row, c.name) for c in columns})
    return out


def suite_pools(session: Session, suite: str, case: str, metric: str) -> list[str]:
    """The pools in which ``suite`` has a stored series point of (case, metric), sorted."""
    rows = session.execute(select(SeriesRow.pool).where(SeriesRow.suite == suite, SeriesRow.case == case,
                                                        SeriesRow.metric == metric).distinct())
    return sorted(pool for (pool,) in rows)


def pool_backends(session: Session, run_keys: Sequence[str]) -> dict[str, str]:
    """pool -> its backend (cuda, ascend, musa ...) as the shards of ``run_keys`` recorded it."""
    out: dict[str, str] = {}
    for chunk in chunks(list(dict.fromkeys(run_keys))):
        for pool, backend in session.execute(select(Shard.pool, Shard.backend).join(Run, Run.id == Shard.run_id)
                                             .where(Run.run_key.in_(chunk)).distinct()):
            out.setdefault(pool, backend)
    return out


def latest_compared_run(session: Session, suite: str, *, kind: str = "nightly") -> str | None:
    """The run key of the newest run of ``suite`` (started last) that has a stored compare table."""
    has_rows = select(ComparisonRow.id).where(ComparisonRow.run_id == Run.id).exists()
    return session.scalars(select(Run.run_key).where(Run.suite == suite, Run.kind == kind, has_rows)
                           .order_by(Run.started_at.desc(), Run.id.desc()).limit(1)).first()
