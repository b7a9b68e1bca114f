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
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zlops.model import Figures, Judgement, Summary, Thresholds, Verdict, as_summary, change_text, median_of

if TYPE_CHECKING:  # zlops.stats imports scipy (~0.5 s): only noise_judge pays for it, when it runs
    from zlops.stats import Policy

#: What a judge reads of the baseline: its median and count (:class:`zlops.model.Summary`), or raw samples
#: (summarized the same way); the compare table and the history keep summaries, not samples.
BaseSide = Summary | Sequence[float]
Judge = Callable[[BaseSide, Sequence[float], bool, Thresholds], Judgement]


def change_pct(base: float, head: float) -> float:
    """Relative change of ``head`` against ``base`` in percent (raw direction of the values)."""
    if base == 0:
        return 0.0 if head == 0 else float("inf") if head > 0 else float("-inf")
    return (head - base) / abs(base) * 100.0


def simple_judge(base: BaseSide, head: Sequence[float], lower_is_better: bool,
                 thresholds: Thresholds) -> Judgement:
    """Delta of medians against fixed thresholds (see module docstring)."""
    ref = as_summary(base)
    figures = Figures(reference=ref.median, reference_label=f"baseline median ({ref.n} samples)",
                      value=median_of(head), value_label=f"tonight, {len(head)} sample{'s' if len(head) != 1 else ''}",
                      lower_is_better=lower_is_better)
    change, worse = figures.change_pct, figures.worse_pct
    if worse > thresholds.regression_pct:
        verdict, used = Verdict.REGRESSION, thresholds.regression_pct
    elif worse > thresholds.potential_pct:
        verdict, used = Verdict.POTENTIAL, thresholds.potential_pct
    elif worse < -thresholds.potential_pct:
        verdict, used = Verdict.IMPROVED, thresholds.potential_pct
    else:
        verdict, used = Verdict.UNCHANGED, thresholds.potential_pct
    return Judgement(verdict=verdict, change_pct=change, worse_pct=worse, threshold_pct=used,
                     figures=dataclasses.replace(figures, threshold_pct=used))


#: zlops.stats.State values -> report verdicts (the same words; MISSING and FAILED are decided by the caller).
STATE_VERDICTS: dict[str, Verdict] = {v.value: v for v in (
    Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED, Verdict.REGRESSION,
    Verdict.SEVERE, Verdict.INVALID, Verdict.UNMEASURABLE, Verdict.MISSING, Verdict.FAILED)}


def noise_judge(base: BaseSide, head: Sequence[float], lower_is_better: bool, thresholds: Thresholds, *,
                history: Sequence[float] | None = None, telemetry: Mapping[str, Any] | None = None,
                policy: Policy | None = None, processes: Sequence[float] | None = None,
                last_settled: bool = False, hold: str | None = None) -> Judgement:
    """Noise-aware judge (issue 5): :func:`zlops.stats.judge_night` then :func:`zlops.stats.decide`.

    Same call as :func:`simple_judge`, plus ``history`` (the series' accepted nightly medians, oldest
    first, normally ending with the baseline night), ``telemetry`` (tonight's shard summary from
    :func:`zlops.host.telemetry.summarize`) and ``policy`` (k, min_nights, ... ; its potential_pct and
    regression_pct are replaced by ``thresholds``). Tonight is compared with the median of the
    history (the baseline's median without history) against max(potential_pct, k x noise).

    Verdicts: IMPROVED, UNCHANGED, INVALID, UNMEASURABLE; SUSPECT when tonight is beyond the
    threshold but unconfirmed (the caller may run an A/B: :func:`zlops.stats.confirm_ab`, then
    :func:`zlops.stats.decide` with ``ab=``); REGRESSION / SEVERE only when confirmed here by two
    consecutive nights: last night, re-judged from ``history[:-1]``, was beyond its threshold too
    (and, being unresolved, is held out of tonight's reference: :func:`zlops.stats.judge_tonight`), unless
    ``last_settled``: its stored verdict says it is no unresolved suspect (``zlops.judge.evidence.series_histories``);
    nor with ``hold``: why nights alone may not confirm it (:func:`zlops.stats.decide`).
    """
    from zlops import stats

    pol = dataclasses.replace(policy or stats.Policy(), potential_pct=thresholds.potential_pct,
                              regression_pct=thresholds.regression_pct)
    ref = as_summary(base)
    night, previous = stats.judge_tonight(history if history is not None else [], head,
                                          baseline_summary=(ref.median, ref.n), lower_is_better=lower_is_better,
                                          policy=pol, telemetry=telemetry, processes=processes,
                                          last_settled=last_settled)
    decision = stats.decide(night, previous=previous, policy=pol, hold=hold)
    return Judgement(verdict=STATE_VERDICTS[decision.state.value], change_pct=decision.change_pct,
                     worse_pct=decision.worse_pct, threshold_pct=decision.threshold_pct, note=decision.reason,
                     figures=night_figures(night, n_samples=len(head), lower_is_better=lower_is_better))


