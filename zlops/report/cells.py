"""Cell formatting shared by the text table, the markdown report and the Slack summary.

One place decides how a value, a delta, a change percentage, a verdict marker and a commit id look,
so the three renderings of one run always agree.

Values are formatted by :func:`zlops.metrics.format_value` (the unit registry); a unit the registry
does not know falls back to the same layout here, because a report must never fail over a unit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from zlops import metrics
from zlops.model import CompareSummary, Comparison, ShardOutcome, ShardStatus, Verdict

#: What is shown where a value does not exist (no baseline, nothing tonight).
NONE = "-"

#: The verdict marker column, as users of the benchmark skill expect it.
MARKERS: dict[Verdict, str] = {
    Verdict.REGRESSION: "!! REGRESSION",
    Verdict.POTENTIAL: "! potential",
    Verdict.IMPROVED: "improved",
    Verdict.UNCHANGED: "",
    Verdict.NEW: "new",
    Verdict.MISSING: "MISSING",
    Verdict.SEVERE: "!!! SEVERE",
    Verdict.SUSPECT: "? suspect",
    Verdict.SUSPECT_IMPROVED: "? suspect improvement",
    Verdict.INVALID: "invalid",
    Verdict.UNMEASURABLE: "unmeasurable",
    Verdict.FAILED: "FAILED",
    Verdict.INCOMPARABLE: "!!! [caliber]",
}

SHORT_SHA = 7


def _number(value: float) -> str:
    """4 significant digits, as :func:`zlops.metrics.format_value` writes them.

    ``%.4g`` (``1240.1`` -> ``1240``, ``12.345`` -> ``12.35``), except that from 1e4 up to 1e15
    the value is an integer (``480000``, not ``4.8e+05``) and below 1e-3 it is in exponent form.
    """
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    if 1e4 <= abs(value) < 1e15:
        return f"{value:.0f}"
    if abs(value) < 1e-3:
        return f"{value:.3e}"
    return f"{value:.4g}"


def format_value(value: float, unit: str) -> str:
    """``1240.1, "us"`` -> ``"1240 us"``: the registry's formatting, or the same layout for an unknown unit."""
    try:
        return metrics.format_value(value, unit)
    except metrics.UnknownUnit:
        text = _number(value)
        return f"{text} {unit}" if unit else text


def fmt_value(value: float | None, unit: str) -> str:
    return NONE if value is None else format_value(value, unit)


def fmt_delta(value: float | None, unit: str, *, scale: float | None = None) -> str:
    """A signed delta: ``+1.8 us``, ``-4.6 us``; an exact zero shows as ``0 us``.

    With ``scale`` (the base value) the delta gets the decimals of 4 significant digits of the base,
    so a small delta of a 0.2746 ms case reads ``+0.0009 ms`` rather than ``+9.420e-04 ms``.
    """
    if value is None:
        return NONE
    if scale is not None and scale != 0 and math.isfinite(scale) and math.isfinite(value):
        decimals = max(0, 3 - math.floor(math.log10(abs(scale))))
        fixed = f"{abs(value):.{decimals}f}"
        text = fixed.rstrip("0").rstrip(".") if "." in fixed else fixed
        text = f"{text} {unit}" if unit else text
        if float(fixed) == 0:
            return text
    else:
        text = format_value(abs(value), unit)
    if value > 0:
        return "+" + text
    if value < 0:
        return "-" + text
    return text


def change_pct(c: Comparison) -> float | None:
    """The raw change ``(head - base) / base * 100``: the judge's figure, else computed."""
    if c.judgement.change_pct is not None:
        return c.judgement.change_pct
    base, head = c.base_value, c.head_value
    if base is None or head is None or base == 0:
        return None
    return (head - base) / base * 100.0


def fmt_change(pct: float | None) -> str:
    """Sign and two decimals: ``+29.66%``, ``-0.37%``, ``+0.00%``."""
    if pct is None:
        return NONE
    if pct == 0:
        pct = 0.0  # no "-0.00%"
    return f"{pct:+.2f}%"


def marker(verdict: Verdict) -> str:
    return MARKERS[verdict]


