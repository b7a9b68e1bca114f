"""Paired nights (zlops.judge.paired): the pair gate, the paired judgement's outcomes, the config, and the rows
a paired pool's compare gets. No timing: synthetic runs (the real ones: tests/test_demo.py)."""

from __future__ import annotations

import random

import pytest

from zlops.config.settings import parse_config
from zlops.errors import ConfigError, HostBusy
from zlops.judge.interleave import run_pairs
from zlops.judge.paired import (
    CLEARED,
    CONFIRMED,
    INCONCLUSIVE,
    INVALID,
    PairKeeper,
    judge_pairs,
    judge_rows,
    pair_busy_reason,
    paired_judgement,
    pairs_to_decide,
)
from zlops.model import Comparison, Judgement, Summary, Verdict


def _config(**paired: object) -> object:
    return parse_config({"pools": {"cpu": {"backend": "cpu", "devices": [0], "measure": "paired"}},
                         "suites": {"s": {"repo": "/r", "command": ["b", "{results}"], "format": "zlops-json",
                                               "pools": ["cpu"]}},
                         **({"paired": paired} if paired else {})})


def _runs(level: float, n: int, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


# --- the pair gate -----------------------------------------------------------------------------------

def test_load_both_runs_saw_cancels_a_burst_on_one_side_invalidates_the_pair_with_both_figures() -> None:
    busy = {"foreign_cpu_mean_pct": 180.0, "steal_max_pct": 12.0}
    assert pair_busy_reason(busy, {"foreign_cpu_mean_pct": 150.0, "steal_max_pct": 14.0}, sides=("base", "head"),
                            max_foreign_cpu_diff_pct=50, max_steal_pct=10) is None
    why = pair_busy_reason({"foreign_cpu_mean_pct": 20.0}, busy, sides=("base", "head"),
                           max_foreign_cpu_diff_pct=50, max_steal_pct=10)
    assert why == ("host load unbalanced: other processes used 20% CPU during the base run and 180% during the "
                   "head run (difference limit 50%)")
    why = pair_busy_reason({"steal_max_pct": 1.0}, {"steal_max_pct": 15.0}, sides=("head", "base"),
                           max_foreign_cpu_diff_pct=50, max_steal_pct=10)
    assert why is not None and "stole 1% during the head run and 15% during the base run" in why


def test_the_keeper_keeps_balanced_pairs_and_refuses_the_second_run_of_an_unbalanced_one() -> None:
    keeper = PairKeeper(max_foreign_cpu_diff_pct=50, max_steal_pct=10)
    keeper.add(0, "base", "b0", {"foreign_cpu_mean_pct": 150.0})
    keeper.add(1, "head", "h0", {"foreign_cpu_mean_pct": 170.0})
    keeper.add(2, "head", "h1", {"foreign_cpu_mean_pct": 10.0})
    with pytest.raises(HostBusy, match="used 10% CPU during the head run and 190% during the base run"):
        keeper.add(3, "base", "b1", {"foreign_cpu_mean_pct": 190.0})
    keeper.add(4, "base", "b2", {})
    keeper.drop(5)  # its second run failed on its own: nothing of pair 2 is kept
    assert keeper.kept == [(("base", "b0"), ("head", "h0"))]
    off = PairKeeper(max_foreign_cpu_diff_pct=50, max_steal_pct=10, enabled=False)  # contention gate off
    off.add(0, "base", "b", {"foreign_cpu_mean_pct": 0.0})
    off.add(1, "head", "h", {"foreign_cpu_mean_pct": 200.0})
    assert len(off.kept) == 1


def test_run_pairs_discards_an_unbalanced_pair_names_it_and_measures_it_again() -> None:
    keeper = PairKeeper(max_foreign_cpu_diff_pct=50, max_steal_pct=None)
    calls: list[tuple[str, int]] = []
    quiets: list[int] = []

    def run_one(side: str, index: int) -> tuple[dict[tuple[str, str], float], float]:
        calls.append((side, index))
        load = 190.0 if len(calls) == 2 else 100.0  # a burst during the second run only
        keeper.add(index, side, side, {"foreign_cpu_mean_pct": load})
        return {("op", "time"): 1.0 if side == "A" else 1.5}, 0.1

    pairs = run_pairs(run_one=run_one, seed=1, min_pairs=5, max_pairs=5, budget_s=100,
                      est_run_s=0.1, decided=lambda s: False, quiet=lambda: quiets.append(1))
    assert len(pairs.discarded) == 1 and "190% during the" in str(pairs.discarded[0])
    assert quiets and len(keeper.kept) == 5
    base, head = pairs.samples[("op", "time")]
    assert base == [1.0] * 5 and head == [1.5] * 5


# --- the paired judgement ------------------------------------------------------------------------------

def test_a_real_change_is_confirmed_by_the_pairs() -> None:
    base, head = _runs(1.0, 7, 0.03, 1), _runs(1.4, 7, 0.03, 2)
    outcome, _ = judge_pairs(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002)
    assert outcome == CONFIRMED
    j = paired_judgement(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002,
                         equivalence_pct=None, base_label="paired base abc1234")
    assert j.verdict is Verdict.SEVERE and 30 < (j.change_pct or 0) < 50 and "confirmed by 7+7 paired runs" in j.note
    better = paired_judgement(head, base, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002,
                              equivalence_pct=None, base_label="b")
    assert better.verdict is Verdict.IMPROVED


def test_a_level_shift_alone_confirms_no_paired_night() -> None:
    """6+6 fully separated runs: confirm_ab's level-shift rule confirms (an A/B of a screened suspect may),
    but the rank test's smallest p (0.0022) is above alpha: a paired night, which tests every series every
    night, leaves it inconclusive with the reason (seen: 2 false confirmations in 170 untouched case-nights)."""
    base, head = _runs(1.0, 6, 0.02, 11), _runs(1.2, 6, 0.02, 12)
    outcome, conf = judge_pairs(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002)
    assert conf.confirmed and outcome == INCONCLUSIVE
    j = paired_judgement(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002,
                         equivalence_pct=None, base_label="b")
    assert j.verdict is Verdict.SUSPECT and "a level shift alone confirms no paired night" in j.note


def test_tight_equal_runs_are_cleared_as_unchanged() -> None:
    base, head = _runs(1.0, 8, 0.004, 3), _runs(1.0, 8, 0.004, 4)
    j = paired_judgement(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002,
                         equivalence_pct=None, base_label="b")
    assert j.verdict is Verdict.UNCHANGED and "cleared by 8+8 paired runs" in j.note and "±2%" in j.note


def test_runs_too_noisy_to_decide_are_inconclusive_never_unchanged() -> None:
    base, head = _runs(1.0, 5, 0.25, 5), _runs(1.03, 5, 0.25, 6)
    outcome, _ = judge_pairs(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002)
    assert outcome == INCONCLUSIVE
    j = paired_judgement(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002,
                         equivalence_pct=None, base_label="b")
    assert j.verdict is not Verdict.UNCHANGED and not j.verdict.flagged
    assert j.note.startswith("inconclusive: 5+5 paired runs neither confirm") and j.figures is not None
    # the equivalence margin is a knob: the same runs inside a wide enough margin are cleared
    wide = paired_judgement(base, head, lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002,
                            equivalence_pct=60, base_label="b")
    assert wide.verdict is Verdict.UNCHANGED


def test_one_pair_is_invalid_with_the_reason() -> None:
    assert judge_pairs([1.0], [1.1], lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002)[0] == INVALID
    j = paired_judgement([1.0], [1.1], lower_is_better=True, threshold_pct=2, severe_pct=5, alpha=0.002,
                         equivalence_pct=None, base_label="b")
    assert j.verdict is Verdict.INVALID and j.note.startswith("paired night: A/B of 1+1 samples")
    assert CLEARED == "cleared"


def test_a_paired_pools_rows_are_judged_from_the_pairs_in_the_runs_meta() -> None:
    config = _config()
    noise = Judgement(Verdict.POTENTIAL, 3.0, 3.0, 2.0, "night vs stored baseline")
    rows = [Comparison("s", "cpu", op, "time", "ms", True, None, Summary(1.0, 5), noise) for op in ("a", "b")]
    meta = {"paired/cpu/0": {"pool": "cpu", "base_sha": "abcdef0123", "samples": [
        ["a", "time", _runs(1.0, 7, 0.02, 7), _runs(1.5, 7, 0.02, 8)]]}, "other": 1}
    a, b = judge_rows(config, meta, rows, potential_pct=2, regression_pct=5)
    assert a.verdict is Verdict.SEVERE and a.judgement.figures is not None
    assert a.judgement.figures.reference_label.startswith("paired base abcdef0")
    assert b == rows[1]  # no pairs for it: left as judged


# --- the config ---------------------------------------------------------------------------------------

def test_measure_is_validated_and_paired_knobs_say_what_to_write() -> None:
    config = _config()
    assert config.measures_paired("cpu") and not config.measures_paired("elsewhere")
    assert config.measures_paired("cpu.variant")   # a PR compare variant's pool
    assert config.paired.min_pairs == 5 and config.paired.max_foreign_cpu_diff_pct == 50
    with pytest.raises(ConfigError, match="measure"):
        parse_config({"pools": {"cpu": {"backend": "cpu", "devices": [0], "measure": "twice"}},
                      "suites": {"s": {"repo": "/r", "command": ["b"], "format": "zlops-json", "pools": ["cpu"]}}})
    with pytest.raises(ConfigError, match=r"paired.max_pairs 6 cannot reach noise.alpha 0.002; use at least 7"):
        _config(min_pairs=2, max_pairs=6)
    assert pairs_to_decide(0.002) == 7 and pairs_to_decide(0.01) == 5
    with pytest.raises(ConfigError, match=r"max_pairs \(5\) must be >= min_pairs \(6\)"):
        _config(min_pairs=6, max_pairs=5)


def test_pairs_are_kept_after_the_first_run_of_a_pair_is_discarded() -> None:
    """A busy first run of a pair: run_pairs discards the pair and runs it again, from an odd run number. The
    keeper pairs consecutive runs, so every later pair is kept (it had paired by the numbers' parity and kept
    none: a paired PR compare ended "measured nothing on HEAD" about a minute in)."""
    keeper = PairKeeper(max_foreign_cpu_diff_pct=50, max_steal_pct=10)
    calls: list[tuple[str, int]] = []

    def run_one(side: str, index: int) -> tuple[dict, float]:
        calls.append((side, index))
        if len(calls) == 3:   # the second pair's first run: the host was busy
            keeper.drop(index)
            raise HostBusy("foreign load", seconds=1.0)
        value = 1.0 if side == "A" else 1.1
        keeper.add(index, {"A": "base", "B": "head"}[side], value, {"foreign_cpu_mean_pct": 5.0})
        return {("case", "time"): value}, 1.0

    pairs = run_pairs(run_one=run_one, seed=3, min_pairs=4, max_pairs=4, budget_s=100.0, est_run_s=1.0)
    assert pairs.pairs == 4 and len(pairs.discarded) == 1 and pairs.runs == 9
    assert calls[3][1] % 2 == 1        # the re-run pair starts from an odd number
    assert len(keeper.kept) == 4, (calls, keeper.kept)
    assert all({a[0], b[0]} == {"base", "head"} for a, b in keeper.kept)
