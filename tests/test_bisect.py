"""The bisection search (zlops.bisect.search) with a fake measurer: positions, skips, unclear steps, resume, budget."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from zlops.bisect.search import (
    Allowance,
    BisectPolicy,
    BuildFailed,
    Key,
    Outcome,
    Paused,
    State,
    StepKind,
    StepRecord,
    Target,
    bisect_range,
    builds_bound,
    classify,
    position,
)

T = (Target("softmax_8192", "time", "ms", True),)


class FakeMeasurer:
    """Commit ``i`` of the range runs at ``1.0`` before ``culprit`` and ``1 + step`` from it on, with
    multiplicative noise of ``noise`` (seeded); ``broken`` commits do not build; ``bimodal`` ones
    alternate between the two levels run by run (a step that cannot be decided)."""

    def __init__(self, commits: Sequence[str], culprit: int, *, step: float = 0.3, noise: float = 0.005,
                 broken: Sequence[int] = (), bimodal: Sequence[int] = (), crash_after: int | None = None,
                 seed: int = 0) -> None:
        self.index = {sha: i for i, sha in enumerate(commits)}
        self.culprit, self.step, self.noise = culprit, step, noise
        self.broken, self.bimodal = set(broken), set(bimodal)
        self.rng = np.random.default_rng(seed)
        self.runs: list[str] = []
        self.builds: list[str] = []
        self.crash_after = crash_after

    def build(self, sha: str) -> None:
        self.builds.append(sha)
        if self.index[sha] in self.broken:
            raise BuildFailed(f"{sha[:7]}: pip install failed")

    def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[Key, float], float]:
        if self.crash_after is not None and len(self.runs) >= self.crash_after:
            raise RuntimeError("worker killed")
        self.runs.append(sha)
        i = self.index[sha]
        level = 1.0 + (self.step if i >= self.culprit else 0.0)
        if i in self.bimodal:
            level = 1.0 + self.step * (self.runs.count(sha) % 2)  # alternates: the median sits between
        value = level * (1.0 + self.noise * float(self.rng.standard_normal()))
        return {t.key: value for t in targets}, 1.5


def commits(n: int) -> list[str]:
    return [f"{i:02d}" + "a" * 38 for i in range(n + 1)]


def run(cs: list[str], m: FakeMeasurer, *, steps: Sequence[StepRecord] = (), allowance: Allowance | None = None,
        hints: Sequence[int] = (), policy: BisectPolicy | None = None) -> tuple[object, list[StepRecord]]:
    saved: list[StepRecord] = []
    res = bisect_range(cs, T, m, policy=policy or BisectPolicy(), allowance=allowance or Allowance(100, 1e9),
                       steps=steps, save=saved.append, hints=hints)
    return res, saved


@pytest.mark.parametrize(("n", "culprit"), [(2, 1), (2, 2), (8, 3), (16, 1), (16, 16), (33, 20), (64, 41)])
def test_finds_the_culprit_within_the_log2_bound(n: int, culprit: int) -> None:
    cs = commits(n)
    m = FakeMeasurer(cs, culprit)
    res, saved = run(cs, m)
    assert res.state is State.FOUND and res.culprit == culprit
    middle = [s for s in saved if s.kind is StepKind.STEP]
    assert len(middle) <= math.ceil(math.log2(n))
    assert [s.kind for s in saved][0] is StepKind.REPRODUCE and saved[-1].kind is StepKind.VERIFY
    assert res.builds == len(set(m.builds)) <= builds_bound(n)
    verify = saved[-1]
    assert (verify.base_sha, verify.sha) == (cs[culprit - 1], cs[culprit])
    (ev,) = verify.evidence
    assert ev.figures.worse_pct == pytest.approx(30, abs=3) and ev.outcome is Outcome.BAD


def test_a_commit_that_does_not_build_is_skipped() -> None:
    cs = commits(16)
    m = FakeMeasurer(cs, culprit=11, broken=[8])  # 8 is the first midpoint
    res, saved = run(cs, m)
    assert res.state is State.FOUND and res.culprit == 11
    skipped = [s for s in saved if s.outcome is Outcome.SKIPPED]
    assert [s.position for s in skipped] == [8] and "did not build" in skipped[0].note
    assert skipped[0].builds == 1 and skipped[0].pairs == 0


def test_an_unclear_step_is_skipped() -> None:
    cs = commits(16)
    m = FakeMeasurer(cs, culprit=5, bimodal=[8], seed=3)
    res, saved = run(cs, m)
    assert res.state is State.FOUND and res.culprit == 5
    (unclear,) = [s for s in saved if s.outcome is Outcome.UNCLEAR]
    assert unclear.position == 8 and unclear.pairs == BisectPolicy().max_pairs
    assert "straddles" in unclear.note


def test_only_skipped_commits_left_is_ambiguous() -> None:
    cs = commits(8)
    m = FakeMeasurer(cs, culprit=5, broken=[4])
    res, _ = run(cs, m)
    assert res.state is State.AMBIGUOUS and res.candidates == (4, 5) and res.culprit is None


def test_no_regression_between_the_ends_is_not_reproduced() -> None:
    cs = commits(8)
    m = FakeMeasurer(cs, culprit=99)
    res, saved = run(cs, m)
    assert res.state is State.NOT_REPRODUCED and len(saved) == 1 and saved[0].outcome is Outcome.GOOD


def test_a_good_end_that_does_not_build_fails() -> None:
    cs = commits(8)
    res, _ = run(cs, FakeMeasurer(cs, culprit=3, broken=[0]))
    assert res.state is State.FAILED and "did not build" in res.reason


def test_resume_after_a_crash_reuses_the_stored_steps() -> None:
    cs = commits(32)
    saved: list[StepRecord] = []
    crashing = FakeMeasurer(cs, culprit=21, crash_after=30)
    with pytest.raises(RuntimeError):
        bisect_range(cs, T, crashing, policy=BisectPolicy(), allowance=Allowance(100, 1e9), save=saved.append)
    assert 2 <= len(saved) < 6
    fresh = FakeMeasurer(cs, culprit=21, seed=1)
    res, more = run(cs, fresh, steps=saved)
    assert res.state is State.FOUND and res.culprit == 21
    assert {(s.kind, s.sha) for s in more}.isdisjoint({(s.kind, s.sha) for s in saved})  # nothing measured twice
    # the stored steps' commits are not counted as builds again
    assert sum(s.builds for s in saved + more) == len(set(crashing.builds) | set(fresh.builds))


def test_budget_pauses_and_a_later_call_resumes() -> None:
    cs = commits(16)
    m = FakeMeasurer(cs, culprit=6)
    res, saved = run(cs, m, allowance=Allowance(builds=3, seconds=1e9))
    assert res.state is State.PAUSED and "build budget" in res.reason
    assert sum(s.builds for s in saved) <= 3
    res2, _ = run(cs, m, steps=saved)
    assert res2.state is State.FOUND and res2.culprit == 6
    res3, saved3 = run(cs, FakeMeasurer(cs, culprit=6), allowance=Allowance(100, seconds=10.0))
    assert res3.state is State.PAUSED and "device-time" in res3.reason


def test_yield_to_a_nightly_pauses_before_the_next_run() -> None:
    cs = commits(8)
    m = FakeMeasurer(cs, culprit=2)
    calls = []

    def nightly_running() -> str | None:
        calls.append(1)
        return "nightly zlops_nightly_fake is running on local/0" if len(calls) > 12 else None

    res, saved = run(cs, m, allowance=Allowance(100, 1e9, yield_check=nightly_running))
    assert res.state is State.PAUSED and "nightly" in res.reason
    assert len(m.runs) == 12


def test_a_known_culprit_is_tested_first() -> None:
    cs = commits(64)
    res, saved = run(cs, FakeMeasurer(cs, culprit=37), hints=[37])
    assert res.state is State.FOUND and res.culprit == 37
    assert [s.position for s in saved if s.kind is StepKind.STEP] == [37, 36]


def test_a_culprit_whose_own_ab_does_not_reproduce_is_unverified() -> None:
    cs = commits(4)

    class Flaky(FakeMeasurer):
        step_1_done = False

        def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[Key, float], float]:
            values, took = super().run(sha, targets)
            # the verify A/B (parent 1 vs culprit 2) sees both sides at the bad level
            if self.index[sha] == 1 and self.step_1_done:
                values = {k: v * 1.3 for k, v in values.items()}
            return values, took

    m = Flaky(cs, culprit=2)
    saved: list[StepRecord] = []

    def save(step: StepRecord) -> None:
        saved.append(step)
        m.step_1_done = m.step_1_done or (step.kind is StepKind.STEP and step.position == 1)

    res = bisect_range(cs, T, m, policy=BisectPolicy(), allowance=Allowance(100, 1e9), save=save)
    assert [(s.kind, s.position) for s in saved][-2:] == [(StepKind.STEP, 1), (StepKind.VERIFY, 2)]
    assert res.state is State.UNVERIFIED and res.culprit == 2 and "not bad" in res.reason


def test_position_skips_and_prefers_the_middle() -> None:
    assert position(8, {}).next == 4
    assert position(8, {4: Outcome.GOOD}).next == 6
    assert position(8, {4: Outcome.SKIPPED}).next == 3
    p = position(8, {4: Outcome.BAD, 2: Outcome.GOOD, 3: Outcome.UNCLEAR})
    assert (p.lo, p.hi, p.next) == (2, 4, None)
    assert position(8, {}, hints=[6]).next == 6
    assert position(8, {6: Outcome.BAD}, hints=[6]).next == 5


def test_classify_uses_the_ci_against_the_line() -> None:
    base = [1.00, 1.01, 0.99, 1.00, 1.005]
    bad = [1.30, 1.31, 1.29, 1.30, 1.30]
    e = classify(base, bad, line_pct=15, lower_is_better=True, confidence=0.95)
    assert e.outcome is Outcome.BAD and e.figures.change_pct == pytest.approx(30, abs=0.5)
    assert e.figures.ci_pct[0] > 15
    assert classify(base, base, line_pct=15, lower_is_better=True, confidence=0.95).outcome is Outcome.GOOD
    # higher is better: a drop is worse
    assert classify(bad, base, line_pct=15, lower_is_better=False, confidence=0.95).outcome is Outcome.BAD
    mixed = [1.0, 1.3, 1.0, 1.3, 1.0, 1.3]
    assert classify(base, mixed, line_pct=15, lower_is_better=True, confidence=0.95).outcome is None


def test_policy_and_range_are_validated() -> None:
    with pytest.raises(ValueError, match="min_pairs"):
        BisectPolicy(min_pairs=5, max_pairs=4)
    with pytest.raises(ValueError, match="share"):
        BisectPolicy(share=1.5)
    from zlops.errors import ZlopsError

    with pytest.raises(ZlopsError, match="good and a bad"):
        bisect_range(["a" * 40], T, FakeMeasurer(["a" * 40], 1), policy=BisectPolicy(), allowance=Allowance(1, 1),
                     save=lambda s: None)
    assert Paused.__mro__[1] is ZlopsError


def test_the_shift_ci_is_exact_and_distribution_free() -> None:
    from zlops.stats import hodges_lehmann_ratio_ci
    from zlops.stats.twosample import _mwu_lower_counts, _shift_rank

    # the exact null distribution of U (6 + 6): C(12, 6) orderings, P(U <= 2) = 4/924
    counts = _mwu_lower_counts(6, 6)
    assert sum(counts) == math.comb(12, 6) and counts[:4] == (1.0, 1.0, 2.0, 3.0)
    assert _shift_rank(6, 6, 0.99) == 3 and _shift_rank(4, 4, 0.99) == 0 and _shift_rank(4, 4, 0.95) == 1
    # a two-level series shifted by 5%: the shift is found where the medians jump by the gap
    rng = np.random.default_rng(3)
    levels = np.where(rng.random(24) < 0.5, 1.0, 1.08) * (1 + 0.002 * rng.standard_normal(24))
    head = np.where(rng.random(24) < 0.5, 1.0, 1.08) * 1.05 * (1 + 0.002 * rng.standard_normal(24))
    ratio, lo, hi = hodges_lehmann_ratio_ci(levels, head, confidence=0.95)
    assert lo is not None and hi is not None and lo < 1.05 < hi and abs(ratio - 1.05) < 0.02
    # coverage under the null on real-like bimodal noise: the 95% CI excludes 1 in about 5% of A/Bs
    misses = 0
    for _ in range(400):
        a = np.where(rng.random(8) < 0.4, 1.0, 1.07) * (1 + 0.003 * rng.standard_normal(8))
        b = np.where(rng.random(8) < 0.4, 1.0, 1.07) * (1 + 0.003 * rng.standard_normal(8))
        _, lo, hi = hodges_lehmann_ratio_ci(a, b, confidence=0.95)
        misses += not (lo <= 1.0 <= hi)
    assert misses / 400 < 0.08
    assert hodges_lehmann_ratio_ci([1.0] * 4, [1.1] * 4, confidence=0.99)[1] is None  # 4 + 4 cannot reach 99%


def test_unclear_steps_extend_then_retest_before_skipping() -> None:
    from zlops.bisect.search import worth_extending

    cs = commits(8)
    # commit 4 lands on both levels run by run: its step stays unclear at 24 pairs, the projection says
    # more pairs would not settle it (the estimate sits on the line), it is retested once, then skipped:
    # between the last good (3) and the first bad (5) only it is left, so the culprit is 4 or 5
    res, saved = run(cs, FakeMeasurer(cs, culprit=5, bimodal=[4]))
    kinds = [(s.kind, s.position, s.outcome) for s in saved]
    assert (StepKind.STEP, 4, Outcome.UNCLEAR) in kinds and (StepKind.RETEST, 4, Outcome.UNCLEAR) in kinds
    assert res.state is State.AMBIGUOUS and res.candidates == (4, 5) and "twice" in res.reason
    step4 = next(s for s in saved if s.kind is StepKind.STEP and s.position == 4)
    assert step4.pairs < BisectPolicy().extend_pairs and "straddles" in step4.note
    # the culprit itself unclear at first: the retest decides it and the search ends found, not ambiguous
    cs = commits(4)

    class Late(FakeMeasurer):
        first_done = False

        def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[Key, float], float]:
            values, took = super().run(sha, targets)
            if self.index[sha] == 2 and not self.first_done:   # its first step: both levels, run by run
                values = {k: v * (1.0 if self.runs.count(sha) % 2 else 1 / 1.3) for k, v in values.items()}
            return values, took

    def late_run(policy: BisectPolicy) -> tuple[object, list[StepRecord]]:
        m = Late(cs, culprit=2)
        saved: list[StepRecord] = []

        def save(step: StepRecord) -> None:
            saved.append(step)
            m.first_done = m.first_done or step.position == 2

        return bisect_range(cs, T, m, policy=policy, allowance=Allowance(100, 1e9), save=save), saved

    res, saved = late_run(BisectPolicy())
    assert [(s.kind, s.position, s.outcome) for s in saved] == [
        (StepKind.REPRODUCE, 4, Outcome.BAD), (StepKind.STEP, 2, Outcome.UNCLEAR), (StepKind.STEP, 1, Outcome.GOOD),
        (StepKind.STEP, 3, Outcome.BAD), (StepKind.RETEST, 2, Outcome.BAD), (StepKind.VERIFY, 2, Outcome.BAD)]
    assert res.state is State.FOUND and res.culprit == 2
    # no retest: the same search ends ambiguous between commits 1 and 3
    res, _ = late_run(BisectPolicy(retest=False))
    assert res.state is State.AMBIGUOUS and res.candidates == (2, 3)
    # the projection: far from the line with a CI that would shrink enough extends, on the line does not
    e = classify([1.0, 1.01, 0.99, 1.0], [1.04, 1.2, 1.05, 1.21], line_pct=5, lower_is_better=True, confidence=0.95)
    assert e.outcome is None and worth_extending([e], 4, 64)
    e = classify([1.0, 1.1, 1.0, 1.1], [1.0, 1.1, 1.0, 1.1], line_pct=0.5, lower_is_better=True, confidence=0.95)
    assert e.outcome is None and not worth_extending([e], 24, 64)


def test_policy_and_config_refuse_a_statistic_that_cannot_decide() -> None:
    from zlops.config.settings import BisectConfig

    with pytest.raises(ValueError, match="at least 5 pairs"):
        BisectPolicy(confidence=0.99, max_pairs=4, extend_pairs=4)
    with pytest.raises(ValueError, match="statistic"):
        BisectPolicy(statistic="mean")
    with pytest.raises(ValueError, match="needs at least 4 pairs"):
        BisectConfig(min_pairs=2, max_pairs=3, extend_pairs=3)
    assert BisectConfig(min_pairs=2, max_pairs=2, extend_pairs=2, statistic="median").statistic == "median"
