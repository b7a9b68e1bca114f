"""Interleaved same-device runs: the one machinery of the A/B confirmation, the paired nights and bisection steps.

Three parts, each usable alone:

- :class:`CostModel` / :func:`learn_cost`: what one fresh benchmark process costs on a pool, learned from
  what zlops already timed (tonight's shards and earlier A/B runs, each a whole process: its seconds
  against the cases it ran). A process costs a fixed start-up (interpreter, torch, ``import flag_gems``:
  11-14 s of a 25 s FlagGems process on an H200) plus a per-case time; dividing a shard's time by its
  case count (the old estimate) misses the start-up and under-estimates a one-op A/B run ~12x.
- :func:`ab_budget`: the device seconds an A/B may spend on a pool tonight: the larger of a share of
  the night and a floor (so that a small suite's top suspects always get a decisive A/B), capped by
  a ceiling (the schedule's window).
- :func:`run_pairs`: interleaved pairs of fresh processes of two sides (A = base, B = head), each pair
  in a random order (Pinpoint ``run_test.py``), adding pairs until the caller's ``decided`` says the
  samples decide, the pairs run out, or the next pair would break the budget. A pair one of whose
  runs the host-contention gate made invalid (:class:`zlops.errors.HostBusy`) is discarded whole,
  recorded with its reason, and run again after the host quiets, while the budget lasts: a busy
  moment never ends the job, and a burst that hit one side only never biases the comparison.

Nothing here knows Airflow or the store; the callers (:mod:`zlops.judge.confirm`, the paired nights,
:mod:`zlops.bisect.run`) hand in how to run one process.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zlops.errors import HostBusy

Key = tuple[str, str]
Samples = dict[Key, tuple[list[float], list[float]]]

#: the share of a whole-suite process assumed to be start-up while only one case count was ever timed
#: (FlagGems on an H200: 11-14 s of 23-27 s; replaced as soon as two case counts are seen), and its cap:
#: a long suite's start-up is not half its time (interpreter + torch + a library import: seconds, not minutes)
PRIOR_FIXED_SHARE = 0.5
PRIOR_FIXED_MAX_S = 30.0


@dataclass(frozen=True)
class CostModel:
    """Seconds of one fresh process on a pool: ``fixed_s`` + ``per_case_s`` x cases; ``basis`` says from what."""

    fixed_s: float
    per_case_s: float
    basis: str
    observations: int = 0

    def __post_init__(self) -> None:
        for name in ("fixed_s", "per_case_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"CostModel.{name}: expected a finite number >= 0, got {value!r}")

    def estimate(self, n_cases: int) -> float:
        """Seconds of one process running ``n_cases`` cases."""
        return self.fixed_s + self.per_case_s * max(int(n_cases), 0)

    def to_json(self) -> dict[str, Any]:
        return {"fixed_s": round(self.fixed_s, 3), "per_case_s": round(self.per_case_s, 4), "basis": self.basis,
                "observations": self.observations}


def learn_cost(observations: Sequence[tuple[int, float]], *, prior_fixed_share: float = PRIOR_FIXED_SHARE,
               prior_fixed_max_s: float = PRIOR_FIXED_MAX_S) -> CostModel:
    """The cost model of a pool from whole processes it ran: ``(cases, seconds)`` each.

    With two or more distinct case counts: a robust line through them (Theil-Sen: the median of the
    pairwise slopes, Sen 1968; one slow night does not tilt it), its intercept the start-up, both
    clamped at 0. With one case count only: ``prior_fixed_share`` of its median seconds as start-up
    (at most ``prior_fixed_max_s``), the rest spread over its cases (said in ``basis``). Raises
    ValueError without observations.
    """
    obs = [(int(n), float(s)) for n, s in observations if n > 0 and s is not None and math.isfinite(s) and s > 0]
    if not obs:
        raise ValueError("learn_cost: no process was timed (expected (cases, seconds) pairs with both > 0)")
    counts = sorted({n for n, _ in obs})
    if len(counts) >= 2:
        slopes = sorted((s2 - s1) / (n2 - n1) for i, (n1, s1) in enumerate(obs) for n2, s2 in obs[i + 1:]
                        if n2 != n1)
        slope = max(_median(slopes), 0.0)
        intercept = max(_median([s - slope * n for n, s in obs]), 0.0)
        return CostModel(intercept, slope, f"fitted on {len(obs)} processes of {len(counts)} case counts "
                         f"({counts[0]}-{counts[-1]} cases)", len(obs))
    n = counts[0]
    seconds = _median([s for _, s in obs])
    fixed = min(prior_fixed_share * seconds, prior_fixed_max_s)
    return CostModel(fixed, (seconds - fixed) / n, f"{len(obs)} processes of {n} cases only: start-up assumed "
                     f"{fixed:.1f} s of {seconds:.1f} s until a selection is timed", len(obs))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


@dataclass(frozen=True)
class Budget:
    """Device seconds an A/B may spend on a pool tonight, and which rule set them."""

    seconds: float
    basis: str


def ab_budget(night_s: float, *, share: float, floor_s: float, ceiling_s: float | None = None,
              fixed_s: float | None = None) -> Budget:
    """``max(share x night_s, floor_s)``, at most ``ceiling_s``; ``fixed_s`` (an explicit budget) wins."""
    if fixed_s is not None:
        return Budget(float(fixed_s), f"noise.ab_budget_s = {fixed_s:g} s")
    by_share = share * max(night_s, 0.0)
    if by_share >= floor_s:
        seconds, basis = by_share, f"{share:.0%} of tonight's {night_s:.0f} s"
    else:
        seconds, basis = float(floor_s), f"floor {floor_s:g} s (> {share:.0%} of tonight's {night_s:.0f} s)"
    if ceiling_s is not None and seconds > ceiling_s:
        seconds, basis = float(ceiling_s), f"{basis}, capped at {ceiling_s:g} s"
    return Budget(seconds, basis)


@dataclass
class Pairs:
    """What interleaved pairs measured (``samples``: per series, base and head values aligned by pair)."""

    samples: Samples = field(default_factory=dict)
    runs: int = 0                 # processes that ran, discarded ones included
    pairs: int = 0                # pairs kept
    seconds: float = 0.0          # seconds every process took, discarded ones included
    est_run_s: float = 0.0        # the estimate of one run made before the first one
    stopped: str = "max pairs"
    discarded: list[str] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)
    pooled: int = 0               # pairs of an earlier A/B of the same commits the samples started from
    seen: Samples = field(default_factory=dict)   # the series measured beside those asked (Rounds.seen)

    @property
    def realised_run_s(self) -> float | None:
        return self.seconds / self.runs if self.runs else None

    def to_json(self) -> dict[str, Any]:
        real = self.realised_run_s
        return {"runs": self.runs, "pairs": self.pairs, "seconds": round(self.seconds, 2),
                "est_run_s": round(self.est_run_s, 2), "realised_run_s": None if real is None else round(real, 2),
                "est_s": round(self.est_run_s * self.runs, 2), "stopped": self.stopped,
                "discarded": list(self.discarded), **({"pooled_pairs": self.pooled} if self.pooled else {})}


def interleaved_order(n_pairs: int, *, seed: int | Sequence[int]) -> list[str]:
    from zlops.stats import interleaved_order as order

    return order(n_pairs, seed=seed)


@dataclass
class Rounds:
    """What interleaved rounds measured: one head arm against one or more base arms (:func:`run_rounds`).

    ``samples[arm]``: per series of that base arm, its values and the head's of the same rounds, aligned.
    ``arm_runs`` / ``arm_seconds`` / ``arm_est_s``: per arm (the head's included) the processes kept or
    discarded, their seconds, and what they were estimated to cost before the first run.
    """

    samples: dict[str, Samples] = field(default_factory=dict)
    runs: int = 0
    rounds: int = 0
    seconds: float = 0.0
    est_s: float = 0.0
    stopped: str = "max pairs"
    discarded: list[str] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)
    run_arms: list[str] = field(default_factory=list)
    arm_pairs: dict[str, int] = field(default_factory=dict)
    arm_runs: dict[str, int] = field(default_factory=dict)
    arm_seconds: dict[str, float] = field(default_factory=dict)
    arm_est_s: dict[str, float] = field(default_factory=dict)
    closed: dict[str, str] = field(default_factory=dict)   # base arm -> why it stopped before the others
    pooled: dict[str, int] = field(default_factory=dict)   # base arm -> pairs of an earlier A/B it started from
    #: base arm -> the series its runs and the head's measured beside the ones asked (``keys``), aligned like
    #: ``samples``: fresh processes of two commits minutes apart, evidence of those series' A/B noise
    seen: dict[str, Samples] = field(default_factory=dict)


def run_rounds(*, head: str, arms: Sequence[str],
               run_one: Callable[[str, int, frozenset[str]], tuple[Mapping[Key, float], float]],
               seed: int | Sequence[int], min_pairs: int, max_pairs: int, budget_s: float,
               est_run_s: Callable[[str, frozenset[str]], float],
               decided: Callable[[str, Samples], bool] | None = None, quiet: Callable[[], Any] | None = None,
               keys: Mapping[str, Sequence[Key]] | None = None, max_discards: int | None = None,
               order: Callable[[int, list[str]], list[str]] | None = None,
               prior: Mapping[str, Samples] | None = None,
               clock: Callable[[], float] = time.monotonic) -> Rounds:
    """Interleaved rounds of fresh processes: each round runs the ``head`` once and every open base arm of
    ``arms`` once, in a random order (a seeded permutation; ``order(round, sides)`` overrides it), so one
    head run serves every base: an A/B of tonight's commit against several baseline commits costs one head
    run a round, not one per base (:mod:`zlops.judge.confirm`). Two sides (one base arm) are the pairs of
    :func:`run_pairs`.

    ``run_one(arm, i, open)`` runs one process (``open``: the base arms still open, whose series a head run
    must measure) and returns per (case, metric) its value and the seconds it took; it raises
    :class:`HostBusy` for a run the contention gate made invalid (the whole round is discarded, recorded with
    its reason, and run again after ``quiet``), any other exception ends the rounds (the caller decides).
    ``est_run_s(arm, open)``: the estimate of one run before any ran. ``keys[arm]``: the series of that base
    arm (None: every series both ran). A base arm closes once it has ``min_pairs`` pairs and ``decided(arm,
    its samples)`` says so; the rounds end when no arm is open ("decided"), at ``max_pairs`` pairs, or when
    the next round would break the budget: the first round always runs, a later one only while ``seconds +
    its estimate <= budget_s``, the estimate being the open arms' estimates times how much the runs so far
    cost against theirs (the worst run's ratio until a whole round ran, then the sum's ratio), plus one run of
    the round at the worst ratio seen instead (the budget is a ceiling, not a mean); where the whole
    round does not fit, the last open arms of ``arms`` (list the most urgent first) stop, one by one, while a
    round of the others fits.
    ``max_discards`` (default ``max_pairs``) bounds the re-runs of busy rounds. ``prior[arm]``: values of an
    earlier A/B of the same two commits on the same device (the night before, when upstream did not move),
    per series, base and head aligned: the samples start from them, and they count towards ``min_pairs`` and
    ``max_pairs`` as far as every series of the arm (``keys[arm]``) has them, so a comparison the earlier
    pairs left undecidable stops before it runs again."""
    if min_pairs < 1 or max_pairs < min_pairs:
        raise ValueError(f"run_rounds: expected 1 <= min_pairs <= max_pairs, got {min_pairs}, {max_pairs}")
    if not arms or head in arms or len(set(arms)) != len(arms):
        raise ValueError(f"run_rounds: expected distinct base arms other than the head {head!r}, got {list(arms)}")
    import numpy as np

    out = Rounds(samples={a: {k: (list(b), list(h)) for k, (b, h) in ((prior or {}).get(a) or {}).items()
                              if len(b) == len(h)} for a in arms},
                 arm_pairs={a: 0 for a in arms})
    for a in arms:   # earlier pairs every series of the arm has
        wanted = list(keys[a]) if keys is not None and keys.get(a) is not None else list(out.samples[a])
        out.pooled[a] = min((len(out.samples[a].get(k, ([], []))[0]) for k in wanted), default=0)
    limit_discards = max_pairs if max_discards is None else max_discards
    rng = np.random.default_rng(seed)
    first_round = len(arms) + 1
    factor, est_done, seconds_done, plain = 1.0, 0.0, 0.0, 0.0
    worst, slowest = 1.0, 0.0   # the worst realised/estimated ratio and the slowest run so far
    open_arms = list(arms)
    index = 0
    while True:
        if max(out.arm_pairs[a] + out.pooled[a] for a in open_arms) >= max_pairs:
            out.stopped = "max pairs"
            break
        if decided is not None:
            for arm in list(open_arms):
                if out.arm_pairs[arm] + out.pooled[arm] >= min_pairs and decided(arm, out.samples[arm]):
                    open_arms.remove(arm)
                    if open_arms:
                        out.closed[arm] = f"decided after {out.arm_pairs[arm]} pairs"
        if not open_arms:
            out.stopped = "decided"
            break
        def projected(arms_now: list[str], ratio: float, fallback: float) -> tuple[dict[str, float], float]:
            estimates = {a: max(float(est_run_s(a, frozenset(arms_now))), 0.0) for a in [head, *arms_now]}
            # a side without an estimate is projected at the realised seconds of a run (the worst of the first round)
            each = [ratio * e if e > 0 else fallback for e in estimates.values()]
            # and one run of the round as slow as the worst so far: the budget is a ceiling, and a round projected
            # at the mean overran it whenever one of its runs came out slower (hold-out 3's replay on a loaded
            # 2-core host: 14.87 s of a 15 s budget, once over it)
            slack = max(((worst - ratio) * e if e > 0 else slowest - fallback) for e in estimates.values())
            return estimates, sum(each) + max(slack, 0.0)

        estimates, cost = projected(open_arms, factor, plain)
        if out.runs and out.seconds + cost > budget_s:
            # the last arms (the least urgent: callers list the arms most urgent first) give way while a smaller
            # round fits, so the first ones still reach a decision; with none left to drop the budget is spent.
            # A smaller round is projected at the worst run so far (its runs are not the ones the mean came
            # from: hold-out 3's replay, night 4, a head-and-one-base round at the mean overran 15 s by 0.07 s)
            kept = list(open_arms)
            while len(kept) > 1 and out.seconds + cost > budget_s:
                kept.pop()
                estimates, cost = projected(kept, max(factor, worst), max(plain, slowest))
            if out.seconds + cost > budget_s:
                out.stopped = f"budget ({budget_s:.0f} s) spent"
                break
            for arm in open_arms[len(kept):]:
                out.closed[arm] = f"budget ({budget_s:.0f} s) spent after {out.arm_pairs[arm]} pairs"
            open_arms = kept
        now = frozenset(open_arms)
        sides = [head, *open_arms]
        if len(out.discarded) >= limit_discards + 1:
            out.stopped = f"{len(out.discarded)} busy pairs discarded (limit {limit_discards})"
            break
        ran = order(index, sides) if order is not None else [sides[i] for i in rng.permutation(len(sides))]
        got: dict[str, Mapping[Key, float]] = {}
        busy: str | None = None
        for pos, arm in enumerate(ran):
            t0 = clock()
            try:
                # a run's number (its folder) is the count of runs so far: once stopped arms shrink a round,
                # len(sides) x round + position repeats (two runs, one folder)
                values, took = run_one(arm, out.runs, now)
            except HostBusy as exc:
                took = max(clock() - t0, exc.seconds or 0.0)
                busy = f"pair {index + 1} ({arm}): {exc}"
                values = None
            out.runs += 1
            out.seconds += took
            out.est_s += estimates[arm]
            out.run_seconds.append(took)
            out.run_arms.append(arm)
            out.arm_runs[arm] = out.arm_runs.get(arm, 0) + 1
            out.arm_seconds[arm] = out.arm_seconds.get(arm, 0.0) + took
            out.arm_est_s[arm] = out.arm_est_s.get(arm, 0.0) + estimates[arm]
            if estimates[arm] > 0:
                est_done += estimates[arm]
                seconds_done += took
                worst = max(worst, took / estimates[arm])
            slowest = max(slowest, took)
            if out.runs <= first_round:
                factor = max(factor, took / estimates[arm]) if estimates[arm] > 0 else factor
                plain = max(plain, took)
            else:
                factor = seconds_done / est_done if est_done > 0 else factor
                plain = out.seconds / out.runs
            if values is None:
                break
            got[arm] = values
        index += 1
        if busy is not None:
            out.discarded.append(busy)
            if len(out.discarded) > limit_discards:
                out.stopped = f"{len(out.discarded)} busy pairs discarded (limit {limit_discards})"
                break
            if quiet is not None:
                quiet()
            continue
        out.rounds += 1
        for arm in open_arms:
            out.arm_pairs[arm] += 1
            common = set(got[arm]) & set(got[head])
            wanted = None if keys is None or keys.get(arm) is None else set(keys[arm])
            for key in sorted(common if wanted is None else common & wanted):
                base, head_values = out.samples[arm].setdefault(key, ([], []))
                base.append(float(got[arm][key]))
                head_values.append(float(got[head][key]))
            for key in sorted(common - wanted) if wanted is not None else ():
                base, head_values = out.seen.setdefault(arm, {}).setdefault(key, ([], []))
                base.append(float(got[arm][key]))
                head_values.append(float(got[head][key]))
    return out


def run_pairs(*, run_one: Callable[[str, int], tuple[Mapping[Key, float], float]], seed: int | Sequence[int],
              min_pairs: int, max_pairs: int, budget_s: float, est_run_s: float,
              decided: Callable[[Samples], bool] | None = None, quiet: Callable[[], Any] | None = None,
              keys: Sequence[Key] | None = None, max_discards: int | None = None, prior: Samples | None = None,
              clock: Callable[[], float] = time.monotonic) -> Pairs:
    """Interleaved pairs of ``run_one("A", i)`` / ``run_one("B", i)`` (see the module docstring): the rounds
    of :func:`run_rounds` with one base arm ("A") against the head ("B"), each pair's order "AB" or "BA"
    (:func:`interleaved_order`).

    ``run_one`` runs one fresh process and returns per (case, metric) its value and the seconds it took
    (device-seconds for a gang); it raises :class:`HostBusy` for a run the contention gate made invalid,
    any other exception ends the pairs (the caller decides). ``keys``: the series to keep (None: all).
    The first pair always runs (an A/B that cannot even start is the caller's choice to skip); later
    pairs start only while ``seconds + 2 x the current per-run estimate <= budget_s``; from the third run
    on the estimate is the mean of the runs so far. ``max_discards`` (default ``max_pairs``) bounds the
    re-runs of busy pairs.
    """
    if min_pairs < 1 or max_pairs < min_pairs:
        raise ValueError(f"run_pairs: expected 1 <= min_pairs <= max_pairs, got {min_pairs}, {max_pairs}")
    limit_discards = max_pairs if max_discards is None else max_discards
    sequence = interleaved_order(max_pairs + limit_discards, seed=seed)
    rounds = run_rounds(head="B", arms=["A"], run_one=lambda side, i, _open: run_one(side, i), seed=seed,
                        min_pairs=min_pairs, max_pairs=max_pairs, budget_s=budget_s,
                        est_run_s=lambda _arm, _open: est_run_s,
                        decided=None if decided is None else (lambda _arm, samples: decided(samples)),
                        quiet=quiet, keys=None if keys is None else {"A": keys}, max_discards=limit_discards,
                        order=lambda i, _sides: sequence[2 * i: 2 * i + 2],
                        prior=None if prior is None else {"A": prior}, clock=clock)
    return Pairs(samples=rounds.samples["A"], runs=rounds.runs, pairs=rounds.rounds, seconds=rounds.seconds,
                 est_run_s=est_run_s, stopped=rounds.stopped, discarded=rounds.discarded,
                 run_seconds=rounds.run_seconds, pooled=rounds.pooled.get("A", 0), seen=rounds.seen.get("A", {}))
