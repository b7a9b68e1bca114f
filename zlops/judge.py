"""The judge: one replaceable function that turns (baseline, tonight) into a verdict.

``simple`` is the rule of the Ascend seed's compare mode: the change of medians, in percent,
oriented so that positive is worse; above ``regression_pct`` is a regression (highlighted), above
``potential_pct`` a potential regression (flagged for review), below ``-potential_pct`` an
improvement, anything else within noise. It knows nothing of noise; the noise-aware judge
``noise`` (issue 5, :func:`noise_judge`, built on :mod:`zlops.stats`) registers beside it and is
picked by the config's ``judge`` key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zlops.model import Judgement, Thresholds, Verdict, median_of

if TYPE_CHECKING:  # zlops.stats imports scipy (~0.5 s): only noise_judge pays for it, when it runs
    from zlops.stats import Policy

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


#: zlops.stats.State values -> report verdicts (the same words; MISSING and FAILED are decided by the caller).
STATE_VERDICTS: dict[str, Verdict] = {v.value: v for v in (
    Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.SUSPECT, Verdict.REGRESSION, Verdict.SEVERE, Verdict.INVALID,
    Verdict.UNMEASURABLE, Verdict.MISSING, Verdict.FAILED)}


def noise_judge(base: Sequence[float], head: Sequence[float], lower_is_better: bool, thresholds: Thresholds, *,
                history: Sequence[float] | None = None, telemetry: Mapping[str, Any] | None = None,
                policy: Policy | None = None) -> Judgement:
    """Noise-aware judge (issue 5): :func:`zlops.stats.judge_night` then :func:`zlops.stats.decide`.

    Same call as :func:`simple_judge`, plus ``history`` (the series' accepted nightly medians, oldest
    first, normally ending with the baseline night), ``telemetry`` (tonight's shard summary from
    :func:`zlops.telemetry.summarize`) and ``policy`` (k, min_nights, ... ; its potential_pct and
    regression_pct are replaced by ``thresholds``). Tonight is compared with the median of the
    history (the baseline's median without history) against max(potential_pct, k x noise).

    Verdicts: IMPROVED, UNCHANGED, INVALID, UNMEASURABLE; SUSPECT when tonight is beyond the
    threshold but unconfirmed (the caller may run an A/B: :func:`zlops.stats.confirm_ab`, then
    :func:`zlops.stats.decide` with ``ab=``); REGRESSION / SEVERE only when confirmed here by two
    consecutive nights: last night, re-judged from ``history[:-1]``, was beyond its threshold too
    (and, being unresolved, is held out of tonight's reference: :func:`zlops.stats.judge_tonight`).
    """
    from zlops import stats

    pol = dataclasses.replace(policy or stats.Policy(), potential_pct=thresholds.potential_pct,
                              regression_pct=thresholds.regression_pct)
    night, previous = stats.judge_tonight(history if history is not None else [], head, base,
                                          lower_is_better=lower_is_better, policy=pol, telemetry=telemetry)
    decision = stats.decide(night, previous=previous, policy=pol)
    return Judgement(verdict=STATE_VERDICTS[decision.state.value], change_pct=decision.change_pct,
                     worse_pct=decision.worse_pct, threshold_pct=decision.threshold_pct, note=decision.reason)


def confirm_suspect(judgement: Judgement, base_runs: Sequence[float], head_runs: Sequence[float], *,
                    lower_is_better: bool, policy: Policy) -> Judgement:
    """Decide a SUSPECT with a same-device A/B: one observation per run on each side.

    :func:`zlops.stats.confirm_ab` (Mann-Whitney U + bootstrap CI of the median ratio), then
    :func:`zlops.stats.decide`: regression / severe when confirmed, unchanged when the A/B does not
    reproduce it, still a suspect when the A/B cannot decide (too few runs, statistics refused).
    The severe line is never below the series' own threshold (a noisy series' threshold can exceed
    5%: seen on an H200). Used by the nightly's confirm step and by the PR compare.
    """
    from zlops import stats

    if judgement.verdict is not Verdict.SUSPECT or stats.min_mwu_pvalue(len(base_runs), len(head_runs)) > policy.alpha:
        return judgement
    threshold = judgement.threshold_pct or policy.potential_pct
    night = stats.NightResult(stats.State.SUSPECT, judgement.change_pct, judgement.worse_pct, judgement.threshold_pct,
                              None, None, None, judgement.note)
    try:
        conf = stats.confirm_ab(base_runs, head_runs, lower_is_better=lower_is_better, threshold_pct=threshold,
                                severe_pct=max(policy.regression_pct, threshold), alpha=policy.alpha, seed=0)
        decision = stats.decide(night, ab=conf, policy=policy)
    except ValueError as exc:  # statistics that cannot decide leave a suspect, never take a run down
        return dataclasses.replace(judgement, note=f"{judgement.note}; A/B could not be judged: {exc}")
    return Judgement(STATE_VERDICTS.get(decision.state.value, Verdict.SUSPECT), decision.change_pct,
                     decision.worse_pct, decision.threshold_pct, decision.reason)


JUDGES: dict[str, Judge] = {"simple": simple_judge, "noise": noise_judge}


def get_judge(name: str) -> Judge:
    try:
        return JUDGES[name]
    except KeyError:
        raise ValueError(f"unknown judge {name!r}; known: {', '.join(sorted(JUDGES))}") from None
