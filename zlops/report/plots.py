"""Trend plots of one series: its accepted history, the baseline band and tonight's value.

matplotlib is imported inside :func:`trend_plot` (it costs about a second at import time, and this
module is imported by DAG files). The figure is drawn on an explicit Agg canvas, never through
pyplot, so no global backend or figure state is touched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from zlops import metrics
from zlops.model import Comparison, HistoryPoint, Verdict, median_of
from zlops.report import cells

if TYPE_CHECKING:
    from matplotlib.axes import Axes

FIGSIZE = (8.0, 4.5)
DPI = 110
FONT_SIZE = 11
MAX_TICK_LABELS = 12

HISTORY_COLOUR = "#4c72b0"
CLOCK_COLOUR = "#17becf"
REFERENCE_COLOUR = "#9467bd"
TEMP_COLOUR = "#e377c2"
BASELINE_COLOUR = "#555555"
#: Tonight's point: red for a regression, orange potential, green improved, blue otherwise.
VERDICT_COLOURS: dict[Verdict, str] = {
    Verdict.REGRESSION: "#d62728",
    Verdict.POTENTIAL: "#ff7f0e",
    Verdict.IMPROVED: "#2ca02c",
    Verdict.UNCHANGED: "#1f3f7a",
    Verdict.NEW: "#1f3f7a",
    Verdict.MISSING: "#1f3f7a",
    Verdict.SEVERE: "#8b0000",
    Verdict.SUSPECT: "#bcbd22",
    Verdict.SUSPECT_IMPROVED: "#17becf",
    Verdict.INVALID: "#7f7f7f",
    Verdict.UNMEASURABLE: "#7f7f7f",
    Verdict.FAILED: "#7f7f7f",
    Verdict.INCOMPARABLE: "#9467bd",
}


def trend_plot(
    history: Sequence[HistoryPoint],
    comparison: Comparison,
    out_path: Path,
    *,
    title: str | None = None,
    band_pct: float = 2.0,
    telemetry: Sequence[tuple[float | None, float | None]] | None = None,
    reference: tuple[float, str, str] | None = None,
    clock_label: str = "clock MHz",
    tonight: Sequence[float] | None = None,
) -> Path:
    """Draw the trend of one series to a PNG at ``out_path`` and return the path.

    ``history`` is the series' accepted points, oldest first, *without* tonight's run: x is the
    night index labelled with short shas, y the median with min-max whiskers. Tonight's value
    (``comparison.head_value``, with min-max whiskers of its raw samples ``tonight`` when given, in
    ``comparison.unit``) is the last point, labelled ``HEAD`` and coloured by verdict.
    The baseline median is a horizontal line with a ``±band_pct`` band (the potential threshold).
    History and baseline are converted to ``comparison.unit`` with :func:`zlops.metrics.convert`;
    a unit that does not convert raises ``ValueError`` rather than plot two scales on one axis.
    ``telemetry`` gives each night (the history, then tonight) its (median clock MHz, max
    temperature °C), drawn in a strip under the trend: clock on the left axis, temperature on a
    twin axis, so a step in the series can be set against throttling or heat at a glance.
    ``reference`` = (value, unit, label) draws another level as a dotted line, e.g. the reference of
    an open alert (back within its band = fixed) when the rolling baseline has moved on.
    ``clock_label`` names the clock axis by the pool's backend (:func:`zlops.backends.clocks.clock_axis_label`).
    Inputs are not modified.
    """
    series = [(cells.short_sha(p.sha), _in_unit(p.samples, p.unit, comparison.unit, p.run_key))
              for p in history]
    base = None
    if comparison.base is not None:
        [base] = _in_unit([comparison.base.median], comparison.base.unit, comparison.unit, "baseline")
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"font.size": FONT_SIZE, "axes.titlesize": FONT_SIZE + 1}):
        overlay = bool(telemetry) and any(v is not None for pair in telemetry or () for v in pair)
        fig = Figure(figsize=(FIGSIZE[0], FIGSIZE[1] + 1.6) if overlay else FIGSIZE, dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        if overlay:
            ax, strip = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
        else:
            ax, strip = fig.add_subplot(), None
        labels = [label for label, _ in series]
        _draw_history(ax, [samples for _, samples in series])
        if base is not None:
            _draw_baseline(ax, base, comparison, band_pct)
        if reference is not None:
            [level] = _in_unit([reference[0]], reference[1], comparison.unit, reference[2])
            ax.axhspan(level * (1 - band_pct / 100), level * (1 + band_pct / 100), color=REFERENCE_COLOUR,
                       alpha=0.08, linewidth=0)
            ax.axhline(level, color=REFERENCE_COLOUR, linestyle=":", linewidth=2.0,
                       label=f"{reference[2]} ±{band_pct:g}%: {cells.format_value(level, comparison.unit)}")
        if comparison.head is not None:
            _draw_tonight(ax, len(history), comparison, tonight)
            labels.append("HEAD")
        elif comparison.verdict is Verdict.MISSING:
            ax.text(0.99, 0.02, "no value tonight", transform=ax.transAxes, ha="right",
                    va="bottom", color=VERDICT_COLOURS[Verdict.REGRESSION])
        if not labels and base is None:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center")

        _set_ticks(strip if strip is not None else ax, labels)
        ax.set_xlim(-0.5, max(len(labels), 1) - 0.5)
        if strip is not None:
            _draw_telemetry(strip, list(telemetry or ())[: max(len(labels), 1)], clock_label)
            strip.set_xlabel("night (oldest to newest)")
        else:
            ax.set_xlabel("night (oldest to newest)")
        unit = f" ({comparison.unit})" if comparison.unit else ""
        ax.set_ylabel(f"{comparison.metric}{unit}")
        ax.set_title(title if title is not None else _default_title(comparison))
        ax.grid(True, axis="y", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            # below the axes: "best" inside would hide points of a long, flat history
            fig.legend(loc="outside lower center", ncols=2, fontsize=FONT_SIZE - 1, frameon=False)

        out_path = Path(out_path)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out_path, format="png")
    return out_path


def _default_title(c: Comparison) -> str:
    return f"{c.pool} / {c.case} ({c.metric}, {c.unit})" if c.unit else f"{c.pool} / {c.case} ({c.metric})"


def _whiskers(samples: Sequence[float]) -> tuple[float, float, float]:
    """(median, median - min, max - median) of ``samples``."""
    median = median_of(samples)
    return median, median - min(samples), max(samples) - median


def _in_unit(values: Sequence[float], unit: str, to_unit: str, what: str) -> list[float]:
    if unit == to_unit:
        return list(values)
    try:
        return [metrics.convert(v, unit, to_unit) for v in values]
    except ValueError as exc:
        raise ValueError(f"trend_plot: {what} is in {unit!r}, the series in {to_unit!r}: {exc}") from None


def _draw_history(ax: Axes, history: Sequence[Sequence[float]]) -> None:
    if not history:
        return
    xs = list(range(len(history)))
    stats = [_whiskers(samples) for samples in history]
    ax.errorbar(
        xs, [s[0] for s in stats], yerr=[[s[1] for s in stats], [s[2] for s in stats]],
        fmt="o-", color=HISTORY_COLOUR, ecolor=HISTORY_COLOUR, elinewidth=1.2, capsize=3,
        markersize=5, linewidth=1.2, alpha=0.9, label="accepted nights (median, min-max)",
    )


def _draw_baseline(ax: Axes, base: float, c: Comparison, band_pct: float) -> None:
    """The baseline median (already in ``c.unit``) and the ±band_pct band around it."""
    assert c.base is not None  # checked by the caller
    low, high = sorted((base * (1 - band_pct / 100), base * (1 + band_pct / 100)))
    ax.axhspan(low, high, color=BASELINE_COLOUR, alpha=0.12, linewidth=0, label=f"±{band_pct:g}% band")
    ax.axhline(base, color=BASELINE_COLOUR, linestyle="--", linewidth=1.3,
               label=f"baseline {cells.short_sha(c.base.sha)}: {cells.format_value(base, c.unit)}")


def _draw_tonight(ax: Axes, x: int, c: Comparison, samples: Sequence[float] | None) -> None:
    """Tonight's median (the row's HEAD value) with the min-max whiskers of its samples when known."""
    assert c.head is not None  # checked by the caller
    median = c.head.median
    below = above = 0.0
    if samples:
        below, above = median - min(samples), max(samples) - median
    colour = VERDICT_COLOURS[c.verdict]
    label = tonight_label(c)
    ax.errorbar(
        [x], [median], yerr=[[below], [above]], fmt="o", color=colour, ecolor=colour,
        elinewidth=1.6, capsize=4, markersize=10, markeredgecolor="black", zorder=5, label=label,
    )


def tonight_label(c: Comparison) -> str:
    """The legend line of tonight's dot: its value and the verdict's change. When the verdict's change
    comes from other numbers than the dot (an A/B's runs: :class:`zlops.model.Figures`), the line says
    which two, so the change printed is derivable from what the plot shows, as in the tables."""
    assert c.head is not None  # checked by the caller
    median = c.head.median
    change = cells.fmt_change(cells.change_pct(c))
    verdict = c.verdict.value if change == cells.NONE else f"{c.verdict.value}, {change}"
    fig = c.figures
    if fig is not None and change != cells.NONE and not math.isclose(fig.value, median, rel_tol=1e-9):
        return (f"HEAD: {cells.format_value(median, c.unit)} tonight\n{verdict}: {fig.reference_label} "
                f"{cells.format_value(fig.reference, c.unit)} -> {fig.value_label} "
                f"{cells.format_value(fig.value, c.unit)}")
    return f"HEAD: {cells.format_value(median, c.unit)} ({verdict})"


def _draw_telemetry(ax: Axes, nights: Sequence[tuple[float | None, float | None]],
                    clock_label: str = "clock MHz") -> None:
    """Median clock per night (left axis) and max temperature (twin right axis); gaps where unknown.

    A quantity no night reports gets no axis (a CPU pool has a clock but no temperature).
    """
    xs = list(range(len(nights)))
    clock = [c if c is not None else float("nan") for c, _ in nights]
    temp = [t if t is not None else float("nan") for _, t in nights]
    ax.grid(True, axis="y", alpha=0.3)
    if any(c is not None for c, _ in nights):
        ax.plot(xs, clock, "s-", color=CLOCK_COLOUR, markersize=5, linewidth=1.4)
        ax.set_ylabel(clock_label, color=CLOCK_COLOUR, fontsize=FONT_SIZE - 1)
        ax.tick_params(axis="y", colors=CLOCK_COLOUR, labelsize=FONT_SIZE - 2)
    else:
        ax.set_yticks([])
    if any(t is not None for _, t in nights):
        twin = ax.twinx()
        twin.plot(xs, temp, "^--", color=TEMP_COLOUR, markersize=5, linewidth=1.2)
        twin.set_ylabel("max °C", color=TEMP_COLOUR, fontsize=FONT_SIZE - 1)
        twin.tick_params(axis="y", colors=TEMP_COLOUR, labelsize=FONT_SIZE - 2)


def _set_ticks(ax: Axes, labels: Sequence[str]) -> None:
    """Label every night with its short sha, thinned to at most MAX_TICK_LABELS (HEAD always kept)."""
    if not labels:
        ax.set_xticks([])
        return
    step = max(1, -(-len(labels) // MAX_TICK_LABELS))
    ticks = list(range(len(labels) - 1, -1, -step))[::-1]  # count back from the newest
    ax.set_xticks(ticks)
    ax.set_xticklabels([labels[i] for i in ticks], rotation=30 if len(ticks) > 6 else 0,
                       ha="right" if len(ticks) > 6 else "center")
