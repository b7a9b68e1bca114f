"""What the series page and the cross-backend page show, as plain values read from the store (no drawing).

:func:`series_view`: one series (suite, pool, case, metric) over its last N accepted nights: each
night's median, n and spread (the columnar history read, :meth:`Store.history_frame`), its raw samples
pooled over the pool's devices (:func:`zlops.store.pages.series_samples`), the compare row the judge
stored for it (verdict, note, :class:`~zlops.model.Figures` with the A/B runs when an A/B ran) and the
pool's telemetry that night (median clock, max temperature: the report's trend strip,
:func:`zlops.report.night_figures.telemetry_by_pool`), the open alert of the series (its reference and band),
and the change points: the nights whose confirmed verdict changed the level, and the first bad commit a
flagged night's change-point note named.

:func:`cross_view`: the same (case, metric) in every pool that measured it, each pool's last N nights
with the change the judge stored for each (tonight against that pool's own reference:
``Figures.change_pct``), so "slower everywhere" reads apart from "slower on one backend".

A constant number of queries per page, whatever N. Nothing is recomputed: every number comes from the
store as the report and Slack printed it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from zlops.alerts.lifecycle import OPEN_STATES, Alert
from zlops.model import Comparison, Figures, Verdict
from zlops.store import Store

#: Most nights a page reads.
MAX_NIGHTS = 365
_CHANGE_POINT = re.compile(r"(change point: [^;]*? at ([0-9a-f]{7,40})\b[^;]*)")


@dataclass(frozen=True)
class Night:
    """One accepted night of one series in one pool."""

    run_key: str
    sha: str
    when: datetime
    unit: str
    median: float
    n: int
    spread_pct: float | None
    samples: tuple[float, ...]        # raw, pooled over the pool's devices
    comparison: Comparison | None     # what the judge stored that night (None: not compared)
    clock_mhz: float | None
    temp_c: float | None

    @property
    def verdict(self) -> Verdict | None:
        return None if self.comparison is None else self.comparison.verdict

    @property
    def figures(self) -> Figures | None:
        return None if self.comparison is None else self.comparison.figures

    @property
    def change_pct(self) -> float | None:
        """The change the judge stored for this night, against the reference it names."""
        return None if self.comparison is None else self.comparison.judgement.change_pct


@dataclass(frozen=True)
class ChangeMark:
    """A change point drawn on the trend: a confirmed level change, or the first bad commit a note named."""

    run_key: str
    sha: str
    kind: str      # "level" (a confirmed regression / severe / improvement) or "first bad" (the note's)
    text: str


@dataclass(frozen=True)
class SeriesView:
    suite: str
    pool: str
    case: str
    metric: str
    backend: str | None
    nights: tuple[Night, ...]       # oldest first
    alert: Alert | None             # the open alert of the series, if any
    marks: tuple[ChangeMark, ...]

    @property
    def unit(self) -> str:
        return self.nights[-1].unit if self.nights else (self.alert.unit if self.alert else "")


@dataclass(frozen=True)
class PoolColumn:
    pool: str
    backend: str | None
    nights: tuple[Night, ...]       # oldest first

    @property
    def latest(self) -> Night | None:
        return self.nights[-1] if self.nights else None


@dataclass(frozen=True)
class CrossView:
    suite: str
    case: str
    metric: str
    pools: tuple[PoolColumn, ...]


def _nights(store: Store, suite: str, case: str, metric: str, *, pools: Sequence[str] | None,
            nights: int) -> tuple[dict[str, list[Night]], dict[str, str]]:
    """Per pool, its last ``nights`` accepted nights of (case, metric), oldest first; and each pool's backend."""
    from zlops.report.night_figures import telemetry_by_pool
    from zlops.store import pages

    if not 1 <= nights <= MAX_NIGHTS:
        raise ValueError(f"nights: expected 1..{MAX_NIGHTS}, got {nights}")
    accepted = store.accepted_runs(suite)
    frame = store.history_frame(suite, ancestors={r.sha for r in accepted}, window=nights, pools=pools,
                                only=[(case, metric)])
    if not len(frame):
        return {}, {}
    run_keys = list(dict.fromkeys(frame["run_key"].tolist()))
    samples = store.read(pages.series_samples, run_keys, case, metric, pools=pools)
    rows = store.read(pages.series_comparisons, run_keys, case, metric, pools=pools)
    extras = store.read(pages.run_telemetry, run_keys)
    backends = store.read(pages.pool_backends, run_keys)
    telemetry = {key: telemetry_by_pool(per_run) for key, per_run in extras.items()}
    out: dict[str, list[Night]] = {}
    for rec in frame.itertuples(index=False):
        clock, temp = telemetry.get(rec.run_key, {}).get(rec.pool, (None, None))
        unit_samples = samples.get((rec.run_key, rec.pool))
        spread = None if rec.spread_pct != rec.spread_pct else float(rec.spread_pct)  # NaN: unknown
        out.setdefault(rec.pool, []).append(Night(
            run_key=rec.run_key, sha=rec.sha, when=rec.finished_at.to_pydatetime(), unit=rec.unit,
            median=float(rec.median), n=int(rec.n), spread_pct=spread,
            samples=unit_samples[1] if unit_samples else (), comparison=rows.get((rec.run_key, rec.pool)),
            clock_mhz=clock, temp_c=temp))
    return out, backends


def change_marks(nights: Sequence[Night]) -> list[ChangeMark]:
    """The nights whose confirmed verdict changed the series' level, and the first bad commit that a
    flagged night's change-point note named (drawn at that commit's night when it is in the window)."""
    marks: list[ChangeMark] = []
    by_sha = {n.sha: n for n in nights}
    for n in nights:
        if n.verdict is not None and n.verdict.changes_level:
            marks.append(ChangeMark(n.run_key, n.sha, "level", f"confirmed {n.verdict.label} at {n.sha[:7]}"))
        found = _CHANGE_POINT.search(n.comparison.judgement.note if n.comparison else "")
        if found:
            at = next((m for sha, m in by_sha.items() if sha.startswith(found.group(2))), None)
            if at is not None:
                marks.append(ChangeMark(at.run_key, at.sha, "first bad", found.group(1)))
    return marks


def series_view(store: Store, suite: str, pool: str, case: str, metric: str, *, nights: int = 30) -> SeriesView:
    """One series over its last ``nights`` accepted nights (see the module docstring)."""
    per_pool, backends = _nights(store, suite, case, metric, pools=[pool], nights=nights)
    rows = tuple(per_pool.get(pool, ()))
    alert = next((a for a in store.alerts(suite=suite, states=OPEN_STATES, limit=None)
                  if (a.pool, a.case, a.metric) == (pool, case, metric)), None)
    return SeriesView(suite, pool, case, metric, backends.get(pool), rows, alert, tuple(change_marks(rows)))


def cross_view(store: Store, suite: str, case: str, metric: str, *, nights: int = 14,
               pools: Sequence[str] | None = None) -> CrossView:
    """(case, metric) in every pool of ``suite`` that measured it (or ``pools``), side by side."""
    from zlops.store import pages

    names = list(pools) if pools else store.read(pages.suite_pools, suite, case, metric)
    per_pool, backends = _nights(store, suite, case, metric, pools=names or None, nights=nights)
    return CrossView(suite, case, metric, tuple(PoolColumn(p, backends.get(p), tuple(per_pool.get(p, ())))
                                                 for p in names))
