"""Series reads for the comparer and the trend plots: baseline candidates and series history.

The columnar reads of a whole suite (history, verdicts, baselines) live in :mod:`.frames`.

A series is (suite, pool, case, metric). Only shards that ended "ok" count, and the samples of one
run's series are pooled over the devices of the pool (concatenated in device order): the devices of
a pool are interchangeable copies of one kind of hardware, so their rounds are one sample.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, insert, or_, select
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.model import BaselinePoint, CaseResult, HistoryPoint, ShardStatus
from zlops.store.models import Result, Run, SeriesPointRow, SeriesRow, Shard
from zlops.store.points import SeriesKey, SeriesPoint, point_rows, point_values
from zlops.store.runs import require_run

BaselineCandidate = tuple[str, str, str, BaselinePoint, datetime]

#: How many accepted runs per pool :func:`baseline_candidates` looks back (a series absent from all of
#: them has no baseline: NEW).
BASELINE_WINDOW = 60


def baseline_candidates(session: Session, suite: str, *, shas: Collection[str],
                        exclude_run_key: str | None = None, kind: str = "nightly",
                        window: int = BASELINE_WINDOW, only_runs: Collection[str] | None = None,
                        before: datetime | None = None) -> list[BaselineCandidate]:
    """(pool, case, metric, point, finished_at) of every series: its NEWEST point among the newest
    ``window`` ACCEPTED runs of its pool of ``suite``/``kind`` whose sha is in ``shas``; newest finished
    first. ``exclude_run_key`` (tonight's run) is never its own baseline. A run without ``finished_at``
    is dated by its ``started_at``. ``only_runs`` and ``before`` narrow the candidates to those runs
    and to runs finished before that moment (a rescore: the night's own baselines, as of that night).

    Bounded: which run holds each series' newest point comes from the summary rows
    (:func:`zlops.store.frames.history_frame`); raw samples are loaded only for those runs (usually one
    per pool), never for the whole history.
    """
    from zlops.store import frames  # pandas on first use only

    history = frames.history_frame(session, suite, ancestors=shas, window=window,
                                   exclude_run_key=exclude_run_key, kind=kind)
    if only_runs is not None and len(history):
        history = history[history["run_key"].isin(list(only_runs))]
    if before is not None and len(history):
        history = history[history["finished_at"] < before]
    newest = frames.newest_per_series(history)
    if not len(newest):
        return []
    out: list[tuple[float, BaselineCandidate]] = []
    for run_key, group in newest.groupby("run_key", sort=False):
        samples = frames.run_samples(session, str(run_key), set(group["pool"]))
        for pool, case, metric, when in zip(group["pool"], group["case"], group["metric"],
                                            group["finished_at"], strict=True):
            point = samples.get((pool, case, metric))
            if point is not None:
                stamp = when.to_pydatetime()
                out.append((stamp.timestamp(), (pool, case, metric, point, stamp)))
    out.sort(key=lambda item: (-item[0], item[1][3].run_key, item[1][:3]))
    return [candidate for _, candidate in out]


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


def save_series_points(session: Session, run_key: str,
                       points: Mapping[SeriesKey, CaseResult] | Iterable[SeriesPoint | Mapping[str, Any]]) -> int:
    """REPLACE the pooled series points of ``run_key`` with ``points``; returns how many were stored.

    ``points``: the output of ``compare.pool_results`` (series -> pooled CaseResult; the median, n and
    spread are computed here), or :class:`~zlops.store.points.SeriesPoint` values, or plain mappings
    with their fields. Replacing keeps a retry (or a rescore) idempotent; a repeated series is refused.
    New series get their ``series`` row here.
    """
    run = require_run(session, run_key)
    try:
        rows = point_rows(points)
    except ValueError as exc:
        raise StoreError(f"series points of run {run_key!r} were refused: {exc}") from exc
    session.execute(delete(SeriesPointRow).where(SeriesPointRow.run_id == run.id))
    if rows:
        values = point_values(run.id, run.suite, session.connection(), SeriesRow.__table__, rows)
        session.execute(insert(SeriesPointRow), values)
    return len(rows)
