"""Automatic bisection of a confirmed regression: the search itself (no git, no store, no devices).

The range is the suite branch's first-parent line from the good night's commit (position 0, known
good) to the bad night's commit (position ``n``): ``commits[0..n]``. The culprit is one of
``commits[1..n]``. The search runs in three kinds of step, each a same-device interleaved A/B of
only the regressed cases (:class:`Measurer` runs one benchmark process per call):

1. **reproduce**: the bad end against the good end. A case is bisected only when this A/B shows it
   worse beyond the floor (the judge's potential threshold); nothing reproduced ends the bisection
   (``not_reproduced``). Each reproduced case gets its own line between good and bad:
   ``max(floor, share x its reproduced change)`` (half-way between the two levels by default), so a
   step is judged against the size of the change it looks for, not against the floor.
2. **step**: a commit inside the range against the good end. Pairs are added, from ``min_pairs`` up
   to ``max_pairs`` (and on to ``extend_pairs`` while :func:`worth_extending`), until the CI clears
   the line for every case (:func:`classify`: by default the rank CI of the Hodges-Lehmann shift of
   the runs): ``bad`` when any case is wholly beyond its line, ``good`` when every case is wholly
   below it, else ``unclear``. An unclear commit is measured once more (``retest``) before the search
   would end on it. Still unclear, and commits that do not build, are skipped like ``git bisect
   skip``: the next commit is the untested one nearest the middle; when only skipped commits are left
   between the last good and the first bad commit the result is ``ambiguous`` with those candidates.
3. **verify**: the culprit against its first parent, which must reproduce the change (``bad``);
   otherwise the result is ``unverified`` (named, with its evidence, but not claimed).

Everything the search decided is a stored :class:`StepRecord`; :func:`bisect_range` rebuilds its
position from them, so a rerun after a crash resumes where the stored steps end and measures
nothing twice. ``hints`` (culprits already found by other bisections inside this range) are tested
first, with their parents: when one is the culprit here too, two steps find it.

Builds: with ``commits[k-1]`` and ``commits[k]`` both tested (or ends), the verify step builds
nothing new, so a bisection of ``n`` commits without skips builds at most ``ceil(log2 n) + 2``
commits (the two ends and the midpoints). Anchors: git bisect (skip), Chromium Pinpoint (adaptive
repeats, reproduce first), Mozilla's perfherder alert bisection.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from zlops.errors import ZlopsError
from zlops.model import Figures, median_of

Key = tuple[str, str]  # (case, metric)


class Outcome(str, Enum):
    GOOD = "good"
    BAD = "bad"
    UNCLEAR = "unclear"     # max pairs spent, the CI still straddles a line
    SKIPPED = "skipped"     # the commit did not build (or its benchmark failed)


class StepKind(str, Enum):
    REPRODUCE = "reproduce"
    STEP = "step"
    RETEST = "retest"       # a fresh A/B of a commit whose step stayed unclear, before it is skipped
    VERIFY = "verify"


class State(str, Enum):
    RUNNING = "running"
    FOUND = "found"                    # culprit verified against its parent
    UNVERIFIED = "unverified"          # the search named a commit; its own A/B did not reproduce the change
    AMBIGUOUS = "ambiguous"            # only skipped commits between the last good and the first bad one
    NOT_REPRODUCED = "not_reproduced"  # the ends' A/B did not show the regression on this device
    PAUSED = "paused"                  # budget spent or yielded to a nightly: a rerun resumes
    FAILED = "failed"                  # an end does not build or measure: nothing to bisect against

    @property
    def finished(self) -> bool:
        return self not in (State.RUNNING, State.PAUSED)


class BuildFailed(ZlopsError):
    """A commit's worktree or environment could not be built, or its benchmark did not measure."""


class Paused(ZlopsError):
    """The bisection stops here for now (budget spent, a nightly needs the device); a rerun resumes."""


@dataclass(frozen=True)
class Target:
    """One regressed series the bisection measures."""

    case: str
    metric: str
    unit: str = ""
    lower_is_better: bool = True

    @property
    def key(self) -> Key:
        return (self.case, self.metric)


