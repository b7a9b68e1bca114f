"""Run-level figures (pure: values in, PNG out): paired ratios, phases, strong scaling, telemetry.

Each function returns the PNG path, or None when the run has no data for that figure (a figure is
skipped, never drawn empty). Every figure is drawn on an explicit Agg canvas (no pyplot state),
at 8 x 4.5 in and 110 dpi with 13 pt text, so it stays legible as Slack's ~360 px thumbnail.
matplotlib is imported inside the functions. The trend of one series is :func:`zlops.report.plots.trend_plot`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.model import CaseResult, Comparison, Verdict
from zlops.report.plots import VERDICT_COLOURS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGSIZE = (8.0, 4.5)
DPI = 110
FONT_SIZE = 13
#: Cases named on the ratio chart's axis; past this the chart shows ranks and names the worst.
NAMED_CASES = 25
#: The simpler-style phase metrics, in the order the rounds table prints them.
PHASES = ("host", "device", "effective", "orch", "sched")
#: Cases drawn on one phase-breakdown figure (the ones whose phases moved most).
PHASE_CASES = 4
BASE_COLOUR = "#9e9e9e"
HEAD_COLOUR = "#1f77b4"


@dataclass(frozen=True)
class PhaseRow:
    """One case's phase medians (us): the baseline's (None without one) and tonight's."""

    pool: str
    case: str
    base: Mapping[str, float] | None
    head: Mapping[str, float]


@dataclass(frozen=True)
class ScalingPoint:
    """One measured point of a strong-scaling line: ``value`` at ``p`` devices (baseline ``base``)."""

    line: str
    p: int
    value: float
    base: float | None
    unit: str


def _figure(figsize: tuple[float, float] = FIGSIZE) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, out_path: Path) -> Path:
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, format="png")
    return out_path


def _rc() -> Any:
    import matplotlib

    return matplotlib.rc_context({"font.size": FONT_SIZE, "axes.titlesize": FONT_SIZE + 1,
                                  "legend.fontsize": FONT_SIZE - 2})


def cost_ratio(c: Comparison) -> float | None:
    """HEAD / base, turned so that > 1 is always worse (base / HEAD for a higher-is-better metric)."""
    from zlops.alerts.lifecycle import reference_value

    base, head = reference_value(c), c.head_value
    if base is None or head is None or base <= 0 or head <= 0:
        return None
    return head / base if c.lower_is_better else base / head


def ratio_chart(comparisons: Sequence[Comparison], out_path: Path, *, band_pct: float,
                title: str | None = None) -> Path | None:
    """Paired ratio per case, sorted: the 1.0 line, the ±band_pct band, points coloured by verdict.

    Up to ``NAMED_CASES`` cases are named on the axis (horizontal bars); more are plotted by rank
    and the three worst are named. None when no case has both sides.
    """
    rows = sorted(((r, c) for c in comparisons if (r := cost_ratio(c)) is not None),
                  key=lambda rc: (rc[0], rc[1].pool, rc[1].case, rc[1].metric))
    if not rows:
        return None
    ratios = [r for r, _ in rows]
    colours = [VERDICT_COLOURS.get(c.verdict, HEAD_COLOUR) for _, c in rows]
    low, high = 1 - band_pct / 100, 1 + band_pct / 100
    with _rc():
        fig = _figure()
        ax = fig.add_subplot()
        if len(rows) <= NAMED_CASES:
            ys = list(range(len(rows)))
            ax.barh(ys, [r - 1 for r in ratios], left=1.0, color=colours, height=0.7)
            pools = len({c.pool for _, c in rows}) > 1
            ax.set_yticks(ys, [_short((f"{c.pool} / " if pools else "") + c.case
                                      + (f" ({c.metric})" if _multi_metric(rows) else ""), 30)
                               for _, c in rows], fontsize=FONT_SIZE - 3 if len(rows) > 12 else FONT_SIZE - 1)
            if len(rows) <= 12:
                for y, r in zip(ys, ratios, strict=True):
                    ax.text(r, y, f" {(r - 1) * 100:+.1f}% ", va="center", ha="left" if r >= 1 else "right",
                            fontsize=FONT_SIZE - 3)
            ax.axvspan(low, high, color="#555555", alpha=0.12, linewidth=0, label=f"±{band_pct:g}% band")
            ax.axvline(1.0, color="black", linewidth=1.2)
            ax.set_xlabel("HEAD / base  (> 1 = worse)")
            span = max(abs(r - 1) for r in [*ratios, high])
            ax.set_xlim(1 - span * 1.35, 1 + span * 1.35)
            ax.grid(True, axis="x", alpha=0.3)
        else:
            xs = list(range(len(rows)))
            ax.axhspan(low, high, color="#555555", alpha=0.12, linewidth=0, label=f"±{band_pct:g}% band")
            ax.axhline(1.0, color="black", linewidth=1.2)
            ax.scatter(xs, ratios, c=colours, s=18, zorder=3)
            worst = [(x, r, c) for x, (r, c) in zip(xs, rows, strict=True) if r > high][::-1][:3]
            for n, (x, r, c) in enumerate(worst):  # staggered, so equal ratios do not print over each other
                ax.annotate(_short(c.case, 24), (x, r), textcoords="offset points", xytext=(-10, -14 - 15 * n),
                            ha="right", fontsize=FONT_SIZE - 3,
                            arrowprops={"arrowstyle": "-", "color": "#777777", "linewidth": 0.6})
            ax.set_xlabel(f"case, sorted ({len(rows)} cases)")
            ax.set_ylabel("HEAD / base  (> 1 = worse)")
            ax.grid(True, axis="y", alpha=0.3)
        worse = sum(1 for r in ratios if r > high)
        better = sum(1 for r in ratios if r < low)
        ax.set_title(title or f"Paired ratio per case: {worse} worse, {better} better than ±{band_pct:g}%")
        ax.legend(loc="lower right", frameon=False)
        return _save(fig, out_path)


