"""Derived campaign series: strong-scaling efficiency and paired stack ratios, and their wording.

Pure functions over the campaign's measured :class:`~zlops.model.CaseResult` rows (cases named
``<stem>/p<P>/<variant>/<stack>``, :attr:`zlops.campaign.plan.CampaignCase.series_case`, with the shard
in ``params["campaign"]``). The derived rows are stored beside the measured ones (the ``ingest``
step, :mod:`zlops.campaign.run`), so they get baselines, history and verdicts like any series.

- **Strong-scaling efficiency** per (stem, variant, stack), one series per P above the smallest
  measured P (``P_min``): ``E(P) = t(P_min) * P_min / (t(P) * P)`` (1 = perfect strong scaling;
  the textbook definition, e.g. Hager & Wellein, "Introduction to High Performance Computing for
  Scientists and Engineers", 5.3). Case ``<stem>/<variant>/<stack>``, metric ``efficiency_p<P>``,
  unit ``eff`` (higher is better).
- **Paired stack ratio** per (stem, P, variant) and configured pair (numerator, denominator):
  ``t(numerator) / t(denominator)`` (the seed's pypto / simpler). Case ``<stem>/p<P>/<variant>``,
  metric ``ratio_<num>_over_<den>``, unit ``t/t`` (lower is better: the numerator got faster).

``t`` is each series' median of the scaling metric (``execute_s``): one value per night, so each
derived series has ONE sample a night (the rounds of different processes are not paired), and
its noise is judged from its nights, like a summary-only results.json.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zlops.model import CaseResult, Comparison, Verdict

EFFICIENCY_UNIT = "eff"
RATIO_UNIT = "t/t"
#: params["derived"] of a derived row
EFFICIENCY, RATIO = "efficiency", "stack_ratio"
_EFF_METRIC = re.compile(r"^efficiency_p(\d+)$")
_RATIO_METRIC = re.compile(r"^ratio_(.+)_over_(.+)$")


@dataclass(frozen=True)
class Point:
    """One measured campaign series tonight: its shard's coordinates and the median time."""

    stem: str
    p: int
    variant: str
    stack: str
    value: float
    unit: str


def campaign_points(results: Iterable[CaseResult], metric: str) -> list[Point]:
    """The measured rows of ``metric`` that carry a campaign shard (``params["campaign"]``)."""
    out = []
    for r in results:
        shard = r.params.get("campaign") if isinstance(r.params, Mapping) else None
        if r.metric != metric or not isinstance(shard, Mapping) or r.params.get("derived"):
            continue
        stem = shard["case"] if shard.get("size") is None else f"{shard['case']}/{shard['size_label']}"
        out.append(Point(stem, int(shard["p"]), str(shard["variant"]), str(shard["stack"]), r.median, r.unit))
    return out


def efficiency(points: Sequence[Point], *, metric: str = "execute_s") -> list[CaseResult]:
    """``E(P) = t(P_min) * P_min / (t(P) * P)`` per (stem, variant, stack), for every P > P_min.

    A group measured at a single P (or whose P_min time is not positive) gives nothing: efficiency
    needs a reference point.
    """
    groups: dict[tuple[str, str, str], dict[int, Point]] = {}
    for pt in points:
        groups.setdefault((pt.stem, pt.variant, pt.stack), {})[pt.p] = pt
    out = []
    for (stem, variant, stack), by_p in sorted(groups.items()):
        p_min = min(by_p)
        ref = by_p[p_min]
        if len(by_p) < 2 or ref.value <= 0:
            continue
        for p, pt in sorted(by_p.items()):
            if p == p_min or pt.value <= 0:
                continue
            e = ref.value * p_min / (pt.value * p)
            out.append(CaseResult(
                case=f"{stem}/{variant}/{stack}", metric=f"efficiency_p{p}", unit=EFFICIENCY_UNIT,
                lower_is_better=False, samples=(e,),
                params={"derived": EFFICIENCY, "p": p, "p_min": p_min, "t_p": pt.value, "t_p_min": ref.value,
                        "from_metric": metric, "time_unit": pt.unit, "stack": stack, "variant": variant,
                        "formula": f"E({p}) = t({p_min})*{p_min} / (t({p})*{p})"}))
    return out