@dataclass(frozen=True)
class BisectPolicy:
    """How steps are measured and judged (``bisect:`` in the config; docs/bisect.md)."""

    floor_pct: float = 2.0        # the judge's potential threshold: the smallest change the ends must show
    share: float = 0.5            # a case's line between good and bad, as a share of its reproduced change
    min_pairs: int = 4
    max_pairs: int = 24           # pairs a step adds while its CI straddles the line ...
    extend_pairs: int = 64        # ... and up to this many when more pairs would settle it (:func:`worth_extending`)
    confidence: float = 0.95
    statistic: str = "shift"      # "shift": Hodges-Lehmann with its rank CI; "median": bootstrap of the median ratio
    retest: bool = True           # an unclear commit is measured once more before the search ends ambiguous
    #: a step whose commit (one run) compiled the regressed ops' kernels exactly as one end of the range
    #: did, while the two ends' kernels differ, takes that end's outcome without an A/B (the suite's
    #: ``kernels.skip_same_in_bisect``; the culprit is still verified against its parent)
    skip_same_kernels: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.floor_pct:
            raise ValueError(f"BisectPolicy.floor_pct: expected > 0, got {self.floor_pct}")
        if not 0 < self.share < 1:
            raise ValueError(f"BisectPolicy.share: expected 0 < share < 1, got {self.share}")
        if not 2 <= self.min_pairs <= self.max_pairs:
            raise ValueError(f"BisectPolicy: expected 2 <= min_pairs <= max_pairs, got {self.min_pairs}, "
                             f"{self.max_pairs}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"BisectPolicy.confidence: expected 0 < c < 1, got {self.confidence}")
        if self.extend_pairs < self.max_pairs:
            raise ValueError(f"BisectPolicy: expected extend_pairs >= max_pairs, got {self.extend_pairs}, "
                             f"{self.max_pairs}")
        if self.statistic not in STATISTICS:
            raise ValueError(f"BisectPolicy.statistic: expected one of {', '.join(STATISTICS)}, got {self.statistic!r}")
        if self.statistic == "shift":
            from zlops.stats.twosample import _shift_rank

            if _shift_rank(self.extend_pairs, self.extend_pairs, self.confidence) < 1:
                raise ValueError(f"BisectPolicy: {self.extend_pairs} pairs cannot reach a {self.confidence:g} rank CI "
                                 f"of the shift (at least {min_pairs_for(self.confidence)} pairs are needed)")


#: the statistics a step can be judged by (:func:`classify`)
STATISTICS = ("shift", "median")


def min_pairs_for(confidence: float) -> int:
    """The fewest pairs whose rank CI of the shift reaches ``confidence`` (5 at 99%, 4 at 95%).

    That CI exists (:func:`zlops.stats.twosample._shift_rank` >= 1) when the one ordering of n + n runs
    with U = 0 is rare enough, P(U = 0) = 1 / C(2n, n) <= (1 - confidence) / 2; n <= 30 reaches every
    confidence below 1, so the exact distribution decides and this closed form is the same number.
    Closed form because loading a config checks it: ``zlops runs`` then imports neither numpy nor scipy.
    """
    half = (1.0 - confidence) / 2.0
    return next(n for n in range(2, 1000) if 1.0 / math.comb(2 * n, n) <= half)


@dataclass(frozen=True)
class CaseEvidence:
    """One case of one step: the A/B's figures and the line it was judged against.

    ``shift_pct``: the Hodges-Lehmann shift of head's runs from base's (raw direction, from
    ``figures.runs_base``/``runs_head``), the estimate ``figures.ci_pct`` is the CI of when the
    step was judged by the shift; None when it was judged by the median ratio (``figures.change_pct``).
    """

    case: str
    metric: str
    figures: Figures
    line_pct: float
    outcome: Outcome | None    # None: undecided at this many pairs
    shift_pct: float | None = None

    @property
    def worse_estimate_pct(self) -> float:
        """The estimate the CI surrounds, positive = worse: the shift, or the median ratio's change."""
        if self.shift_pct is None:
            return self.figures.worse_pct
        return self.shift_pct if self.figures.lower_is_better else -self.shift_pct


@dataclass(frozen=True)
class StepRecord:
    """A decided step, as stored (``bisection_steps``): what ran, what it cost, what it showed."""

    kind: StepKind
    sha: str
    base_sha: str
    position: int
    outcome: Outcome
    pairs: int = 0
    seconds: float = 0.0
    builds: int = 0
    evidence: tuple[CaseEvidence, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Result:
    """Where the bisection stands: its state, the culprit's position (or the ambiguous candidates)."""

    state: State
    culprit: int | None = None
    candidates: tuple[int, ...] = ()
    reason: str = ""
    steps: tuple[StepRecord, ...] = ()

    @property
    def builds(self) -> int:
        return sum(s.builds for s in self.steps)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)


class Measurer(Protocol):
    """What a bisection needs from the world: build a commit, run its benchmark once."""

    def build(self, sha: str) -> None:
        """Make the commit runnable (worktree + env, cached); raise :class:`BuildFailed` when it cannot be."""

    def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[Key, float], float]:
        """One benchmark process of ``targets``: per case its median, and the device seconds it took.
        Raise :class:`BuildFailed` when the benchmark fails; :class:`Paused` to stop for now."""


