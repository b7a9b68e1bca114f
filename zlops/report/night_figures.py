"""The figures of one run, drawn into ``<run_dir>/plots/`` by the report step.

Gathers what each figure needs from the store and the shard artifacts, then calls the pure drawing
functions of :mod:`zlops.report.plots` and :mod:`zlops.report.figures`:

- a trend per flagged, suspect or improved series (and per series with an open alert, with the
  alert's reference drawn in), with its baseline band and a telemetry strip: the median clock
  and the max temperature of the pool's shards on each night (from the shard telemetry summaries
  the store keeps); the histories of all the trends are one windowed read
  (:meth:`~zlops.store.Store.series_histories`) and their nights' telemetry another, never a query per series;
- the paired-ratio chart of the run; the phase breakdown (simpler-style results); strong scaling
  (collectives results with a device count ``p``); a telemetry timeline per shard (its telemetry.csv).

A figure that cannot be drawn (a unit that does not convert, an unwritable folder) is logged and
skipped: a missing picture never costs the report.
"""

from __future__ import annotations

import logging
import re
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from zlops.backends.clocks import clock_axis_label, clock_label
from zlops.host.telemetry import CSV_NAME, read_csv
from zlops.model import CompareSummary, HistoryPoint, ShardOutcome, ShardStatus, Verdict
from zlops.store import Store

log = logging.getLogger(__name__)

SeriesKey = tuple[str, str, str]
#: Verdicts whose series get a trend figure.
PLOTTED = frozenset({Verdict.SEVERE, Verdict.REGRESSION, Verdict.POTENTIAL, Verdict.SUSPECT, Verdict.IMPROVED,
                     Verdict.SUSPECT_IMPROVED})
#: the metric of the strong-scaling figure (zlops.report.figures.scaling_points)
SCALING_METRIC = "execute_s"
#: most trend figures a report draws (each is ~0.1-0.3 s of matplotlib): a night where a compiler change
#: moved thousands of series must still report in seconds; the rest are listed, not drawn
MAX_TRENDS = 60
#: the accepted nights a trend figure looks back over (before leaving out the run itself and other lines)
TREND_NIGHTS = 60
#: the order trends are drawn in when there are more candidates than MAX_TRENDS
_PRIORITY = {Verdict.SEVERE: 0, Verdict.REGRESSION: 1, Verdict.POTENTIAL: 2, Verdict.IMPROVED: 3,
             Verdict.SUSPECT: 4, Verdict.SUSPECT_IMPROVED: 5}


def trend_candidates(summary: CompareSummary, references: Mapping[SeriesKey, Any],
                     limit: int = MAX_TRENDS) -> list[Any]:
    """The series that get a trend figure, most important first, at most ``limit``: confirmed changes by
    severity, series with an open alert, then suspects by how far beyond their threshold they are."""
    rows = [c for c in summary.comparisons if c.verdict in PLOTTED or (c.pool, c.case, c.metric) in references]

    def rank(c: Any) -> tuple[int, float, str, str, str]:
        prio = _PRIORITY.get(c.verdict, 6)
        if (c.pool, c.case, c.metric) in references:
            prio = min(prio, 2)
        excess = abs(c.judgement.worse_pct or 0.0) / (c.judgement.threshold_pct or 1.0)
        return (prio, -excess, c.pool, c.case, c.metric)

    return sorted(rows, key=rank)[:limit]


