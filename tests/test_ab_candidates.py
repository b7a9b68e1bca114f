"""A move the nights cannot judge is put to the A/B: "unmeasurable" by the nights is not unmeasurable by every
means zlops has.

The case that made this a rule: a ~3.4% slowdown of one quiet FlagGems reduction shape on the H200 read
"noise 1.66% x k=3 = 5.0% hides a 5% change (change tonight +3.38% worse)" on all three of its nights, so no A/B
was ever spent on it, while processes of that shape minutes apart agree to ~0.1%: the nights' spread is drift
between runs hours apart, which an interleaved A/B does not see.
"""

from __future__ import annotations

import math

import pytest

from zlops.stats.noise import ab_noise_pct
from zlops.judge.judges import (
    AB_CANDIDATE_UNDECIDED,
    ab_candidate,
    ab_can_still_decide,
    ab_information,
    ab_undecided,
    confirm_suspect,
)
from zlops.model import Figures, Judgement, Verdict
from zlops.stats import Policy

FLOOR = Policy().potential_pct
UNMEASURABLE_NOTE = "noise 1.66% x k=3 = 5.0% hides a 5% change (change tonight +3.38% worse)"


def night(verdict: Verdict, worse: float, threshold: float, *, noise: float = 1.66, modes: tuple[float, ...] = (),
          ab_noise: float | None = None, lower: bool = True, follows: str = "") -> Judgement:
    ref = 1.0
    value = ref * (1 + worse / 100) if lower else ref / (1 + worse / 100)
    figures = Figures(reference=ref, reference_label="median of 9 nights", value=value, value_label="tonight, 1 sample",
                      lower_is_better=lower, threshold_pct=threshold, noise_pct=noise, modes=modes,
                      ab_noise_pct=ab_noise, follows=follows)
    return Judgement(verdict, None, None, threshold, UNMEASURABLE_NOTE, figures=figures)


def test_a_move_beyond_the_floor_inside_the_nights_line_is_a_candidate() -> None:
    assert ab_candidate(night(Verdict.UNMEASURABLE, 3.38, 5.0), FLOOR)
    assert ab_candidate(night(Verdict.UNCHANGED, 3.0, 4.2), FLOOR)          # inside a threshold above the floor
    assert ab_candidate(night(Verdict.UNMEASURABLE, -3.0, 5.0), FLOOR)      # improvements too
    assert ab_candidate(night(Verdict.UNMEASURABLE, 3.0, 5.0, lower=False), FLOOR)
    assert not ab_candidate(night(Verdict.UNMEASURABLE, 1.5, 5.0), FLOOR)   # within the floor: nothing to ask
    assert not ab_candidate(night(Verdict.UNCHANGED, 1.9, FLOOR), FLOOR)
    assert not ab_candidate(night(Verdict.UNMEASURABLE, 30.0, 40.0, modes=(1.0, 1.4)), FLOOR)   # its levels
    assert not ab_candidate(night(Verdict.UNMEASURABLE, 3.4, 5.0, follows="latency"), FLOOR)   # follows a source
    assert not ab_candidate(night(Verdict.SUSPECT, 9.0, 5.0), FLOOR)        # a suspect is asked as one already
    assert not ab_candidate(night(Verdict.INVALID, 9.0, 5.0), FLOOR)


QUIET_BASE = [1.000, 1.001, 0.999, 1.0005, 0.9995, 1.0002]


def test_a_separated_ab_confirms_a_candidate_against_the_floor_not_the_nights_threshold() -> None:
    head = [v * 1.034 for v in QUIET_BASE]
    got = confirm_suspect(night(Verdict.UNMEASURABLE, 3.38, 5.0), QUIET_BASE, head, lower_is_better=True,
                          policy=Policy())
    assert got.verdict is Verdict.REGRESSION, got.note
    assert got.worse_pct == pytest.approx(3.4, abs=0.05)
    assert got.figures is not None and got.figures.runs_head == tuple(head)
    assert got.figures.reference_label.startswith("A/B base")