@dataclass
class Allowance:
    """What tonight's budget of this pool still allows (builds and device seconds)."""

    builds: int
    seconds: float
    #: checked before every benchmark process: a reason to stop now (a nightly needs the device), or None
    yield_check: Callable[[], str | None] = field(default=lambda: None)


# --- judging one A/B --------------------------------------------------------------------------------

def classify(base_runs: Sequence[float], head_runs: Sequence[float], *, line_pct: float, lower_is_better: bool,
             confidence: float, seed: int = 0, base_label: str = "good", head_label: str = "head",
             statistic: str = "shift") -> CaseEvidence:
    """Judge one case of an A/B against ``line_pct``: bad, good, or None (the CI straddles the line).

    Each run (process) is one observation. ``statistic="shift"`` (the default): the Hodges-Lehmann
    shift of head's level from base's with its distribution-free rank CI
    (:func:`zlops.stats.hodges_lehmann_ratio_ci`): it uses every run, so a series whose processes land
    on two levels (a median of runs that jumps by the gap) is decided in about half the pairs.
    ``"median"``: the percentile-bootstrap CI of median(head)/median(base)
    (:func:`zlops.stats.bootstrap_median_ratio_ci`); it reaches a decision from 2 + 2 runs, the rank CI
    needs 4 + 4 at 95% and 5 + 5 at 99%. The CI, in percent and oriented so that positive is worse:
    ``bad`` when its low end is beyond ``line_pct``, ``good`` when its high end is below it.
    """
    from zlops.stats import bootstrap_median_ratio_ci, hodges_lehmann_ratio_ci

    shift: float | None = None
    ci: tuple[float, float] | None
    if statistic == "shift":
        ratio, lo_r, hi_r = hodges_lehmann_ratio_ci(base_runs, head_runs, confidence=confidence)
        shift = (ratio - 1.0) * 100.0
        ci = None if lo_r is None or hi_r is None else ((lo_r - 1.0) * 100.0, (hi_r - 1.0) * 100.0)
    elif statistic == "median":
        lo, hi = bootstrap_median_ratio_ci(base_runs, head_runs, confidence=confidence, seed=seed)
        ci = ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0)
    else:
        raise ValueError(f"statistic: expected one of {', '.join(STATISTICS)}, got {statistic!r}")
    outcome = None
    if ci is not None:
        worse_lo, worse_hi = (ci if lower_is_better else (-ci[1], -ci[0]))
        outcome = Outcome.BAD if worse_lo > line_pct else Outcome.GOOD if worse_hi < line_pct else None
    figures = Figures(reference=median_of(base_runs), reference_label=f"{base_label}, {len(base_runs)} runs",
                      value=median_of(head_runs), value_label=f"{head_label}, {len(head_runs)} runs",
                      lower_is_better=lower_is_better, ci_pct=ci, threshold_pct=line_pct,
                      runs_base=tuple(base_runs), runs_head=tuple(head_runs))
    return CaseEvidence("", "", figures, line_pct, outcome, shift)


def worth_extending(evidence: Sequence[CaseEvidence], pairs: int, extend_pairs: int) -> bool:
    """Whether a step still undecided at ``pairs`` may settle by ``extend_pairs``: some undecided case's
    estimate is farther from its line than its CI's half-width shrunk by sqrt(pairs / extend_pairs)
    (a CI narrows as 1/sqrt(runs)). A commit that sits on the line (a partial change, or noise too
    wide for this step) stops here, unclear, instead of spending the extended pairs."""
    if pairs >= extend_pairs:
        return False
    for e in evidence:
        if e.outcome is not None:
            continue
        if e.figures.ci_pct is None:
            return True    # the CI is not reachable yet at these sizes: more pairs are needed to know
        half = (e.figures.ci_pct[1] - e.figures.ci_pct[0]) / 2.0
        if abs(e.worse_estimate_pct - e.line_pct) > half * math.sqrt(pairs / extend_pairs):
            return True
    return False


