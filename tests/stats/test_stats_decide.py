"""Nightly screening, A/B and consecutive-night confirmation, and the final decision."""

from __future__ import annotations

import numpy as np
import pytest

from zlops.stats.decide import SAME_CODE_PENDING
from zlops.stats import (
    NightResult,
    Policy,
    State,
    confirm_ab,
    confirm_consecutive,
    decide,
    interleaved_order,
    judge_night,
    judge_tonight,
    select_for_ab,
    telemetry_problem,
)


def _history(sigma_pct: float = 0.3, n: int = 12, level: float = 100.0, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return (level * (1 + sigma_pct / 100 * rng.standard_normal(n))).tolist()


def _samples(level: float, n: int = 20, sigma_pct: float = 0.5, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return (level * (1 + sigma_pct / 100 * rng.standard_normal(n))).tolist()


# --- judge_night -------------------------------------------------------------------------------------------


def test_quiet_series_unchanged_suspect_and_improved() -> None:
    hist = _history()
    ref = float(np.median(hist))
    assert judge_night(hist, _samples(ref)).state is State.UNCHANGED
    bad = judge_night(hist, _samples(ref * 1.10))
    assert bad.state is State.SUSPECT
    assert bad.worse_pct == pytest.approx(10.0, abs=0.5) and bad.threshold_pct == 2.0
    assert bad.reference == pytest.approx(ref) and bad.noise is not None and bad.noise.enough_history
    assert judge_night(hist, _samples(ref * 0.9)).state is State.SUSPECT_IMPROVED  # confirmed like a regression


def test_higher_is_better_flips_the_direction() -> None:
    hist = _history()
    ref = float(np.median(hist))
    res = judge_night(hist, _samples(ref * 0.9), lower_is_better=False)
    assert res.state is State.SUSPECT and res.change_pct is not None and res.change_pct < 0 < res.worse_pct


def test_threshold_grows_with_noise_and_a_noisy_series_is_unmeasurable() -> None:
    mid = _history(sigma_pct=1.2, n=20, seed=2)
    res = judge_night(mid, _samples(float(np.median(mid)) * 1.03))
    assert res.threshold_pct is not None and res.threshold_pct > 3.0
    assert res.state is State.UNCHANGED           # a 3% change is within this series' noise
    loud = _history(sigma_pct=4.0, n=20, seed=3)
    res = judge_night(loud, _samples(float(np.median(loud)) * 1.03))
    assert res.state is State.UNMEASURABLE and "hides" in res.reason   # a coverage gap, with its figure
    assert res.worse_pct == pytest.approx(3.0, abs=2.0)
    # a change far beyond even this noise is never hidden behind "unmeasurable": it is a suspect
    big = judge_night(loud, _samples(float(np.median(loud)) * 1.6))
    assert big.state is State.SUSPECT and big.threshold_pct is not None and big.worse_pct > big.threshold_pct


def test_one_odd_night_in_the_history_does_not_make_tonight_look_slow() -> None:
    hist = _history()
    hist_with_fast_night = [*hist[:-1], hist[-1] * 0.95]    # last night ran 5% fast by chance
    tonight = _samples(float(np.median(hist)))
    assert judge_night(hist_with_fast_night, tonight).state is State.UNCHANGED


def test_too_few_samples_and_no_reference_are_invalid() -> None:
    pol = Policy(min_samples=5)
    assert judge_night(_history(), [1.0, 1.0], policy=pol).state is State.INVALID
    res = judge_night([], [100.0] * 5, [100.0] * 2, policy=pol)
    assert res.state is State.INVALID and "no reference" in res.reason


def test_without_history_the_baseline_is_the_reference_and_the_model_provisional() -> None:
    res = judge_night([], _samples(103.0), _samples(100.0, seed=9))
    assert res.state is State.SUSPECT and "provisional" in res.reason
    assert res.noise is not None and not res.noise.enough_history


@pytest.mark.parametrize(("telemetry", "expect"), [
    ({"below_90pct_peak_share": 0.35, "sm_clock_median_mhz": 1500, "sm_clock_peak_mhz": 1980}, "throttling"),
    ({"below_90pct_peak_share": 0.0, "temp_max_c": 91.0}, "heat"),
])
def test_throttling_or_heat_make_the_night_invalid(telemetry: dict[str, float], expect: str) -> None:
    pol = Policy(temp_limit_c=85.0)
    hist = _history()
    res = judge_night(hist, _samples(float(np.median(hist)) * 1.1), policy=pol, telemetry=telemetry)
    assert res.state is State.INVALID and expect in res.reason
    assert res.worse_pct is not None   # the figures are kept for the report


def test_missing_telemetry_is_no_evidence() -> None:
    assert telemetry_problem(None, max_throttle_share=0.2, temp_limit_c=80) is None
    assert telemetry_problem({"samples": 0, "error": "nvidia-smi: not found"}, max_throttle_share=0.2,
                             temp_limit_c=80) is None
    assert telemetry_problem({"below_90pct_peak_share": 0.1, "temp_max_c": 70}, max_throttle_share=0.2,
                             temp_limit_c=80) is None


def test_judge_night_never_modifies_its_inputs() -> None:
    hist, head, base = _history(), _samples(101.0), _samples(100.0)
    tel = {"below_90pct_peak_share": 0.0}
    saved = (list(hist), list(head), list(base), dict(tel))
    judge_night(hist, head, base, telemetry=tel)
    assert (hist, head, base, tel) == saved


def test_policy_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="regression_pct"):
        Policy(potential_pct=5.0, regression_pct=2.0)
    with pytest.raises(ValueError, match="window"):
        Policy(min_nights=10, window=5)
    with pytest.raises(ValueError, match="noise_quantile"):
        Policy(noise_quantile=1.5)


# --- confirmation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("factor", "state"), [(1.035, State.REGRESSION), (1.08, State.SEVERE),
                                               (0.95, State.IMPROVED), (1.0, State.UNCHANGED)])