def noise_judge_many(items: Sequence[tuple[BaseSide, Sequence[float], bool, Sequence[float],
                                          Mapping[str, Any] | None, Sequence[float]]],
                     thresholds: Thresholds, *, policy: Policy | None = None,
                     settled: Sequence[bool] | None = None,
                     hold: Sequence[str | None] | None = None) -> list[Judgement]:
    """:func:`noise_judge` for many series at once (``zlops.stats.frame``: vectorized, same verdicts).

    ``items``: per series (baseline summary or samples, tonight's samples, lower_is_better, history, telemetry,
    processes); ``settled`` and ``hold``: per series, those of :func:`noise_judge`. Series the vectorized path
    does not cover are judged one by one.
    """
    from zlops import stats
    from zlops.stats.frame import judge_many

    pol = dataclasses.replace(policy or stats.Policy(), potential_pct=thresholds.potential_pct,
                              regression_pct=thresholds.regression_pct)
    fast = judge_many([i[3] for i in items], [i[1] for i in items], [i[2] for i in items], policy=pol,
                      telemetry=[i[4] for i in items], processes=[i[5] for i in items], settled=settled,
                      hold=hold)
    out: list[Judgement] = []
    for i, ((base, head, lower, history, telemetry, processes), fv) in enumerate(zip(items, fast, strict=True)):
        if fv is None:
            out.append(noise_judge(base, head, lower, thresholds, history=list(history), telemetry=telemetry,
                                   policy=policy, processes=list(processes),
                                   last_settled=bool(settled[i]) if settled is not None else False,
                                   hold=hold[i] if hold is not None else None))
            continue
        n = len(head)
        figures = Figures(reference=fv.reference, reference_label=fv.reference_text, value=fv.value,
                          value_label=f"tonight, {n} sample{'s' if n != 1 else ''}", lower_is_better=lower,
                          threshold_pct=fv.threshold_pct, noise_pct=fv.noise_pct)
        out.append(Judgement(STATE_VERDICTS[fv.state.value], fv.change_pct, fv.worse_pct, fv.threshold_pct,
                             fv.reason, figures=figures))
    return out


def night_figures(night: Any, *, n_samples: int, lower_is_better: bool) -> Figures | None:
    """The figures of a night's screening (:class:`zlops.stats.NightResult`): its reference and tonight's median."""
    if night.reference is None or night.value is None:
        return None
    modes = tuple(night.modes.levels) if night.modes is not None else ()
    return Figures(reference=night.reference, reference_label=night.reference_text or "reference",
                   value=night.value, value_label=f"tonight, {n_samples} sample{'s' if n_samples != 1 else ''}",
                   lower_is_better=lower_is_better, threshold_pct=night.threshold_pct,
                   noise_pct=None if night.noise is None else night.noise.sigma_pct, modes=modes)


def ab_figures(base_runs: Sequence[float], head_runs: Sequence[float], conf: Any, *, lower_is_better: bool,
               threshold_pct: float | None, base_label: str = "A/B base") -> Figures:
    """The figures of a same-device A/B: median of the base runs against median of the head runs."""
    return Figures(reference=median_of(base_runs), reference_label=f"{base_label}, {len(base_runs)} runs",
                   value=median_of(head_runs), value_label=f"A/B head, {len(head_runs)} runs",
                   lower_is_better=lower_is_better, ci_pct=getattr(conf, "ci_pct", None),
                   threshold_pct=threshold_pct, p_value=getattr(conf, "p_value", None),
                   runs_base=tuple(base_runs), runs_head=tuple(head_runs))


#: the note of a series the nights alone cannot judge because tonight's devices are not the baseline's
#: (zlops.judge.compare.device_moved_suspect); an A/B's verdict of such a series keeps it
DEVICE_MOVED_NOTE = ("a suspect because the devices changed: tonight's delta includes the two devices' own "
                     "difference, so the same-device A/B decides")