def _multi_metric(rows: Sequence[tuple[float, Comparison]]) -> bool:
    return len({c.metric for _, c in rows}) > 1


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def phase_rows(comparisons: Sequence[Comparison]) -> list[PhaseRow]:
    """Group simpler-style results (metrics host/device/effective/orch/sched) by (pool, case)."""
    by_case: dict[tuple[str, str], dict[str, Comparison]] = {}
    for c in comparisons:
        if c.metric in PHASES and c.head_value is not None:
            by_case.setdefault((c.pool, c.case), {})[c.metric] = c
    out = []
    for (pool, case), metrics in sorted(by_case.items()):
        if len(metrics) < 2:
            continue
        base = {m: c.base_value for m, c in metrics.items() if c.base_value is not None}
        head = {m: c.head_value for m, c in metrics.items() if c.head_value is not None}
        out.append(PhaseRow(pool, case, base or None, head))
    return out


def phase_breakdown(rows: Sequence[PhaseRow], out_path: Path, *, title: str | None = None,
                    order: Sequence[str] = PHASES, unit: str = "us") -> Path | None:
    """Per case, each phase's baseline and HEAD median side by side, with the change in percent.

    Side by side, not stacked: simpler's phases overlap in time (Orch and Sched run inside the Device
    span, Device inside Host), so a stack would add up time that was never spent. Log scale, because
    Host is one to two orders of magnitude above the rest. The ``PHASE_CASES`` cases whose phases
    moved most are drawn; None without phase data.
    """
    rows = [r for r in rows if r.head]
    if not rows:
        return None

    def moved(r: PhaseRow) -> float:
        if not r.base:
            return 0.0
        return max((abs(r.head[m] / r.base[m] - 1) for m in r.head if r.base.get(m)), default=0.0)

    chosen = sorted(rows, key=lambda r: (-moved(r), r.pool, r.case))[:PHASE_CASES]
    with _rc():
        fig = _figure((8.0, 1.6 + 1.7 * len(chosen)))
        axes = fig.subplots(len(chosen), 1, squeeze=False)[:, 0]
        for ax, r in zip(axes, chosen, strict=True):
            phases = [m for m in order if m in r.head]
            ys = list(range(len(phases)))
            if r.base:
                ax.barh([y + 0.2 for y in ys], [r.base.get(m, 0.0) for m in phases], height=0.4,
                        color=BASE_COLOUR, label="base")
            ax.barh([y - 0.2 for y in ys], [r.head[m] for m in phases], height=0.4, color=HEAD_COLOUR,
                    label="HEAD")
            for y, m in zip(ys, phases, strict=True):
                if r.base and r.base.get(m):
                    change = (r.head[m] / r.base[m] - 1) * 100
                    colour = "#d62728" if change > 2 else "#2ca02c" if change < -2 else "black"
                    ax.text(max(r.head[m], r.base[m]) * 1.08, y, f"{change:+.1f}%", va="center",
                            fontsize=FONT_SIZE - 2, color=colour)
            ax.set_xscale("log")
            ax.set_yticks(ys, [m.capitalize() for m in phases], fontsize=FONT_SIZE - 2)
            ax.invert_yaxis()
            ax.set_title(_short(f"{r.pool} / {r.case}", 60), fontsize=FONT_SIZE - 1, loc="left")
            values = [*r.head.values(), *(r.base or {}).values()]
            ax.set_xlim(min(values) / 2, max(values) * 3)  # bars on a log axis start at its left edge
            ax.grid(True, axis="x", alpha=0.3)
        axes[-1].set_xlabel(f"median per phase ({unit}, log scale)")
        axes[0].legend(loc="lower right", frameon=False, ncols=2)
        more = len(rows) - len(chosen)
        fig.suptitle(title or ("Phase breakdown" + (f" ({more} more cases in the report)" if more else "")))
        return _save(fig, out_path)


