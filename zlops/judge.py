"""The judge: one replaceable function that turns (baseline, tonight) into a verdict.

``simple`` is the rule of the Ascend seed's compare mode: the change of medians, in percent,
oriented so that positive is worse; above ``regression_pct`` is a regression (highlighted), above
``potential_pct`` a potential regression (flagged for review), below ``-potential_pct`` an
improvement, anything else within noise. It knows nothing of noise; the noise-aware judge
(issue 5) registers beside it and is picked by the config's ``judge`` key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from zlops.model import Judgement, Thresholds, Verdict, median_of

Judge = Callable[[Sequence[float], Sequence[float], bool, Thresholds], Judgement]


def change_pct(base: float, head: float) -> float:
    """Relative change of ``head`` against ``base`` in percent (raw direction of the values)."""
    if base == 0:
        return 0.0 if head == 0 else float("inf") if head > 0 else float("-inf")
    return (head - base) / abs(base) * 100.0


def simple_judge(base: Sequence[float], head: Sequence[float], lower_is_better: bool,
                 thresholds: Thresholds) -> Judgement:
    """Delta of medians against fixed thresholds (see module docstring)."""
    change = change_pct(median_of(base), median_of(head))
    worse = change if lower_is_better else -change
    if worse > thresholds.regression_pct:
        verdict, used = Verdict.REGRESSION, thresholds.regression_pct
    elif worse > thresholds.potential_pct:
        verdict, used = Verdict.POTENTIAL, thresholds.potential_pct
    elif worse < -thresholds.potential_pct:
        verdict, used = Verdict.IMPROVED, thresholds.potential_pct
    else:
        verdict, used = Verdict.UNCHANGED, thresholds.potential_pct
    return Judgement(verdict=verdict, change_pct=change, worse_pct=worse, threshold_pct=used)


JUDGES: dict[str, Judge] = {"simple": simple_judge}


def get_judge(name: str) -> Judge:
    try:
        return JUDGES[name]
    except KeyError:
        raise ValueError(f"unknown judge {name!r}; known: {', '.join(sorted(JUDGES))}") from None
