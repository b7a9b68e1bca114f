"""Summary figures of stored samples: what ingest writes beside the raw samples, so reads need not parse them.

- :func:`spread_pct` / :func:`spreads`: the robust in-run spread of a sample, 1.4826 * MAD of the log
  samples in percent, exactly :func:`zlops.stats.noise.robust_relative_spread` with q = 0.5 (Hampel
  1974), vectorized over many samples of equal size (a suite's cases usually share a round count).
  None for fewer than two samples or any sample <= 0 (a log needs positive values).
- :func:`pool_device_results`: the samples of one run's series pooled over the pool's devices exactly
  as :func:`zlops.judge.compare.pool_results` pools them (device order; later devices converted to the first
  device's unit, which names the series' unit and direction).
- :func:`point_rows`: rows of the ``series_points`` table from pooled results or plain rows.

Pure functions of plain values; the store's writers and migration ``0004`` call them.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, select

from zlops import metrics
from zlops.model import CaseResult

#: Phi^-1(0.75): 1 / this = 1.4826..., the MAD's scale to a normal sigma (scipy.special.ndtri(0.75)).
_NDTRI_075 = 0.6744897501960817

SeriesKey = tuple[str, str, str]  # (pool, case, metric)
#: A row of the ``series`` table, as its identity: (pool, case, metric, unit, lower_is_better) in a suite.
SeriesIdentity = tuple[str, str, str, str, bool]


def spread_pct(samples: Sequence[float]) -> float | None:
    """1.4826 * MAD of ``log(samples)`` in percent; None for fewer than 2 samples or any value <= 0."""
    return spreads([samples])[0]


def spreads(samples: Sequence[Sequence[float]]) -> list[float | None]:
    """:func:`spread_pct` of each sample, computed in one numpy pass per distinct sample size."""
    import numpy as np  # here, not at the top: `zlops runs` and `zlops --help` load the store without it
    out: list[float | None] = [None] * len(samples)
    by_size: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        if len(s) >= 2:
            by_size[len(s)].append(i)
    for idx in by_size.values():
        arr = np.array([samples[i] for i in idx], dtype=float)
        positive = np.all(arr > 0, axis=1) & np.all(np.isfinite(arr), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(np.where(positive[:, None], arr, 1.0))
        dev = np.abs(logs - np.median(logs, axis=1, keepdims=True))
        values = np.median(dev, axis=1) / _NDTRI_075 * 100.0
        for i, ok, v in zip(idx, positive.tolist(), values.tolist(), strict=True):
            out[i] = v if ok else None
    return out


def pool_device_results(rows: Iterable[tuple[str, int, CaseResult]]) -> dict[SeriesKey, CaseResult]:
    """(pool, device, result) rows pooled per series, as :func:`zlops.judge.compare.pool_results` does."""
    params: dict[SeriesKey, Mapping[str, Any]] = {}

    def flat() -> Iterator[tuple[str, int, str, str, str, bool, Sequence[float]]]:
        for pool, device, r in rows:
            params.setdefault((pool, r.case, r.metric), r.params)
            yield pool, device, r.case, r.metric, r.unit, r.lower_is_better, r.samples

    pooled = pool_samples(flat())
    return {key: CaseResult(key[1], key[2], unit, lower, tuple(samples), dict(params[key]))
            for key, (unit, lower, samples) in pooled.items()}


def pool_samples(rows: Iterable[tuple[str, int, str, str, str, bool, Sequence[float]]],
                 ) -> dict[SeriesKey, tuple[str, bool, list[float]]]:
    """(pool, device, case, metric, unit, lower_is_better, samples) rows pooled per series into
    (unit, lower_is_better, samples): devices in order, the first device's unit and direction win and
    the other devices' samples are converted to that unit (``compare.pool_results``' rule)."""
    grouped: dict[SeriesKey, list[tuple[int, str, bool, Sequence[float]]]] = defaultdict(list)
    for pool, device, case, metric, unit, lower, samples in rows:
        grouped[(pool, case, metric)].append((device, unit, bool(lower), samples))
    out: dict[SeriesKey, tuple[str, bool, list[float]]] = {}
    for key, items in grouped.items():
        if len(items) > 1:
            items.sort(key=lambda t: t[0])
        _, unit, lower, _ = items[0]
        pooled: list[float] = []
        for _, u, _, samples in items:
            if u == unit:
                pooled.extend(float(v) for v in samples)
            else:
                pooled.extend(metrics.convert(float(v), u, unit) for v in samples)
        out[key] = (unit, lower, pooled)
    return out


@dataclass(frozen=True)
class SeriesPoint:
    """One series of one run, pooled over the pool's devices: the summary the history reads use."""

    pool: str
    case: str
    metric: str
    unit: str
    lower_is_better: bool
    median: float
    n: int
    spread_pct: float | None

    def __post_init__(self) -> None:
        for name in ("pool", "case", "metric"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"SeriesPoint.{name}: expected a non-empty string, got {getattr(self, name)!r}")
        if not (isinstance(self.median, (int, float)) and math.isfinite(self.median)):
            raise ValueError(f"SeriesPoint.median: expected a finite number, got {self.median!r}")
        if not (isinstance(self.n, int) and self.n >= 1):
            raise ValueError(f"SeriesPoint.n: expected an int >= 1, got {self.n!r}")
        if self.spread_pct is not None and not (math.isfinite(self.spread_pct) and self.spread_pct >= 0):
            raise ValueError(f"SeriesPoint.spread_pct: expected a finite number >= 0 or None, got {self.spread_pct!r}")