def scaling_points(results: Sequence[tuple[str, int, CaseResult]], comparisons: Sequence[Comparison],
                   metric: str = "execute_s") -> list[ScalingPoint]:
    """Collectives results with a device count ``p`` in their params, one line per stack and problem."""
    base = {(c.pool, c.case, c.metric): c.base_value for c in comparisons}
    seen: dict[tuple[str, str], ScalingPoint] = {}
    for pool, _device, r in results:
        p = r.params.get("p")
        if r.metric != metric or not isinstance(p, int) or isinstance(p, bool) or p <= 0:
            continue
        parts = [str(r.params[k]) for k in ("stack", "variant") if r.params.get(k) is not None]
        if r.params.get("count") is not None:
            parts.append(f"count={r.params['count']}")
        if r.params.get("dtype") is not None:
            parts.append(str(r.params["dtype"]))
        line = f"{pool}: " + (" ".join(parts) or r.case)
        seen[(line, r.case)] = ScalingPoint(line, p, r.median, base.get((pool, r.case, metric)), r.unit)
    return sorted(seen.values(), key=lambda s: (s.line, s.p))


def _lines_over_p(points: Sequence[ScalingPoint]) -> dict[str, list[ScalingPoint]]:
    """The points per line, in P order; only lines with at least two device counts."""
    lines: dict[str, list[ScalingPoint]] = {}
    for pt in points:
        lines.setdefault(pt.line, []).append(pt)
    return {k: sorted(v, key=lambda s: s.p) for k, v in lines.items() if len({s.p for s in v}) >= 2}