def step_outcome(evidence: Sequence[CaseEvidence]) -> Outcome | None:
    """A step is bad when any case is bad, good when every case is good, else undecided."""
    if any(e.outcome is Outcome.BAD for e in evidence):
        return Outcome.BAD
    if evidence and all(e.outcome is Outcome.GOOD for e in evidence):
        return Outcome.GOOD
    return None


def lines_from(reproduce: StepRecord, policy: BisectPolicy) -> dict[Key, float]:
    """Each reproduced case's line between good and bad: max(floor, share x its reproduced change)."""
    return {(e.case, e.metric): max(policy.floor_pct, policy.share * e.worse_estimate_pct)
            for e in reproduce.evidence if e.outcome is Outcome.BAD}


# --- where the search stands ------------------------------------------------------------------------

@dataclass(frozen=True)
class Position:
    lo: int                       # the last known good position
    hi: int                       # the first known bad position
    next: int | None              # the position to test next; None when no untested one is left
    untested: tuple[int, ...]


def position(n: int, outcomes: Mapping[int, Outcome], *, hints: Sequence[int] = ()) -> Position:
    """The search's position over ``commits[0..n]`` given the step outcomes so far (pure).

    ``hi`` is the lowest bad position (``n`` when none), ``lo`` the highest good position below it
    (0 when none); unclear and skipped positions are never tested again. The next position is a
    hint (or a hint's parent) when one is untested inside (lo, hi), else the untested position
    nearest the middle (the lower one on a tie).
    """
    hi = min([p for p, o in outcomes.items() if o is Outcome.BAD and 0 < p <= n] + [n])
    lo = max([p for p, o in outcomes.items() if o is Outcome.GOOD and 0 <= p < hi] + [0])
    untested = tuple(p for p in range(lo + 1, hi) if p not in outcomes)
    nxt = None
    for h in hints:
        for p in (h, h - 1):
            if p in untested:
                nxt = p
                break
        if nxt is not None:
            break
    if nxt is None and untested:
        mid = (lo + hi) / 2
        nxt = min(untested, key=lambda p: (abs(p - mid), p))
    return Position(lo, hi, nxt, untested)


def step_outcomes(steps: Sequence[StepRecord]) -> dict[int, Outcome]:
    """Each tested position's outcome: its step's, or its retest's when it was measured again."""
    out = {s.position: s.outcome for s in steps if s.kind is StepKind.STEP}
    out.update({s.position: s.outcome for s in steps if s.kind is StepKind.RETEST})
    return out


def retest_next(n: int, steps: Sequence[StepRecord], *, hints: Sequence[int] = ()) -> int | None:
    """The unclear position to measure once more before the search ends ambiguous: inside (last good,
    first bad), not retested yet, the one nearest the middle (None when there is none)."""
    outcomes = step_outcomes(steps)
    pos = position(n, outcomes, hints=hints)
    retested = {s.position for s in steps if s.kind is StepKind.RETEST}
    unclear = [p for p in range(pos.lo + 1, pos.hi) if outcomes.get(p) is Outcome.UNCLEAR and p not in retested]
    if pos.next is not None or not unclear:
        return None
    mid = (pos.lo + pos.hi) / 2
    return min(unclear, key=lambda p: (abs(p - mid), p))