_POINT_FIELDS = ("pool", "case", "metric", "unit", "lower_is_better", "median", "n", "spread_pct")


def series_points(pooled: Mapping[SeriesKey, CaseResult]) -> list[SeriesPoint]:
    """The summary point of every pooled series (median, n, spread of the pooled samples)."""
    keys = sorted(pooled)
    spread = spreads([pooled[k].samples for k in keys])
    return [SeriesPoint(pool, case, metric, pooled[(pool, case, metric)].unit,
                        bool(pooled[(pool, case, metric)].lower_is_better),
                        float(statistics.median(pooled[(pool, case, metric)].samples)),
                        len(pooled[(pool, case, metric)].samples), s)
            for (pool, case, metric), s in zip(keys, spread, strict=True)]


def point_rows(points: Mapping[SeriesKey, CaseResult] | Iterable[SeriesPoint | Mapping[str, Any]],
               ) -> list[dict[str, Any]]:
    """``series_points`` rows (without ``run_id``) from :func:`zlops.judge.compare.pool_results`' output, or
    from :class:`SeriesPoint` values or plain mappings with the fields of :class:`SeriesPoint`
    (a mapping without ``spread_pct`` stores NULL). A repeated series is an error."""
    if isinstance(points, Mapping):
        values: Iterable[SeriesPoint | Mapping[str, Any]] = series_points(points)
    else:
        values = points
    rows: list[dict[str, Any]] = []
    seen: set[SeriesKey] = set()
    for p in values:
        if isinstance(p, SeriesPoint):
            point = p
        else:
            missing = [f for f in _POINT_FIELDS if f not in p and f != "spread_pct"]
            if missing:
                raise ValueError(f"series point {dict(p)!r} lacks {', '.join(missing)}")
            spread = p.get("spread_pct")
            point = SeriesPoint(str(p["pool"]), str(p["case"]), str(p["metric"]), str(p["unit"]),
                                bool(p["lower_is_better"]), float(p["median"]), int(p["n"]),
                                None if spread is None or (isinstance(spread, float) and math.isnan(spread))
                                else float(spread))
        key = (point.pool, point.case, point.metric)
        if key in seen:
            raise ValueError(f"series point {key} given twice")
        seen.add(key)
        rows.append({f: getattr(point, f) for f in _POINT_FIELDS})
    return rows


def ensure_series(conn: Connection, table: Table, suite: str,
                  keys: Iterable[SeriesIdentity]) -> dict[SeriesIdentity, int]:
    """The ``series`` ids of ``keys`` in ``suite``, inserting the new ones (concurrent writers: ON
    CONFLICT DO NOTHING, then read back). Two queries, three when some series are new; ``table`` is the
    ``series`` table (the model's, or a migration's lightweight copy)."""
    wanted = set(keys)
    if not wanted:
        return {}
    pools = sorted({k[0] for k in wanted})
    c = table.c

    def known() -> dict[SeriesIdentity, int]:
        rows = conn.execute(select(c.id, c.pool, c.case, c.metric, c.unit, c.lower_is_better)
                            .where(c.suite == suite, c.pool.in_(pools)))
        return {(p, cs, m, u, bool(lib)): i for i, p, cs, m, u, lib in rows}

    ids = known()
    missing = sorted(wanted - ids.keys())
    if missing:
        from sqlalchemy.dialects import postgresql, sqlite

        insert = postgresql.insert(table) if conn.dialect.name == "postgresql" else sqlite.insert(table)
        conn.execute(insert.on_conflict_do_nothing(),
                     [{"suite": suite, "pool": p, "case": cs, "metric": m, "unit": u, "lower_is_better": lib}
                      for p, cs, m, u, lib in missing])
        ids = known()
    return {k: ids[k] for k in wanted}


def point_values(run_id: int, suite: str, conn: Connection, series_table: Table,
                 rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``series_points`` rows of :func:`point_rows` output for one run (series ids resolved/created)."""
    ids = ensure_series(conn, series_table, suite,
                        ((r["pool"], r["case"], r["metric"], r["unit"], bool(r["lower_is_better"])) for r in rows))
    return [{"run_id": run_id, "median": r["median"], "n": r["n"], "spread_pct": r["spread_pct"],
             "series_id": ids[(r["pool"], r["case"], r["metric"], r["unit"], bool(r["lower_is_better"]))]}
            for r in rows]
