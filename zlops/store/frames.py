"""Columnar series reads for the judge: a suite's history, verdicts and baselines in a few queries.

Every read here issues a number of queries that does not depend on the number of series (run-id IN
lists are cut into chunks of :data:`CHUNK`, so it grows only with the window), and none parses raw
samples except :func:`run_samples`, which loads ONE run (a trend's whiskers). The rows come from ``series_points`` (one per
series and run, pooled over the pool's devices, written by the compare step and by migration 0004): numbers
and a ``series`` id only, so the strings of a series (pool, case, metric, unit) are read once per read,
not once a night, and the frame's string columns share those objects.
A run in the window that has no points yet (stored before its compare step, or a pool re-recorded since)
is summarized from its raw results instead, with the same functions ingest uses, so the answer never
depends on whether the compare step already ran.

Which runs count: the accepted runs of the suite and ``kind`` whose sha is in ``ancestors``, minus
``exclude_run_key``, dated by ``finished_at`` (``started_at`` when unset); per pool (a run is in a pool
when one of its shards there ended ok) the newest ``window`` of them. The caller owns the transaction.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from zlops.model import ShardStatus
from zlops.store.models import ComparisonRow, Result, Run, SeriesPointRow, SeriesRow, Shard
from zlops.store.points import SeriesKey, pool_samples, spreads
from zlops.store.runs import require_run

#: Ids per IN (...) list: far below SQLite's bound-parameter limit (32766 since 3.32, 999 before).
CHUNK = 500

HISTORY_COLUMNS = ["pool", "case", "metric", "run_key", "sha", "finished_at", "unit", "lower_is_better",
                   "median", "n", "spread_pct"]
VERDICT_COLUMNS = ["run_key", "pool", "case", "metric", "verdict"]
BASELINE_COLUMNS = ["pool", "run_key", "sha", "finished_at"]
_POINT_COLUMNS = ["run_id", "pool", "case", "metric", "unit", "lower_is_better", "median", "n", "spread_pct"]


def chunks(values: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


@dataclass(frozen=True)
class WindowRun:
    """One accepted run in one pool's window."""

    run_id: int
    pool: str
    run_key: str
    sha: str
    finished_at: datetime


def window_runs(session: Session, suite: str, *, ancestors: Collection[str], window: int,
                exclude_run_key: str | None = None, pools: Collection[str] | None = None,
                kind: str = "nightly", before: datetime | None = None) -> list[WindowRun]:
    """The newest ``window`` accepted ancestor runs of each pool, newest first within a pool (ONE query).

    ``before``: only runs dated (finished, else started) before it, the window counted among those (a
    rescore sees the nights its night saw, not fewer because later nights came).

    The accepted runs of the suite are listed with their pools and filtered by sha here: ``ancestors``
    is typically a first-parent history of thousands of commits, too long for a portable IN list, while
    a suite has one accepted run a night (a few hundred rows a year).
    """
    if window < 1:
        raise ValueError(f"window: expected >= 1, got {window}")
    wanted = set(ancestors)
    if not wanted:
        return []
    rows = session.execute(
        select(Run.id, Shard.pool, Run.run_key, Run.sha, Run.finished_at, Run.started_at)
        .join(Shard, Shard.run_id == Run.id)
        .where(Run.suite == suite, Run.kind == kind, Run.accepted.is_(True),
               Shard.status == ShardStatus.OK.value)
        .distinct())
    per_pool: dict[str, list[WindowRun]] = {}
    for rid, pool, run_key, sha, finished, started in rows:
        when = finished or started
        if (sha in wanted and run_key != exclude_run_key and (pools is None or pool in pools)
                and (before is None or when < before)):
            per_pool.setdefault(pool, []).append(WindowRun(rid, pool, run_key, sha, when))
    out: list[WindowRun] = []
    for pool in sorted(per_pool):
        runs = sorted(per_pool[pool], key=lambda r: (r.finished_at, r.run_id), reverse=True)
        out.extend(runs[:window])
    return out


