"""The level-shift escape of a few-run A/B is not available to a series whose earlier A/Bs spread beyond what an A/B
can see: held out on the CPU gloo campaign, unchanged code, two P=1 series "confirmed severe" by 5+5 A/Bs at
p=0.00794 (the rank test's alpha is 0.002), both series whose earlier A/Bs' runs had spread 388% and 45%. Their runs,
the noise their rows carried and what the night asked are those the record stores
(tests/data/campaign_gloo_cpu_defaults/run8, run9: ``night4.comparisons.json``). A quiet series' few-run
confirmation (the H100 hold-out's cos (64x64): +3.23%, CI [+3.16%, +3.53%], 5+5) is unchanged, and a noisy series'
real step still confirms once the rank test reaches alpha (7+7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.judge.judges import confirm_suspect
from zlops.model import Figures, Judgement, Verdict
from zlops.stats import Policy

DATA = Path(__file__).resolve().parent / "data" / "campaign_gloo_cpu_defaults"


def _stored(run: str, case: str, metric: str) -> dict:
    rows = json.loads((DATA / run / "night4.comparisons.json").read_text())
    rows = rows if isinstance(rows, list) else rows.get("rows") or rows.get("comparisons")
    (row,) = [r for r in rows if r["case"] == case and r["metric"] == metric]
    return row


def _asked(base: list[float], head: list[float], ab_noise_pct: float | None) -> Judgement:
    """A suspect as the nights put it to the A/B (against the 2% floor), its figures carrying its A/B noise."""
    ref, val = sorted(base)[len(base) // 2], sorted(head)[len(head) // 2]
    figures = Figures(ref, "median of 6 nights", val, "tonight, 1 sample", ab_noise_pct=ab_noise_pct)
    return Judgement(Verdict.SUSPECT, None, None, 2.0, "awaiting confirmation", figures=figures)


@pytest.mark.parametrize(("run", "case", "metric"), [
    ("run8", "allreduce/4MiB/p1/ring/ring", "wall_s"),
    ("run9", "allreduce/4MiB/p1/tree/nccl", "setup_s"),
])
def test_the_campaigns_few_run_confirmations_on_unchanged_code_no_longer_stand(run: str, case: str,
                                                                               metric: str) -> None:
    row = _stored(run, case, metric)
    assert row["verdict"] == "severe" and "p=0.00794" in row["note"]          # what the live night said
    fig = row["figures"]
    base, head, noise = list(fig["runs_base"]), list(fig["runs_head"]), fig["ab_noise_pct"]
    assert noise > 5.0 / 3
    got = confirm_suspect(_asked(base, head, noise), base, head, lower_is_better=True, policy=Policy())
    assert got.verdict is Verdict.SUSPECT, got.note
    assert "earlier A/Bs spread" in got.note and "only the rank test" in got.note
    # the same runs on a series whose earlier A/Bs were quiet (or never ran) are confirmed as before
    for quiet in (None, 1.0):
        again = confirm_suspect(_asked(base, head, quiet), base, head, lower_is_better=True, policy=Policy())
        assert again.verdict.changes_level, again.note


def test_a_quiet_series_few_run_confirmation_and_a_noisy_series_rank_test_still_stand() -> None:
    base = [1.3435, 1.3441, 1.3452, 1.3463, 1.3477]     # the H100 hold-out's cos (64x64), lease 2 night 9 (us)
    head = [1.3899, 1.3902, 1.3905, 1.3909, 1.3912]
    got = confirm_suspect(_asked(base, head, 0.4), base, head, lower_is_better=True, policy=Policy())
    assert got.verdict.changes_level, got.note
    # a noisy series (earlier A/Bs 20%) with a real +100% step, every run apart: 5+5 is not enough, 7+7 is
    b7 = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98]
    h7 = [2.0, 2.2, 1.8, 2.1, 1.9, 2.04, 1.96]
    five = confirm_suspect(_asked(b7[:5], h7[:5], 20.0), b7[:5], h7[:5], lower_is_better=True, policy=Policy())
    assert five.verdict is Verdict.SUSPECT, five.note
    seven = confirm_suspect(_asked(b7, h7, 20.0), b7, h7, lower_is_better=True, policy=Policy())
    assert seven.verdict is Verdict.SEVERE, seven.note