def result_of(n: int, steps: Sequence[StepRecord], *, hints: Sequence[int] = (), retest: bool = True) -> Result | None:
    """The finished result the stored steps already imply, or None when the search must go on."""
    by_kind = {s.kind: s for s in steps if s.kind is not StepKind.STEP}
    rep = by_kind.get(StepKind.REPRODUCE)
    if rep is None:
        return None
    if rep.outcome is Outcome.SKIPPED:
        return Result(State.FAILED, reason=rep.note or "an end of the range did not build or measure",
                      steps=tuple(steps))
    if rep.outcome is not Outcome.BAD:
        return Result(State.NOT_REPRODUCED, reason=f"the A/B of the range's ends was {rep.outcome.value}: the "
                      "regression does not reproduce on this device", steps=tuple(steps))
    pos = position(n, step_outcomes(steps), hints=hints)
    if pos.next is not None or (retest and retest_next(n, steps, hints=hints) is not None):
        return None
    if pos.hi - pos.lo > 1:
        return Result(State.AMBIGUOUS, candidates=tuple(range(pos.lo + 1, pos.hi + 1)),
                      reason=f"{pos.hi - pos.lo - 1} commit(s) between the last good and the first bad one were "
                             "skipped (did not build, or stayed unclear" + (" twice" if retest else "") + ")",
                      steps=tuple(steps))
    ver = by_kind.get(StepKind.VERIFY)
    if ver is None or ver.position != pos.hi:
        return None
    if ver.outcome is Outcome.BAD:
        return Result(State.FOUND, culprit=pos.hi, reason="verified against its parent", steps=tuple(steps))
    return Result(State.UNVERIFIED, culprit=pos.hi, candidates=(pos.hi,),
                  reason=f"the A/B against its parent was {ver.outcome.value}, not bad", steps=tuple(steps))


# --- the search -------------------------------------------------------------------------------------

