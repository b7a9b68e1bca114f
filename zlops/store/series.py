"""Series reads for the comparer and the trend plots: baseline candidates and series history.

A series is (suite, pool, case, metric). Only shards that ended "ok" count, and the samples of one
run's series are pooled over the devices of the pool (concatenated in device order): the devices of
a pool are interchangeable copies of one kind of hardware, so their rounds are one sample.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from zlops.model import BaselinePoint, HistoryPoint, ShardStatus
from zlops.store.models import Result, Run, Shard

#: Run ids per IN (...) list: far below SQLite's bound-parameter limit, few round trips.
_CHUNK = 500

BaselineCandidate = tuple[str, str, str, BaselinePoint, datetime]


def _chunks(ids: Sequence[int], size: int = _CHUNK) -> Iterator[Sequence[int]]:
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def baseline_candidates(session: Session, suite: str, *, shas: Collection[str],
                        exclude_run_key: str | None = None,
                        kind: str = "nightly") -> list[BaselineCandidate]:
    """(pool, case, metric, point, finished_at) of every series of the ACCEPTED runs of
    ``suite``/``kind`` whose sha is in ``shas``, newest finished first (the caller takes the first
    per series). ``exclude_run_key`` (tonight's run) is never its own baseline. A run without
    ``finished_at`` is dated by its ``started_at``.

    The accepted runs are listed first and filtered by sha in Python: ``shas`` is typically a
    first-parent history of thousands of commits, too long for a portable IN list.
    """
    wanted = set(shas)
    if not wanted:
        return []
    runs = session.execute(
        select(Run.id, Run.run_key, Run.sha, Run.finished_at, Run.started_at)
        .where(Run.suite == suite, Run.kind == kind, Run.accepted.is_(True)))
    chosen = {rid: (run_key, sha, finished or started)
              for rid, run_key, sha, finished, started in runs
              if sha in wanted and run_key != exclude_run_key}
    pooled: dict[tuple[int, str, str, str], tuple[str, list[float]]] = {}
    for chunk in _chunks(sorted(chosen)):
        rows = session.execute(
            select(Shard.run_id, Shard.pool, Result.case, Result.metric, Result.unit, Result.samples)
            .join(Result, Result.shard_id == Shard.id)
            .where(Shard.run_id.in_(chunk), Shard.status == ShardStatus.OK.value)
            .order_by(Shard.run_id, Shard.pool, Result.case, Result.metric, Shard.device))
        _pool_samples(rows, pooled)
    out: list[tuple[datetime, int, BaselineCandidate]] = []
    for (rid, pool, case, metric), (unit, samples) in pooled.items():
        run_key, sha, when = chosen[rid]
        point = BaselinePoint(run_key=run_key, sha=sha, unit=unit, samples=tuple(samples))
        out.append((when, rid, (pool, case, metric, point, when)))
    out.sort(key=lambda item: (-item[0].timestamp(), -item[1], item[2][:3]))
    return [candidate for _, _, candidate in out]


def _pool_samples(rows: Iterable[Any],
                  into: dict[tuple[int, str, str, str], tuple[str, list[float]]]) -> None:
    # rows arrive in device order within a series; the first device's unit names the series'
    for rid, pool, case, metric, unit, samples in rows:
        key = (rid, pool, case, metric)
        if key not in into:
            into[key] = (unit, [])
        into[key][1].extend(float(v) for v in samples)


def series_history(session: Session, suite: str, pool: str, case: str, metric: str, *,
                   limit: int = 60, kind: str = "nightly",
                   include_run_key: str | None = None, before: datetime | None = None) -> list[HistoryPoint]:
    """The newest ``limit`` points of one series, returned OLDEST first (for trend plots).

    Points come from the accepted runs of ``suite``/``kind``, plus ``include_run_key`` (tonight's
    run, of any kind, before it is accepted) when it belongs to ``suite``; ``when`` is the run's
    ``started_at``. ``before``: only runs started before it (a run's history as of then).
    """
    if limit < 1:
        raise ValueError(f"series_history: limit must be >= 1, got {limit}")
    runs: ColumnElement[bool] = and_(Run.kind == kind, Run.accepted.is_(True))
    if include_run_key is not None:
        runs = or_(runs, Run.run_key == include_run_key)
    where = (Run.suite == suite, runs, Shard.pool == pool, Shard.status == ShardStatus.OK.value,
             Result.case == case, Result.metric == metric,
             *(() if before is None else (Run.started_at < before,)))
    newest = session.scalars(
        select(Run.id)
        .join(Shard, Shard.run_id == Run.id).join(Result, Result.shard_id == Shard.id)
        .where(*where)
        .group_by(Run.id, Run.started_at)
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)).all()
    if not newest:
        return []
    rows = session.execute(
        select(Run.id, Run.run_key, Run.sha, Run.started_at, Result.unit, Result.samples)
        .join(Shard, Shard.run_id == Run.id).join(Result, Result.shard_id == Shard.id)
        .where(Run.id.in_(newest), *where)
        .order_by(Run.started_at, Run.id, Shard.device))
    points: dict[int, tuple[str, str, datetime, str, list[float]]] = {}
    for rid, run_key, sha, started_at, unit, samples in rows:
        if rid not in points:
            points[rid] = (run_key, sha, started_at, unit, [])
        points[rid][4].extend(float(v) for v in samples)
    return [HistoryPoint(run_key=run_key, sha=sha, when=when, unit=unit, samples=tuple(samples))
            for run_key, sha, when, unit, samples in points.values()]