def _draw_lines_over_p(ax: Any, lines: Mapping[str, list[ScalingPoint]]) -> list[int]:
    """One solid line per key (tonight) and its dashed baseline; returns the device counts drawn."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    for i, (name, pts) in enumerate(sorted(lines.items())):
        colour = palette(i % 10)
        ax.plot([s.p for s in pts], [s.value for s in pts], "o-", color=colour, linewidth=2, markersize=7,
                label=_short(name, 40))
        based = [(s.p, s.base) for s in pts if s.base is not None]
        if len(based) >= 2:
            ax.plot([p for p, _ in based], [b for _, b in based], "--", color=colour, alpha=0.6, linewidth=1.5)
    return sorted({s.p for pts in lines.values() for s in pts})


def strong_scaling(points: Sequence[ScalingPoint], out_path: Path, *, title: str | None = None) -> Path | None:
    """Time against device count, one line per stack and problem (dashed: the baseline); log-log.

    None unless some line has at least two device counts.
    """
    lines = _lines_over_p(points)
    if not lines:
        return None
    unit = next(iter(lines.values()))[0].unit
    with _rc():
        fig = _figure()
        ax = fig.add_subplot()
        ps = _draw_lines_over_p(ax, lines)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ps, [str(p) for p in ps])
        ax.set_xlabel("devices (p)")
        ax.set_ylabel(f"time ({unit})")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(title or "Strong scaling (solid: HEAD, dashed: baseline)")
        ax.legend(loc="best", frameon=False)
        return _save(fig, out_path)


#: campaign phases (the seed's phase breakdown): metric of the collectives format -> phase name
CAMPAIGN_PHASES = {"setup_s": "setup", "execute_s": "execute", "wall_s": "wall"}


def campaign_phase_rows(comparisons: Sequence[Comparison]) -> list[PhaseRow]:
    """Per campaign series (``.../p<P>/<variant>/<stack>``), its setup / execute / wall seconds."""
    by_case: dict[tuple[str, str], dict[str, Comparison]] = {}
    for c in comparisons:
        if c.metric in CAMPAIGN_PHASES and c.head_value is not None and c.unit == "s":
            by_case.setdefault((c.pool, c.case), {})[CAMPAIGN_PHASES[c.metric]] = c
    out = []
    for (pool, case), phases in sorted(by_case.items()):
        if "setup" not in phases or "execute" not in phases:
            continue
        base = {m: c.base_value for m, c in phases.items() if c.base_value is not None}
        head = {m: c.head_value for m, c in phases.items() if c.head_value is not None}
        out.append(PhaseRow(pool, case, base or None, head))
    return out


def efficiency_points(results: Sequence[tuple[str, int, CaseResult]], comparisons: Sequence[Comparison]
                      ) -> list[ScalingPoint]:
    """Strong-scaling efficiency per (stem, variant, stack) line: E(P_min) = 1, then each derived
    ``efficiency_p<P>`` series tonight (``base``: the value its verdict compared with)."""
    base = {(c.pool, c.case, c.metric): c.base_value for c in comparisons}
    out: dict[tuple[str, int], ScalingPoint] = {}
    for pool, _device, r in results:
        if r.params.get("derived") != "efficiency":
            continue
        line = f"{pool}: {r.case}"
        p, p_min = int(r.params["p"]), int(r.params["p_min"])
        out[(line, p_min)] = ScalingPoint(line, p_min, 1.0, 1.0, r.unit)
        out[(line, p)] = ScalingPoint(line, p, r.median, base.get((pool, r.case, r.metric)), r.unit)
    return sorted(out.values(), key=lambda s: (s.line, s.p))


def efficiency_chart(points: Sequence[ScalingPoint], out_path: Path, *, title: str | None = None) -> Path | None:
    """Strong-scaling efficiency against P, one line per (problem, variant, stack): solid tonight,
    dashed the baseline; the 1.0 line is perfect scaling. None without a line of two P values."""
    lines = _lines_over_p(points)
    if not lines:
        return None
    with _rc():
        fig = _figure()
        ax = fig.add_subplot()
        ps = _draw_lines_over_p(ax, lines)
        ax.axhline(1.0, color="black", linewidth=1.0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ps, [str(p) for p in ps])
        top = max([1.0, *(s.value for pts in lines.values() for s in pts)])
        ax.set_ylim(0, top * 1.1)
        ax.set_xlabel("devices (p)")
        ax.set_ylabel("efficiency t(Pmin)·Pmin / (t(P)·P)")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(title or "Strong-scaling efficiency (solid: HEAD, dashed: baseline)")
        ax.legend(loc="best", frameon=False, fontsize=FONT_SIZE - 4)
        return _save(fig, out_path)


def stack_ratio_chart(comparisons: Sequence[Comparison], out_path: Path, *, title: str | None = None
                      ) -> Path | None:
    """Paired stack ratio per case (``ratio_<a>_over_<b>``: t(a) / t(b)): HEAD and baseline bars,
    the 1.0 line (both stacks equal); coloured by verdict. None without a ratio series."""
    rows = sorted((c for c in comparisons if c.metric.startswith("ratio_") and c.unit == "t/t"
                   and c.head_value is not None), key=lambda c: (c.pool, c.case, c.metric))[:NAMED_CASES]
    if not rows:
        return None
    with _rc():
        fig = _figure((8.0, max(3.0, 1.4 + 0.45 * len(rows))))
        ax = fig.add_subplot()
        ys = list(range(len(rows)))
        bases = [c.base_value for c in rows]
        ax.barh([y + 0.2 for y in ys], [b if b is not None else 0.0 for b in bases], height=0.4,
                color=BASE_COLOUR, label="base")
        ax.barh([y - 0.2 for y in ys], [c.head_value or 0.0 for c in rows], height=0.4,
                color=[VERDICT_COLOURS.get(c.verdict, HEAD_COLOUR) for c in rows], label="HEAD")
        for y, c in zip(ys, rows, strict=True):
            ax.text((c.head_value or 0.0) * 1.01, y - 0.2, f" {c.head_value:.3g}", va="center", fontsize=FONT_SIZE - 4)
        ax.axvline(1.0, color="black", linewidth=1.2)
        ax.set_yticks(ys, [_short(f"{c.case} {c.metric.removeprefix('ratio_').replace('_over_', '/')}", 40)
                           for c in rows], fontsize=FONT_SIZE - 4)
        ax.invert_yaxis()
        ax.set_xlabel("time ratio t(numerator) / t(denominator)  (< 1: numerator faster)")
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_title(title or "Paired stack ratio per case")
        ax.legend(loc="lower right", frameon=False)
        return _save(fig, out_path)


def _seconds(rows: Sequence[Mapping[str, Any]]) -> list[float | None]:
    stamps: list[datetime | None] = []
    for r in rows:
        try:
            stamps.append(datetime.fromisoformat(str(r.get("timestamp", ""))))
        except ValueError:
            stamps.append(None)
    first = next((s for s in stamps if s is not None), None)
    if first is None:
        return [float(i) for i in range(len(rows))]
    return [None if s is None else (s - first).total_seconds() for s in stamps]


def telemetry_timeline(rows: Sequence[Mapping[str, Any]], out_path: Path, *, title: str,
                       clock_label: str = "clock (MHz)") -> Path | None:
    """One shard's telemetry.csv rows over time: clock, temperature and power, one line per device.

    ``clock_label`` names the clock by the shard's backend (``CPU clock (MHz)`` on a CPU pool).

    A panel per quantity that has at least two samples; None when none has.
    """
    series = (("sm_clock_mhz", clock_label, "#1f77b4"), ("temp_c", "temp (°C)", "#d62728"),
              ("power_w", "power (W)", "#ff7f0e"))
    present = [s for s in series if sum(1 for r in rows if r.get(s[0]) is not None) >= 2]
    if not present:  # a single sample is not a timeline
        return None
    secs = _seconds(rows)
    devices = sorted({int(r["index"]) for r in rows if r.get("index") is not None}) or [0]
    styles = ("-", "--", ":", "-.")
    with _rc():
        fig = _figure((8.0, 1.4 + 1.3 * len(present)))
        axes = fig.subplots(len(present), 1, sharex=True, squeeze=False)[:, 0]
        for ax, (col, label, colour) in zip(axes, present, strict=True):
            for i, dev in enumerate(devices):
                pts = [(t, float(r[col])) for t, r in zip(secs, rows, strict=True)
                       if t is not None and r.get(col) is not None
                       and (r.get("index") is None or int(r["index"]) == dev)]
                if pts:
                    marker = "o" if len(pts) <= 40 else ""  # few samples: show where each one is
                    ax.plot([t for t, _ in pts], [v for _, v in pts], marker + styles[i % len(styles)], color=colour,
                            linewidth=1.8, markersize=4, label=f"device {dev}" if len(devices) > 1 else None)
            ax.set_ylabel(label, fontsize=FONT_SIZE - 2)
            ax.grid(True, alpha=0.3)
            values = [float(r[col]) for r in rows if r.get(col) is not None]
            if values and not math.isclose(min(values), max(values)):
                pad = (max(values) - min(values)) * 0.1
                ax.set_ylim(min(values) - pad, max(values) + pad)
        if len(devices) > 1:
            axes[0].legend(loc="best", frameon=False, ncols=min(4, len(devices)))
        axes[-1].set_xlabel("seconds since the first sample")
        fig.suptitle(title)
        return _save(fig, out_path)


#: Figure colours for the verdicts a ratio chart shows (re-exported for tests and the HTML legend).
RATIO_COLOURS = {v: VERDICT_COLOURS[v] for v in (Verdict.REGRESSION, Verdict.SEVERE, Verdict.POTENTIAL,
                                                 Verdict.IMPROVED, Verdict.UNCHANGED)}
