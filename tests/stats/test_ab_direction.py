"""The A/B judges a change on one scale in both directions: the worse ratio (positive = worse), its CI turned
the same way, so a higher-is-better series is confirmed, cleared or left inconclusive exactly as the mirrored
lower-is-better one is.

The case that made this a rule: a throughput whose processes vary 25% fell to 15% of its level; the night's A/B
of 5+5 runs, every run apart, said "+85.33% worse, 95% CI of the change [-92.42%, -82.53%], p=0.00794 ...
inconclusive" while the same case's time series (6x) was SEVERE: the decision weighed the plain -85% (which can
never pass -100%) against lines drawn for ratios.
"""

from __future__ import annotations

import numpy as np
import pytest

from zlops.model import Judgement, Verdict, change_text, worse_ci_pct, worse_pct
from zlops.stats import Policy, State, confirm_ab
from zlops.judge.judges import confirm_suspect

#: 5+5 runs, 25% process noise (log-normal, fixed): every head run is far from every base run
RNG = np.random.default_rng(40)
BASE = (100.0 * np.exp(RNG.normal(0.0, 0.25, 5))).tolist()
FALLEN = (15.0 * np.exp(RNG.normal(0.0, 0.25, 5))).tolist()


def mirror(values: list[float]) -> list[float]:
    """The same runs as a time (1 / throughput): what a lower-is-better series of the case measures."""
    return [1.0 / v for v in values]


def test_the_worse_ratio_and_its_interval_are_one_scale_for_both_directions() -> None:
    assert worse_pct(100.0, 15.0, lower_is_better=False) == pytest.approx(566.666, rel=1e-4)
    assert worse_pct(1 / 100.0, 1 / 15.0, lower_is_better=True) == pytest.approx(566.666, rel=1e-4)
    lo, hi = worse_ci_pct((-92.42, -82.53), lower_is_better=False)
    assert (lo, hi) == pytest.approx((472.4, 1219.3), abs=0.1)
    assert worse_ci_pct((-2.0, 3.0), lower_is_better=True) == (-2.0, 3.0)
    assert worse_ci_pct((-100.0, 5.0), lower_is_better=False)[1] == float("inf")
    assert change_text(3.1, 3.1) == "+3.10% worse"
    assert change_text(-85.33, 581.2) == "-85.33% (worse by 581.2%)"
    assert change_text(25.0, -20.0) == "+25.00% (better by 20.0%)"


@pytest.mark.parametrize("threshold", [2.0, 75.0])   # the floor, and a 25%-noise series' own threshold (3 x 25%)
def test_a_fully_separated_fall_of_a_throughput_is_confirmed_like_the_mirrored_time(threshold: float) -> None:
    kw = dict(threshold_pct=threshold, severe_pct=max(5.0, threshold), alpha=0.002)
    up = confirm_ab(BASE, FALLEN, lower_is_better=False, **kw)
    time = confirm_ab(mirror(BASE), mirror(FALLEN), lower_is_better=True, **kw)
    assert time.state is State.SEVERE, time.reason
    assert up.state is State.SEVERE, up.reason
    assert up.worse_pct == pytest.approx(time.worse_pct, rel=1e-9)
    assert up.worse_ci_pct is not None and up.worse_ci_pct[0] > threshold
    # the text says the raw change and the ratio, never "+85% worse" beside a CI of -92%..-82%
    assert "(worse by " in up.reason and f"{up.change_pct:+.2f}% worse" not in up.reason


def test_a_fully_separated_rise_of_a_throughput_is_an_improvement_like_the_mirrored_time() -> None:
    kw = dict(threshold_pct=75.0, severe_pct=75.0, alpha=0.002)
    up = confirm_ab(FALLEN, BASE, lower_is_better=False, **kw)
    time = confirm_ab(mirror(FALLEN), mirror(BASE), lower_is_better=True, **kw)
    assert up.state is State.IMPROVED and time.state is State.IMPROVED, (up.reason, time.reason)
    assert up.worse_pct < 0 and "(better by " in up.reason


@pytest.mark.parametrize("lower", [True, False])
def test_cleared_and_inconclusive_mirror_each_other(lower: bool) -> None:
    rng = np.random.default_rng(7)
    quiet = (1.0 + rng.normal(0.0, 0.002, 16)).tolist()
    noisy = (1.0 * np.exp(rng.normal(0.0, 0.2, 12))).tolist()
    conv = (lambda v: v) if lower else mirror
    cleared = confirm_ab(conv(quiet[:8]), conv(quiet[8:]), lower_is_better=lower, threshold_pct=2.0, severe_pct=5.0)
    assert cleared.state is State.UNCHANGED and cleared.outcome == "cleared", cleared.reason
    undecided = confirm_ab(conv(noisy[:6]), conv(noisy[6:]), lower_is_better=lower, threshold_pct=2.0,
                           severe_pct=5.0)
    assert undecided.state is State.INCONCLUSIVE, undecided.reason


@pytest.mark.parametrize("lower", [True, False])
def test_a_separated_small_step_is_confirmed_in_both_directions(lower: bool) -> None:
    rng = np.random.default_rng(3)
    base = (1.0 + rng.normal(0.0, 0.001, 6)).tolist()
    worse = [v * (1.04 if lower else 1 / 1.04) for v in (1.0 + rng.normal(0.0, 0.001, 6))]
    conf = confirm_ab(base, worse, lower_is_better=lower, threshold_pct=2.0, severe_pct=5.0)
    assert conf.state is State.REGRESSION, conf.reason
    assert conf.worse_pct == pytest.approx(4.0, abs=0.5)


def test_the_suspect_of_a_noisy_throughput_is_confirmed_by_its_separated_ab() -> None:
    """The night's rule flagged the fall (a suspect on its own 75% threshold); the A/B that separates every run
    confirms it severe, with the A/B's figures, where it had read inconclusive."""
    night = Judgement(Verdict.SUSPECT, -85.0, 566.7, 75.0, "tonight +566.70% worse")
    got = confirm_suspect(night, BASE, FALLEN, lower_is_better=False, policy=Policy())
    assert got.verdict is Verdict.SEVERE, got.note
    assert got.figures is not None and got.figures.runs_head == tuple(FALLEN)
    assert got.worse_pct == pytest.approx(worse_pct(float(np.median(BASE)), float(np.median(FALLEN)),
                                                    lower_is_better=False))