def _raw_rows(session: Session, query: Any) -> list[tuple[Any, ...]]:
    """The rows of ``query`` as plain DBAPI tuples: executed through SQLAlchemy (events, logging) but
    fetched from the driver's cursor, skipping the Row objects (a third of the time for 10^5 rows)."""
    conn = session.connection()
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args: Any = tuple(params[name] for name in compiled.positiontup) if compiled.positional else params
    result = conn.exec_driver_sql(str(compiled), args)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=_DTYPES.get(c, object)) for c in columns})


_DTYPES = {"median": "float64", "spread_pct": "float64", "n": "int64", "lower_is_better": "bool",
           "finished_at": "datetime64[us, UTC]", "run_id": "int64"}


def _series_meta(session: Session, suite: str, pools: Sequence[str], only: Collection[tuple[str, str]] | None = None,
                 ) -> dict[int, tuple[str, str, str, str, bool]]:
    c = SeriesRow.__table__.c
    query = select(c.id, c.pool, c.case, c.metric, c.unit, c.lower_is_better).where(c.suite == suite)
    if len(pools) <= CHUNK:
        query = query.where(c.pool.in_(pools))
    if only is not None and len(only) <= CHUNK:
        query = query.where(c.case.in_(sorted({case for case, _ in only})))
    wanted = None if only is None else set(only)
    return {row[0]: (row[1], row[2], row[3], row[4], bool(row[5])) for row in _raw_rows(session, query)
            if wanted is None or (row[2], row[3]) in wanted}