def test_confirm_ab_states(factor: float, state: State) -> None:
    base = _samples(100.0, n=8, sigma_pct=0.5, seed=11)
    head = _samples(100.0 * factor, n=8, sigma_pct=0.5, seed=12)
    conf = confirm_ab(base, head, threshold_pct=2.0, severe_pct=5.0, seed=0)
    assert conf.state is state
    assert conf.confirmed == (state is not State.UNCHANGED)


def test_confirm_ab_needs_significance_and_effect() -> None:
    base = _samples(100.0, n=8, sigma_pct=0.1, seed=1)
    tiny = confirm_ab(base, _samples(101.0, n=8, sigma_pct=0.1, seed=2))   # significant, but 1% < 2%
    assert tiny.state is State.UNCHANGED and tiny.p_value is not None and tiny.p_value < 0.002
    assert tiny.outcome == "cleared" and tiny.decided and "cleared" in tiny.reason
    noisy = confirm_ab(_samples(100.0, n=8, sigma_pct=5, seed=3), _samples(103.0, n=8, sigma_pct=5, seed=4))
    # 3% but not significant, and a CI far wider than +-2%: the A/B could not decide either way
    assert noisy.state is State.INCONCLUSIVE and noisy.outcome == "inconclusive" and not noisy.decided
    assert noisy.ci_pct is not None and (noisy.ci_pct[0] < -2.0 or noisy.ci_pct[1] > 2.0)