def reference_name(c: Comparison) -> str:
    """Which samples "Base" is for this row: the verdict's reference label ("A/B base, 8 runs", "median of
    7 nights"), else the baseline commit."""
    if c.figures is not None:
        return c.figures.reference_label
    if c.base is not None:
        return f"baseline {short_sha(c.base.sha)}"
    return NONE


def value_name(c: Comparison) -> str:
    """Which samples "HEAD" is for this row: the verdict's value label ("A/B head, 8 runs", "tonight, 10
    samples"), else tonight's median and its sample count."""
    if c.figures is not None:
        return c.figures.value_label
    if c.head is not None:
        return f"tonight's median, {c.head.n} sample{'s' if c.head.n != 1 else ''}"
    return NONE


def reference_text(c: Comparison) -> str:
    """What "Base" is for this row: :func:`reference_name`, with the A/B's confidence interval when it has one."""
    if c.figures is not None and c.figures.ci_pct is not None:
        lo, hi = c.figures.ci_pct
        return f"{c.figures.reference_label}; 95% CI [{lo:+.2f}%, {hi:+.2f}%]"
    return reference_name(c)


#: verdicts whose reason a report names beside the row (never a bare word)
EXPLAINED = (Verdict.INVALID, Verdict.UNMEASURABLE, Verdict.INCOMPARABLE, Verdict.FAILED, Verdict.SUSPECT,
             Verdict.SUSPECT_IMPROVED)


def reason_lines(comparisons: Iterable[Comparison]) -> list[str]:
    """``marker  pool / case (metric): reason`` for every row whose verdict needs its reason said."""
    out = []
    for c in sorted_comparisons(comparisons):
        if c.verdict in EXPLAINED:
            reason = (c.judgement.note or "no reason recorded").splitlines()[0]
            out.append(f"{marker(c.verdict)}  {series_name(c)}: {reason}")
    return out


def short_sha(sha: str) -> str:
    return sha[:SHORT_SHA]


def baseline_label(comparisons: Iterable[Comparison]) -> str:
    """The baseline commit of a table: one short sha, ``several baselines`` or ``none``."""
    shas = sorted({c.base.sha for c in comparisons if c.base is not None})
    if not shas:
        return "none"
    if len(shas) == 1:
        return short_sha(shas[0])
    return "several baselines"


def header_line(summary: CompareSummary, base_label: str | None, head_label: str | None) -> str:
    base = base_label if base_label is not None else baseline_label(summary.comparisons)
    head = head_label if head_label is not None else short_sha(summary.sha)
    return f"Baseline: {base} -> HEAD: {head}"