@dataclass(frozen=True)
class RunFigures:
    """Paths of a run's figures; a figure the run had no data for is None (or absent)."""

    trends: Mapping[SeriesKey, Path] = field(default_factory=dict)
    ratio: Path | None = None
    phases: Path | None = None
    scaling: Path | None = None
    telemetry: Mapping[tuple[str, int], Path] = field(default_factory=dict)
    efficiency: Path | None = None      # campaigns (zlops.campaign.scaling): efficiency vs P
    stack_ratio: Path | None = None     # campaigns: paired stack ratio per case

    def overview(self) -> list[tuple[str, Path]]:
        """(title, path) of the run-level figures, in the order the report shows them."""
        out = [(t, p) for t, p in (("Paired ratio per case", self.ratio), ("Phase breakdown", self.phases),
                                   ("Strong scaling", self.scaling), ("Strong-scaling efficiency", self.efficiency),
                                   ("Paired stack ratio", self.stack_ratio)) if p is not None]
        out += [(f"Telemetry {pool} / device {device}", p) for (pool, device), p in sorted(self.telemetry.items())]
        return out


def figure_name(*parts: str) -> str:
    """A safe, bounded PNG file name from its parts (``pool__case__metric.png``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts))[:150] + ".png"


def draw_run_figures(store: Store, *, run_key: str, suite: str, summary: CompareSummary,
                     shards: list[ShardOutcome], out_dir: Path, band_pct: float,
                     references: Mapping[SeriesKey, tuple[float, str, str]] | None = None,
                     as_of: datetime | None = None, ancestors: Collection[str] | None = None,
                     max_trends: int = MAX_TRENDS) -> RunFigures:
    """Draw every figure of the run into ``out_dir`` (see the module docstring).

    ``references`` (value, unit, label) per series: the open alerts' references; these series get
    a trend whatever their verdict, with the reference drawn in. A trend's history is the run's as
    of then: runs started before ``as_of`` whose commit is in ``ancestors`` (when given), so a
    re-render of an old run never draws the nights that came after it. The histories of all the
    trends are one read (:func:`trend_histories`), their nights' telemetry another: the store is never
    queried per series.
    """
    from zlops.report import figures
    from zlops.report.plots import trend_plot

    trends: dict[SeriesKey, Path] = {}
    references = references or {}
    backends = {s.pool: s.backend for s in shards}  # the clock's name follows the pool's backend
    candidates = trend_candidates(summary, references, max_trends)
    # tonight's raw samples of the drawn series only (the compare rows keep medians): one query
    ok_pools = sorted({s.pool for s in shards if s.status is ShardStatus.OK})
    samples = store.run_samples(run_key, ok_pools, keys={(c.pool, c.case, c.metric) for c in candidates
                                                         if c.head is not None}) if candidates else {}
    histories = trend_histories(store, suite, candidates, run_key=run_key, as_of=as_of, ancestors=ancestors)
    # the telemetry strip: each drawn night's clock and temperature per pool, one read for every trend
    drawn_nights = sorted({h.run_key for history in histories.values() for h in history} | {run_key})
    extras = store.run_telemetry(drawn_nights) if candidates else {}
    nights = {key: telemetry_by_pool(shards_of) for key, shards_of in extras.items()}

    def night(key: str, pool: str) -> tuple[float | None, float | None]:
        return nights.get(key, {}).get(pool, (None, None))

    for c in candidates:
        key = (c.pool, c.case, c.metric)
        history = histories.get(key, [])
        telemetry = [night(h.run_key, c.pool) for h in history]
        if c.head is not None:
            telemetry.append(night(run_key, c.pool))
        drawn = _guard(f"trend of {key}", lambda c=c, history=history, telemetry=telemetry, key=key: trend_plot(
            history, c, out_dir / figure_name(*key), band_pct=band_pct, telemetry=telemetry,
            reference=references.get(key), clock_label=clock_axis_label(backends.get(c.pool)),
            tonight=samples.get(key)))
        if drawn is not None:
            trends[key] = drawn

    ratio = _guard("paired-ratio chart", lambda: figures.ratio_chart(
        summary.comparisons, out_dir / "run__ratio.png", band_pct=band_pct))
    phases = _guard("phase breakdown", lambda: figures.phase_breakdown(
        figures.phase_rows(summary.comparisons), out_dir / "run__phases.png"))
    if phases is None:  # a campaign's phases: setup / execute (/ wall) seconds per series
        phases = _guard("phase breakdown", lambda: figures.phase_breakdown(
            figures.campaign_phase_rows(summary.comparisons), out_dir / "run__phases.png",
            order=tuple(figures.CAMPAIGN_PHASES.values()), unit="s"))
    # collectives results only (execute_s with a device count, derived efficiency_p<P>): the results,
    # 10^4-10^5 rows of a big suite, are read only when the run has such series
    scaled = store.results(run_key) if any(c.metric == SCALING_METRIC or c.metric.startswith("efficiency_p")
                                           for c in summary.comparisons) else []
    scaling = _guard("strong scaling", lambda: figures.strong_scaling(
        figures.scaling_points(scaled, summary.comparisons, SCALING_METRIC), out_dir / "run__scaling.png"))
    efficiency = _guard("strong-scaling efficiency", lambda: figures.efficiency_chart(
        figures.efficiency_points(scaled, summary.comparisons), out_dir / "run__efficiency.png"))
    stack_ratio = _guard("paired stack ratio", lambda: figures.stack_ratio_chart(
        summary.comparisons, out_dir / "run__stack_ratio.png"))
    timelines: dict[tuple[str, int], Path] = {}
    for s in shards:
        rows = read_csv(Path(s.artifact_dir) / CSV_NAME)
        if not rows:
            continue
        drawn = _guard(f"telemetry of {s.pool}/{s.device}", lambda s=s, rows=rows: figures.telemetry_timeline(
            rows, out_dir / figure_name("telemetry", s.pool, str(s.device)),
            title=f"{s.pool} / device {s.device}: telemetry during the benchmark",
            clock_label=f"{clock_label(s.backend)} (MHz)"))
        if drawn is not None:
            timelines[(s.pool, s.device)] = drawn
    return RunFigures(trends, ratio, phases, scaling, timelines, efficiency, stack_ratio)


def trend_histories(store: Store, suite: str, candidates: Sequence[Any], *, run_key: str,
                    as_of: datetime | None, ancestors: Collection[str] | None,
                    limit: int = TREND_NIGHTS) -> dict[SeriesKey, list[HistoryPoint]]:
    """The accepted history each trend draws, oldest first: per series its newest ``limit`` points of
    runs started before ``as_of`` (:meth:`Store.series_histories`, one read for every series), less
    the run itself and, when ``ancestors`` is given, the runs off its ancestor line."""
    if not candidates:
        return {}
    read = store.series_histories(suite, {(c.pool, c.case, c.metric) for c in candidates}, limit=limit,
                                  before=as_of)
    return {key: [h for h in history if h.run_key != run_key and (ancestors is None or h.sha in ancestors)]
            for key, history in read.items()}


def telemetry_by_pool(extras: Mapping[tuple[str, int], Mapping[str, Any]]) -> dict[str, tuple[float | None,
                                                                                                float | None]]:
    """Per pool: the median of its shards' median clocks, and the max of their max temperatures (the
    trend figures' telemetry strip and the series page's overlay)."""
    clocks: dict[str, list[float]] = {}
    temps: dict[str, list[float]] = {}
    for (pool, _device), extra in extras.items():
        t = extra.get("telemetry") or {}
        if t.get("sm_clock_median_mhz") is not None:
            clocks.setdefault(pool, []).append(float(t["sm_clock_median_mhz"]))
        if t.get("temp_max_c") is not None:
            temps.setdefault(pool, []).append(float(t["temp_max_c"]))
    return {pool: (statistics.median(clocks[pool]) if clocks.get(pool) else None,
                   max(temps[pool]) if temps.get(pool) else None) for pool in set(clocks) | set(temps)}


def _guard(what: str, draw: Any) -> Path | None:
    try:
        return draw()
    except (ValueError, OSError) as exc:
        log.warning("figure skipped: %s: %s", what, exc)
        return None