def test_an_a_b_whose_ci_excludes_the_floor_is_never_unchanged() -> None:
    """#22: on a loaded host the demo's softmax measured "+51.79% worse, 95% CI [+4.94%, +102.99%],
    p=0.0079" and was reported unchanged. A CI wholly beyond the floor is evidence of a change, not of
    its absence: inconclusive (5+5 runs cannot reach alpha 0.002 by MWU), and its suspect stays one."""
    rng = np.random.default_rng(5)
    base = list(100.0 * np.exp(rng.normal(0, 0.25, 5)))
    head = list(150.0 * np.exp(rng.normal(0, 0.25, 5)))
    conf = confirm_ab(base, head, threshold_pct=2.0, severe_pct=5.0, seed=0)
    assert conf.ci_pct is not None and conf.ci_pct[0] > 2.0          # the CI lies beyond +2%
    assert conf.state is not State.UNCHANGED and conf.outcome in ("inconclusive", "confirmed")
    night = NightResult(State.SUSPECT, 50.0, 50.0, 2.0, 100.0, 150.0, None, "suspect")
    decision = decide(night, ab=conf)
    assert decision.state is not State.UNCHANGED
    if conf.outcome == "inconclusive":
        assert decision.state is State.SUSPECT and decision.reason.startswith("A/B inconclusive")
        assert "CI of the change" in decision.reason    # its figures, beside it


