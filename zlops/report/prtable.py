"""The PR compare report in the seed's format: grouped by variant (runtime), one row per example
with the headline metric and sub-rows for the others, Base / HEAD / Delta / Change %, the overall
line, and the different-devices note. Pure functions over plain values."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from zlops.model import CaseResult, Comparison, Verdict
from zlops.report import cells

IMPROVED = (Verdict.IMPROVED,)
REGRESSED = (Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE)


def _render(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cols = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        out.append("  ".join(cols).rstrip())
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def _headline(metrics: Sequence[str], preferred: str | None) -> str:
    return preferred if preferred in metrics else metrics[0]


def _unit_label(units: set[str]) -> str:
    return f" ({units.pop()})" if len(units) == 1 else ""


def compare_report(variants: Mapping[str, Sequence[Comparison]], *, base_sha: str, head_sha: str, ref: str,
                   args: str, devices: tuple[int, int] | None, headline: str | None = None,
                   caliber_lines: Sequence[str] = (), errors: Sequence[str] = (),
                   shown: Callable[[Comparison], bool] | None = None) -> str:
    """The compare-mode table; ``devices`` is (baseline device, head device).

    ``shown`` keeps only the cases with a row it accepts in the tables (the forge check shows the
    changed series); the Overall line still counts every case, and a line says how many were left out.
    """
    lines = [f"Merge-base: {cells.short_sha(base_sha)} -> HEAD: {cells.short_sha(head_sha)} ({ref})", f"Args: {args}"]
    if devices is not None:
        lines.append(f"Device: baseline={devices[0]}, current={devices[1]}")
    if caliber_lines:
        lines += ["", *caliber_lines]
    improved = regressed = judged = 0
    headline_names = set()
    hidden = 0
    for variant, rows in variants.items():
        by_case: dict[str, list[Comparison]] = {}
        for c in rows:
            by_case.setdefault(c.case, []).append(c)
        visible = {case for case, cs in by_case.items() if shown is None or any(shown(c) for c in cs)}
        hidden += len(by_case) - len(visible)
        if visible:
            lines += ["", f"### {variant}", ""]
        units = {c.unit for c in rows}
        unit = _unit_label(set(units))
        table = [("Example", f"Base{unit}", f"HEAD{unit}", f"Delta{unit}", "Change (%)", "")]
        for case in sorted(by_case):
            metrics = [c.metric for c in by_case[case]]
            head_metric = _headline(metrics, headline)
            headline_names.add(head_metric)
            ordered = sorted(by_case[case], key=lambda c: (c.metric != head_metric, metrics.index(c.metric)))
            for i, c in enumerate(ordered):
                label = case if i == 0 else f"  ({c.metric})"
                show_unit = "" if unit else c.unit
                row = (label, cells.fmt_value(c.base_value, show_unit).strip(),
                       cells.fmt_value(c.head_value, show_unit).strip(),
                       cells.fmt_delta(c.delta, show_unit, scale=c.base_value).strip(),
                       cells.fmt_change(cells.change_pct(c)), cells.marker(c.verdict))
                if i == 0 and c.verdict not in (Verdict.NEW, Verdict.MISSING, Verdict.INCOMPARABLE):
                    judged += 1
                    improved += c.verdict in IMPROVED
                    regressed += c.verdict in REGRESSED
                if case in visible:
                    table.append(row)
        if visible:
            lines += _render(table)
    if hidden:
        lines += ["", f"({hidden} unchanged example{'s' if hidden != 1 else ''} not shown)"]
    based = f" (based on {', '.join(sorted(headline_names))})" if headline_names else ""
    lines += ["", f"Overall: {improved} of {judged} examples improved, {regressed} regressed{based}"]
    if devices is not None and devices[0] != devices[1]:
        lines += ["", (f"Note: Baseline and current ran on different devices ({devices[0]} vs {devices[1]}). "
                       "Results within ±2% may reflect device-to-device variance rather than code changes. "
                       "For a definitive comparison, re-run on one device (devices: [N]).")]
    lines += [f"Error: {e}" for e in errors]
    return "\n".join(lines) + "\n"


def single_report(variants: Mapping[str, Sequence[CaseResult]], *, head_sha: str, ref: str, args: str,
                  headline: str | None = None, errors: Sequence[str] = ()) -> str:
    """Single mode (the ref has no commits beyond main): one table of medians per variant."""
    lines = [f"Benchmark at: {cells.short_sha(head_sha)} ({ref}: no commits beyond main)", f"Args: {args}"]
    for variant, results in variants.items():
        metrics: list[str] = []
        for r in results:
            if r.metric not in metrics:
                metrics.append(r.metric)
        if headline in metrics:
            metrics.remove(headline)
            metrics.insert(0, headline)
        by_case: dict[str, dict[str, CaseResult]] = {}
        for r in results:
            by_case.setdefault(r.case, {})[r.metric] = r
        units = {m: next(r.unit for r in results if r.metric == m) for m in metrics}
        table = [("Example", *(f"{m} ({units[m]})" for m in metrics))]
        for case in sorted(by_case):
            table.append((case, *(cells.fmt_value(by_case[case][m].median, "").strip() if m in by_case[case] else "-"
                                  for m in metrics)))
        lines += ["", f"### {variant}", "", *_render(table)]
    lines += [f"Error: {e}" for e in errors]
    return "\n".join(lines) + "\n"
