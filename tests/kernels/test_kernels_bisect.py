"""Bisection steps are marked when the commit compiled the same kernels as the good end (zlops.kernels)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from triton_cache_factory import flaggems_like

from zlops.bisect.search import Allowance, BisectPolicy, Key, Outcome, State, StepKind, StepRecord, Target, bisect_range
from zlops.kernels.attribution import kernel_side, same_op_kernels
from zlops.kernels.triton import parse_cache

T = (Target("amax/float16/(64x64)", "time", "ms", True),)


class KernelMeasurer:
    """Commit ``i`` runs at 1.0 before ``culprit`` and 1.3 from it on; from ``kernel_change`` on, the
    amax kernel compiles to other code (a commit at or past it is not "the same kernels as good")."""

    def __init__(self, commits: Sequence[str], culprit: int, kernel_change: int, tmp: Path) -> None:
        self.index = {sha: i for i, sha in enumerate(commits)}
        self.culprit = culprit
        self.inv = {}
        for sha, i in self.index.items():
            changed = {"amax_kernel": {"body": "BLOCK=2048"}} if i >= kernel_change else None
            flaggems_like(tmp / sha, 10, changed=changed, size=100)
            self.inv[sha] = parse_cache(tmp / sha)
        self.n = 0

    def build(self, sha: str) -> None:
        pass

    def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[Key, float], float]:
        self.n += 1
        level = 1.3 if self.index[sha] >= self.culprit else 1.0
        return {t.key: level * (1 + 0.001 * (self.n % 3)) for t in targets}, 1.0

    def same_kernels(self, base_sha: str, head_sha: str, targets: Sequence[Target]) -> bool | None:
        return same_op_kernels(self.inv[base_sha], self.inv[head_sha], ["amax"])

    def kernel_side(self, good_sha: str, bad_sha: str, sha: str, targets: Sequence[Target]) -> str | None:
        return kernel_side(self.inv[good_sha], self.inv[bad_sha], self.inv[sha], ["amax"])


def _bisect(tmp: Path, culprit: int, kernel_change: int, *, skip: bool = False,
            counter: list[int] | None = None) -> tuple[object, list[StepRecord], list[str]]:
    cs = [f"{i:02d}" + "b" * 38 for i in range(9)]
    saved: list[StepRecord] = []
    m = KernelMeasurer(cs, culprit, kernel_change, tmp)
    res = bisect_range(cs, T, m, policy=BisectPolicy(skip_same_kernels=skip),
                       allowance=Allowance(100, 1e9), steps=(), save=saved.append)
    if counter is not None:
        counter.append(m.n)
    return res, saved, cs


def test_python_only_culprit_steps_before_it_are_same_kernels_as_good(tmp_path: Path) -> None:
    # the slowdown comes at commit 5, the kernel never changes: every step reads "same kernels as good"
    res, saved, _ = _bisect(tmp_path, culprit=5, kernel_change=99)
    assert res.state is State.FOUND and res.culprit == 5  # type: ignore[attr-defined]
    steps = [s for s in saved if s.kind in (StepKind.STEP, StepKind.REPRODUCE)]
    assert steps and all("same kernels as good" in s.note for s in steps)
    verify = saved[-1]
    assert verify.kind is StepKind.VERIFY and "same kernels as its parent" in verify.note


def test_kernel_culprit_is_not_marked_from_it_on(tmp_path: Path) -> None:
    res, saved, cs = _bisect(tmp_path, culprit=5, kernel_change=5)
    assert res.culprit == 5  # type: ignore[attr-defined]
    for s in saved:
        if s.kind is StepKind.VERIFY:
            assert "same kernels" not in s.note
        elif cs.index(s.sha) >= 5:
            assert "same kernels" not in s.note, s
        else:
            assert "same kernels as good" in s.note, s


def test_same_op_kernels_cannot_tell_without_inventories(tmp_path: Path) -> None:
    flaggems_like(tmp_path, 4, size=100)
    inv = parse_cache(tmp_path)
    assert same_op_kernels(inv, inv, ["amax"]) is True
    assert same_op_kernels(None, inv, ["amax"]) is None
    assert same_op_kernels(inv, inv, ["softmax"]) is None


def test_skip_same_kernels_decides_steps_from_one_run_and_says_what_it_saved(tmp_path: Path) -> None:
    runs: list[int] = []
    plain, _, _ = _bisect(tmp_path / "plain", culprit=5, kernel_change=5, counter=runs)
    res, saved, _ = _bisect(tmp_path / "skip", culprit=5, kernel_change=5, skip=True, counter=runs)
    assert plain.culprit == res.culprit == 5 and res.state is State.FOUND  # type: ignore[attr-defined]
    steps = [s for s in saved if s.kind is StepKind.STEP]
    assert steps and all(s.pairs == 0 and "not measured further" in s.note and "device s saved" in s.note
                         for s in steps)
    assert {s.outcome for s in steps} == {Outcome.GOOD, Outcome.BAD}
    assert saved[-1].kind is StepKind.VERIFY and saved[-1].pairs >= 4  # the culprit is still measured
    assert runs[1] < runs[0] / 2, runs


def test_skip_same_kernels_never_claims_a_python_culprit_it_did_not_measure(tmp_path: Path) -> None:
    # the kernel changed at 3, the slowdown came at 6 (Python): the shortcut points at 3, verify refutes it
    res, saved, _ = _bisect(tmp_path, culprit=6, kernel_change=3, skip=True)
    assert res.state is State.UNVERIFIED and res.culprit == 3  # type: ignore[attr-defined]
    assert saved[-1].kind is StepKind.VERIFY and saved[-1].outcome is Outcome.GOOD
    # the kernels never changed: no shortcut at all, the search measures every step
    res2, saved2, _ = _bisect(tmp_path / "b", culprit=6, kernel_change=99, skip=True)
    assert res2.culprit == 6 and all("not measured further" not in s.note for s in saved2)  # type: ignore[attr-defined]