class _Runner:
    """Runs A/Bs with adaptive pairs within the allowance; counts the commits it builds."""

    def __init__(self, measurer: Measurer, targets: Sequence[Target], policy: BisectPolicy, allowance: Allowance,
                 built: set[str]) -> None:
        self.m, self.targets, self.policy, self.allowance, self.built = measurer, tuple(targets), policy, allowance, built
        self.bad_sha: str | None = None   # the range's bad end (for skip_same_kernels)

    def ab(self, kind: StepKind, base: tuple[int, str], head: tuple[int, str], lines: Mapping[Key, float],
           labels: tuple[str, str]) -> StepRecord:
        (_, base_sha), (pos, head_sha) = base, head
        builds = 0
        try:
            for sha in (base_sha, head_sha):
                if sha not in self.built:  # a commit first built in this bisection counts, built or not
                    if self.allowance.builds <= 0:
                        raise Paused("tonight's build budget of this pool is spent")
                    self.allowance.builds -= 1
                    self.built.add(sha)
                    builds += 1
                self.m.build(sha)  # cached after the first time (or rebuilt cheaply on another host)
        except BuildFailed as exc:
            return StepRecord(kind, head_sha, base_sha, pos, Outcome.SKIPPED, builds=builds,
                              note=f"did not build: {str(exc)[:400]}")
        targets = [t for t in self.targets if t.key in lines]
        if self.policy.skip_same_kernels and kind in (StepKind.STEP, StepKind.RETEST) and base[0] == 0:
            shortcut = self._kernel_shortcut(kind, base_sha, (pos, head_sha), builds, targets)
            if shortcut is not None:
                return shortcut
        from zlops.stats import interleaved_order

        salt = f"/{kind.value}" if kind is StepKind.RETEST else ""
        order = interleaved_order(self.policy.extend_pairs, seed=zlib.crc32(f"{base_sha}/{head_sha}{salt}".encode()))
        runs: dict[Key, tuple[list[float], list[float]]] = {t.key: ([], []) for t in targets}
        seconds, pairs, cap = 0.0, 0, self.policy.max_pairs
        evidence: tuple[CaseEvidence, ...] = ()
        decided: Outcome | None = None
        while True:
            if pairs >= self.policy.min_pairs:
                judged = self._judge(targets, runs, lines, labels)
                evidence, decided = judged[0], _decide(judged)
                if decided is not None:
                    break
                if pairs >= cap:
                    if cap < self.policy.extend_pairs and worth_extending(evidence, pairs, self.policy.extend_pairs):
                        cap = self.policy.extend_pairs   # the CI straddles the line, more pairs would settle it
                    else:
                        break
            for side in order[2 * pairs: 2 * pairs + 2]:
                why = self.allowance.yield_check()
                if why:
                    raise Paused(why)
                if self.allowance.seconds <= 0:
                    raise Paused("tonight's device-time budget of this pool is spent")
                sha = base_sha if side == "A" else head_sha
                try:
                    medians, took = self.m.run(sha, targets)
                except BuildFailed as exc:
                    return StepRecord(kind, head_sha, base_sha, pos, Outcome.SKIPPED, pairs, seconds, builds,
                                      note=f"benchmark of {sha[:12]} failed: {str(exc)[:400]}")
                self.allowance.seconds -= took
                seconds += took
                for t in targets:
                    value = medians.get(t.key)
                    if value is not None and value > 0:
                        runs[t.key][0 if side == "A" else 1].append(value)
            pairs += 1
        outcome = decided if decided is not None else Outcome.UNCLEAR
        note = "" if decided is not None else f"the CI still straddles the line after {pairs} pairs"
        note = "; ".join(n for n in (self._same_kernels(base, head, targets), note) if n)
        return StepRecord(kind, head_sha, base_sha, pos, outcome, pairs, seconds, builds, tuple(evidence), note)

    def _kernel_shortcut(self, kind: StepKind, good_sha: str, head: tuple[int, str], builds: int,
                         targets: Sequence[Target]) -> StepRecord | None:
        """One run of the commit; when its kernels for the targets' ops equal one end's (and the ends'
        differ: the regression came with a kernel change), the step takes that end's outcome unmeasured.
        None: measure it as usual (the one run is counted in the device time, not in the A/B)."""
        side_of = getattr(self.m, "kernel_side", None)
        pos, sha = head
        if side_of is None or self.bad_sha is None:
            return None
        why = self.allowance.yield_check()
        if why:
            raise Paused(why)
        if self.allowance.seconds <= 0:
            raise Paused("tonight's device-time budget of this pool is spent")
        try:
            _, took = self.m.run(sha, targets)
        except BuildFailed as exc:
            return StepRecord(kind, sha, good_sha, pos, Outcome.SKIPPED, 0, 0.0, builds,
                              note=f"benchmark of {sha[:12]} failed: {str(exc)[:400]}")
        self.allowance.seconds -= took
        side = side_of(good_sha, self.bad_sha, sha, targets)
        if side not in ("good", "bad"):
            return None
        saved = (2 * self.policy.min_pairs - 1) * took
        return StepRecord(kind, sha, good_sha, pos, Outcome.GOOD if side == "good" else Outcome.BAD, 0, took, builds,
                          note=f"same kernels as {side}: not measured further (kernels.skip_same_in_bisect; "
                               f"~{saved:.0f} device s saved: {2 * self.policy.min_pairs - 1} runs of {took:.1f} s)")

    def _same_kernels(self, base: tuple[int, str], head: tuple[int, str], targets: Sequence[Target]) -> str:
        """``same kernels as good`` (or ``as its parent``) when the measurer's kernel inventories
        (zlops.kernels) say the two commits compiled the same kernels for the targets' ops; else ''."""
        same = getattr(self.m, "same_kernels", None)
        if same is None or not same(base[1], head[1], targets):
            return ""
        return "same kernels as good" if base[0] == 0 else "same kernels as its parent"

    def _judge(self, targets: Sequence[Target], runs: Mapping[Key, tuple[list[float], list[float]]],
               lines: Mapping[Key, float], labels: tuple[str, str]) -> tuple[tuple[CaseEvidence, ...], bool]:
        """Each case with at least 2 runs a side, judged; and whether every target was."""
        out = []
        for t in targets:
            base_runs, head_runs = runs[t.key]
            if len(base_runs) < 2 or len(head_runs) < 2:
                continue
            e = classify(base_runs, head_runs, line_pct=lines[t.key], lower_is_better=t.lower_is_better,
                         confidence=self.policy.confidence, base_label=labels[0], head_label=labels[1],
                         statistic=self.policy.statistic)
            out.append(CaseEvidence(t.case, t.metric, e.figures, e.line_pct, e.outcome, e.shift_pct))
        return tuple(out), len(out) == len(targets)


def _decide(judged: tuple[tuple[CaseEvidence, ...], bool]) -> Outcome | None:
    """A step's outcome; a case the runs did not measure keeps it from being good (never from being bad)."""
    evidence, complete = judged
    outcome = step_outcome(evidence)
    return None if outcome is Outcome.GOOD and not complete else outcome