def _point_frame(session: Session, suite: str, runs: Sequence[WindowRun],
                 keys: Collection[SeriesKey] | None = None,
                 only: Collection[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Columns :data:`_POINT_COLUMNS` of the (run, pool) pairs of ``runs``; a pair without stored points
    is summarized from its raw results (see the module docstring). ``keys``: only those series;
    ``only``: only these (case, metric) in any pool (a page about one operator). Filtered, the series'
    ids go in the query when they are few."""
    run_ids = sorted({r.run_id for r in runs})
    pools = sorted({r.pool for r in runs})
    series = None if keys is None else set(keys)
    pairs = set(only) if only is not None else (None if series is None else {k[1:] for k in series})
    if only is not None and series is not None:
        pairs &= {k[1:] for k in series}
    meta = _series_meta(session, suite, pools, pairs)
    if series is not None:
        meta = {i: m for i, m in meta.items() if m[:3] in series}
    filtered = pairs is not None
    rows: list[tuple[Any, ...]] = []
    c = SeriesPointRow.__table__.c
    narrow = filtered and len(meta) <= CHUNK  # a few series (the flagged ones, a page): their ids in the query
    for chunk in chunks(run_ids) if not (filtered and not meta) else ():
        query = select(c.run_id, c.series_id, c.median, c.n, c.spread_pct).where(c.run_id.in_(chunk))
        rows.extend(_raw_rows(session, query.where(c.series_id.in_(sorted(meta))) if narrow else query))
    if rows:
        # one C-level conversion (None -> NaN); run and series ids and n are exact in float64
        arr = np.array(rows, dtype=float)
        run_col, sid_col = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
        ids = np.array(sorted(meta), dtype=np.int64)  # slot k holds series ids[k]
        by_name = sorted(range(len(ids)), key=lambda k: meta[int(ids[k])])
        names = [meta[int(ids[k])][:3] for k in by_name]
        # dense rank of (pool, case, metric): a series whose unit changed keeps one place, ordered by time
        rank_of = np.full(len(ids) + 1, -1, dtype=np.int64)
        rank_of[by_name] = np.cumsum([0] + [a != b for a, b in itertools.pairwise(names)], dtype=np.int64)[:len(ids)]
        table = np.array([meta[int(i)] for i in ids] + [("", "", "", "", False)], dtype=object)
        slot = np.searchsorted(ids, sid_col)
        known = (slot < len(ids)) & (ids[np.minimum(slot, max(len(ids) - 1, 0))] == sid_col) if len(ids) else \
            np.zeros(len(sid_col), dtype=bool)
        slot = np.where(known, slot, len(ids))  # an unknown id takes the blank last row; dropped below
        # each pool keeps the runs of its own window: (run id, pool) pairs as integers, no string compares
        pool_no = {pool: k for k, pool in enumerate(pools)}
        width = len(pools) + 1
        slot_pool = np.array([pool_no.get(meta[int(i)][0], len(pools)) for i in ids] + [len(pools)], dtype=np.int64)
        pair = run_col * width + slot_pool[slot]
        allowed = np.array(sorted({r.run_id * width + pool_no[r.pool] for r in runs}), dtype=np.int64)
        keep = known & np.isin(pair, allowed)
        slot, arr, pair = slot[keep], arr[keep], pair[keep]
        picked, pos = table[slot], rank_of[slot]
        points = pd.DataFrame({
            "run_id": run_col[keep], "pool": picked[:, 0], "case": picked[:, 1], "metric": picked[:, 2],
            "unit": picked[:, 3], "lower_is_better": picked[:, 4].astype(bool), "median": arr[:, 2],
            "n": arr[:, 3].astype(np.int64), "spread_pct": arr[:, 4], "_rank": pos})
        present = {(int(v) // width, pools[int(v) % width]) for v in np.unique(pair)}
    else:
        points = _empty(_POINT_COLUMNS)
        present = set()
    # a pool without points gets them from the raw results (usually none: the compare step writes them)
    missing = sorted({(r.run_id, r.pool) for r in runs} - present)
    if missing and filtered:  # a series the run has no point of: only runs without any point
        has_points = select(c.run_id).where(c.run_id == Run.id).exists()  # an index seek per run, not a scan
        with_points = {rid for (rid,) in _raw_rows(session, select(Run.id).where(
            Run.id.in_(sorted({rid for rid, _ in missing})), has_points))}
        missing = [(rid, pool) for rid, pool in missing if rid not in with_points]
    if missing:
        fallback = points_from_results(session, missing, series, pairs)
        if len(fallback):
            points = pd.concat([points, fallback], ignore_index=True) if len(points) else fallback
    return points


def points_from_results(session: Session, pairs: Sequence[tuple[int, str]],
                        series: Collection[SeriesKey] | None = None,
                        only: Collection[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Columns :data:`_POINT_COLUMNS` of the (run id, pool) ``pairs`` summarized from their ok shards' raw
    results (samples pooled per series over the pool's devices, as the compare step pools them): the
    history's fallback for a run without points, and what :func:`zlops.store.series.refresh_series_points`
    stores. ``series`` / ``only``: as in :func:`_point_frame`."""
    wanted = set(pairs)
    cases = None if only is None else sorted({case for case, _ in only})
    records: list[dict[str, Any]] = []
    for chunk in chunks(sorted({rid for rid, _ in pairs})):
        query = (select(Shard.run_id, Shard.pool, Shard.device, Result.case, Result.metric, Result.unit,
                        Result.lower_is_better, Result.samples)
                 .join(Result, Result.shard_id == Shard.id)
                 .where(Shard.run_id.in_(chunk), Shard.status == ShardStatus.OK.value)
                 .order_by(Shard.run_id, Shard.pool, Shard.device, Result.id))
        if cases is not None and len(cases) <= CHUNK:
            query = query.where(Result.case.in_(cases))
        rows = session.connection().execute(query)
        by_run: dict[int, list[tuple[str, int, str, str, str, bool, Sequence[float]]]] = {}
        for rid, *row in rows:
            if ((rid, row[0]) in wanted and (series is None or (row[0], row[2], row[3]) in series)
                    and (only is None or (row[2], row[3]) in only)):
                by_run.setdefault(rid, []).append(tuple(row))  # type: ignore[arg-type]
        for rid, items in by_run.items():
            pooled = pool_samples(items)
            keys = sorted(pooled)
            for key, spread in zip(keys, spreads([pooled[k][2] for k in keys]), strict=True):
                unit, lower, samples = pooled[key]
                records.append({"run_id": rid, "pool": key[0], "case": key[1], "metric": key[2], "unit": unit,
                                "lower_is_better": lower, "median": float(statistics.median(samples)),
                                "n": len(samples), "spread_pct": spread})
    if not records:
        return _empty(_POINT_COLUMNS)
    return pd.DataFrame.from_records(records, columns=_POINT_COLUMNS)


def history_frame(session: Session, suite: str, *, ancestors: Collection[str], window: int,
                  exclude_run_key: str | None = None, pools: Collection[str] | None = None,
                  kind: str = "nightly", before: datetime | None = None,
                  only: Collection[tuple[str, str]] | None = None) -> pd.DataFrame:
    """The suite's history, one row per series and run, oldest first per series.

    ``only``: just these (case, metric) series (a page about one operator), read by their series ids.

    Columns :data:`HISTORY_COLUMNS`: ``pool, case, metric, run_key, sha, finished_at`` (UTC),
    ``unit, lower_is_better, median, n, spread_pct`` (NaN where the spread is unknown); the rows of a
    series are consecutive, sorted by (pool, case, metric, finished_at). Runs: the module docstring.
    """
    runs = window_runs(session, suite, ancestors=ancestors, window=window, exclude_run_key=exclude_run_key,
                       pools=pools, kind=kind, before=before)
    return runs_frame(session, suite, runs, only=only)


def runs_frame(session: Session, suite: str, runs: Sequence[WindowRun],
               keys: Collection[SeriesKey] | None = None, *,
               only: Collection[tuple[str, str]] | None = None) -> pd.DataFrame:
    """:func:`history_frame`'s rows of exactly ``runs`` (each in its own pool, from :func:`window_runs`),
    only the series of ``keys`` (or the (case, metric) of ``only``) when given. Queries: one for the
    series, one per :data:`CHUNK` runs, one or two more when some (run, pool) has no stored points."""
    if not runs:
        return _empty(HISTORY_COLUMNS)
    points = _point_frame(session, suite, runs, keys, only)
    if not len(points):
        return _empty(HISTORY_COLUMNS)
    by_run = {r.run_id: r for r in runs}  # run_key, sha and date are the run's, whatever the pool
    run_ids = pd.Index(sorted(by_run))
    at = run_ids.get_indexer(points["run_id"].to_numpy())
    ordered = [by_run[i] for i in run_ids]
    frame = points.reset_index(drop=True)
    frame["run_key"] = np.array([r.run_key for r in ordered], dtype=object)[at]
    frame["sha"] = np.array([r.sha for r in ordered], dtype=object)[at]
    frame["finished_at"] = pd.DatetimeIndex(pd.to_datetime([r.finished_at for r in ordered], utc=True))[at]
    if "_rank" in frame and not frame["_rank"].isna().any():  # all from stored points: sort numbers
        when = np.empty(len(ordered), dtype=np.int64)  # each run's place in time (finished_at, run id)
        when[sorted(range(len(ordered)), key=lambda i: (ordered[i].finished_at, ordered[i].run_id))] = \
            np.arange(len(ordered))
        order = np.lexsort((when[at], frame["_rank"].to_numpy()))
        frame = frame.iloc[order].reset_index(drop=True)
    else:
        frame = frame.sort_values(["pool", "case", "metric", "finished_at", "run_id"], kind="stable",
                                  ignore_index=True)
    frame["n"] = frame["n"].astype("int64")
    frame["median"] = frame["median"].astype("float64")
    frame["spread_pct"] = frame["spread_pct"].astype("float64")
    frame["lower_is_better"] = frame["lower_is_better"].astype(bool)
    return frame[HISTORY_COLUMNS]


def baseline_frame(session: Session, suite: str, *, ancestors: Collection[str], window: int,
                   exclude_run_key: str | None = None, pools: Collection[str] | None = None,
                   kind: str = "nightly") -> pd.DataFrame:
    """Per pool, its newest accepted ancestor run within the window: columns :data:`BASELINE_COLUMNS`.

    The baseline run of a pool; :func:`run_samples` loads its raw samples. One query.
    """
    newest: dict[str, WindowRun] = {}
    for r in window_runs(session, suite, ancestors=ancestors, window=window, exclude_run_key=exclude_run_key,
                         pools=pools, kind=kind):
        newest.setdefault(r.pool, r)  # window_runs lists each pool newest first
    if not newest:
        return _empty(BASELINE_COLUMNS)
    runs = [newest[p] for p in sorted(newest)]
    return pd.DataFrame({"pool": [r.pool for r in runs], "run_key": [r.run_key for r in runs],
                         "sha": [r.sha for r in runs],
                         "finished_at": pd.to_datetime([r.finished_at for r in runs], utc=True)})


def run_samples(session: Session, run_key: str, pools: Collection[str] | None = None,
                keys: Collection[SeriesKey] | None = None) -> dict[SeriesKey, tuple[float, ...]]:
    """The raw samples of ONE run's series, pooled over each pool's ok shards (device order, later
    devices converted to the first one's unit, as ``compare.pool_results``). ``keys``: only those
    series (their cases in the query when they are few). Two queries."""
    run = require_run(session, run_key)
    query = (select(Shard.pool, Shard.device, Result.case, Result.metric, Result.unit, Result.lower_is_better,
                    Result.samples)
             .join(Result, Result.shard_id == Shard.id)
             .where(Shard.run_id == run.id, Shard.status == ShardStatus.OK.value)
             .order_by(Shard.pool, Shard.device, Result.id))
    if pools is not None:
        query = query.where(Shard.pool.in_(sorted(pools)))
    wanted = None if keys is None else set(keys)
    if wanted is not None:
        cases = sorted({k[1] for k in wanted})
        if not cases:
            return {}
        if len(cases) <= CHUNK:
            query = query.where(Result.case.in_(cases))
    rows = session.connection().execute(query)
    if wanted is not None:
        rows = (r for r in rows if (r[0], r[2], r[3]) in wanted)  # type: ignore[assignment]
    pooled = pool_samples(rows)  # type: ignore[arg-type]
    return {key: tuple(samples) for key, (_unit, _, samples) in pooled.items()}


def verdict_frame(session: Session, run_keys: Sequence[str], *,
                  verdicts: Collection[str] | None = None) -> pd.DataFrame:
    """What the compare tables of ``run_keys`` judged: columns :data:`VERDICT_COLUMNS`.

    ``verdicts`` keeps only rows with those verdict values (e.g. the level changes), which keeps the
    frame small; rows are in run_keys order, then by series. One query per :data:`CHUNK` run keys.
    """
    keys = list(dict.fromkeys(run_keys))
    frames: list[pd.DataFrame] = []
    wanted = None if verdicts is None else sorted({str(getattr(v, "value", v)) for v in verdicts})
    if wanted is not None and not wanted:
        return _empty(VERDICT_COLUMNS)
    for chunk in chunks(keys):
        query = (select(Run.run_key, ComparisonRow.pool, ComparisonRow.case, ComparisonRow.metric,
                        ComparisonRow.verdict)
                 .join(ComparisonRow, ComparisonRow.run_id == Run.id)
                 .where(Run.run_key.in_(chunk)))
        if wanted is not None:
            query = query.where(ComparisonRow.verdict.in_(wanted))
        rows = _raw_rows(session, query)
        if rows:
            frames.append(pd.DataFrame(rows, columns=VERDICT_COLUMNS))
    if not frames:
        return _empty(VERDICT_COLUMNS)
    frame = pd.concat(frames, ignore_index=True)
    order = {k: i for i, k in enumerate(keys)}
    frame["_o"] = frame["run_key"].map(order)
    return frame.sort_values(["_o", "pool", "case", "metric"], kind="stable", ignore_index=True)[VERDICT_COLUMNS]


def series_starts(frame: pd.DataFrame) -> np.ndarray:
    """Where each series' rows begin in a :func:`history_frame` (its rows are consecutive), plus ``len(frame)``."""
    if not len(frame):
        return np.zeros(1, dtype=np.int64)
    pools, cases, metrics = (frame[c].to_numpy(dtype=object) for c in ("pool", "case", "metric"))
    changed = np.ones(len(frame), dtype=bool)
    changed[1:] = (pools[1:] != pools[:-1]) | (cases[1:] != cases[:-1]) | (metrics[1:] != metrics[:-1])
    return np.append(np.flatnonzero(changed), len(frame))


def last_of_series(frame: pd.DataFrame) -> np.ndarray:
    """Positions of the last (newest) row of every series of a :func:`history_frame`."""
    return series_starts(frame)[1:] - 1


def newest_per_series(history: pd.DataFrame) -> pd.DataFrame:
    """The last (newest) row of every series of a :func:`history_frame`."""
    if not len(history):
        return history
    return history.groupby(["pool", "case", "metric"], sort=False, observed=True).tail(1)