def ab_candidate(judgement: Judgement, floor_pct: float, target_pct: float = 5.0) -> bool:
    """Whether tonight's move is one the nights cannot judge but a same-device A/B can: the series moved beyond
    the floor (``floor_pct``, either way, on the log scale) while its nights' own line is wider, so they called
    it ``unchanged`` (within a threshold above the floor) or ``unmeasurable`` (noise that hides the target
    change). The nights' spread carries their drift (a quiet large shape held to ~0.1% among processes
    minutes apart sat 2.2% apart between runs hours apart on the H200), an interleaved A/B has its own noise,
    so "unmeasurable" by the nights is not unmeasurable by every means zlops has. Not a candidate: a series
    judged by its process levels (tonight within them: ``figures.modes``), a verdict an A/B already made
    (A/B runs in its figures), a derived row (it follows its source), nor one whose earlier A/Bs' runs spread so
    far that an A/B could not see ``target_pct`` either (:data:`AB_NOISE_K` x its A/B noise beyond it): that one is
    unmeasurable by every means zlops has."""
    if judgement.verdict not in (Verdict.UNCHANGED, Verdict.UNMEASURABLE) or judgement.worse_pct is None:
        return False
    f = judgement.figures
    if f is None or f.modes or f.runs_head or f.follows:
        return False
    if f.ab_noise_pct is not None and AB_NOISE_K * f.ab_noise_pct > target_pct:
        return False   # its earlier A/Bs' runs spread too far for an A/B to see the target change: unmeasurable
    threshold = judgement.threshold_pct
    return (threshold is not None and threshold > floor_pct and judgement.worse_pct > -100.0
            and abs(math.log1p(judgement.worse_pct / 100.0)) > math.log1p(floor_pct / 100.0))


#: how many of its A/B noise sigmas the target change must be for an A/B to be worth asking (the judge's k)
AB_NOISE_K = 3.0


def _ab_spread(base_runs: Sequence[float], head_runs: Sequence[float]) -> float | None:
    """The run-to-run noise of tonight's A/B (:func:`zlops.stats.noise.ab_noise_pct`'s estimator: each side about
    its own median)."""
    from zlops.stats.noise import ab_noise_pct

    return ab_noise_pct([tuple(base_runs), tuple(head_runs)])


def ab_spread_line(target_pct: float, worse_pct: float | None) -> float:
    """How far 3 x a candidate's A/B spread may reach for the A/B to confirm it: the larger of the target change
    (``measurable_target_pct``) and the change the A/B measured. A change beyond 3 x the spread of the A/B's own runs
    stands out of them; one inside it, on runs that spread so far that the target hides too, may be a reshuffle of
    process levels (benchmarks/noise_replay.py compares this with the target alone)."""
    return max(target_pct, abs(worse_pct or 0.0))


def as_ab_question(judgement: Judgement, floor_pct: float) -> Judgement:
    """A candidate (:func:`ab_candidate`) put to the A/B as a suspect is: its direction tonight, against the floor."""
    verdict = Verdict.SUSPECT if (judgement.worse_pct or 0.0) > 0 else Verdict.SUSPECT_IMPROVED
    return dataclasses.replace(judgement, verdict=verdict, threshold_pct=floor_pct)


#: the smallest noise (sigma, %) an A/B's expected information is computed with: below it, the timer's own
#: resolution and the A/B's few runs decide, not the noise
MIN_AB_NOISE_PCT = 0.1


def ab_information(judgement: Judgement) -> float:
    """What an A/B of this series is likely to tell, to order the A/B's spending: tonight's change in units of the
    noise the A/B will see (both as log ratios). That noise is the series' own A/B noise where earlier A/Bs
    measured it (``figures.ab_noise_pct``), else its nights' noise, which carries their drift too, so a series
    never A/B'd is weighed at worst as the nights see it. A quiet shape's +3.4% (A/B noise 0.1%) outranks a
    launch-bound shape's +184% whose A/B runs spread 40%."""
    worse, f = judgement.worse_pct, judgement.figures
    if worse is None or worse <= -100.0:
        return 0.0
    sigma = None if f is None else (f.ab_noise_pct if f.ab_noise_pct is not None else f.noise_pct)
    if sigma is None:   # no noise known: the threshold applied is k x it at most
        sigma = (judgement.threshold_pct or 100.0) / 3.0
    return abs(math.log1p(worse / 100.0)) / math.log1p(max(sigma, MIN_AB_NOISE_PCT) / 100.0)