def bisect_range(commits: Sequence[str], targets: Sequence[Target], measurer: Measurer, *, policy: BisectPolicy,
                 allowance: Allowance, steps: Sequence[StepRecord] = (), save: Callable[[StepRecord], None],
                 hints: Sequence[int] = ()) -> Result:
    """Bisect ``commits`` (``commits[0]`` good, ``commits[-1]`` bad) for ``targets``; see the module docstring.

    ``steps`` are the steps stored by earlier attempts (resumed, never re-measured); every new step
    is passed to ``save`` as soon as it is decided. Returns a finished :class:`Result`, or one in
    state ``paused`` (budget spent or yielded) that a later call with the saved steps continues.
    """
    if len(commits) < 2:
        raise ZlopsError(f"a bisection needs a good and a bad commit, got {len(commits)} commit(s)")
    if not targets:
        raise ZlopsError("a bisection needs at least one regressed case")
    n = len(commits) - 1
    done = list(steps)
    built = {s.sha for s in done} | {s.base_sha for s in done}
    runner = _Runner(measurer, targets, policy, allowance, built)
    runner.bad_sha = commits[n]
    floor = {t.key: policy.floor_pct for t in targets}

    def record(step: StepRecord) -> None:
        save(step)
        done.append(step)

    def label(p: int) -> str:
        return "good end" if p == 0 else "bad end" if p == n else f"{commits[p][:7]}"

    try:
        while True:
            finished = result_of(n, done, hints=hints, retest=policy.retest)
            if finished is not None:
                return finished
            rep = next((s for s in done if s.kind is StepKind.REPRODUCE), None)
            if rep is None:
                record(runner.ab(StepKind.REPRODUCE, (0, commits[0]), (n, commits[n]), floor,
                                 (f"good {commits[0][:7]}", f"bad {commits[n][:7]}")))
                continue
            lines = lines_from(rep, policy)
            pos = position(n, step_outcomes(done), hints=hints)
            if pos.next is not None:
                record(runner.ab(StepKind.STEP, (0, commits[0]), (pos.next, commits[pos.next]), lines,
                                 (f"good {commits[0][:7]}", label(pos.next))))
                continue
            again = retest_next(n, done, hints=hints) if policy.retest else None
            if again is not None:
                record(runner.ab(StepKind.RETEST, (0, commits[0]), (again, commits[again]), lines,
                                 (f"good {commits[0][:7]}", label(again))))
                continue
            culprit = pos.hi
            record(runner.ab(StepKind.VERIFY, (culprit - 1, commits[culprit - 1]), (culprit, commits[culprit]),
                             lines, (f"parent {commits[culprit - 1][:7]}", f"culprit {commits[culprit][:7]}")))
    except Paused as exc:
        return Result(State.PAUSED, reason=str(exc), steps=tuple(done))


def builds_bound(n: int) -> int:
    """The most builds a bisection of ``n`` commits needs without skips: ``ceil(log2 n) + 2``."""
    return math.ceil(math.log2(n)) + 2 if n > 1 else 2


# --- stored form ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bisection:
    """A bisection as stored (``bisections``): its range, targets, state and culprit."""

    id: int
    suite: str
    pool: str
    device: int
    good_sha: str
    bad_sha: str
    commits: tuple[str, ...]
    targets: tuple[Target, ...]
    state: State
    reason: str
    culprit_sha: str | None
    culprit_subject: str | None
    culprit_author: str | None
    candidates: tuple[str, ...]
    alert_ids: tuple[int, ...]

    @property
    def n(self) -> int:
        """Commits in the range (the good end excluded)."""
        return len(self.commits) - 1


def evidence_to_json(evidence: Sequence[CaseEvidence]) -> list[dict[str, object]]:
    return [{"case": e.case, "metric": e.metric, "line_pct": e.line_pct,
             "outcome": None if e.outcome is None else e.outcome.value, "figures": e.figures.to_dict(),
             "shift_pct": e.shift_pct}
            for e in evidence]


def evidence_from_json(data: Sequence[Mapping[str, object]]) -> tuple[CaseEvidence, ...]:
    out = []
    for d in data:
        figures = Figures.from_dict(d["figures"])  # type: ignore[arg-type]
        if figures is None:
            continue
        shift = d.get("shift_pct")
        out.append(CaseEvidence(str(d["case"]), str(d["metric"]), figures, float(d["line_pct"]),  # type: ignore[arg-type]
                                None if d.get("outcome") is None else Outcome(str(d["outcome"])),
                                None if shift is None else float(shift)))  # type: ignore[arg-type]
    return tuple(out)
