"""Plotly figures of the triage pages, built from :mod:`zlops.triage.series` values (pure: values in, JSON out).

Plotly (the python package, imported on first use) builds the figure; the page draws it with the
plotly.js bundle that package ships (served by the plugin itself: nothing is fetched from a CDN).
Zoom, pan and hover are plotly's own. Every number in a hover or label is a stored one, formatted as
the report formats it (:mod:`zlops.report.cells`): a night's median, n and spread, its raw samples,
the judge's Figures (reference and its label, value, change, threshold, A/B runs, CI, p-value), the
alert's reference and band, the pool telemetry. Band edges and the x positions are drawing only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zlops.model import Verdict
from zlops.report import cells
from zlops.report.plots import CLOCK_COLOUR, HISTORY_COLOUR, REFERENCE_COLOUR, TEMP_COLOUR, VERDICT_COLOURS
from zlops.triage.night import MatrixView
from zlops.triage.series import CrossView, Night, SeriesView

NO_VERDICT = "not compared"


def night_label(n: Night) -> str:
    """The x label of a night: its date and short commit (unique within a pool's window)."""
    return f"{n.when:%m-%d %H:%M} {cells.short_sha(n.sha)}"


def _verdict_name(n: Night) -> str:
    return n.verdict.label if n.verdict is not None else NO_VERDICT


def _colour(v: Verdict | None) -> str:
    return VERDICT_COLOURS.get(v, HISTORY_COLOUR) if v is not None else HISTORY_COLOUR


def night_hover(n: Night) -> str:
    """The hover text of a night: its stored numbers, and the judge's figures when it was compared."""
    lines = [f"<b>{night_label(n)}</b> · {n.run_key}",
             f"median {cells.format_value(n.median, n.unit)} · n {n.n}"
             + ("" if n.spread_pct is None else f" · spread {n.spread_pct:.2f}%")]
    c = n.comparison
    if c is not None:
        lines.append(f"verdict: {c.verdict.label} · change {cells.fmt_change(c.judgement.change_pct)}"
                     + ("" if c.judgement.threshold_pct is None else f" (threshold {c.judgement.threshold_pct:g}%)"))
        f = c.figures
        if f is not None:
            lines.append(f"{f.value_label}: {cells.format_value(f.value, f.unit or c.unit)}")
            lines.append(f"{cells.reference_text(c)}: {cells.format_value(f.reference, f.unit or c.unit)}")
            if f.p_value is not None:
                lines.append(f"p = {f.p_value:.3g}")
    if n.clock_mhz is not None or n.temp_c is not None:
        lines.append(" · ".join(t for t in (
            None if n.clock_mhz is None else f"clock {n.clock_mhz:.0f} MHz",
            None if n.temp_c is None else f"max temp {n.temp_c:.0f} °C") if t))
    return "<br>".join(_escape(line) if i else line for i, line in enumerate(lines))


def _escape(text: str) -> str:
    # plotly renders hover text as a small HTML subset: names from the outside world must not add tags
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_json(figure: Any) -> str:
    """A figure as JSON that is safe inside a ``<script type="application/json">`` element."""
    import plotly.io

    return str(plotly.io.to_json(figure, validate=False)).replace("</", "<\\/")


def series_figure(view: SeriesView) -> str:
    """The series page's figure: raw samples per night (box + every sample), the medians, each night's
    reference as the judge named it, the alert's reference and band, A/B runs, change points; under it
    the pool's telemetry (clock, max temperature)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    nights = view.nights
    labels = [night_label(n) for n in nights]
    # a strip, and an axis, only for the telemetry the series has (a CPU pool has a clock, no temperature)
    clock = any(n.clock_mhz is not None for n in nights)
    temp = any(n.temp_c is not None for n in nights)
    telemetry = clock or temp
    fig = make_subplots(rows=2 if telemetry else 1, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=[0.74, 0.26] if telemetry else [1.0],
                        specs=[[{}], [{"secondary_y": clock and temp}]] if telemetry else [[{}]])
    unit = view.unit
    by_verdict: dict[str, list[Night]] = {}
    for n in nights:
        by_verdict.setdefault(_verdict_name(n), []).append(n)
    for name, members in by_verdict.items():
        xs = [night_label(n) for n in members for _ in n.samples]
        ys = [v for n in members for v in n.samples]
        fig.add_trace(go.Box(x=xs, y=ys, name=f"samples ({name})", boxpoints="all", jitter=0.35, pointpos=0,
                             marker={"size": 4, "opacity": 0.6, "color": _colour(members[0].verdict)},
                             line={"width": 1}, legendgroup="samples",
                             hovertemplate="%{x}<br>sample %{y} " + _escape(unit) + "<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=labels, y=[n.median for n in nights], mode="lines+markers", name="median",
                             line={"color": HISTORY_COLOUR, "width": 1.5},
                             marker={"size": 9, "color": [_colour(n.verdict) for n in nights],
                                     "line": {"width": 1, "color": "white"}},
                             hovertext=[night_hover(n) for n in nights], hoverinfo="text"), row=1, col=1)
    refs = [(night_label(n), n) for n in nights if n.figures is not None]
    if refs:
        fig.add_trace(go.Scatter(
            x=[x for x, _ in refs], y=[n.figures.reference for _, n in refs if n.figures is not None],
            mode="markers", name="the judge's reference that night",
            marker={"symbol": "line-ew-open", "size": 16, "color": "#555555", "line": {"width": 2}},
            hovertext=[_escape(f"{cells.reference_text(n.comparison)}: "
                               f"{cells.format_value(n.figures.reference, n.figures.unit or unit)}")
                       for _, n in refs if n.comparison is not None and n.figures is not None],
            hoverinfo="text"), row=1, col=1)
    _ab_runs(fig, nights, unit)
    if view.alert is not None:
        a = view.alert
        level, band = a.base_value, a.band_pct
        fig.add_hrect(y0=level * (1 - band / 100), y1=level * (1 + band / 100), fillcolor=REFERENCE_COLOUR,
                      opacity=0.10, line_width=0, row=1, col=1, showlegend=True,
                      name=_escape(f"alert #{a.id} band (±{band:g}%)"))
        fig.add_hline(y=level, line={"color": REFERENCE_COLOUR, "dash": "dot", "width": 2}, row=1, col=1,
                      annotation_text=_escape(f"alert #{a.id} reference {cells.format_value(level, a.unit)} "
                                              f"±{band:g}%"), annotation_position="top left")
    at_night: dict[str, list[Any]] = {}
    for mark in view.marks:  # one line per night, however many marks name it
        at_night.setdefault(mark.run_key, []).append(mark)
    for n in nights:
        marks = at_night.get(n.run_key)
        if not marks:
            continue
        x = night_label(n)
        first_bad = any(m.kind == "first bad" for m in marks)
        fig.add_vline(x=x, line={"color": "#d62728" if first_bad else "#7f7f7f", "dash": "dash", "width": 1.5})
        fig.add_annotation(x=x, y=1.0, yref="y domain", text=_escape(" + ".join(dict.fromkeys(m.kind for m in marks))),
                           showarrow=False, yshift=10, hovertext=_escape("; ".join(m.text for m in marks)),
                           font={"size": 11})
    if clock:
        fig.add_trace(go.Scatter(x=labels, y=[n.clock_mhz for n in nights], mode="lines+markers",
                                 name="pool clock (MHz, median)", line={"color": CLOCK_COLOUR},
                                 connectgaps=False), row=2, col=1)
        fig.update_yaxes(title_text="MHz", row=2, col=1, secondary_y=False)
    if temp:  # on the right of the clock when both are drawn, else alone on the strip's axis
        fig.add_trace(go.Scatter(x=labels, y=[n.temp_c for n in nights], mode="lines+markers",
                                 name="pool max temperature (°C)", line={"color": TEMP_COLOUR, "dash": "dot"},
                                 connectgaps=False), row=2, col=1, **({"secondary_y": True} if clock else {}))
        fig.update_yaxes(title_text="°C", row=2, col=1, **({"secondary_y": True} if clock else {}))
    fig.update_yaxes(title_text=_escape(f"{view.metric} ({unit})" if unit else view.metric), row=1, col=1)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    fig.update_layout(height=640 if telemetry else 480, margin={"l": 60, "r": 30, "t": 40, "b": 60},
                      hovermode="closest", dragmode="zoom", legend={"orientation": "h", "y": -0.12},
                      boxmode="overlay", template="plotly_white")
    return to_json(fig)


def _ab_runs(fig: Any, nights: Sequence[Night], unit: str) -> None:
    """The per-run values of each A/B (base and head), beside the night that ran it, with its CI and p."""
    import plotly.graph_objects as go

    for side, colour, symbol in (("base", "#7f7f7f", "triangle-left"), ("head", "#d62728", "triangle-right")):
        xs: list[str] = []
        ys: list[float] = []
        text: list[str] = []
        for n in nights:
            f = n.figures
            runs = () if f is None else (f.runs_base if side == "base" else f.runs_head)
            for v in runs:
                xs.append(night_label(n))
                ys.append(v)
                ci = "" if f is None or f.ci_pct is None else f" · 95% CI [{f.ci_pct[0]:+.2f}%, {f.ci_pct[1]:+.2f}%]"
                p = "" if f is None or f.p_value is None else f" · p = {f.p_value:.3g}"
                text.append(_escape(f"A/B {side} run: {cells.format_value(v, unit)}{ci}{p}"))
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=f"A/B {side} runs",
                                     marker={"symbol": symbol, "size": 10, "color": colour},
                                     hovertext=text, hoverinfo="text"), row=1, col=1)


def cross_figure(view: CrossView) -> str:
    """One panel per pool, side by side on one y axis: each night's stored change against that pool's own
    reference (``Figures.change_pct``), coloured by the night's verdict (one trace per pool and verdict,
    named by the verdict, so the legend says what each colour is; the trace's ``meta`` is its pool), the
    threshold it was judged with as a band."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    columns = [c for c in view.pools if c.nights]
    if not columns:
        return to_json(go.Figure())
    titles = [_escape(f"{c.pool} ({c.backend})" if c.backend else c.pool) for c in columns]
    fig = make_subplots(rows=1, cols=len(columns), shared_yaxes=True, subplot_titles=titles,
                        horizontal_spacing=0.03)
    in_legend: set[str] = set()
    for i, col in enumerate(columns, start=1):
        judged = [n for n in col.nights if n.change_pct is not None]
        by_verdict: dict[str, list[Night]] = {}
        for n in judged:
            by_verdict.setdefault(_verdict_name(n), []).append(n)
        for name, members in by_verdict.items():  # one trace per verdict: its colour is a legend entry
            fig.add_trace(go.Bar(x=[night_label(n) for n in members], y=[n.change_pct for n in members],
                                 marker={"color": _colour(members[0].verdict)}, name=name, legendgroup=name,
                                 showlegend=name not in in_legend, meta=col.pool,
                                 text=[cells.fmt_change(n.change_pct) for n in members], textposition="outside",
                                 hovertext=[night_hover(n) for n in members], hoverinfo="text"),
                          row=1, col=i)
            in_legend.add(name)
        latest = col.latest
        if latest is not None and latest.comparison is not None and latest.comparison.judgement.threshold_pct:
            t = latest.comparison.judgement.threshold_pct
            fig.add_hrect(y0=-t, y1=t, fillcolor="#555555", opacity=0.08, line_width=0, row=1, col=i,
                          name="the pool's threshold (shaded)", legendgroup="threshold",
                          showlegend="threshold" not in in_legend)
            in_legend.add("threshold")
        fig.update_xaxes(type="category", tickangle=-45, categoryorder="array",
                         categoryarray=[night_label(n) for n in judged], row=1, col=i)
    fig.add_hline(y=0, line={"color": "black", "width": 1})
    fig.update_yaxes(title_text="change vs the pool's reference (%)", row=1, col=1)
    fig.update_layout(height=520, margin={"l": 60, "r": 20, "t": 50, "b": 130}, hovermode="closest",
                      dragmode="zoom", template="plotly_white", barmode="overlay", showlegend=True,
                      legend={"orientation": "h", "y": -0.35})
    return to_json(fig)


def matrix_figure(view: MatrixView, links: dict[tuple[str, str], str]) -> str:
    """The op family x pool heatmap of a night: each cell coloured by the stored ``worse_pct`` of its worst
    row (positive = worse, whatever the metric's direction), labelled with that row's stored change and
    case; ``links`` (family, pool) -> the page a click opens (the worst case's series)."""
    import plotly.graph_objects as go

    pools = [p for p, _ in view.pools]
    families = [r.family for r in view.rows]
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    hover: list[list[str]] = []
    custom: list[list[str]] = []
    for row in view.rows:
        zs: list[float | None] = []
        texts: list[str] = []
        hovers: list[str] = []
        for pool in pools:
            cell = row.cells.get(pool)
            worst = cell.worst if cell is not None else None
            zs.append(None if worst is None else worst.judgement.worse_pct)
            if cell is None:
                texts.append("")
                hovers.append(_escape(f"{row.family} · {pool}: not measured"))
                continue
            texts.append("no change" if worst is None else
                         _escape(f"{cells.fmt_change(worst.judgement.change_pct)} {worst.verdict.label}"))
            lines = [f"<b>{_escape(row.family)} · {_escape(pool)}</b>: {cell.flagged} of {len(cell.rows)} flagged"]
            lines += [_escape(f"{c.case} ({c.metric}): {cells.fmt_change(c.judgement.change_pct)} {c.verdict.label}")
                      for c in cell.rows[:8]]
            if len(cell.rows) > 8:
                lines.append(f"… {len(cell.rows) - 8} more")
            hovers.append("<br>".join(lines))
        z.append(zs)
        text.append(texts)
        hover.append(hovers)
        custom.append([links.get((row.family, pool), "") for pool in pools])
    fig = go.Figure(go.Heatmap(
        z=z, x=[_escape(p) for p in pools], y=[_escape(f) for f in families], text=text, texttemplate="%{text}",
        hovertext=hover, hoverinfo="text", customdata=custom, colorscale="RdBu_r", zmid=0, xgap=2, ygap=2,
        colorbar={"title": {"text": "worse (%)"}}))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", side="top")
    fig.update_layout(height=max(260, 60 + 34 * len(families)), margin={"l": 140, "r": 20, "t": 50, "b": 20},
                      template="plotly_white")
    return to_json(fig)