@pytest.mark.parametrize("seed", range(40))
def test_cleared_only_when_the_ci_lies_inside_the_floor(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sigma = float(rng.uniform(0.1, 8.0))
    shift = float(rng.uniform(0.9, 1.1))
    base = list(100.0 * np.exp(rng.normal(0, sigma / 100, 8)))
    head = list(100.0 * shift * np.exp(rng.normal(0, sigma / 100, 8)))
    conf = confirm_ab(base, head, threshold_pct=2.0, severe_pct=5.0, seed=seed)
    if conf.state is State.UNCHANGED:
        assert conf.ci_pct is not None and -2.0 < conf.ci_pct[0] and conf.ci_pct[1] < 2.0
    assert conf.outcome == {State.UNCHANGED: "cleared", State.INCONCLUSIVE: "inconclusive",
                            State.INVALID: "invalid"}.get(conf.state, "confirmed")


def test_confirm_ab_refuses_samples_too_small_to_reach_alpha() -> None:
    conf = confirm_ab([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], alpha=0.01)
    assert conf.state is State.INVALID and "cannot reach" in conf.reason


def test_confirm_ab_is_deterministic_and_pure() -> None:
    base, head = _samples(100.0, n=8, seed=5), _samples(103.0, n=8, seed=6)
    saved = (list(base), list(head))
    assert confirm_ab(base, head, seed=3) == confirm_ab(base, head, seed=3)
    assert (base, head) == saved


def test_confirm_ab_with_ks_uses_the_smaller_p() -> None:
    base, head = _samples(100.0, n=10, seed=7), _samples(103.0, n=10, seed=8)
    conf = confirm_ab(base, head, use_ks=True)
    assert conf.p_value == min(conf.p_mwu or 1.0, conf.p_ks or 1.0)


def test_confirm_consecutive_is_hud_style() -> None:
    assert confirm_consecutive([0.1, 2.5, 3.0], 2.0)
    assert not confirm_consecutive([2.5, 3.0, 1.0], 2.0)       # the violations must be trailing
    assert not confirm_consecutive([3.0], 2.0)
    assert not confirm_consecutive([2.5, None, 3.0], 2.0)
    assert confirm_consecutive([2.5, 2.6, 3.0], 2.0, nights=3)


def test_interleaved_order_pairs_are_balanced_random_and_seeded() -> None:
    order = interleaved_order(50, seed=1)
    pairs = [tuple(order[i:i + 2]) for i in range(0, 100, 2)]
    assert all(sorted(p) == ["A", "B"] for p in pairs)
    assert {("A", "B"), ("B", "A")} == set(pairs)
    assert order == interleaved_order(50, seed=1) and order != interleaved_order(50, seed=2)
    with pytest.raises(ValueError):
        interleaved_order(0, seed=1)


# --- decide ------------------------------------------------------------------------------------------------


def test_two_consecutive_suspect_nights_confirm_a_regression() -> None:
    hist = _history(n=12)
    ref = float(np.median(hist))
    night1 = judge_night(hist, [ref * 1.03])
    night2 = judge_night([*hist, ref * 1.03], [ref * 1.035])
    assert decide(night1).state is State.SUSPECT
    d = decide(night2, previous=night1)
    assert d.state is State.REGRESSION and d.confirmed_by == "consecutive"
    severe = decide(judge_night([*hist, ref * 1.07], [ref * 1.08]), previous=judge_night(hist, [ref * 1.07]))
    assert severe.state is State.SEVERE


def test_two_suspect_nights_that_began_on_unchanged_code_confirm_nothing() -> None:
    """Issue 22, live H200 hold-out 5: a series landed on a 2x process level on two nights of the commit the night
    before them had run at the usual level; "two consecutive nights" read it severe. No commit lies between the
    level before and the move: it stays a suspect, saying why; the same figures with a code change confirm."""
    hist = _history(n=12)
    ref = float(np.median(hist))
    night1 = judge_night(hist, [ref * 1.5])
    night2 = judge_night([*hist, ref * 1.5], [ref * 1.6])
    assert decide(night2, previous=night1).state is State.SEVERE            # a code change between: confirmed
    kept = decide(night2, previous=night1, hold=SAME_CODE_PENDING)
    assert kept.state is State.SUSPECT and kept.confirmed_by is None
    assert kept.reason.startswith(SAME_CODE_PENDING) and "no code change" in kept.reason
    assert kept.worse_pct == pytest.approx(night2.worse_pct)                 # its figures stay the night's
    better = decide(judge_night([*hist, ref * 0.6], [ref * 0.6]), previous=judge_night(hist, [ref * 0.6]),
                    hold=SAME_CODE_PENDING)
    assert better.state is State.SUSPECT_IMPROVED                            # an improvement alike
    first = decide(night1, hold=SAME_CODE_PENDING)                                 # a first night is a suspect anyway
    assert first.state is State.SUSPECT and SAME_CODE_PENDING not in first.reason


def test_a_provisional_night_cannot_be_confirmed_by_consecutive_nights() -> None:
    hist = [100.0, 101.5, 99.3, 100.8]   # wanders by more than the floor: no clear step either
    ref = float(np.median(hist))
    night2, night1 = judge_tonight([*hist, ref * 1.1], [ref * 1.1])
    assert night1 is not None and night1.state is State.SUSPECT and night2.state is State.SUSPECT
    assert decide(night2, previous=night1).state is State.SUSPECT


def test_ab_confirms_or_clears_a_suspect() -> None:
    hist = _history()
    night = judge_night(hist, [float(np.median(hist)) * 1.04])
    base = _samples(100.0, n=8, seed=21)
    yes = decide(night, ab=confirm_ab(base, _samples(104.0, n=8, seed=22)))
    assert yes.state is State.REGRESSION and yes.confirmed_by == "ab"
    no = decide(night, ab=confirm_ab(base, _samples(100.0, n=8, seed=23)))
    assert no.state is State.UNCHANGED and "cleared by A/B" in no.reason
    invalid_ab = confirm_ab([1.0, 1.0], [2.0, 2.0])
    assert decide(night, ab=invalid_ab).state is State.SUSPECT     # an impossible A/B decides nothing


def test_only_suspects_are_ever_confirmed() -> None:
    hist = _history()
    ref = float(np.median(hist))
    unchanged = judge_night(hist, [ref])
    assert decide(unchanged, previous=judge_night(hist, [ref * 1.1])).state is State.UNCHANGED
    improved = judge_night(hist, [ref * 0.9])
    assert improved.state is State.SUSPECT_IMPROVED
    assert decide(improved).state is State.SUSPECT_IMPROVED        # never announced unconfirmed
    # confirmed exactly like a regression: two calibrated nights, or an A/B in the same direction
    assert decide(improved, previous=judge_night(hist, [ref * 0.9])).state is State.IMPROVED
    ab_better = confirm_ab(_samples(ref, n=8, seed=1), _samples(ref * 0.9, n=8, seed=2))
    assert decide(improved, ab=ab_better).state is State.IMPROVED
    ab_worse = confirm_ab(_samples(ref, n=8, seed=1), _samples(ref * 1.1, n=8, seed=2))
    # the A/B confirms the other direction: not this improvement, nor "unchanged" (its CI is beyond the floor on
    # the worse side): a suspect that way, nothing confirmed while the night and the A/B disagree
    opposite = decide(improved, ab=ab_worse)
    assert opposite.state is State.SUSPECT and "opposite direction" in opposite.reason
    assert opposite.change_pct == ab_worse.change_pct
    same = confirm_ab(_samples(ref, n=8, seed=1), _samples(ref, n=8, seed=2))
    assert decide(improved, ab=same).state is State.UNCHANGED


def test_select_for_ab_spends_the_budget_on_the_largest_excess() -> None:
    hist = _history()
    ref = float(np.median(hist))
    nights = {"a": judge_night(hist, [ref * 1.03]), "b": judge_night(hist, [ref * 1.09]),
              "c": judge_night(hist, [ref]), "d": judge_night(hist, [ref * 1.05])}
    assert select_for_ab(nights, budget=2) == ["b", "d"]
    assert select_for_ab(nights, budget=10) == ["b", "d", "a"]     # "c" is no suspect
    assert select_for_ab(nights, budget=0) == []


def test_select_for_ab_serves_calibrated_series_before_provisional_ones() -> None:
    hist = _history()
    ref = float(np.median(hist))
    nights = {"new": judge_night(hist[:3], [ref * 1.2]), "old": judge_night(hist, [ref * 1.03])}
    assert select_for_ab(nights, budget=1) == ["old"]


def test_judge_tonight_holds_an_unresolved_suspect_out_of_the_history() -> None:
    hist = _history(n=7)
    ref = float(np.median(hist))
    night, previous = judge_tonight([*hist, ref * 1.10], [ref * 1.10])
    assert previous is not None and previous.state is State.SUSPECT
    assert night.noise is not None and night.noise.n_nights == 7        # the suspect night is held out
    assert decide(night, previous=previous).state is State.SEVERE
    # taken into the history instead, the 10% night would inflate the noise model
    taken = judge_night([*hist, ref * 1.10], [ref * 1.10]).noise
    assert taken is not None and taken.sigma_pct > night.noise.sigma_pct
    calm, prev_calm = judge_tonight([*hist, ref], [ref])
    assert prev_calm is not None and calm.noise is not None and calm.noise.n_nights == 8
    assert judge_tonight([100.0], [100.0])[1] is None


def test_two_nights_never_confirm_where_the_process_levels_are_not_known() -> None:
    """Issue 22: nights alone confirm only where at least min_nights processes at the series' level
    (history nights plus A/B runs) show its between-process behaviour. Real FlagGems on an H200: a
    reduction's latency spans 0.133-0.341 ms over ten fresh processes of unchanged code; a few nights on
    one level and two on the other were confirmed "+8.46%". Even a clean 2x step on four tight nights
    (abs doing its work twice) waits for an A/B; over six nights it is confirmed by the second night."""
    stable = [10.0, 10.004, 9.997, 10.002]
    night, previous = judge_tonight([*stable, 20.01], [20.0])
    assert previous is not None and previous.state is State.SUSPECT and night.state is State.SUSPECT
    pending = decide(night, previous=previous)
    assert pending.state is State.SUSPECT and pending.confirmed_by is None
    assert pending.reason.startswith("a second suspect night, not confirmed: the process levels are known "
                                     "from 4 processes (nights at this level, < 6)"), pending.reason
    assert "awaiting an A/B" in pending.reason
    first = decide(previous)
    assert first.reason.startswith("awaiting confirmation: the process levels are known from 4 processes")
    # earlier A/B runs do not make the levels known (counted, they let two nights confirm launch-bound
    # FlagGems shapes over 3-4 nights in the recorded H200 replay): still a suspect, either way
    runs = [10.001, 9.998, 10.003, 10.0, 9.999, 10.002, 10.001, 9.997]
    night, previous = judge_tonight([*stable, 20.01], [20.0], processes=runs)
    assert previous is not None and night.noise is not None and night.noise.n_processes == 8
    assert decide(night, previous=previous).state is State.SUSPECT
    night, previous = judge_tonight([*stable, 5.0], [5.01])
    assert decide(night, previous=previous).state is State.SUSPECT_IMPROVED
    # calibrated by nights alone (6 of them): confirmed as before
    night, previous = judge_tonight([*stable, 10.001, 9.999, 20.01], [20.0])
    assert decide(night, previous=previous).state is State.SEVERE


def _calibrated_for_test(night: object) -> bool:
    return bool(getattr(night, "noise", None) is not None and night.noise.enough_history)  # type: ignore[attr-defined]


def test_changes_are_ratios_a_fall_to_15pct_is_as_loud_as_a_6_7x_time() -> None:
    """Issue 22: the judge and what the report shows agree on one formula (zlops.model.worse_pct)."""
    from zlops.model import worse_pct
    from zlops.stats.decide import worse_ratio_pct

    for ref, value in ((100.0, 15.0), (100.0, 667.0), (100.0, 98.0), (3.0, 3.3)):
        for lower in (True, False):
            assert worse_ratio_pct(ref, value, lower_is_better=lower) == pytest.approx(
                worse_pct(ref, value, lower_is_better=lower), rel=1e-12)
    assert worse_ratio_pct(100.0, 15.0, lower_is_better=False) == pytest.approx(
        worse_ratio_pct(15.0, 100.0, lower_is_better=True))
    # a loud series (25% noise, 30 nights): a fall of a throughput to 15% is a suspect, not "unmeasurable"
    rng = np.random.default_rng(3)
    hist = (1000 * np.exp(rng.normal(0, 0.25, 30))).tolist()
    night = judge_night(hist, [float(np.median(hist)) * 0.15], lower_is_better=False)
    assert night.state is State.SUSPECT and night.worse_pct == pytest.approx(566.67, abs=0.01), night.reason
    assert night.change_pct == pytest.approx(-85.0)
    # symmetric on the log scale: 2x slower is +100% worse, 2x faster -50% (the same log ratio)
    tight = _history(n=12)
    ref = float(np.median(tight))
    assert judge_night(tight, [ref * 2.0]).worse_pct == pytest.approx(100.0)
    assert judge_night(tight, [ref * 2.0], lower_is_better=False).worse_pct == pytest.approx(-50.0)


# Two process levels (1.0 / 1.35 and 1.0 / 1.08) and ONE code on both sides: the runs only landed on
# different levels. Each of these was "confirmed" by the old level-shift escape (p < 0.05, CI and
# quartiles beyond the 2% threshold); the real FlagGems add 64x512x512 on the H200 was such a case
# ("improved -7.25%, CI [-37.04%, -3.16%], p=0.00813", issue 22). Generated with
# numpy default_rng(1) and (3), rounded to 4 digits.
_RESHUFFLED = [
    ([1.3476, 1.3471, 1.3523, 1.356, 1.3564, 1.3421],
     [0.9923, 1.0022, 0.9975, 0.9962, 1.3478, 1.0048]),           # -25.9%, CI [-26.5, -12.9], p=0.0152
    ([0.9937, 1.0029, 0.9931, 0.9986, 1.0055, 1.3581, 1.0042, 0.9972],
     [1.3458, 1.3536, 1.3453, 1.349, 1.3533, 1.3532, 1.0045, 1.3563]),  # +35.0%, CI [+34.0, +35.9], p=0.0148
    ([1.006, 0.9967, 0.9875, 0.9921, 1.0666, 1.0166],
     [1.0824, 1.1006, 1.0217, 1.0877, 1.0854, 1.0826]),           # +8.3%, CI [+3.9, +9.8], p=0.0043
    ([1.0263, 1.0727, 1.0693, 1.0799, 1.0706, 1.003, 1.0877, 1.0785],
     [1.0057, 0.9993, 1.0005, 1.0195, 1.0005, 1.0233, 1.0057, 1.0622]),  # -6.2%, CI [-7.1, -2.6], p=0.0073
]


@pytest.mark.parametrize("base, head", _RESHUFFLED)
def test_a_reshuffle_of_process_levels_is_not_a_level_shift(base: list[float], head: list[float]) -> None:
    c = confirm_ab(base, head)
    assert not c.confirmed, c.reason
    assert c.outcome == "inconclusive" and "inconclusive" in c.reason


def test_the_level_shift_escape_still_confirms_a_shift_far_beyond_the_severe_line() -> None:
    # the real FlagGems abs 64x64 shape: +165% with MWU p above alpha (two process levels on each side)
    base = [0.010, 0.011, 0.010, 0.019, 0.011, 0.020]
    head = [0.027, 0.029, 0.028, 0.050, 0.030, 0.049]
    c = confirm_ab(base, head)
    assert c.state is State.SEVERE and c.p_mwu is not None and c.p_mwu > 0.002
    assert "levels shifted together" in c.reason


def test_a_narrow_shift_of_every_run_is_confirmed_with_the_fewest_runs() -> None:
    """The live H200 hold-out night S (issue 22): mean (1024x1024x1024, 1) +2.87%, 5+5 runs each on one
    level, CI [+2.73%, +2.92%]; MWU's smallest p at 5+5 is 0.0079, above alpha, and the A/B budget (300 s
    of 26 s whole-suite runs) buys 5 pairs. Every run of each side on one level, apart: confirmed."""
    base = [0.8401, 0.8399, 0.8405, 0.8398, 0.8402]
    head = [0.8643, 0.8640, 0.8647, 0.8641, 0.8645]
    c = confirm_ab(base, head)
    assert c.state is State.REGRESSION and c.p_mwu is not None and c.p_mwu > 0.002, c.reason
    assert "levels shifted together" in c.reason
    # the same +2.9% with the runs spread over +-1%: the CI is wide, and 5+5 stays inconclusive
    wide = confirm_ab([0.84 * f for f in (1.0, 1.01, 0.99, 1.005, 0.995)],
                      [0.8644 * f for f in (1.0, 1.01, 0.99, 1.005, 0.995)])
    assert wide.outcome == "inconclusive", wide.reason


# the live H200 hold-out, night S (docs/evidence/h200_holdout/live2.md): mean (1024x1024x1024, 1) latency of
# 5+5 interleaved whole-suite processes (ms); the timer repeats values, so both sides hold ties
LIVE_S_BASE = [0.4901120066642761, 0.49004799127578735, 0.4901120066642761, 0.49081599712371826, 0.49057599902153015]
LIVE_S_HEAD = [0.5041279792785645, 0.504399985074997, 0.504256010055542, 0.5041279792785645, 0.5041919946670532]


def test_tied_runs_get_the_exact_rank_test_p_and_the_live_change_is_confirmed() -> None:
    from zlops.stats.twosample import mann_whitney

    # wholly separated 5+5: exact p = 2/252; scipy's normal approximation (used with ties) said 0.0117
    assert mann_whitney(LIVE_S_BASE, LIVE_S_HEAD) == pytest.approx(2 / 252)
    c = confirm_ab(LIVE_S_BASE, LIVE_S_HEAD)
    assert c.state is State.REGRESSION, c.reason
    assert c.ci_pct is not None and 2.7 < c.ci_pct[0] < c.ci_pct[1] < 2.95
