"""The judge's notes word every change as :func:`zlops.model.change_text` does, in both directions.

A lower-is-better time that fell, or a higher-is-better throughput that rose, is an improvement: no note may
call it "-15.30% worse" (the nights' unmeasurable note did, on the recorded gloo run 7: "noise 448.68% x k=3 =
1346.0% hides a 5% change (change tonight -15.30% worse)"). Each note is checked against the exact words
change_text gives for its own figures, and a walk over random series in both directions checks every note
the nightly judge, the frame judge, the two-night confirmation and the A/B write for a signed number whose
direction word disagrees with its sign. The renderings (report, Slack, pages) print these notes as they are.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from zlops.model import change_text
from zlops.stats.decide import Policy, State, confirm_ab, decide, judge_night, judge_tonight
from zlops.stats.frame import judge_many

#: a series whose noise (about 10% between nights) hides a 5% change at k = 3: unmeasurable
NOISY = [1.0, 1.08, 0.93, 1.05, 0.96, 1.1, 0.9, 1.02, 0.97, 1.04]
#: a quiet series (about 0.5%): a 20% move is a suspect, two of them in a row confirm
QUIET = [1.0, 1.005, 0.995, 1.002, 0.998, 1.004, 0.996, 1.001, 0.999, 1.003]

#: "-3.10% worse" or "+3.10% (better)": a signed change whose word says the other direction
_CONTRADICTION = re.compile(r"-\d+(?:\.\d+)?% worse\b|\+\d+(?:\.\d+)?% \(better\)")


def contradictions(text: str) -> list[str]:
    """Every signed change in ``text`` whose direction word disagrees with its sign."""
    return [m.group(0) for m in _CONTRADICTION.finditer(text) if not m.group(0).startswith(("-0.00%", "+0.00%"))]


def test_the_pattern_finds_the_recorded_wording() -> None:
    assert contradictions("noise 448.68% x k=3 = 1346.0% hides a 5% change (change tonight -15.30% worse)") \
        == ["-15.30% worse"]
    assert contradictions("+3.10% worse; -18.74% (better); -85.33% (worse by 581.2%); +25.00% (better by 20.0%)") \
        == []


@pytest.mark.parametrize("lower_is_better", [True, False])
@pytest.mark.parametrize("factor", [0.85, 1.15])
def test_the_unmeasurable_note_says_the_change_in_its_direction(lower_is_better: bool, factor: float) -> None:
    night = judge_night(NOISY, [factor] * 5, lower_is_better=lower_is_better)
    assert night.state is State.UNMEASURABLE
    assert night.change_pct is not None and night.worse_pct is not None
    improved = (factor < 1.0) == lower_is_better
    assert (night.worse_pct < 0) == improved
    words = change_text(night.change_pct, night.worse_pct)
    assert night.reason.endswith(f"hides a 5% change (change tonight {words})")
    assert ("better" in words) == improved and ("worse" in words) == (not improved)
    assert contradictions(night.reason) == []
    # the frame judge (many series at once) writes the same note
    [fv] = judge_many([NOISY], [[factor] * 5], [lower_is_better], policy=Policy())
    assert fv is not None and fv.state is State.UNMEASURABLE and fv.reason == night.reason


def test_the_recorded_improvement_no_longer_reads_worse() -> None:
    """A time that fell 15.3% on an unmeasurable series: "(change tonight -15.30% (better))"."""
    night = judge_night(NOISY, [float(np.median(NOISY)) * (1 - 0.153)] * 5, lower_is_better=True)
    assert night.state is State.UNMEASURABLE
    assert night.reason.endswith("(change tonight -15.30% (better))")


@pytest.mark.parametrize("lower_is_better", [True, False])
@pytest.mark.parametrize("factor", [0.8, 1.25])
def test_the_screening_and_the_two_night_confirmation_word_both_directions(lower_is_better: bool,
                                                                          factor: float) -> None:
    improved = (factor < 1.0) == lower_is_better
    history = [*QUIET, factor]                    # last night moved; tonight moved a little further
    tonight = [factor * 1.01] * 5
    night, previous = judge_tonight(history, tonight, lower_is_better=lower_is_better)
    assert previous is not None and night.state is (State.SUSPECT_IMPROVED if improved else State.SUSPECT)
    assert night.reason.startswith(change_text(night.change_pct, night.worse_pct) + " vs median of")
    decision = decide(night, previous=previous)
    assert decision.state is (State.IMPROVED if improved else State.SEVERE)
    assert (f"({change_text(previous.change_pct, previous.worse_pct)}, then "
            f"{change_text(night.change_pct, night.worse_pct)})") in decision.reason
    assert contradictions(decision.reason) == []
    [fv] = judge_many([history], [tonight], [lower_is_better], policy=Policy())
    assert fv is not None and (fv.state, fv.reason) == (decision.state, decision.reason)


def test_an_ab_improvement_of_a_throughput_reads_better_on_its_ci_too() -> None:
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1]
    head = [v * 1.3 for v in base]
    conf = confirm_ab(base, head, threshold_pct=2.0, lower_is_better=False, seed=1)
    assert conf.state is State.IMPROVED and conf.worse_pct is not None and conf.worse_pct < 0
    assert conf.reason.startswith(f"A/B 8+8: {change_text(conf.change_pct, conf.worse_pct)}, 95% CI")
    assert "(better by [" in conf.reason and "worse by" not in conf.reason


def test_a_walk_over_random_series_finds_no_direction_contradiction() -> None:
    """Random nights (noisy and quiet, both directions, every size of move) through every judge that writes
    a change into a note: none says a signed change in the other direction's words."""
    rng = np.random.default_rng(20261206)
    pol = Policy()
    notes: list[str] = []
    histories, tonights, lowers = [], [], []
    for _ in range(300):
        sigma = float(rng.choice([0.005, 0.02, 0.1, 0.3]))
        history = list(np.exp(rng.normal(0.0, sigma, size=int(rng.integers(6, 15)))))
        move = float(np.exp(rng.normal(0.0, 0.3)))
        history.append(history[-1] * float(np.exp(rng.normal(0.0, 0.2))) if rng.random() < 0.5 else move)
        tonight = list(move * np.exp(rng.normal(0.0, sigma / 3, size=5)))
        lower = bool(rng.random() < 0.5)
        night, previous = judge_tonight(history, tonight, lower_is_better=lower, policy=pol)
        notes += [night.reason, decide(night, previous=previous, policy=pol).reason]
        histories.append(history)
        tonights.append(tonight)
        lowers.append(lower)
    notes += [fv.reason for fv in judge_many(histories, tonights, lowers, policy=pol) if fv is not None]
    for _ in range(20):
        base = list(np.exp(rng.normal(0.0, 0.05, size=6)))
        head = list(float(np.exp(rng.normal(0.0, 0.4))) * np.exp(rng.normal(0.0, 0.05, size=6)))
        notes.append(confirm_ab(base, head, threshold_pct=2.0, lower_is_better=bool(rng.random() < 0.5),
                                seed=2).reason)
    assert any("(better)" in n for n in notes) and any("better by" in n for n in notes)
    assert any("hides a" in n for n in notes)
    bad = [(c, n) for n in notes for c in contradictions(n)]
    assert bad == []


@pytest.mark.parametrize("spread", [0.1, 3.0])
def test_the_unmeasurable_note_names_the_threshold_the_row_carries(spread: float) -> None:
    """The noise is a spread of logs, so the threshold k x it is a ratio: exp(k sigma) - 1. The note said
    "noise 448.68% x k=3 = 1346.0%" (k x sigma in plain percent) beside a threshold of 70112713% on the recorded gloo
    run 7; it now names the row's own threshold, whatever the noise (10% here, and a factor ~20 between nights)."""
    history = [float(v) ** (1 + spread) for v in NOISY]
    night = judge_night(history, [1.0] * 5, lower_is_better=True)
    assert night.state is State.UNMEASURABLE and night.threshold_pct is not None
    shown = re.search(r"x k=3: threshold ([0-9.]+)% hides", night.reason)
    assert shown is not None, night.reason
    assert float(shown.group(1)) == pytest.approx(night.threshold_pct, rel=1e-3, abs=0.006)
    [fv] = judge_many([history], [[1.0] * 5], [True], policy=Policy())   # None: left to the per-series judge
    assert (fv is None) == (spread > 1.0) and (fv is None or fv.reason == night.reason)