#: what an A/B candidate that the A/B could not decide keeps: the nights' verdict, and this said beside it
AB_CANDIDATE_UNDECIDED = "an A/B could not decide it either"


def ab_undecided(asked: Judgement, judged: Judgement | None, floor_pct: float) -> bool:
    """Whether an A/B left ``asked`` (a suspect, or an A/B candidate) undecided: ``judged`` is what
    :func:`confirm_suspect` made of it so far (None: not judged yet). A suspect stays one; a candidate keeps its
    night's verdict without A/B figures (confirmed and cleared ones carry the A/B's)."""
    if judged is None:
        return asked.verdict.awaiting_confirmation or ab_candidate(asked, floor_pct)
    if judged.verdict.awaiting_confirmation:
        return True
    return (ab_candidate(asked, floor_pct) and not judged.verdict.changes_level
            and (judged.figures is None or not judged.figures.runs_head))


def confirm_suspect(judgement: Judgement, base_runs: Sequence[float], head_runs: Sequence[float], *,
                    lower_is_better: bool, policy: Policy, base_label: str = "A/B base") -> Judgement:
    """Decide a suspect (either direction) with a same-device A/B: one observation per run on each side.

    :func:`zlops.stats.confirm_ab` (Mann-Whitney U + bootstrap CI of the median ratio, and the
    level-shift rule for mixtures), then :func:`zlops.stats.decide`: regression / severe / improved
    when confirmed in the suspect's direction, unchanged only when the A/B clears it (the CI of the
    change inside +-potential_pct, the floor), unmeasurable when it is inconclusive and its base runs
    show separated process levels, and still a suspect (with the A/B's figures, "A/B inconclusive")
    when it could not decide: too few runs, a CI that straddles the floor, statistics refused. The
    verdict's figures become the A/B's: the
    median of the base runs against the median of the head runs, with the CI and the runs. The
    severe line is never below the series' own threshold (a noisy series' threshold can exceed 5%:
    seen on an H200). Used by the nightly's confirm step, the PR compare and bisection.
    """
    if ab_candidate(judgement, policy.potential_pct, policy.measurable_target_pct):
        asked = as_ab_question(judgement, policy.potential_pct)
        got, ab_text = _confirm(asked, base_runs, head_runs, lower_is_better=lower_is_better, policy=policy,
                                base_label=base_label, severe_floor=judgement.threshold_pct)
        spread = _ab_spread(base_runs, head_runs)
        line = ab_spread_line(policy.measurable_target_pct, got.worse_pct)
        if got.verdict.changes_level and spread is not None and AB_NOISE_K * spread > line:
            # the A/B's own runs spread so far that neither the target change nor tonight's change stands out of
            # them: with many candidates asked a night its rank test's alpha would be spent on reshuffles of process
            # levels (real H200 A/A noise, mm_512 at 3.7%: random 8+8 splits of one code's processes "improved
            # -6.36%, p=0.00016"; a reshuffle of two levels spreads each side by about half the gap it reports). A
            # change larger than 3 x the spread stands out whatever the target (the recall and false-improvement
            # figures of both lines: docs/statistics.md, "the candidate's spread line")
            ab_text = (f"{ab_text}; its runs spread {spread:.2f}% about each side's median (x {AB_NOISE_K:g} > "
                       f"{line:.2f}%, the larger of the {policy.measurable_target_pct:g}% target and the change): "
                       "unmeasurable by the A/B too, not confirmed")
        elif got.verdict.changes_level or got.verdict is Verdict.UNCHANGED:
            return got   # confirmed or cleared, with the A/B's figures
        # undecided (or the other way, or the base's own levels): the nights' verdict stands, with its figures;
        # the A/B's are said beside it
        return dataclasses.replace(judgement, note=f"{judgement.note}; {AB_CANDIDATE_UNDECIDED}: {ab_text}")
    if not judgement.verdict.awaiting_confirmation:
        return judgement
    # a suspect is put to the A/B against the floor as a candidate is: the A/B's own statistics deal with its noise
    # (a suspect held to its nights' k x sigma stayed inconclusive at a real, separated +3%); the level-shift
    # escape keeps its line at 2x the series' own threshold
    asked = dataclasses.replace(judgement, threshold_pct=policy.potential_pct)
    got = _confirm(asked, base_runs, head_runs, lower_is_better=lower_is_better, policy=policy,
                   base_label=base_label, severe_floor=judgement.threshold_pct)[0]
    if got.verdict.changes_level or got.verdict is Verdict.UNCHANGED:
        return got
    # undecided: the line the nights apply stays the series' own (what coverage and the next night read)
    return dataclasses.replace(got, threshold_pct=judgement.threshold_pct, figures=None if got.figures is None else
                               dataclasses.replace(got.figures, threshold_pct=judgement.threshold_pct))


