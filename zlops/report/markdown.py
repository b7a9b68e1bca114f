"""The run report as GitHub-flavoured markdown: shards, compare tables, flagged series with plots.

Pure: it renders values it is given (plots must already exist as files; this only links them).
Paths are written relative to ``artifacts_root`` when given, so the report can be published
together with its artifact folder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from zlops.backends.clocks import clock_label
from zlops.model import (
    CompareSummary,
    Comparison,
    RunRecord,
    ShardOutcome,
    ShardStatus,
    Verdict,
    class_bounds,
)
from zlops.report import cells
from zlops.report.ab_cost import ab_section
from zlops.report.table import caliber_lines, row_cells
from zlops.run.partition import schedule_section

PlotKey = tuple[str, str, str]  # (pool, case, metric)

_ERROR_CHARS = 120


def markdown_report(
    summary: CompareSummary,
    *,
    run: RunRecord,
    shards: Sequence[ShardOutcome],
    plots: Mapping[PlotKey, Path] | None = None,
    thresholds: tuple[float, float] = (2.0, 5.0),
    artifacts_root: Path | None = None,
    telemetry: Mapping[tuple[str, int], Mapping[str, Any]] | None = None,
    alerts: Sequence[str] = (),
    gang_busy: Mapping[tuple[str, int], float] | None = None,
    judge: str = "simple",
    canary: Sequence[str] = (),
    coverage: Sequence[str] = (),
) -> str:
    """Render one run's report as GitHub-flavoured markdown (pure and deterministic).

    ``coverage``: the night's coverage, a line per pool and one per pool whose coverage fell
    (:func:`zlops.judge.coverage.pool_lines`, the one rendering of the figure).

    ``gang_busy``: a campaign run's device-seconds per (pool, device) (:func:`zlops.run.partition.gang_busy`),
    so its Schedule counts a gang shard on every device it held.

    ``plots`` maps ``(pool, case, metric)`` to a trend plot file, shown under "Flagged";
    ``thresholds`` is ``(potential_pct, regression_pct)`` as the judge applied them, stated in the
    notes so a reader knows what "flagged" meant tonight, as ``judge`` meant it
    (:func:`zlops.model.class_bounds`, the words of every rendering).
    """
    plots = plots or {}
    potential_pct, regression_pct = thresholds
    out: list[str] = [
        f"# {summary.suite} @ `{cells.short_sha(run.sha)}`",
        "",
        f"- Run: `{run.run_key}`",
        f"- Kind: {run.kind}",
        f"- Branch: `{run.branch}`",
        f"- Commit: `{run.sha}`",
        f"- {cells.header_line(summary, None, None)}",
        f"- Run status: {run.status.value}" + (" (baseline promotion follows this report)"
                                                if run.status.value == "running" else ""),
        *([f"- Baseline: {promotion_line(run.meta['promotion'])}"]
          if isinstance(run.meta.get("promotion"), dict) else []),  # zlops.judge.promotion: whether and why
        "",
    ]
    if alerts:  # the regression lifecycle's changes tonight (zlops.slack.announce)
        out += ["## Alerts", "", *(f"- {_cell(line)}" for line in alerts), ""]
    if coverage:  # the share of series watched at both thresholds and why the others are not (zlops.judge.coverage)
        out += ["## Coverage", "", *(f"- {_cell(line)}" for line in coverage), ""]
    if canary:  # the recall canary zlops planted (zlops.judge.canary): a line of its own, never an alert
        out += ["## Recall canary", "", *(f"- {_cell(line)}" for line in canary), ""]
    out += _shard_section(shards, artifacts_root)
    # scale-out: predicted (partition plan) against realized makespan, device idle time (zlops.run.partition)
    out += schedule_section(run.meta.get("partition"), shards, gang_busy)
    out += campaign_section(run.meta.get("campaign"), summary)
    out += ab_section(run.meta)   # what each pool's A/B cost against its estimate and budget (zlops.judge.confirm)
    out += _telemetry_section(telemetry or {})
    caliber = caliber_lines(summary.comparisons)
    if caliber:   # a caliber break is a wall: said before any delta
        out += ["## Caliber", "", *(f"- {_cell(line)}" for line in caliber), ""]
    out += _compare_section(summary)
    out += _flagged_section(summary, plots, artifacts_root, telemetry or {})
    reasons = cells.reason_lines(summary.comparisons)
    if reasons:
        out += ["## Not decided or not judged", "", *(f"- {_cell(r)}" for r in reasons), ""]
    out += [
        "## Notes",
        "",
        *class_notes(judge, potential_pct, regression_pct),
        ("- Change (%) is (HEAD - Base) / Base; whether a positive change is worse depends on the "
         "metric (lower is better for times, higher for throughput)."),
        ("- Base is what the verdict compared tonight with (its reference: the median of the last accepted "
         "nights, a level of a multi-modal series, or the A/B base runs), HEAD tonight's value (or the A/B head "
         "runs); Delta and Change (%) are computed from exactly these two. The Reference column names it."),
        "",
    ]
    return "\n".join(out)


def campaign_section(plans: Mapping[str, Any] | None, summary: CompareSummary) -> list[str]:
    """A campaign's plan (gang LPT per pool) and tonight's scaling verdicts in words (zlops.campaign.scaling);
    every number is the plan's or a verdict's own figures."""
    from zlops.campaign.plan import CampaignPlan
    from zlops.campaign.scaling import derived_kind, scaling_lines

    derived = [c for c in summary.comparisons if derived_kind(c.metric)]
    if not plans and not derived:
        return []
    out = ["## Campaign", ""]
    for raw in (plans or {}).values():
        plan = CampaignPlan.from_dict(raw)
        out.append(f"- {plan.summary()}.")
        for p in plan.unplaced:
            out.append(f"- `{p.series_case}` not run: it needs {p.p} devices, the pool has {len(plan.devices)}.")
    lines = scaling_lines(summary.comparisons)
    out += ["", "### Scaling", ""]
    if not lines:
        # "none moved" is said only of what was judged: a series the noise hides is counted, not called unmoved
        gaps = Counter(c.verdict.value for c in derived if c.verdict.value in ("unmeasurable", "invalid", "missing",
                                                                                "failed", "incomparable"))
        why = "; ".join(f"{n} {v}" for v, n in sorted(gaps.items()))
        lines = ["- No strong-scaling efficiency or stack ratio was flagged tonight"
                 + (f" ({why}: not judged at the threshold, see the table)." if why else ".")]
    out += lines
    if derived:
        out += ["", "| Pool | Series | Metric | Base | HEAD | Change (%) | Verdict |", "|---|---|---|---:|---:|---:|---|"]
        for c in sorted(derived, key=lambda c: (c.pool, c.case, c.metric)):
            out.append(f"| {c.pool} | `{_cell(c.case)}` | {c.metric} | {cells.fmt_value(c.base_value, c.unit)} | "
                       f"{cells.fmt_value(c.head_value, c.unit)} | {cells.fmt_change(cells.change_pct(c))} | "
                       f"{c.verdict.label} |")
    out.append("")
    return out


def promotion_line(p: Mapping[str, Any]) -> str:
    """Whether the run became (or will become) the baseline, and why (``run.meta["promotion"]``)."""
    return f"{'promoted' if p.get('accepted') else 'not promoted'}: {p.get('reason', '')}"


def telemetry_line(t: Mapping[str, Any]) -> str:
    """One shard's telemetry summary in a phrase: what a delta's reader needs to rule heat out."""
    if not t or not t.get("samples"):
        return f"no telemetry ({_first_line(t.get('error')) or 'sampler unavailable'})" if t else "no telemetry"
    parts = []
    if t.get("sm_clock_median_mhz") is not None:
        parts.append(f"{clock_label(t.get('backend'))} {t['sm_clock_median_mhz']:.0f} MHz median, "
                     f"{t['sm_clock_min_mhz']:.0f} min")
        parts.append(f"{100 * t.get('below_90pct_peak_share', 0.0):.0f}% of busy samples below 90% of peak")
    if t.get("temp_max_c") is not None:
        parts.append(f"{t['temp_max_c']:.0f} °C max")
    if t.get("power_mean_w") is not None:
        parts.append(f"{t['power_mean_w']:.0f} W mean")
    return ", ".join(parts) + f" ({t['samples']} samples)"


def _telemetry_section(telemetry: Mapping[tuple[str, int], Mapping[str, Any]]) -> list[str]:
    if not telemetry:
        return []
    out = ["## Telemetry", "", "| Pool | Device | During the benchmark |", "|---|---:|---|"]
    for (pool, device), t in sorted(telemetry.items()):
        out.append(f"| {_cell(pool)} | {device} | {_cell(telemetry_line(t))} |")
    return [*out, ""]


def _shard_section(shards: Sequence[ShardOutcome], root: Path | None) -> list[str]:
    ok = sum(1 for s in shards if s.status is ShardStatus.OK)
    out = ["## Shards", "", f"{ok} of {len(shards)} shards ok.", ""]
    if not shards:
        return out
    out += [
        "| Pool | Device | Backend | Status | Duration | Error | Artifacts |",
        "|---|---:|---|---|---:|---|---|",
    ]
    for s in sorted(shards, key=lambda s: (s.pool, s.device, s.backend)):
        status = s.status.value if s.status is ShardStatus.OK else f"**{s.status.value}**"
        out.append(
            "| " + " | ".join([
                _cell(s.pool), str(s.device), _cell(s.backend), status,
                _duration(s.duration_s), _cell(_first_line(s.error)),
                f"`{_cell(_rel(s.artifact_dir, root))}`",
            ]) + " |"
        )
    return [*out, ""]


_HEADER = ["| Case | Metric | Base | HEAD | Delta | Change (%) | Verdict | Reference |",
           "|---|---|---:|---:|---:|---:|---|---|"]


def _compare_section(summary: CompareSummary) -> list[str]:
    """One table per pool, rows grouped by operator family, the most urgent family and row first; a pool of
    more than :data:`cells.GROUP_ROWS` rows gets a family index and one table per family, the families
    where every case is unchanged folded (``<details>``), so 20,000 rows still read from the top."""
    out = ["## Comparison", ""]
    groups = cells.by_pool(summary.comparisons)
    if not groups:
        out += ["No comparisons.", ""]
    for pool, comparisons in groups.items():
        families = cells.family_groups(comparisons)
        out += [f"### {pool}", ""]
        if len(comparisons) <= cells.GROUP_ROWS:
            out += [*_HEADER, *(_row(c) for g in families for c in g.rows), ""]
            continue
        loud = [g for g in families if not g.quiet]
        out += [f"{len(comparisons)} rows in {len(families)} operator families; {len(loud)} with something to "
                "read come first, the rest (every case unchanged) are folded.", "",
                "| Family | Cases | Flagged | Awaiting | Improved | Not judged | Unchanged |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for g in families:
            k = g.counts()
            out.append(f"| {_cell(g.family)} | {len(g.rows)} | {k['flagged']} | {k['awaiting']} | {k['improved']} "
                       f"| {k['not judged']} | {k['unchanged']} |")
        out.append("")
        for g in families:
            if g.quiet:
                out += [f"<details><summary>{_html(g.summary())}</summary>", "", *_HEADER,
                        *(_row(c) for c in g.rows), "", "</details>", ""]
            else:
                out += [f"#### {_cell(g.summary())}", "", *_HEADER, *(_row(c) for c in g.rows), ""]
    return [*out, f"**{summary.overall_line()}**", ""]


def _row(c: Comparison) -> str:
    case, base, head, delta, change, mark = row_cells(c, c.case)
    row = [_cell(case), _cell(c.metric), base, head, delta, change, mark, _cell(cells.reference_text(c))]
    if c.verdict.flagged:
        row = [f"**{x}**" for x in row]
    return "| " + " | ".join(row) + " |"


def _html(text: str) -> str:
    from html import escape

    return escape(text, quote=False)


def _flagged_section(
    summary: CompareSummary, plots: Mapping[PlotKey, Path], root: Path | None,
    telemetry: Mapping[tuple[str, int], Mapping[str, Any]] | None = None,
) -> list[str]:
    flagged = cells.flagged_order(summary.comparisons)
    missing = [c for c in cells.sorted_comparisons(summary.comparisons) if c.verdict is Verdict.MISSING]
    out = ["## Flagged", ""]
    if not flagged:
        out += ["Nothing flagged.", ""]
    for c in flagged:
        out += _flagged_entry(c, plots.get((c.pool, c.case, c.metric)), root)
        pool_t = [(d, t) for (p, d), t in sorted((telemetry or {}).items()) if p == c.pool]
        if pool_t:  # next to the delta: could heat or clocks explain it?
            out[-1:-1] = ["Telemetry tonight: " + "; ".join(f"device {d}: {telemetry_line(t)}" for d, t in pool_t),
                          ""]
    if missing:
        out += ["### Missing tonight", ""]
        out += [f"- {_cell(cells.series_name(c))}: in the baseline, no value tonight" for c in missing]
        out.append("")
    return out


def _flagged_entry(c: Comparison, plot: Path | None, root: Path | None) -> list[str]:
    base = cells.fmt_value(c.base_value, cells.base_unit(c))
    head = cells.fmt_value(c.head_value, c.unit)
    change = cells.fmt_change(cells.change_pct(c))
    baseline = f" (Base = {_cell(cells.reference_text(c))})" if c.base is not None or c.figures else ""
    out = [
        f"### {cells.marker(c.verdict)}: {_cell(cells.series_name(c))}",
        "",
        f"{change}: {base} -> {head}{baseline}.",
    ]
    if c.judgement.note:
        out += ["", f"> {_first_line(c.judgement.note)}"]
    if plot is not None:
        link = quote(_rel(plot, root))
        out += ["", f"[![trend of {_cell(c.case)}]({link})]({link})"]
    return [*out, ""]


def _rel(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` when it lies under it, else as given; always ``/``-separated."""
    p = PurePath(path)
    if root is not None and p.is_relative_to(PurePath(root)):
        p = p.relative_to(PurePath(root))
    return p.as_posix()