def test_a_quiet_ab_clears_a_candidate_and_a_noisy_one_leaves_the_nights_verdict_with_its_figures() -> None:
    cleared = confirm_suspect(night(Verdict.UNMEASURABLE, 3.38, 5.0), QUIET_BASE, [v * 1.0003 for v in QUIET_BASE],
                              lower_is_better=True, policy=Policy())
    assert cleared.verdict is Verdict.UNCHANGED and "cleared by A/B" in cleared.note, cleared.note
    noisy_base = [1.0, 1.08, 0.93, 1.05, 0.97, 1.1]
    noisy_head = [1.03, 0.96, 1.12, 1.0, 1.07, 0.95]
    asked = night(Verdict.UNMEASURABLE, 3.38, 5.0)
    kept = confirm_suspect(asked, noisy_base, noisy_head, lower_is_better=True, policy=Policy())
    assert kept.verdict is Verdict.UNMEASURABLE
    assert kept.figures == asked.figures                     # the nights' figures, not a half-made A/B's
    assert AB_CANDIDATE_UNDECIDED in kept.note and "A/B 6+6" in kept.note and "inconclusive" in kept.note
    assert ab_undecided(asked, kept, FLOOR) and ab_undecided(asked, None, FLOOR)
    assert not ab_undecided(asked, cleared, FLOOR)
    assert ab_can_still_decide(asked, QUIET_BASE[:3], QUIET_BASE[3:], remaining_pairs=3, lower_is_better=True,
                               policy=Policy())


def test_a_suspect_is_judged_as_before() -> None:
    suspect = night(Verdict.SUSPECT, 9.0, 5.0)
    head = [v * 1.09 for v in QUIET_BASE]
    got = confirm_suspect(suspect, QUIET_BASE, head, lower_is_better=True, policy=Policy())
    assert got.verdict is Verdict.SEVERE
    assert confirm_suspect(night(Verdict.UNCHANGED, 1.0, FLOOR), QUIET_BASE, head, lower_is_better=True,
                           policy=Policy()).verdict is Verdict.UNCHANGED   # not asked: left as it is


def test_the_ab_spends_first_where_it_can_tell_most() -> None:
    """Tonight's change over the noise the A/B will see: a quiet shape's +3.4% (A/B noise 0.1%) before a
    launch-bound +184% whose earlier A/B runs spread 40%; never A/B'd, the nights' noise stands in."""
    quiet = night(Verdict.UNMEASURABLE, 3.38, 5.0, noise=1.66, ab_noise=0.1)
    launch = night(Verdict.SUSPECT, 184.0, 120.0, noise=40.0, ab_noise=40.0)
    assert ab_information(quiet) > ab_information(launch)
    assert ab_information(quiet) == pytest.approx(math.log1p(0.0338) / math.log1p(0.001), rel=1e-6)
    never = night(Verdict.UNMEASURABLE, 3.38, 5.0, noise=1.66)
    assert ab_information(never) == pytest.approx(math.log1p(0.0338) / math.log1p(0.0166), rel=1e-6)


def test_the_ab_noise_is_each_sides_spread_about_its_own_median() -> None:
    assert ab_noise_pct([(1.0, 1.0), (1.0,)]) is None                      # too few runs
    same = ab_noise_pct([(1.0, 1.01, 0.99, 1.0), (1.034, 1.044, 1.024, 1.034)])   # a 3.4% step between sides
    assert same is not None and same < 1.5                                  # the step is not noise
    assert ab_noise_pct([(1.0, 2.0, 1.0), (2.0, 1.0, 2.0), (1.0, 1.0, 2.0)]) > 30.0   # two process levels are