def _confirm(judgement: Judgement, base_runs: Sequence[float], head_runs: Sequence[float], *,
             lower_is_better: bool, policy: Policy, base_label: str,
             severe_floor: float | None = None) -> tuple[Judgement, str]:
    """:func:`confirm_suspect` of a suspect (either direction), and the A/B's own words. ``severe_floor``: the
    lowest severe line (an A/B candidate's nights' threshold: the level-shift rule, which 5+5 runs reach at
    p < 0.01, stays as far beyond the series' own noise as a suspect's; the rank test confirms at the floor)."""
    from zlops import stats

    threshold = judgement.threshold_pct or policy.potential_pct
    severe = max(policy.regression_pct, threshold, severe_floor or 0.0)
    state = stats.State.SUSPECT if judgement.verdict is Verdict.SUSPECT else stats.State.SUSPECT_IMPROVED
    night = stats.NightResult(state, judgement.change_pct, judgement.worse_pct, judgement.threshold_pct,
                              None, None, None, judgement.note)
    try:
        conf = stats.confirm_ab(base_runs, head_runs, lower_is_better=lower_is_better, threshold_pct=threshold,
                                severe_pct=severe, alpha=policy.alpha, seed=0,
                                equivalence_pct=min(policy.potential_pct, threshold))
    except ValueError as exc:  # statistics that cannot decide leave a suspect, never take a run down
        return (dataclasses.replace(judgement, note=f"{judgement.note}; A/B could not be judged: {exc}"),
                f"A/B could not be judged: {exc}")
    if conf.state is stats.State.INVALID:
        return (dataclasses.replace(judgement, note=f"{judgement.note}; A/B undecided: {conf.reason}"),
                f"A/B undecided: {conf.reason}")
    decision = stats.decide(night, ab=conf, policy=policy, ab_base_runs=base_runs)
    figures = ab_figures(base_runs, head_runs, conf, lower_is_better=lower_is_better, threshold_pct=threshold,
                         base_label=base_label)
    modes = judgement.figures.modes if judgement.figures is not None else ()
    if modes:
        figures = dataclasses.replace(figures, modes=modes)
    if judgement.figures is not None and judgement.figures.ab_noise_pct is not None:
        figures = dataclasses.replace(figures, ab_noise_pct=judgement.figures.ab_noise_pct)
    within = _within_levels(conf, modes, alpha=policy.alpha) or _within_ab_noise(
        conf, figures.ab_noise_pct, alpha=policy.alpha, target_pct=policy.measurable_target_pct)
    if within and decision.state in (stats.State.REGRESSION, stats.State.SEVERE, stats.State.IMPROVED):
        # the series' processes settle on known levels and the A/B's change could be a reshuffle of its runs
        # between them: the level-shift rule (5+5 runs at p < 0.01) does not confirm it, the rank test must
        # (replayed H200 hold-out 2, night K: prod 64x512x512, levels 0.0266/0.0572 ms, "+102.10%, CI [+18.54%,
        # +121.16%], quartiles +20.8%, p=0.00794" read severe on unchanged code)
        return (Judgement(judgement.verdict, conf.change_pct, conf.worse_pct, threshold,
                          f"A/B inconclusive, still a {judgement.verdict.label}: {conf.reason}; {within}",
                          figures=figures), f"{conf.reason}; {within}")
    nights = None if judgement.worse_pct is None else change_text(
        judgement.worse_pct if judgement.change_pct is None else judgement.change_pct, judgement.worse_pct)
    moved = f"; {DEVICE_MOVED_NOTE} (the nights read {nights} across devices)" \
        if DEVICE_MOVED_NOTE in judgement.note and nights is not None else ""
    return (Judgement(STATE_VERDICTS.get(decision.state.value, judgement.verdict), decision.change_pct,
                      decision.worse_pct, decision.threshold_pct, decision.reason + moved, figures=figures),
            conf.reason)