def _cell(text: str) -> str:
    """Make ``text`` safe inside a markdown table cell or heading."""
    return text.replace("|", "\\|").replace("\n", " ")


def _first_line(text: str | None) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 3] + "..."


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return cells.NONE
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def class_notes(judge: str, potential_pct: float, regression_pct: float) -> list[str]:
    """The report's notes on what each class meant tonight (:func:`zlops.model.class_bounds`)."""
    words = class_bounds(judge, potential_pct, regression_pct, long=True)
    if judge == "noise":
        return [f"- Severe (`!!! SEVERE`): {words[Verdict.SEVERE]}.",
                f"- Regression (`!! REGRESSION`): {words[Verdict.REGRESSION]} (and beyond the series' own noise).",
                f"- Improved: {words[Verdict.IMPROVED]}; a change not yet confirmed is a suspect, nobody is alerted.",
                ("- A derived metric (speedup, TFLOPS, GB/s, a campaign's efficiency or ratio) has the verdict of the "
                 "timing it comes from, its change as a ratio of that timing's (docs/statistics.md).")]
    return [f"- Potential regression (flagged, `! potential`): {words[Verdict.POTENTIAL]}.",
            f"- Regression (highlighted, `!! REGRESSION`): {words[Verdict.REGRESSION]}.",
            f"- Improved: {words[Verdict.IMPROVED]}; anything within ±{potential_pct:g}% is treated as noise."]
