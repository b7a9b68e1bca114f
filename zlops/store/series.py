"""Series reads for the comparer and the trend plots: baseline candidates and series history.

The columnar reads of a whole suite (history, verdicts, baselines) live in :mod:`.frames`.

A series is (suite, pool, case, metric). Only shards that ended "ok" count, and the samples of one
run's series are pooled over the devices of the pool (concatenated in device order): the devices of
a pool are interchangeable copies of one kind of hardware, so their rounds are one sample.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, or_, select
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.model import BaselinePoint, CaseResult, HistoryPoint, ShardStatus
from zlops.store.engine import bulk_insert
from zlops.store.models import Result, Run, SeriesPointRow, SeriesRow, Shard
from zlops.store.points import SeriesKey, SeriesPoint, point_rows, point_values
from zlops.store.runs import require_run

BaselineCandidate = tuple[str, str, str, BaselinePoint, datetime]

#: How many accepted runs per pool :func:`baseline_candidates` looks back (a series absent from all of
#: them has no baseline: NEW).
BASELINE_WINDOW = 60


@dataclass(frozen=True)
class CompareWindow:
    """What the compare step reads of the store's past, in one transaction (:func:`compare_window`).

    ``history``: :func:`~zlops.store.frames.history_frame` of the newest ``history_window`` runs per
    pool; ``baselines``: each series' newest point among the newest ``baseline_window`` runs per pool
    (median and count: :class:`~zlops.model.BaselinePoint`); ``newest_run``: per pool, the newest run
    that holds a baseline (its series tonight lacks are MISSING); ``finished``: when each baseline's run
    finished; ``runs``: the baseline window's runs, newest first per pool (for targeted reads later).
    """

    history: Any
    baselines: dict[SeriesKey, BaselinePoint]
    finished: dict[SeriesKey, datetime]
    newest_run: dict[str, str]
    runs: tuple[Any, ...]


def compare_window(session: Session, suite: str, *, ancestors: Collection[str], history_window: int,
                   baseline_window: int = BASELINE_WINDOW, keys: Collection[SeriesKey] = (),
                   exclude_run_key: str | None = None, kind: str = "nightly", before: datetime | None = None,
                   only_runs: Collection[str] | None = None) -> CompareWindow:
    """The history and the baselines of a night, a constant number of queries whatever the number of series.

    Runs: the accepted ``kind`` runs of ``suite`` on ``ancestors`` (minus ``exclude_run_key``, only those
    dated before ``before``), per pool the newest ``max(history_window, baseline_window)`` (one query).
    The history is read from the newest ``history_window`` of them (series points: numbers, no raw
    samples). A series' baseline is its newest point among the newest ``baseline_window`` runs (of
    ``only_runs`` when given: a rescore uses the night's own baselines); it comes from the history
    read, and only for series of ``keys`` that the history lacks are the older runs read, by series id
    (one more query). Never per series, never raw samples.
    """
    from zlops.store import frames  # pandas on first use only

    runs = frames.window_runs(session, suite, ancestors=ancestors, window=max(history_window, baseline_window, 1),
                              exclude_run_key=exclude_run_key, kind=kind, before=before)
    rank: dict[str, int] = {}
    recent, older, eligible = [], [], set()
    for r in runs:  # newest first within a pool
        i = rank.get(r.pool, 0)
        rank[r.pool] = i + 1
        (recent if i < history_window else older).append(r)
        if i < baseline_window and (only_runs is None or r.run_key in only_runs):
            eligible.add(r.run_key)
    history = frames.runs_frame(session, suite, recent)
    baselines: dict[SeriesKey, BaselinePoint] = {}
    finished: dict[SeriesKey, datetime] = {}
    _newest_points(history, eligible, baselines, finished)
    missing = set(keys) - baselines.keys()
    older = [r for r in older if r.run_key in eligible]
    if missing and older:
        _newest_points(frames.runs_frame(session, suite, older, keys=missing), eligible, baselines, finished)
    newest: dict[str, tuple[datetime, str]] = {}
    for key, point in baselines.items():
        when = finished[key]
        if key[0] not in newest or when > newest[key[0]][0]:
            newest[key[0]] = (when, point.run_key)
    return CompareWindow(history, baselines, finished, {pool: rk for pool, (_, rk) in newest.items()}, tuple(runs))


def _newest_points(frame: Any, eligible: Collection[str], baselines: dict[SeriesKey, BaselinePoint],
                   finished: dict[SeriesKey, datetime]) -> None:
    """Add each series' newest row of ``frame`` among the runs of ``eligible`` (series already in
    ``baselines`` keep theirs: they come from newer runs)."""
    from zlops.store import frames

    if not len(frame):
        return
    frame = frame[frame["run_key"].isin(list(eligible))]
    last = frames.last_of_series(frame)
    columns = [frame[c].to_numpy(dtype=object)[last] for c in ("pool", "case", "metric", "run_key", "sha", "unit")]
    medians = frame["median"].to_numpy(dtype=float)[last].tolist()
    counts = frame["n"].to_numpy()[last].tolist()
    stamps = [t.to_pydatetime() for t in frame["finished_at"].iloc[last]]
    for pool, case, metric, run_key, sha, unit, median, n, when in zip(*columns, medians, counts, stamps,
                                                                      strict=True):
        key = (pool, case, metric)
        if key not in baselines:
            baselines[key] = BaselinePoint(run_key, sha, unit, median, int(n))
            finished[key] = when


def baseline_candidates(session: Session, suite: str, *, shas: Collection[str],
                        exclude_run_key: str | None = None, kind: str = "nightly",
                        window: int = BASELINE_WINDOW, only_runs: Collection[str] | None = None,
                        before: datetime | None = None) -> list[BaselineCandidate]:
    """(pool, case, metric, point, finished_at) of every series: its NEWEST point among the newest
    ``window`` ACCEPTED runs of its pool of ``suite``/``kind`` whose sha is in ``shas``; newest finished
    first. ``exclude_run_key`` (tonight's run) is never its own baseline. A run without ``finished_at``
    is dated by its ``started_at``. ``only_runs`` and ``before`` narrow the candidates to those runs
    and to runs finished before that moment (a rescore: the night's own baselines, as of that night).

    The points are summaries (median and count of the run's pooled samples, from ``series_points``):
    no raw sample is read (:func:`compare_window`, which the compare step calls).
    """
    cw = compare_window(session, suite, ancestors=shas, history_window=window, baseline_window=window,
                        exclude_run_key=exclude_run_key, kind=kind, before=before, only_runs=only_runs)
    out = [(cw.finished[k].timestamp(), (k[0], k[1], k[2], p, cw.finished[k])) for k, p in cw.baselines.items()]
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


def refresh_series_points(session: Session, run_key: str) -> int:
    """REPLACE the run's series points with its stored results summarized again; returns how many.

    The points are what the compare step writes for the run (its ok shards' samples pooled per
    series: :func:`~zlops.store.points.pool_samples`, then median, n and spread), computed by the very
    function the history reads fall back to for a run without points
    (:func:`~zlops.store.frames.points_from_results`), so a refreshed run reads the same either way.
    For a writer that replaced the run's results after its compare step (a rescore): re-recording a
    shard drops its pool's points (:func:`~zlops.store.runs.record_shard`).
    """
    from zlops.store import frames  # pandas on first use only (see zlops.store.store._frames)

    run = require_run(session, run_key)
    pools = session.scalars(select(Shard.pool).where(Shard.run_id == run.id, Shard.status == ShardStatus.OK.value)
                            .distinct()).all()
    points = frames.points_from_results(session, [(run.id, pool) for pool in pools])
    return save_series_points(session, run_key, points.to_dict("records"))


#: How far back :func:`series_histories` looks for a series' points, in multiples of its ``limit`` (runs of
#: the series' pool): a series with fewer points than that (a young one, one with gaps) stops there.
HISTORY_DEPTH = 4


def series_histories(session: Session, suite: str, keys: Collection[SeriesKey], *, limit: int = 60,
                     kind: str = "nightly", include_run_key: str | None = None, before: datetime | None = None,
                     depth: int | None = None) -> dict[SeriesKey, list[HistoryPoint]]:
    """:func:`series_history` of every series of ``keys`` in one read (the report's trend figures): a
    number of queries that does not depend on the number of series, and never all of the history.

    The runs (one query: run ids, keys, shas, dates and pools, no results) are walked newest first per
    pool: the raw results of the ``keys`` are read from the newest ``limit`` runs of their pools, and
    only the series with fewer than ``limit`` points there are looked for further back, in batches
    that double (``limit``, ``2 limit``, ...), never beyond the newest ``depth`` runs of the pool
    (``HISTORY_DEPTH * limit`` by default; ``depth`` >= ``limit``). So a series' points are exactly
    :func:`series_history`'s whenever its newest ``limit`` points lie within the newest ``depth`` runs
    of its pool; with fewer, it gets the points it has there. Queries: one for the runs, then per batch
    (at most ``1 + log2(depth / limit)``) one per :data:`~zlops.store.frames.CHUNK` runs. A series
    without points is absent from the answer.
    """
    from zlops.store.frames import CHUNK, chunks

    if limit < 1:
        raise ValueError(f"series_histories: limit must be >= 1, got {limit}")
    depth = max(limit, HISTORY_DEPTH * limit if depth is None else depth)
    wanted = set(keys)
    if not wanted:
        return {}
    runs: ColumnElement[bool] = and_(Run.kind == kind, Run.accepted.is_(True))
    if include_run_key is not None:
        runs = or_(runs, Run.run_key == include_run_key)
    listed = session.execute(
        select(Run.id, Shard.pool, Run.run_key, Run.sha, Run.started_at)
        .join(Shard, Shard.run_id == Run.id)
        .where(Run.suite == suite, runs, Shard.status == ShardStatus.OK.value,
               Shard.pool.in_(sorted({k[0] for k in wanted})),
               *(() if before is None else (Run.started_at < before,)))
        .distinct())
    meta: dict[int, tuple[str, str, datetime]] = {}
    per_pool: dict[str, list[int]] = {}
    for rid, pool, run_key, sha, started_at in listed:
        meta[rid] = (run_key, sha, started_at)
        per_pool.setdefault(pool, []).append(rid)
    for ids in per_pool.values():  # newest first, as series_history orders them
        ids.sort(key=lambda rid: (meta[rid][2], rid), reverse=True)
        del ids[depth:]
    # (pool, case, metric) -> run id -> (unit, samples pooled in device order)
    found: dict[SeriesKey, dict[int, tuple[str, list[float]]]] = {}
    pending = {k for k in wanted if k[0] in per_pool}
    start, size = 0, limit
    while pending and start < depth:
        pools = {k[0] for k in pending}
        batch = {(rid, pool) for pool in pools for rid in per_pool[pool][start:start + size]}
        cases, metrics = sorted({k[1] for k in pending}), sorted({k[2] for k in pending})
        for chunk in chunks(sorted({rid for rid, _ in batch})):
            query = (select(Shard.run_id, Shard.pool, Result.case, Result.metric, Result.unit, Result.samples)
                     .join(Result, Result.shard_id == Shard.id)
                     .where(Shard.run_id.in_(chunk), Shard.status == ShardStatus.OK.value,
                            Shard.pool.in_(sorted(pools)))
                     .order_by(Shard.run_id, Shard.device))
            if len(cases) <= CHUNK:
                query = query.where(Result.case.in_(cases))
            if len(metrics) <= CHUNK:
                query = query.where(Result.metric.in_(metrics))
            for rid, pool, case, metric, unit, samples in session.connection().execute(query):
                key = (pool, case, metric)
                if key in pending and (rid, pool) in batch:
                    point = found.setdefault(key, {}).setdefault(rid, (unit, []))
                    point[1].extend(float(v) for v in samples)
        start += size
        size = min(2 * size, depth - start)
        pending = {k for k in pending if len(found.get(k, ())) < limit and len(per_pool[k[0]]) > start}
    out: dict[SeriesKey, list[HistoryPoint]] = {}
    for key, points in found.items():
        newest = sorted(points, key=lambda rid: (meta[rid][2], rid), reverse=True)[:limit]
        out[key] = [HistoryPoint(run_key=meta[rid][0], sha=meta[rid][1], when=meta[rid][2], unit=points[rid][0],
                                 samples=tuple(points[rid][1])) for rid in reversed(newest)]
    return out


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
        bulk_insert(session.connection(), SeriesPointRow.__table__, values)
    return len(rows)