def test_a_suspect_is_asked_against_the_floor_too_and_its_shift_line_stays_its_own() -> None:
    """One judge for suspects and candidates: a suspect whose nights' threshold is 8% (drift) and whose A/B
    separates every run at +3.4% is a regression (held to 8% it stayed inconclusive at a real change); a
    reshuffle of a noisy suspect's runs is not confirmed by the level-shift rule below 2x its own threshold."""
    suspect = night(Verdict.SUSPECT, 9.0, 8.0, noise=2.6)
    head = [v * 1.034 for v in QUIET_BASE]
    got = confirm_suspect(suspect, QUIET_BASE, head, lower_is_better=True, policy=Policy())
    assert got.verdict is Verdict.REGRESSION, got.note
    noisy = night(Verdict.SUSPECT, 60.0, 45.0, noise=15.0)
    base5 = [1.0, 1.02, 0.99, 1.01, 1.0]
    head5 = [v * 1.25 for v in base5]    # 5+5 apart: p = 0.0079, the level-shift rule's reach only
    kept = confirm_suspect(noisy, base5, head5, lower_is_better=True, policy=Policy())
    # the CI is narrow (every run on one level each side) and beyond the floor: the narrow rule confirms it
    assert kept.verdict in (Verdict.REGRESSION, Verdict.SEVERE), kept.note


def test_within_known_levels_the_level_shift_rule_does_not_confirm() -> None:
    """A series on two known process levels (0.0266/0.0572 ms) whose A/B runs reshuffle between them: 5+5 at
    p=0.0079 and quartiles moved, but the change lies inside the levels' gap: only the rank test confirms."""
    levels = (0.0266, 0.0572)
    bimodal = night(Verdict.SUSPECT, 60.0, 10.0, noise=3.0, modes=levels)
    base = [0.0266, 0.0268, 0.0265, 0.0267, 0.0266]
    head = [0.0320, 0.0318, 0.0322, 0.0319, 0.0321]   # +20%, inside the 115% gap
    got = confirm_suspect(bimodal, base, head, lower_is_better=True, policy=Policy())
    assert got.verdict is Verdict.SUSPECT and "within the series' process levels" in got.note, got.note
    assert got.figures is not None and got.figures.runs_head == tuple(head)


def test_a_candidate_whose_ab_runs_spread_like_the_nights_is_not_confirmed() -> None:
    """Real H200 A/A noise (benchmarks/noise_replay.py): mm_512 do_bench (3.7% between processes), unmeasurable by
    the nights, put to an A/B that is a random 8+8 split of one code's processes: "-6.36%, p=0.00016". With many
    candidates asked a night the rank test's alpha is spent on such reshuffles: a candidate whose A/B runs spread so
    far that 3 x it hides both the target change and tonight's change is unmeasurable by the A/B too, never
    confirmed; a change that stands beyond 3 x the spread is (a noisy series' large change is still heard)."""
    base = [1.000, 1.050, 0.998, 1.061, 1.049, 1.002, 1.058, 1.055]   # two process levels, 1.00 and 1.05
    head = [0.990, 0.992, 0.989, 0.991, 0.993, 0.988, 0.990, 0.992]   # every run below every base run: -5.7%
    asked = night(Verdict.UNMEASURABLE, -6.36, 11.5, noise=3.7)
    got = confirm_suspect(asked, base, head, lower_is_better=True, policy=Policy())
    assert got.verdict is Verdict.UNMEASURABLE and "unmeasurable by the A/B too" in got.note, got.note
    assert "the larger of the 5% target and the change" in got.note, got.note
    far = confirm_suspect(asked, base, [v * 0.90 / 0.99 for v in head], lower_is_better=True, policy=Policy())
    assert far.verdict is Verdict.IMPROVED, far.note   # -13.4% against runs spread 2.4%: it stands out
    quiet = confirm_suspect(asked, QUIET_BASE, [v * 0.95 for v in QUIET_BASE], lower_is_better=True, policy=Policy())
    assert quiet.verdict is Verdict.IMPROVED, quiet.note   # the same move through quiet runs is confirmed