def _within_levels(conf: Any, modes: Sequence[float], *, alpha: float) -> str:
    """Why an A/B's confirmation may be a reshuffle of known process levels (empty when it may not): the series
    has two or more levels, the rank test did not reach ``alpha`` and the CI's bound nearer to no change lies
    inside the levels' gap."""
    if len(modes) < 2 or conf.worse_ci_pct is None or conf.worse_pct is None or conf.p_value is None:
        return ""
    if conf.p_value < alpha:
        return ""
    lo, hi = conf.worse_ci_pct
    near = lo if conf.worse_pct > 0 else -hi
    gap = (max(modes) / min(modes) - 1.0) * 100.0 if min(modes) > 0 else math.inf
    if near >= gap:
        return ""
    return (f"the change lies within the series' process levels ({'/'.join(f'{m:.4g}' for m in sorted(modes))}, "
            f"{gap:.0f}% apart): a reshuffle of its processes between them can make it, so only the rank test "
            f"(p < {alpha:g}, more pairs) confirms it")


def _within_ab_noise(conf: Any, ab_noise_pct: float | None, *, alpha: float, target_pct: float) -> str:
    """Why an A/B's confirmation may be a reshuffle of the series' process levels that its earlier A/Bs already
    showed (empty when it may not): the rank test did not reach ``alpha`` (the few-run level-shift escape decided),
    and the series' A/B noise (``figures.ab_noise_pct``, its earlier A/Bs' runs) is beyond what an A/B can see
    (:data:`AB_NOISE_K` x it above ``target_pct``: the line :func:`ab_candidate` draws). Found on unchanged code of
    the gloo campaign, where 5+5 runs whose sides fell on a series' two process levels confirmed it severe
    (docs/statistics.md, "a few-run A/B on a series whose earlier A/Bs spread wide")."""
    if ab_noise_pct is None or conf.p_value is None or conf.p_value < alpha or AB_NOISE_K * ab_noise_pct <= target_pct:
        return ""
    return (f"the series' earlier A/Bs spread {ab_noise_pct:.2f}% (x {AB_NOISE_K:g} > the {target_pct:g}% target): "
            f"its runs' levels can make this by chance, so only the rank test (p < {alpha:g}, more pairs) confirms it")


def ab_can_still_decide(judgement: Judgement, base_runs: Sequence[float], head_runs: Sequence[float], *,
                        remaining_pairs: int, lower_is_better: bool, policy: Policy) -> bool:
    """Whether ``remaining_pairs`` more A/B pairs could still decide this suspect (a futility check).

    The A/B judged as :func:`confirm_suspect` judges it, on three optimistic continuations of the runs
    so far: every new head run beyond every run seen and every new base run below them (a confirmation
    worse), the reverse (better), and every new run of both sides at the base's median (clearing). If
    none of them confirms or clears, no outcome of the remaining pairs is likely to: the A/B stops and
    the suspect stays inconclusive with its figures, instead of spending device time on pairs that
    cannot change what is reported (Jennison & Turnbull's futility stopping, in its simplest form).
    """
    from zlops import stats

    if remaining_pairs <= 0 or len(base_runs) < 2 or len(head_runs) < 2:
        return remaining_pairs > 0
    severe_floor = judgement.threshold_pct or 0.0   # asked against the floor, as confirm_suspect asks
    if ab_candidate(judgement, policy.potential_pct, policy.measurable_target_pct):
        judgement = as_ab_question(judgement, policy.potential_pct)
    threshold = policy.potential_pct
    a, b = [float(v) for v in base_runs], [float(v) for v in head_runs]
    lo, hi = min(a + b), max(a + b)
    mid = float(statistics.median(a))
    r = remaining_pairs
    for base, head in ((a + [lo] * r, b + [hi] * r), (a + [hi] * r, b + [lo] * r), (a + [mid] * r, b + [mid] * r)):
        try:
            conf = stats.confirm_ab(base, head, lower_is_better=lower_is_better, threshold_pct=threshold,
                                    severe_pct=max(policy.regression_pct, threshold, severe_floor),
                                    alpha=policy.alpha, seed=0,
                                    n_resamples=500, equivalence_pct=min(policy.potential_pct, threshold))
        except ValueError:
            return True   # cannot tell: keep measuring
        if conf.decided:
            return True
    return False


JUDGES: dict[str, Judge] = {"simple": simple_judge, "noise": noise_judge}


def get_judge(name: str) -> Judge:
    try:
        return JUDGES[name]
    except KeyError:
        raise ValueError(f"unknown judge {name!r}; known: {', '.join(sorted(JUDGES))}") from None