def sorted_comparisons(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """Stable report order: pool, then case, then metric."""
    return sorted(comparisons, key=lambda c: (c.pool, c.case, c.metric))


def flagged_order(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """Flagged series, worst first: regressions, then potential ones, each by how much worse."""
    flagged = [c for c in comparisons if c.verdict.flagged]
    return sorted(
        flagged,
        key=lambda c: (
            {Verdict.SEVERE: 0, Verdict.REGRESSION: 1}.get(c.verdict, 2),
            -(c.judgement.worse_pct if c.judgement.worse_pct is not None else 0.0),
            c.pool, c.case, c.metric,
        ),
    )


def by_pool(comparisons: Iterable[Comparison]) -> dict[str, list[Comparison]]:
    """Comparisons grouped by pool, pools and rows in report order."""
    groups: dict[str, list[Comparison]] = {}
    for c in sorted_comparisons(comparisons):
        groups.setdefault(c.pool, []).append(c)
    return groups


def series_name(c: Comparison) -> str:
    """``pool / case (metric)``: how a series is named outside its pool's table."""
    return f"{c.pool} / {c.case} ({c.metric})"


def base_unit(c: Comparison) -> str:
    return c.base.unit if c.base is not None else c.unit


def pool_status(shards: Sequence[ShardOutcome], comparisons: Sequence[Comparison],
                expected: Sequence[str] | None = None) -> tuple[list[str], list[str], list[str]]:
    """Pools that ran, that ran but gave nothing judgeable (invalid), and that did not run (missing).

    Missing: expected (the suite's pools) with no shard that started (none, or all skipped).
    Invalid: a shard started but none ended ok, or every series of the pool is a coverage gap
    or failed. Run: the rest.
    """
    started = {s.pool for s in shards if s.status is not ShardStatus.SKIPPED}
    ok = {s.pool for s in shards if s.status is ShardStatus.OK}
    pools = sorted(set(expected or ()) | {s.pool for s in shards} | {c.pool for c in comparisons})
    unjudgeable = {Verdict.INVALID, Verdict.UNMEASURABLE, Verdict.INCOMPARABLE, Verdict.FAILED, Verdict.MISSING}
    missing = [p for p in pools if p not in started]
    invalid = [p for p in pools if p in started and (
        p not in ok or (any(c.pool == p for c in comparisons)
                        and all(c.verdict in unjudgeable for c in comparisons if c.pool == p)))]
    ran = [p for p in pools if p not in missing and p not in invalid]
    return ran, invalid, missing


#: the order rows need a reader's attention in: confirmed changes, then what waits on a decision, gaps, improvements
_ATTENTION = {Verdict.SEVERE: 0, Verdict.REGRESSION: 1, Verdict.POTENTIAL: 2, Verdict.SUSPECT: 3,
              Verdict.FAILED: 4, Verdict.MISSING: 4, Verdict.INCOMPARABLE: 4, Verdict.INVALID: 5,
              Verdict.UNMEASURABLE: 5, Verdict.SUSPECT_IMPROVED: 6, Verdict.IMPROVED: 7, Verdict.NEW: 8,
              Verdict.UNCHANGED: 9}

#: a pool table with more rows than this is split by operator family, quiet families folded
GROUP_ROWS = 60


def attention_key(c: Comparison) -> tuple[int, float, str, str]:
    """Sort key of a row by how much it needs a reader: worst verdict first, then by how much worse."""
    return (_ATTENTION.get(c.verdict, 9), -(c.judgement.worse_pct or 0.0), c.case, c.metric)


@dataclass(frozen=True)
class FamilyGroup:
    """The rows of one operator family in one pool's table, most urgent first."""

    family: str
    rows: tuple[Comparison, ...]

    @property
    def quiet(self) -> bool:
        """Every case unchanged: nothing to read (a report folds it)."""
        return all(c.verdict is Verdict.UNCHANGED for c in self.rows)

    def counts(self) -> dict[str, int]:
        """Rows per reading class: flagged, awaiting (a suspect either way), improved, not judged, unchanged."""
        out = {"flagged": 0, "awaiting": 0, "improved": 0, "not judged": 0, "unchanged": 0}
        for c in self.rows:
            if c.verdict.flagged:
                out["flagged"] += 1
            elif c.verdict.awaiting_confirmation:
                out["awaiting"] += 1
            elif c.verdict is Verdict.IMPROVED:
                out["improved"] += 1
            elif c.verdict.is_gap:
                out["not judged"] += 1
            else:
                out["unchanged"] += 1
        return out

    def summary(self) -> str:
        """``softmax: 120 cases, 2 flagged, 1 awaiting confirmation`` (``all unchanged`` when quiet)."""
        counts = self.counts()
        n = len(self.rows)
        parts = [f"{v} {'awaiting confirmation' if k == 'awaiting' else k}" for k, v in counts.items()
                 if v and k != "unchanged"]
        if not parts:
            return f"{self.family}: {n} case{'s' if n != 1 else ''}, all unchanged"
        return f"{self.family}: {n} case{'s' if n != 1 else ''}, " + ", ".join(parts)


def family_groups(comparisons: Iterable[Comparison]) -> list[FamilyGroup]:
    """One pool's rows grouped by operator family (:func:`zlops.alerts.lifecycle.op_family`, as the Slack summary and
    alerts group them): families holding the most urgent row first, then by name; rows inside a family
    by :func:`attention_key`. A 20,000-row table reads from its regressions down, not alphabetically."""
    from zlops.alerts.lifecycle import op_family

    groups: dict[str, list[Comparison]] = {}
    for c in comparisons:
        groups.setdefault(op_family(c.case), []).append(c)
    out = [FamilyGroup(name, tuple(sorted(rows, key=attention_key))) for name, rows in groups.items()]
    return sorted(out, key=lambda g: (attention_key(g.rows[0])[:2], g.family))
