"""The pluggable noise-aware judge (zlops.judge.judges.noise_judge) and the Verdict members it needs."""

from __future__ import annotations

import pytest

from zlops.judge.judges import JUDGES, get_judge, noise_judge, simple_judge
from zlops.model import Thresholds, Verdict
from zlops.stats import Policy

QUIET = [100.0, 100.2, 99.8, 100.1, 99.9, 100.0, 100.3, 99.7]


def test_both_judges_are_registered() -> None:
    assert JUDGES["simple"] is simple_judge
    assert get_judge("noise") is noise_judge


def test_noise_judge_without_history_never_alerts_on_its_own() -> None:
    j = noise_judge([100.0] * 5, [110.0] * 5, True, Thresholds())
    assert j.verdict is Verdict.SUSPECT and not j.verdict.flagged and j.verdict.awaiting_confirmation
    assert j.change_pct == pytest.approx(10.0)


def test_noise_judge_confirms_with_the_night_before_from_history() -> None:
    history = [*QUIET, 103.0]            # last night was already 3% slower
    j = noise_judge([103.0], [103.5], True, Thresholds(), history=history)
    assert j.verdict is Verdict.REGRESSION and j.verdict.flagged and "consecutive" in j.note
    severe = noise_judge([108.0], [108.0], True, Thresholds(), history=[*QUIET, 108.0])
    assert severe.verdict is Verdict.SEVERE and severe.verdict.flagged
    first = noise_judge([100.0], [103.5], True, Thresholds(), history=QUIET)
    assert first.verdict is Verdict.SUSPECT


def test_noise_judge_uses_the_configured_thresholds() -> None:
    history = [*QUIET, 103.0]
    j = noise_judge([103.0], [103.5], True, Thresholds(potential_pct=4.0, regression_pct=8.0), history=history)
    assert j.verdict is Verdict.UNCHANGED and j.threshold_pct == 4.0


def test_noise_judge_invalid_and_unmeasurable() -> None:
    throttled = {"below_90pct_peak_share": 0.5}
    j = noise_judge([100.0], [110.0], True, Thresholds(), history=QUIET, telemetry=throttled)
    assert j.verdict is Verdict.INVALID and "throttling" in j.note
    noisy = [100.0, 108.0, 99.0, 107.0, 100.0, 109.0, 98.0, 108.0]   # two process levels, ~8% apart
    inside = noise_judge([108.0], [104.0], True, Thresholds(), history=noisy)
    assert inside.verdict is Verdict.UNMEASURABLE and "bimodal 99.5/108" in inside.note
    beyond = noise_judge([108.0], [120.0], True, Thresholds(), history=noisy)
    assert beyond.verdict is Verdict.SUSPECT and "upper level of bimodal" in beyond.note
    assert beyond.figures is not None and beyond.figures.reference == pytest.approx(108.0)
    few = noise_judge([100.0], [101.0], True, Thresholds(), history=QUIET, policy=Policy(min_samples=3))
    assert few.verdict is Verdict.INVALID


def test_verdict_additions_keep_the_old_semantics() -> None:
    assert Verdict.POTENTIAL.flagged and Verdict.REGRESSION.flagged and Verdict.SEVERE.flagged
    for v in (Verdict.SUSPECT, Verdict.INVALID, Verdict.UNMEASURABLE, Verdict.FAILED, Verdict.UNCHANGED):
        assert not v.flagged
    assert {v.value for v in Verdict} >= {"improved", "unchanged", "potential", "regression", "new", "missing"}


def test_every_stats_state_has_a_verdict() -> None:
    from zlops.judge.judges import STATE_VERDICTS
    from zlops.stats import State

    # INCONCLUSIVE is an A/B's outcome only: decide() turns it into the suspect's own state, with its figures
    assert set(STATE_VERDICTS) == {s.value for s in State} - {"inconclusive"}
    assert STATE_VERDICTS["suspect_improved"] is Verdict.SUSPECT_IMPROVED
