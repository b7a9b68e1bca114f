"""The plain-text compare table: the format users of the benchmark skill already read.

Grouped by pool (``### <pool>``), one row per series with Base / HEAD / Delta / Change (%) and a
verdict marker (``!! REGRESSION`` > regression threshold, ``! potential`` > potential threshold,
``improved``, ``new``, ``MISSING``). Units travel in the cells because one pool may mix units.
A case with several metrics gets sub-rows ``  (metric)`` under its first metric, as in the skill's
compare mode. The table ends with a short "Flagged:" list and ``summary.overall_line()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from zlops.model import CompareSummary, Comparison
from zlops.report import cells

COLUMNS = ("Case", "Base", "HEAD", "Delta", "Change (%)", "Verdict")
#: Left-aligned columns; the figures are right-aligned so their digits line up.
_LEFT = {0, 5}
_GAP = "  "


def compare_table(
    summary: CompareSummary,
    *,
    base_label: str | None = None,
    head_label: str | None = None,
    max_rows: int | None = None,
) -> str:
    """Render ``summary`` as a plain-text compare table (pure and deterministic).

    ``max_rows``: above that many rows the per-pool tables are left out (a terminal or a task log of a
    20,000-series suite): each pool gets one line of counts instead, and the flagged series, the reasons
    and the overall line follow as always; the full table is in the run's ``report.txt``.

    ``base_label`` / ``head_label`` replace the commit ids of the header line (for example
    ``"main@1a2b3c4"``); by default they are the short baseline sha (or ``several baselines``) and
    the short sha of ``summary.sha``. Rows are sorted by case then metric so that two nights'
    tables diff cleanly; the flagged series are repeated, worst first, at the end.
    """
    lines = [
        cells.header_line(summary, base_label, head_label),
        f"Suite: {summary.suite}  Run: {summary.run_key}",
    ]
    groups = cells.by_pool(summary.comparisons)
    if not groups:
        lines += ["", "(no comparisons)"]
    brief = max_rows is not None and len(summary.comparisons) > max_rows
    if brief and groups:
        lines.append("")
    for pool, comparisons in groups.items():
        if brief:
            counts: dict[str, int] = {}
            for c in comparisons:
                counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
            lines += [f"### {pool}: {len(comparisons)} series: "
                      + ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))]
            continue
        lines += ["", f"### {pool}", ""]
        lines += _render_rows([COLUMNS, *pool_rows(comparisons)])
    if brief:
        lines += ["", f"({len(summary.comparisons)} rows, above {max_rows}: the per-pool tables are in report.txt)"]

    caliber = caliber_lines(summary.comparisons)
    if caliber:
        lines += ["", *caliber]
    flagged = cells.flagged_order(summary.comparisons)
    if flagged:
        lines += ["", "Flagged:"]
        lines += [f"  {_flag_line(c)}" for c in flagged]
    reasons = cells.reason_lines(summary.comparisons)
    if reasons:
        lines += ["", "Not decided or not judged (why):"]
        lines += [f"  {r}" for r in reasons]
    lines += ["", summary.overall_line()]
    return "\n".join(lines) + "\n"


def caliber_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """The ``!!! [caliber]`` findings of the comparisons' notes, once per pool (first, before any delta)."""
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    for c in cells.sorted_comparisons(comparisons):
        for part in (c.judgement.note or "").split("; "):
            if ("[caliber]" in part) and (c.pool, part) not in seen:
                seen.add((c.pool, part))
                out.append(f"{part} (pool {c.pool})")
    return out


def pool_rows(comparisons: Sequence[Comparison]) -> list[tuple[str, ...]]:
    """The body rows of one pool's table, in report order, as cell strings."""
    multi_metric = len({c.metric for c in comparisons}) > 1
    rows: list[tuple[str, ...]] = []
    previous_case: str | None = None
    for c in cells.sorted_comparisons(comparisons):
        if not multi_metric:
            label = c.case
        elif c.case != previous_case:
            label = f"{c.case} ({c.metric})"
        else:
            label = f"  ({c.metric})"
        previous_case = c.case
        rows.append(row_cells(c, label))
    return rows


def row_cells(c: Comparison, label: str) -> tuple[str, ...]:
    """One series as ``(label, base, head, delta, change, marker)`` strings."""
    return (
        label,
        cells.fmt_value(c.base_value, cells.base_unit(c)),
        cells.fmt_value(c.head_value, c.unit),
        cells.fmt_delta(c.delta, c.unit, scale=c.base_value),
        cells.fmt_change(cells.change_pct(c)),
        cells.marker(c.verdict),
    )


def _render_rows(rows: Sequence[Sequence[str]]) -> list[str]:
    """Align ``rows`` (the first is the header) into columns with a dashed rule under the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]

    def fmt(row: Sequence[str]) -> str:
        parts = [
            cell.ljust(widths[i]) if i in _LEFT else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ]
        return _GAP.join(parts).rstrip()

    rule = _GAP.join("-" * w for w in widths)
    return [fmt(rows[0]), rule, *(fmt(r) for r in rows[1:])]


def _flag_line(c: Comparison) -> str:
    base = cells.fmt_value(c.base_value, cells.base_unit(c))
    head = cells.fmt_value(c.head_value, c.unit)
    change = cells.fmt_change(cells.change_pct(c))
    return (f"{cells.marker(c.verdict):<13}  {cells.series_name(c)}: {change} ({base} -> {head}; "
            f"Base = {cells.reference_text(c)})")