def stack_ratios(points: Sequence[Point], pairs: Sequence[Sequence[str]], *, metric: str = "execute_s"
                 ) -> list[CaseResult]:
    """``t(numerator) / t(denominator)`` per (stem, P, variant) and pair, where both were measured."""
    groups: dict[tuple[str, int, str], dict[str, Point]] = {}
    for pt in points:
        groups.setdefault((pt.stem, pt.p, pt.variant), {})[pt.stack] = pt
    out = []
    for (stem, p, variant), by_stack in sorted(groups.items()):
        for num, den in pairs:
            a, b = by_stack.get(num), by_stack.get(den)
            if a is None or b is None or b.value <= 0 or a.unit != b.unit:
                continue
            out.append(CaseResult(
                case=f"{stem}/p{p}/{variant}", metric=f"ratio_{num}_over_{den}", unit=RATIO_UNIT,
                lower_is_better=True, samples=(a.value / b.value,),
                params={"derived": RATIO, "p": p, "numerator": num, "denominator": den, "t_numerator": a.value,
                        "t_denominator": b.value, "from_metric": metric, "time_unit": a.unit, "variant": variant,
                        "formula": f"t({num}) / t({den})"}))
    return out


def derive(results: Iterable[CaseResult], pairs: Sequence[Sequence[str]], *, metric: str = "execute_s"
           ) -> list[CaseResult]:
    """Every derived row of one night: efficiencies, then stack ratios."""
    points = campaign_points(results, metric)
    return [*efficiency(points, metric=metric), *stack_ratios(points, pairs, metric=metric)]


def is_derived(result: CaseResult) -> bool:
    return bool(isinstance(result.params, Mapping) and result.params.get("derived"))


# --- wording ---------------------------------------------------------------------------------------

def derived_kind(metric: str) -> str | None:
    if _EFF_METRIC.match(metric):
        return EFFICIENCY
    if _RATIO_METRIC.match(metric):
        return RATIO
    return None


def describe(c: Comparison) -> str | None:
    """A scaling verdict in words, from the verdict's own figures (nothing recomputed):
    ``efficiency at P=2 fell 12.0% (0.820 -> 0.722)`` or ``pypto/simpler time ratio at P=4 rose
    8.0% (1.10 -> 1.19)``. None for a series that is not derived, or without figures."""
    f = c.figures
    if f is None:
        return None
    text = phrase(c.case, c.metric, f.change_pct)
    if text is None:
        return None
    return f"{text} ({f.reference:.3g} -> {f.value:.3g}; {f.reference_label} vs {f.value_label})"


def phrase(case: str, metric: str, change_pct: float | None) -> str | None:
    """A derived series' change in words, the figure given (never recomputed): ``efficiency at P=2
    fell 12.0%``, ``nccl/ring time ratio at P=2 rose 8.0%``. None for a series that is not derived or
    without a change. Used by the report, Slack and the alert messages."""
    eff, ratio = _EFF_METRIC.match(metric), _RATIO_METRIC.match(metric)
    if (eff is None and ratio is None) or change_pct is None:
        return None
    way = "rose" if change_pct > 0 else "fell" if change_pct < 0 else "held"
    amount = f" {abs(change_pct):.1f}%" if way != "held" else ""
    if eff is not None:
        return f"efficiency at P={eff.group(1)} {way}{amount}"
    assert ratio is not None
    p = re.search(r"/p(\d+)/", case + "/")
    at = f" at P={p.group(1)}" if p else ""
    return f"{ratio.group(1)}/{ratio.group(2)} time ratio{at} {way}{amount}"


def scaling_lines(comparisons: Sequence[Comparison]) -> list[str]:
    """Markdown bullets of tonight's flagged or improved derived series, worst first."""
    rows = [c for c in comparisons if derived_kind(c.metric) and c.figures is not None
            and (c.verdict.flagged or c.verdict is Verdict.IMPROVED)]
    rows.sort(key=lambda c: (-(c.figures.worse_pct if c.figures else 0.0), c.pool, c.case, c.metric))
    out = []
    for c in rows:
        text = describe(c)
        kind = "scaling regression" if c.verdict.flagged else "scaling improvement"
        out.append(f"- **{c.verdict.label}** ({kind}) `{c.pool}` `{c.case}`: {text}")
    return out


def params_summary(params: Mapping[str, Any]) -> str:
    """The inputs of a derived value, for a table cell: ``t(1)=1.20 ms, t(2)=0.70 ms``."""
    if params.get("derived") == EFFICIENCY:
        return f"t({params['p_min']})={params['t_p_min']:.4g}, t({params['p']})={params['t_p']:.4g} {params['time_unit']}"
    if params.get("derived") == RATIO:
        return (f"t({params['numerator']})={params['t_numerator']:.4g}, t({params['denominator']})="
                f"{params['t_denominator']:.4g} {params['time_unit']}")
    return ""
