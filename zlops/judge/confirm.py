"""Confirm suspects before anyone is told: an interleaved A/B on the same device, within a time budget.

For the noise judge a change beyond its threshold is only a suspect (worse: ``suspect``, better:
``suspect_improved``; both are confirmed the same way). Here each pool's suspects get one
same-device A/B: the baseline commit's worktree env (A) against tonight's (B), run in interleaved
pairs whose order is randomized (:func:`zlops.stats.interleaved_order`). Only the suspects' cases
run when the suite's command takes ``{cases}`` (FlagGems' ``-k`` selection: docs/recipes); the
A/B starts with ``noise.ab_min_pairs`` pairs and adds pairs while suspects stay undecided, up to
``noise.ab_pairs``, and stops when the pool's budget of device time is spent (``noise.ab_budget_s``,
default ``noise.ab_budget_share`` of tonight's benchmark time on the pool). Suspects are taken in
order of severity (excess over their threshold) until the estimated cost of the A/B fits.
Each run of the suite command is one observation per case (its median); the two sides are judged
by :func:`zlops.judge.judges.confirm_suspect`; the verdict's figures become the A/B's (runs included, so
later nights' noise model sees each run as a process). Anchors: Pinpoint ``run_test.py`` (A/B on
the same bot, randomized order, adding repeats while undecided); asv ``--interleave-rounds``.
"""

from __future__ import annotations

import logging
import math
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zlops import metrics
from zlops.campaign import ab as campaign_ab
from zlops.errors import DeviceBusy, HostBusy, ZlopsError
from zlops.host.telemetry import summarize_dir
from zlops.judge import canary
from zlops.judge.budget import COST_HISTORY_RUNS, PoolBudget, budget_seconds, less_spent
from zlops.judge.derived import follow_sources
from zlops.judge.evidence import same_code_reason
from zlops.judge.interleave import CostModel, Pairs, learn_cost, run_pairs, run_rounds
from zlops.judge.judges import (
    ab_can_still_decide,
    ab_candidate,
    ab_information,
    ab_undecided,
    confirm_suspect,
)
from zlops.model import CompareSummary, Comparison, Judgement, ShardStatus
from zlops.progress import LogProgress, Progress
from zlops.run.ingest import read_shard
from zlops.run.runner import ShardSpec, run_shard
from zlops.run.selection import selected_cases, selects_cases
from zlops.steps.cleanup import cleanup
from zlops.steps.context import Prepared, RunContext, open_store
from zlops.steps.prepare import prepare
from zlops.steps.seeding import side_seed_plan

log = logging.getLogger(__name__)


def _information(c: Comparison) -> float:
    """What an A/B of this suspect or candidate is likely to tell (:func:`ab_information`: tonight's change in
    units of the noise an A/B will see)."""
    return ab_information(c.judgement)


def _pick(suspects: list[Comparison], budget: int) -> list[Comparison]:
    """The ``budget`` suspects (and A/B candidates) an A/B takes first: timings before one-time set-up series
    (:data:`zlops.metrics.SETUP_TIMINGS`), each by the information an A/B of it is expected to give, most first
    (its change over the A/B's noise, not the nights' severity: the budget went to launch-bound suspects that the
    A/B then called inconclusive while a quiet shape's +3.4%, "unmeasurable" by the nights, got none)."""
    return sorted(suspects, key=lambda c: (metrics.setup_timing(c.metric) is not None, -_information(c), c.pool, c.case,
                                           c.metric))[:budget]


def _left_out(c: Comparison, why: str) -> str:
    """The note of a suspect or candidate tonight's A/B did not take."""
    return f"[{why}]" if c.verdict.awaiting_confirmation else f"[an A/B could judge its move; {why}]"


Samples = dict[tuple[str, str], tuple[list[float], list[float]]]


def judge_runs(chosen: Sequence[Comparison], samples: Samples, policy: Any,
               base_sha: str) -> dict[tuple[str, str, str], Judgement]:
    """Each chosen suspect judged on its A/B runs (:func:`confirm_suspect`), where both sides have two or more."""
    out = {}
    for c in chosen:
        base_s, head_s = samples.get((c.case, c.metric), ([], []))
        if len(base_s) >= 2 and len(head_s) >= 2:
            out[(c.pool, c.case, c.metric)] = confirm_suspect(
                c.judgement, base_s, head_s, lower_is_better=c.lower_is_better, policy=policy,
                base_label=f"A/B base {base_sha[:7]}")
    return out


def still_open(chosen: Sequence[Comparison], samples: Samples, policy: Any, base_sha: str, *, max_pairs: int,
               futile: list[int]) -> bool:
    """Whether more pairs are worth running for ``chosen``: a suspect is still undecided and the pairs left
    could still decide one of them (futility, :func:`ab_can_still_decide`; where none could, the pairs done
    are appended to ``futile``)."""
    done = judge_runs(chosen, samples, policy, base_sha)
    open_ = [c for c in chosen if ab_undecided(c.judgement, done.get((c.pool, c.case, c.metric)), policy.potential_pct)]
    if not open_:
        return False
    for c in open_:
        base_s, head_s = samples.get((c.case, c.metric), ([], []))
        if ab_can_still_decide(c.judgement, base_s, head_s, remaining_pairs=max_pairs - len(base_s),
                               lower_is_better=c.lower_is_better, policy=policy):
            return True
    futile.append(max((len(v[0]) for v in samples.values()), default=0))
    return False


def earlier_runs(ctx: RunContext, store: Any, suspects: Sequence[Comparison]) -> dict[tuple[str, str], Samples]:
    """Per (pool, base sha), the A/B runs of the night before that tonight's A/B can start from: the same two
    commits (that night ran tonight's commit: upstream did not move) on the same physical devices (their
    recorded ids, as the caliber check reads them), per series that night's A/B judged against the same base.
    Without it such a night started its A/B from zero pairs (hold-out 4 on the H200, lease 1 night 4: the
    README-only D1 against A again, 250 s into its A/B when the call ended). Three store reads, none per series."""
    from zlops.identity import check_caliber

    earlier = next((r for r in store.list_runs(suite=ctx.suite_name, kind="nightly", limit=3)
                    if r.run_key != ctx.run_key), None)
    if earlier is None or earlier.sha != ctx.sha:
        return {}
    idents: dict[tuple[str, str], Any] = {}
    for run_key, _, pool, ident in store.pool_identities([earlier.run_key, ctx.run_key]):
        idents.setdefault((run_key, pool), ident)
    wanted = {(c.pool, c.case, c.metric): c.base.sha for c in suspects if c.base is not None}
    out: dict[tuple[str, str], Samples] = {}
    same_devices: dict[str, bool] = {}
    for (run_key, pool, case, metric), (_, figures) in store.verdict_evidence([earlier.run_key],
                                                                                only_evidence=True).items():
        base = wanted.get((pool, case, metric))
        if base is None or figures is None or not figures.runs_head or len(figures.runs_base) != len(figures.runs_head):
            continue
        if not (figures.reference_label or "").startswith(f"A/B base {base[:7]},"):
            continue   # that night's A/B of the series was against another base
        if pool not in same_devices:
            a, b = idents.get((earlier.run_key, pool)), idents.get((ctx.run_key, pool))
            same_devices[pool] = (a is None and b is None) or (
                a is not None and b is not None and not check_caliber(a, b).refused and not check_caliber(a, b).devices_moved)
        if same_devices[pool]:
            out.setdefault((pool, base), {})[(case, metric)] = (list(figures.runs_base), list(figures.runs_head))
    return out


def observed_runs(ctx: RunContext, store: Any, pool: str,
                  tonight: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Whole processes timed on ``pool``: tonight's shards plus the A/B runs of the last nights (run meta)."""
    obs = list(tonight)
    for run in store.list_runs(suite=ctx.suite_name, kind="nightly", limit=COST_HISTORY_RUNS):
        entry = ((run.meta or {}).get("ab") or {}).get(pool) if run.run_key != ctx.run_key else None
        for item in (entry or {}).get("observed", ()) if isinstance(entry, dict) else ():
            if isinstance(item, (list, tuple)) and len(item) == 2:
                obs.append((int(item[0]), float(item[1])))
    return obs


@dataclass(frozen=True)
class DeviceCosting:
    """What one A/B run costs on a one-device pool tonight: the pool's night, and a run's seconds by its cases."""

    night_s: float                 # tonight's benchmark seconds on the pool (the budget's basis)
    per_shard: float               # the longest shard tonight: a whole run
    universe: tuple[str, ...]      # every case a whole run measures
    n_cases: int                   # the most cases one device ran tonight
    cost: CostModel | None         # None: the suite cannot select cases (every run is whole)
    selects: bool

    def executed(self, suite: Any, cases: Sequence[str]) -> int:
        """How many cases a run of ``cases`` executes (a FlagGems ``-m`` selection runs every shape of its ops)."""
        return len(selected_cases(suite, sorted(cases), list(self.universe)))

    def run_cost(self, suite: Any, cases: Iterable[str]) -> float:
        """Seconds of one run of these cases at the model's cost (a whole shard's when it runs everything)."""
        if not self.selects or self.cost is None:
            return self.per_shard
        n = self.executed(suite, list(cases))
        return min(self.cost.estimate(n), self.per_shard or math.inf) if n < self.n_cases else \
            (self.per_shard or self.cost.estimate(n))


def device_costing(ctx: RunContext, pool: str) -> DeviceCosting:
    """The pool's :class:`DeviceCosting` tonight, from one read of its shards and results and the cost model
    (:func:`zlops.judge.interleave.learn_cost` on tonight's shards and earlier A/B runs: a fixed start-up plus
    a per-case time)."""
    store = open_store(ctx.config)
    shards = [o for o in store.shards(ctx.run_key) if o.pool == pool and o.status is ShardStatus.OK]
    durations = [o.duration_s for o in shards if o.duration_s]
    night_s = float(sum(durations)) if durations else 0.0
    per_shard = max(durations) if durations else 0.0
    per_device_cases: dict[int, set[str]] = defaultdict(set)
    for p, device, res in store.results(ctx.run_key):
        if p == pool:
            per_device_cases[device].add(res.case)
    tonight = [(len(per_device_cases.get(o.device, ())), float(o.duration_s)) for o in shards if o.duration_s]
    n_cases = max((len(v) for v in per_device_cases.values()), default=1) or 1
    universe = tuple(sorted({case for v in per_device_cases.values() for case in v}))
    if not selects_cases(ctx.suite):
        return DeviceCosting(night_s, per_shard, universe, n_cases, None, False)
    try:
        cost = learn_cost(observed_runs(ctx, store, pool, tonight))
    except ValueError:   # nothing timed tonight (every shard failed): a whole shard per run, said so
        cost = CostModel(per_shard, 0.0, "no process timed: a whole shard per run")
    return DeviceCosting(night_s, per_shard, universe, n_cases, cost, True)


def pool_budget(ctx: RunContext, pool: str, suspects: list[Comparison], *,
                spent_s: float = 0.0) -> tuple[PoolBudget, list[Comparison]]:
    """The budget of a pool's A/B, and the suspects it can afford (most severe first).

    The budget is :func:`budget_seconds` of tonight's benchmark time on the pool, less ``spent_s``: what
    the pool's earlier A/Bs tonight spent. A run's cost comes
    from the pool's cost model (:func:`device_costing`), so packing several suspects' cases into one run
    costs little more than one; suspects are added most severe first while ``ab_min_pairs`` pairs of
    the union of their cases fit. A suite that cannot select cases costs a whole shard per run.
    """
    cfg = ctx.config.noise
    costing = device_costing(ctx, pool)
    budget = less_spent(budget_seconds(cfg, costing.night_s), spent_s)
    ordered = _pick(suspects, cfg.ab_budget)
    if not costing.selects:
        return PoolBudget(budget.seconds, costing.night_s, costing.per_shard, None, basis=budget.basis), ordered
    chosen: list[Comparison] = []
    for c in ordered:
        cases = {x.case for x in chosen} | {c.case}
        if chosen and 2 * cfg.ab_min_pairs * costing.run_cost(ctx.suite, cases) > budget.seconds:
            continue   # a cheaper suspect further down may still fit beside the chosen ones
        chosen.append(c)
    cases = tuple(sorted({c.case for c in chosen}))
    runs = costing.executed(ctx.suite, cases) if cases else 0
    return PoolBudget(budget.seconds, costing.night_s, costing.run_cost(ctx.suite, set(cases)), cases,
                      basis=budget.basis, cost=costing.cost, runs_cases=runs), chosen


def run_side(ctx: RunContext, side_ctx: RunContext, prepared: Prepared, pool: str,
              device: int, out: Path, cases: tuple[str, ...] | None) -> dict[tuple[str, str], float]:
    """One run of the suite (or of ``cases`` only) on one device; per (case, metric) the median of its samples.

    Used by the nightly's A/B and by bisection (zlops.bisect.run). A run that never started because the
    device stayed leased raises DeviceBusy; any other failure ZlopsError."""
    spec = ShardSpec(run_key=f"{ctx.run_key}:ab", suite_name=ctx.suite_name, suite=ctx.suite, sha=side_ctx.sha,
                     pool=pool, backend=ctx.config.pools[pool].backend, device=device,
                     worktree=prepared.worktree, venv=prepared.venv, artifact_dir=out,
                     cases=canary.measured_cases(cases),
                     kernel_cache=ctx.run_dir / "kernel_cache" / f"{side_ctx.sha[:12]}-{pool}-{device}" / "triton_cache",
                     kernel_seed=side_seed_plan(ctx, pool, device))
    outcome = run_shard(spec, locks_dir=ctx.config.locks_dir, device_wait_s=ctx.config.device_wait_s)
    if outcome.status is ShardStatus.SKIPPED:
        raise DeviceBusy(f"A/B run in {out} skipped: {outcome.error}")
    if outcome.status is not ShardStatus.OK or outcome.results_file is None:
        raise ZlopsError(f"A/B run in {out} {outcome.status.value}: {outcome.error}")
    # parsed as the nightly parses its shards; an A/B measured beside a busy host confirms nothing: its
    # suspects stay suspects
    read = read_shard(ctx.config, ctx.suite_name, outcome, telemetry=summarize_dir(out))
    if read.outcome.status is ShardStatus.INVALID:   # the contention gate: run again once the host quiets
        raise HostBusy(f"A/B run in {out} invalid: {read.outcome.error}", seconds=outcome.duration_s)
    if not read.usable:
        raise ZlopsError(f"A/B run in {out}: {read.outcome.error}")
    # a recall canary's sides are its source's runs, the head scaled on a planted night (zlops.judge.canary)
    return {(r.case, r.metric): r.median for r in canary.ab_results(ctx, side_ctx, read.results)}


@dataclass
class PoolAB:
    """What one pool's A/B measured: per series the base and head run values, and what it cost."""

    samples: dict[tuple[str, str], tuple[list[float], list[float]]]
    runs: int
    seconds: float
    budget: PoolBudget
    stopped: str
    wall_s: float = 0.0   # wall-clock seconds of the whole A/B, both sides' preparation included
    pairs: Pairs | None = None


def confirm_pool(ctx: RunContext, pool: str, suspects: list[Comparison], *, progress: Progress,
                 budget: PoolBudget, decide_fn: object = None, folder: str = "",
                 prior: Samples | None = None) -> PoolAB:
    """Interleaved A/B of ``suspects`` (one pool, one baseline commit) on the pool's first device, or,
    for a campaign suite (``budget.plan``), of the suspects' shards packed over the pool's devices
    (zlops.campaign.ab), through :func:`zlops.judge.interleave.run_pairs`.

    Runs ``ab_min_pairs`` pairs, then adds pairs while ``decide_fn(samples)`` reports undecided
    suspects, up to ``ab_pairs``, never starting a pair the remaining budget cannot pay for; a pair
    the contention gate spoiled is run again after the host quiets. ``folder``: a sub-folder of
    ``<run>/ab/<pool>/`` for the runs (one per baseline commit when the pool has suspects against several).
    """
    cfg = ctx.config.noise
    base_sha = suspects[0].base.sha if suspects[0].base else None
    if base_sha is None:
        raise ZlopsError("a suspect without a baseline cannot be confirmed by A/B")

    devices = ctx.pool_devices(pool)
    device = devices[0]
    if budget.shards and budget.plan is None:
        raise ZlopsError(f"the campaign A/B of pool {pool} has no plan of its shards")
    where = f"{pool}/{device}" if budget.plan is None else \
        f"{pool}/{','.join(map(str, sorted({d for p in budget.plan.placements for d in p.devices})))}"
    base_ctx = RunContext(ctx.config, ctx.suite_name, f"{ctx.run_key}:ab-base", base_sha, ctx.auto_devices)
    keys = sorted({(c.case, c.metric) for c in suspects})
    wall0 = time.monotonic()
    try:
        with progress.step("ab", suite=ctx.suite_name, commit=f"{base_sha[:7]}..{ctx.sha[:7]}",
                           device=where):
            sides = {"A": (base_ctx, prepare(base_ctx)), "B": (ctx, prepare(ctx))}

            def run_one(side: str, i: int) -> tuple[dict[tuple[str, str], float], float]:
                side_ctx, prepared = sides[side]
                out = ctx.run_dir / "ab" / pool / folder / f"{i:02d}{side}" if folder else \
                    ctx.run_dir / "ab" / pool / f"{i:02d}{side}"
                if budget.plan is not None:   # device-seconds of the gang shards, lanes in parallel
                    return campaign_ab.run_side(ctx, side_ctx, prepared, pool, out, budget.plan)
                t0 = time.monotonic()
                medians = run_side(ctx, side_ctx, prepared, pool, device, out, budget.cases)
                return medians, time.monotonic() - t0

            pairs = run_pairs(run_one=run_one, seed=zlib.crc32(f"{ctx.run_key}/{pool}".encode()),
                              min_pairs=min(cfg.ab_min_pairs, max(cfg.ab_pairs, 1)),
                              max_pairs=max(cfg.ab_pairs, cfg.ab_min_pairs), budget_s=budget.seconds,
                              est_run_s=budget.run_s, keys=keys, quiet=quiet_waiter(ctx, pool),
                              decided=None if decide_fn is None else
                              (lambda samples: not decide_fn(samples)),  # type: ignore[operator]
                              prior=prior or None)
    finally:
        cleanup(base_ctx)
    return PoolAB(pairs.samples, pairs.runs, pairs.seconds, budget, pairs.stopped,
                  wall_s=time.monotonic() - wall0, pairs=pairs)


@dataclass
class Arm:
    """One baseline commit's side of a pool's A/B against several bases (:func:`confirm_bases`)."""

    base_sha: str
    members: list[Comparison]                    # the pool's suspects against this base
    chosen: list[Comparison]                     # those the budget affords
    ctx: RunContext | None = None
    futile: list[int] = field(default_factory=list)   # pairs at which its suspects were futile


def _arm_cost(ctx: RunContext, costing: Any, suspects: Sequence[Comparison]) -> float:
    """Seconds (device-seconds for a campaign) of one run that measures ``suspects``."""
    if not suspects:
        return 0.0
    if isinstance(costing, DeviceCosting):
        return costing.run_cost(ctx.suite, {c.case for c in suspects})
    return float(costing.run_cost(costing.shards(suspects)))


def choose_bases(ctx: RunContext, costing: Any, groups: Sequence[tuple[str, list[Comparison]]], *,
                 budget_s: float) -> dict[str, list[Comparison]]:
    """The suspects one A/B against several bases can afford, per base: greedy over the groups in the order
    given (the newest base first), each group's suspects most severe first, every group's timings before any
    group's one-time set-up series (:data:`zlops.metrics.SETUP_TIMINGS`); a suspect joins while
    ``ab_min_pairs`` rounds still fit, a round being one head run of every chosen suspect's cases (their
    union: a suspect whose case or shard the head already runs adds nothing there) plus one run of each base
    of its own suspects' cases. A campaign keeps :data:`zlops.campaign.ab.HEADROOM`. When not even the first
    suspect fits, it is returned alone, so the caller says why the A/B was skipped."""
    cfg = ctx.config.noise
    headroom = 1.0 if isinstance(costing, DeviceCosting) else campaign_ab.HEADROOM
    campaign = not isinstance(costing, DeviceCosting)
    chosen: dict[str, list[Comparison]] = {}
    first: tuple[str, Comparison] | None = None
    taken = 0
    # every base's timing suspects (the newest base first) before any one-time set-up suspect (_pick's order)
    passes = [[(b, c) for b, members in groups for c in _pick(members, cfg.ab_budget)
               if (metrics.setup_timing(c.metric) is not None) == setup] for setup in (False, True)]
    for base_sha, c in (pair for one in passes for pair in one):
        if taken >= cfg.ab_budget:
            break
        if campaign and not costing.shards([c]):
            continue   # no planned shard re-measures it
        first = first or (base_sha, c)
        trial = {b: list(v) for b, v in chosen.items()}
        trial.setdefault(base_sha, []).append(c)
        if cfg.ab_min_pairs * round_cost(ctx, costing, trial) * headroom > budget_s:
            continue   # a cheaper suspect further down may still fit beside the chosen ones
        chosen = trial
        taken += 1
    if not chosen and first is not None:
        chosen = {first[0]: [first[1]]}
    return chosen


def round_cost(ctx: RunContext, costing: Any, chosen: Mapping[str, Sequence[Comparison]]) -> float:
    """One round of an A/B against several bases: the head's run of every chosen suspect, one run per base."""
    everyone = [c for v in chosen.values() for c in v]
    return _arm_cost(ctx, costing, everyone) + sum(_arm_cost(ctx, costing, v) for v in chosen.values())


def confirm_bases(ctx: RunContext, pool: str, groups: Sequence[tuple[str, list[Comparison]]], *,
                  policy: Any, progress: Progress, prior: Mapping[str, Samples] | None = None,
                  seen: dict[tuple[str, str, str], tuple[list[float], list[float]]] | None = None,
                  ) -> tuple[dict[str, Any], dict[tuple[str, str, str], Judgement]]:
    """One interleaved A/B of ``pool``'s suspects against several baseline commits (``groups``: per base its
    suspects, the newest base first), the head run once a round for all of them
    (:func:`zlops.judge.interleave.run_rounds`): tonight's commit measures the union of the open bases'
    suspects' cases (a campaign: their shards), each open base its own, in a random order, and a base stops
    once its suspects are decided or no pair left could decide them. Each base's A/B used to run a head of its
    own (gloo on the H200 host, night 6: the slowed shard's head ran in two of three A/Bs; night 5: a
    carried-over suspect's base was left 161 of 600 device-s, too few for its shard, though the head runs
    it needed had run in another base's A/B).

    ``prior``: per base, the night before's A/B runs of the same commits (:func:`earlier_runs`). ``seen`` (filled
    when given): per series the runs measured beside the suspects' (:attr:`zlops.judge.interleave.Rounds.seen`).
    Returns the pool's run-meta entry (totals, ``groups`` per base, ``head``) and the new judgements."""
    cfg = ctx.config.noise
    campaign = ctx.suite.campaign is not None
    costing: Any = campaign_ab.costing(ctx, pool) if campaign else device_costing(ctx, pool)
    whole = budget_seconds(cfg, costing.night_s, devices=len(ctx.pool_devices(pool)) if campaign else 1)
    unit = "device-s" if campaign else "s"
    picked = choose_bases(ctx, costing, groups, budget_s=whole.seconds)
    arms = [Arm(b, members, picked.get(b, [])) for b, members in groups]
    live = [a for a in arms if a.chosen]
    need = cfg.ab_min_pairs * round_cost(ctx, costing, {a.base_sha: a.chosen for a in live})
    updated: dict[tuple[str, str, str], Judgement] = {}

    def note(c: Comparison, text: str) -> None:
        updated[(c.pool, c.case, c.metric)] = replace(
            c.judgement, note=f"{c.judgement.note} {text}" if c.judgement.note else text)

    entry: dict[str, Any] = {"night_s": round(costing.night_s, 2), "budget_s": round(whole.seconds, 2),
                             "budget_basis": whole.basis, "suspects": sum(len(a.members) for a in arms),
                             "bases": len(arms), "shared_head": True,
                             **({"unit": "device-seconds"} if campaign else {}),
                             **({"cost_model": costing.cost.to_json()} if isinstance(costing, DeviceCosting)
                                and costing.cost is not None else {})}
    if not live or need > whole.seconds:
        why = (f"{cfg.ab_min_pairs} rounds of the head and {len(live)} base(s) need ~{need:.0f} {unit}, the budget "
               f"is {whole.seconds:.0f} {unit}")
        for a in arms:
            for c in a.members:
                note(c, f"[A/B on {pool} skipped: {why}]")
        entry.update(runs=0, seconds=0.0, ab_suspects=0, stopped=f"skipped: {why}; suspects stay suspects",
                     groups=[{"base": a.base_sha[:12], "runs": 0, "seconds": 0.0, "suspects": len(a.members),
                              "ab_suspects": 0} for a in arms])
        return entry, updated

    max_pairs = max(cfg.ab_pairs, cfg.ab_min_pairs)
    by_arm = {a.base_sha: a for a in live}
    plans: dict[tuple[str, ...], Any] = {}
    observed: list[list[float]] = []
    device = ctx.pool_devices(pool)[0]

    def suspects_of(arm: str, open_: frozenset[str]) -> list[Comparison]:
        return by_arm[arm].chosen if arm != "B" else [c for b in sorted(open_) for c in by_arm[b].chosen]

    def est(arm: str, open_: frozenset[str]) -> float:
        return _arm_cost(ctx, costing, suspects_of(arm, open_))

    def run_one(arm: str, i: int, open_: frozenset[str]) -> tuple[dict[tuple[str, str], float], float]:
        side_ctx = ctx if arm == "B" else by_arm[arm].ctx
        assert side_ctx is not None
        out = ctx.run_dir / "ab" / pool / (f"{i:02d}B" if arm == "B" else f"{i:02d}A-{arm[:12]}")
        suspects = suspects_of(arm, open_)
        if campaign:
            shards = costing.shards(suspects)
            key = tuple(s.shard_id for s in shards)
            if key not in plans:
                plans[key] = costing.plan(pool, shards)
            return campaign_ab.run_side(ctx, side_ctx, sides[arm], pool, out, plans[key])
        cases = tuple(sorted({c.case for c in suspects})) if costing.selects else None
        t0 = time.monotonic()
        medians = run_side(ctx, side_ctx, sides[arm], pool, device, out, cases)
        took = time.monotonic() - t0
        if cases is not None:
            observed.append([costing.executed(ctx.suite, cases), round(took, 3)])
        return medians, took

    sides: dict[str, Prepared] = {}
    wall0 = time.monotonic()
    try:
        with progress.step("ab", suite=ctx.suite_name, commit=f"{len(live)} bases..{ctx.sha[:7]}", device=pool):
            for a in live:
                a.ctx = RunContext(ctx.config, ctx.suite_name, f"{ctx.run_key}:ab-base", a.base_sha, ctx.auto_devices)
                sides[a.base_sha] = prepare(a.ctx)
            sides["B"] = prepare(ctx)
            rounds = run_rounds(
                head="B", arms=[a.base_sha for a in live], run_one=run_one,
                seed=zlib.crc32(f"{ctx.run_key}/{pool}".encode()), min_pairs=min(cfg.ab_min_pairs, max_pairs),
                max_pairs=max_pairs, budget_s=whole.seconds, est_run_s=est, quiet=quiet_waiter(ctx, pool),
                keys={a.base_sha: sorted({(c.case, c.metric) for c in a.chosen}) for a in live},
                decided=lambda arm, samples: not still_open(by_arm[arm].chosen, samples, policy, arm,
                                                            max_pairs=max_pairs, futile=by_arm[arm].futile),
                prior={a.base_sha: dict((prior or {}).get(a.base_sha) or {}) for a in live})
    except ZlopsError as exc:
        log.warning("A/B of pool %s against %d bases failed, suspects stay suspects: %s", pool, len(live), exc)
        entry.update(error=str(exc)[:300])
        return entry, updated
    finally:
        for a in live:
            if a.ctx is not None:
                cleanup(a.ctx)
    if seen is not None:
        for a in live:
            for (case, metric), sides in rounds.seen.get(a.base_sha, {}).items():
                seen.setdefault((pool, case, metric), sides)
    against = ", ".join(a.base_sha[:7] for a in live)
    cost = (f"{rounds.runs} runs, the head once a round against base{'s' if len(live) > 1 else ''} {against} "
            f"(of {len(arms)} bases tonight), {rounds.seconds:.0f} {unit} (estimated {rounds.est_s:.0f}), "
            f"budget {whole.seconds:.0f} {unit}")
    if rounds.discarded:
        cost += f"; {len(rounds.discarded)} busy round(s) re-run"
    if any(rounds.pooled.values()):
        cost += "; with pairs of the night before (the same commits and devices)"
    outcomes: dict[str, int] = defaultdict(int)
    groups_meta = []
    for a in arms:
        mine: dict[str, int] = defaultdict(int)
        decided = judge_runs(a.chosen, rounds.samples.get(a.base_sha, {}), policy, a.base_sha) if a.chosen else {}
        for key, j in decided.items():
            updated[key] = replace(j, note=f"{j.note} [A/B on {pool}: {cost}]")
            mine[_outcome(j)] += 1
            outcomes[_outcome(j)] += 1
        for c in a.members:
            if (c.pool, c.case, c.metric) not in decided:
                note(c, _left_out(c, "not in tonight's A/B (budget)" if c not in a.chosen
                                  else "the A/B runs measured no value"))
        stopped = rounds.closed.get(a.base_sha, rounds.stopped) if a.chosen else "none of its suspects fit the budget"
        if a.futile and mine.get("inconclusive") and stopped.startswith("decided"):
            stopped = (f"futile after {a.futile[-1]} pairs: no outcome of the {max_pairs - a.futile[-1]} pairs left "
                       f"could confirm or clear the {mine['inconclusive']} inconclusive suspect(s)")
        groups_meta.append({"base": a.base_sha[:12], "runs": rounds.arm_runs.get(a.base_sha, 0),
                            "pairs": rounds.arm_pairs.get(a.base_sha, 0),
                            "seconds": round(rounds.arm_seconds.get(a.base_sha, 0.0), 2),
                            "est_s": round(rounds.arm_est_s.get(a.base_sha, 0.0), 2),
                            "suspects": len(a.members), "ab_suspects": len(a.chosen), "outcomes": dict(mine),
                            "stopped": stopped,
                            **({"pooled_pairs": rounds.pooled[a.base_sha]} if rounds.pooled.get(a.base_sha) else {})})
    runs = rounds.runs
    entry.update(runs=runs, pairs=rounds.rounds, seconds=round(rounds.seconds, 2), est_s=round(rounds.est_s, 2),
                 est_run_s=round(rounds.est_s / runs, 2) if runs else None,
                 realised_run_s=round(rounds.seconds / runs, 2) if runs else None,
                 stopped=rounds.stopped, discarded=list(rounds.discarded), ab_suspects=sum(len(a.chosen) for a in arms),
                 outcomes=dict(outcomes), observed=observed, wall_s=round(time.monotonic() - wall0, 2),
                 head={"runs": rounds.arm_runs.get("B", 0), "seconds": round(rounds.arm_seconds.get("B", 0.0), 2),
                       "est_s": round(rounds.arm_est_s.get("B", 0.0), 2)},
                 groups=groups_meta)
    union = sorted({c.case for a in live for c in a.chosen})
    if not campaign:   # what the head's run of every chosen suspect selects and executes, as a one-base A/B says
        entry["cases"] = len(union) if costing.selects else "all"
        entry["cases_run"] = costing.executed(ctx.suite, union) if costing.selects else None
    if campaign and runs:   # what campaign_ab.realised_factor learns from: the estimate before the factor
        entry["est_raw_run_s"] = round(rounds.est_s / costing.factor / runs, 3)
        entry["shards"] = [s.series_case for s in costing.shards([c for a in live for c in a.chosen])]
    return entry, updated


def _with_seen(j: Judgement, sides: tuple[list[float], list[float]] | None) -> Judgement:
    """``j`` with the runs an A/B of other series measured of it (each side at least two runs: a side of one run
    says nothing of the spread); a row the A/B decided keeps its own runs, a row without figures gets none."""
    if sides is None or j.figures is None or j.figures.runs_head or min(len(sides[0]), len(sides[1])) < 2:
        return j
    return replace(j, figures=replace(j.figures, seen_base=tuple(sides[0]), seen_head=tuple(sides[1])))


def quiet_waiter(ctx: RunContext, pool: str) -> Any:
    """What run_pairs calls after a busy pair: wait (bounded by the pool's contention_wait_s) for the host
    to quiet, as a shard does before it starts; None where the pool's gate is off."""
    from zlops.host import contention

    limits = ctx.config.host_limits(pool)
    if not limits.gates:
        return None

    def wait() -> None:
        contention.wait_for_quiet(limits, locks_dir=ctx.config.locks_dir)

    return wait


def pool_entry(items: list[dict[str, Any]], budget: tuple[float, str]) -> dict[str, Any]:
    """The run meta's ``ab.<pool>`` entry from the pool's A/Bs tonight, one per baseline commit (most severe
    first). One A/B: its entry as it is. Several: their totals (runs, seconds, estimates, outcomes, the
    suspects, the processes timed for the cost model) against the pool's one budget, with each A/B under
    ``groups``; every rendering reads the totals (zlops.report.ab_cost). ``budget``: the pool's whole budget
    tonight (seconds, basis), which the totals are held against; each group's ``budget_s`` is its share (less
    what earlier groups spent and what is kept for later ones). The totals once took the first group's share
    (the H200, hold-out 3 night 4: "budget 129.56 s", the share of an A/B that was skipped, beside the 214 s
    the other base's A/B spent of its 300 s)."""
    if len(items) == 1:
        return items[0]
    ok = [e for e in items if "error" not in e]
    if not ok:
        return {"error": "; ".join(f"base {e['base'][:7]}: {e['error']}" for e in items)[:300], "groups": items}
    first = ok[0]
    runs = sum(int(e.get("runs") or 0) for e in ok)
    seconds = sum(float(e.get("seconds") or 0.0) for e in ok)
    est = sum(float(e.get("est_s") or (e.get("est_run_s") or 0.0) * int(e.get("runs") or 0)) for e in ok)
    outcomes: dict[str, int] = defaultdict(int)
    for e in ok:
        for k, n in (e.get("outcomes") or {}).items():
            outcomes[k] += int(n)
    total: dict[str, Any] = {**first, "runs": runs, "seconds": round(seconds, 2), "est_s": round(est, 2),
                             "est_run_s": round(est / runs, 2) if runs else first.get("est_run_s"),
                             "realised_run_s": round(seconds / runs, 2) if runs else None,
                             "outcomes": dict(outcomes),
                             "suspects": sum(int(e.get("suspects") or 0) for e in ok),
                             "ab_suspects": sum(int(e.get("ab_suspects") or 0) for e in ok),
                             "observed": [o for e in ok for o in e.get("observed") or ()],
                             "discarded": [d for e in ok for d in e.get("discarded") or ()],
                             "stopped": "; ".join(f"base {e['base'][:7]}: {e.get('stopped') or '-'}" for e in items
                                                  if "error" not in e),
                             "groups": items}
    total.pop("base", None)
    total["budget_s"], total["budget_basis"] = round(budget[0], 2), budget[1]
    if "pairs" in first:
        total["pairs"] = sum(int(e.get("pairs") or 0) for e in ok)
    if any("est_raw_run_s" in e for e in ok) and runs:   # a campaign A/B: the raw estimate per run, weighted
        total["est_raw_run_s"] = round(sum(float(e.get("est_raw_run_s") or 0.0) * int(e.get("runs") or 0)
                                           for e in ok) / runs, 3)
    return total


def _outcome(j: Judgement) -> str:
    """Which of the A/B's three outcomes a judged suspect got (unmeasurable counts as not cleared)."""
    if j.verdict.changes_level:
        return "confirmed"
    if j.verdict.awaiting_confirmation or j.figures is None or not j.figures.runs_head:
        return "inconclusive"   # a suspect still, or a candidate that keeps its night's verdict (no A/B figures)
    return "cleared" if j.verdict.value == "unchanged" else j.verdict.value


def confirm(ctx: RunContext, summary: CompareSummary, *, pools: list[str] | None = None,
            progress: Progress | None = None) -> CompareSummary:
    """Run the A/Bs of tonight's suspects (noise judge only) and store the updated verdicts.

    The run's meta records, per pool, what the A/B cost against tonight's benchmark time.
    """
    progress = progress or LogProgress()
    cfg = ctx.config
    if cfg.judge != "noise" or cfg.noise.ab_pairs == 0:
        return summary
    from zlops.judge import setup as judging

    run = open_store(cfg).get_run(ctx.run_key)
    setup, _ = judging.for_run(run.meta if run is not None else None, cfg)
    policy = setup.policy or cfg.noise.policy(setup.thresholds)
    # a derived row (speedup, TFLOPS ...) follows its source's A/B: never A/B'd on its own (zlops.judge.derived);
    # a paired pool's verdicts already come from interleaved same-device runs (zlops.judge.paired): its
    # inconclusive series stay suspects with their figures, no second A/B. Beside the suspects, the A/B
    # candidates: a move beyond the floor the nights cannot judge (ab_candidate: "unmeasurable" or inside a
    # threshold above the floor), which an interleaved A/B, with its own noise, can
    suspects = [c for c in summary.comparisons
                if (c.verdict.awaiting_confirmation
                    or ab_candidate(c.judgement, policy.potential_pct, policy.measurable_target_pct))
                and c.base is not None and (pools is None or c.pool in pools) and not c.follows
                and not cfg.measures_paired(c.pool)]
    if not suspects:
        return summary
    groups: dict[tuple[str, str], list[Comparison]] = defaultdict(list)
    for c in suspects:
        groups[(c.pool, c.base.sha if c.base else "")].append(c)
    store = open_store(cfg)

    def budget_of(pool: str, members: list[Comparison], **kw: float) -> tuple[PoolBudget, list[Comparison]]:
        if ctx.suite.campaign is not None:   # the suspects' shards on their gangs (zlops.campaign.ab)
            return campaign_ab.pool_budget(ctx, pool, _pick(members, cfg.noise.ab_budget), **kw)
        return pool_budget(ctx, pool, members, **kw)

    # One budget per pool and night. Suspects can have different baseline commits: a series judged against last
    # night (tonight's new suspects) and one still awaiting confirmation, judged against the night before its
    # pending ones (a suspect carried over). They get one A/B (confirm_bases): the head runs once a round for
    # every base, and the newest base's suspects are chosen first (tonight's question). Measured on the H200
    # (hold-out 2, night K, docs/evidence/h200_holdout2): two A/Bs each took the whole 300 s budget, in base-sha
    # order, 384 s, and the +18% suspect's A/B came last and was cut off; ordering by the suspects' size instead
    # gives a carried-over noisy small shape (+329%) the budget before a quiet series' +99.7% (the abs replay,
    # tests/pipeline/test_flaggems_replay.py). A group whose baseline is tonight's commit runs no A/B (below).
    started: dict[str, float] = {}   # one read per distinct base run (a group or two), not per suspect
    for key in {c.base.run_key for c in suspects if c.base is not None}:
        run_ = store.get_run(key)
        started[key] = run_.started_at.timestamp() if run_ is not None and run_.started_at is not None else 0.0

    def base_started(members: list[Comparison]) -> float:
        return max((started.get(c.base.run_key, 0.0) for c in members if c.base is not None), default=0.0)

    order = sorted(groups, key=lambda k: (k[0], -base_started(groups[k]), -max(_information(c) for c in groups[k]),
                                          k[1]))
    n_bases = Counter(pool for pool, _ in groups)
    same_code = {b: why for b in sorted({b for _, b in groups}) if (why := same_code_reason(ctx, b)) is not None}
    # a pool with suspects against two or more baseline commits (other than tonight's code) gets one A/B of
    # them all, the head run once a round for every base (confirm_bases)
    runnable = Counter(pool for pool, base_sha in groups if base_sha not in same_code)
    shared = {pool for pool, n in runnable.items() if n > 1}
    spent: dict[str, float] = defaultdict(float)
    entries: dict[str, list[dict[str, Any]]] = defaultdict(list)
    updated: dict[tuple[str, str, str], Judgement] = {}
    whole: dict[str, tuple[float, str]] = {}   # each pool's budget tonight, before it is shared out
    multi: dict[str, dict[str, Any]] = {}
    prior = earlier_runs(ctx, store, suspects)
    # the series the A/Bs' runs measured beside the suspects (a FlagGems A/B re-runs each suspect's whole op): their
    # runs go into their rows as evidence of their A/B noise (Figures.seen_base/seen_head), learned for nothing
    seen: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    for pool in sorted(shared):
        multi[pool], got = confirm_bases(ctx, pool, [(b, groups[(p, b)]) for p, b in order
                                                     if p == pool and b not in same_code], policy=policy,
                                         progress=progress,
                                         prior={b: v for (p, b), v in prior.items() if p == pool}, seen=seen)
        updated.update(got)
    for pool, base_sha in order:
        members = groups[(pool, base_sha)]
        if pool in shared and base_sha not in same_code:
            continue   # in the pool's one A/B against its bases, above
        budget, chosen = budget_of(pool, members, spent_s=spent[pool])
        if pool not in whole:   # nothing spent yet on this pool: its budget is whole
            whole[pool] = (budget.seconds, budget.basis)
        if not chosen:
            continue
        need = 2 * cfg.noise.ab_min_pairs * budget.run_s
        if base_sha in same_code:
            # the suspects' baseline is tonight's commit itself (a night of the same commit, or the night after
            # a confirmed change), or differs from it only in the suite's inert_paths (a README commit): an A/B
            # would run the same code against itself, an A/A test that can show no code change; on the H200
            # such A/Bs took 180-254 s of a 300 s floor a night (hold-out 3, night 2; hold-out 5, D1 after A)
            why = same_code[base_sha]
            entries[pool].append({"base": base_sha[:12], "runs": 0, "seconds": 0.0, "night_s": round(budget.night_s, 2),
                                  "budget_s": round(budget.seconds, 2), "budget_basis": budget.basis,
                                  "suspects": len(members), "ab_suspects": 0, "est_run_s": round(budget.run_s, 2),
                                  "stopped": f"skipped: {why}; suspects stay suspects"})
            for c in members:
                updated[(c.pool, c.case, c.metric)] = replace(
                    c.judgement, note=f"{c.judgement.note} [A/B on {pool} skipped: {why}]" if c.judgement.note
                    else f"[A/B on {pool} skipped: {why}]")
            continue
        if need > budget.seconds:   # an A/B that cannot reach its first decision is time thrown away
            entries[pool].append({"base": base_sha[:12], "runs": 0, "seconds": 0.0, "night_s": round(budget.night_s, 2),
                           "budget_s": round(budget.seconds, 2), "budget_basis": budget.basis,
                           "suspects": len(members), "ab_suspects": 0, "est_run_s": round(budget.run_s, 2),
                           "stopped": f"skipped: {cfg.noise.ab_min_pairs} pairs need ~{need:.0f} s, the budget is "
                                      f"{budget.seconds:.0f} s ({budget.basis}); suspects stay suspects",
                           **({"cost_model": budget.cost.to_json()} if budget.cost is not None else {})})
            skipped = (f"[A/B on {pool} skipped: {cfg.noise.ab_min_pairs} pairs need ~{need:.0f} s, the budget is "
                       f"{budget.seconds:.0f} s]")
            for c in members:   # the reason a suspect stays one is said beside it, in every rendering
                updated[(c.pool, c.case, c.metric)] = replace(
                    c.judgement, note=f"{c.judgement.note} {skipped}" if c.judgement.note else skipped)
            continue

        max_pairs = max(cfg.noise.ab_pairs, cfg.noise.ab_min_pairs)
        futile: list[int] = []   # pairs at which the A/B stopped because no remaining pair could decide

        def judged(samples: Samples, chosen: list[Comparison] = chosen,
                   base_sha: str = base_sha) -> dict[tuple[str, str, str], Judgement]:
            return judge_runs(chosen, samples, policy, base_sha)

        def undecided(samples: Samples, chosen: list[Comparison] = chosen, futile: list[int] = futile,
                      max_pairs: int = max_pairs, base_sha: str = base_sha) -> bool:
            return still_open(chosen, samples, policy, base_sha, max_pairs=max_pairs, futile=futile)

        try:
            ab = confirm_pool(ctx, pool, chosen, progress=progress, budget=budget, decide_fn=undecided,
                              folder=base_sha[:12] if n_bases[pool] > 1 else "",
                              **({"prior": prior[(pool, base_sha)]} if (pool, base_sha) in prior else {}))
        except ZlopsError as exc:
            log.warning("A/B of pool %s failed, suspects stay suspects: %s", pool, exc)
            entries[pool].append({"base": base_sha[:12], "error": str(exc)[:300]})
            continue
        spent[pool] += ab.seconds
        if ab.pairs is not None:
            for (case, metric), sides in ab.pairs.seen.items():
                seen.setdefault((pool, case, metric), sides)
        unit = "s" if not budget.shards else "device-s"
        cost = (f"{ab.runs} runs, {ab.seconds:.0f} {unit} (estimated {budget.run_s * ab.runs:.0f}), "
                f"budget {budget.seconds:.0f} {unit}")
        if budget.shards:
            cost = f"{ab.runs} runs of {len(budget.shards)} gang shards, " + cost.split(", ", 1)[1]
        if ab.pairs is not None and ab.pairs.discarded:
            cost += f"; {len(ab.pairs.discarded)} busy pair(s) re-run"
        if ab.pairs is not None and ab.pairs.pooled:
            cost += f"; with {ab.pairs.pooled} pairs of the night before (the same commits and devices)"
        outcomes: dict[str, int] = defaultdict(int)
        decided = judged(ab.samples)
        for key, j in decided.items():
            updated[key] = replace(j, note=f"{j.note} [A/B on {pool}: {cost}]")
            outcomes[_outcome(j)] += 1
        left = [c for c in members if (c.pool, c.case, c.metric) not in decided]
        for c in left:   # beyond the budget, or no value in the A/B's runs: said beside it
            why = _left_out(c, "not in tonight's A/B (budget)" if c not in chosen else "the A/B runs measured no value")
            updated[(c.pool, c.case, c.metric)] = replace(
                c.judgement, note=f"{c.judgement.note} {why}" if c.judgement.note else why)
        stopped = ab.stopped
        if stopped == "decided" and futile and outcomes.get("inconclusive"):
            stopped = (f"futile after {futile[-1]} pairs: no outcome of the {max_pairs - futile[-1]} pairs left could "
                       f"confirm or clear the {outcomes['inconclusive']} inconclusive suspect(s)")
            if ab.pairs is not None:
                ab.pairs.stopped = stopped
        pairs_meta = ab.pairs.to_json() if ab.pairs is not None else {}
        observed = [] if budget.shards or budget.cases is None else \
            [[budget.runs_cases or len(budget.cases), round(t, 3)] for t in (ab.pairs.run_seconds if ab.pairs else [])]
        entries[pool].append({"base": base_sha[:12], **pairs_meta, "runs": ab.runs, "seconds": round(ab.seconds, 2),
                       "night_s": round(budget.night_s, 2), "budget_s": round(budget.seconds, 2),
                       "budget_basis": budget.basis, "suspects": len(members), "ab_suspects": len(chosen),
                       "outcomes": dict(outcomes),
                       "cases": len(budget.cases) if budget.cases is not None else "all",
                       "cases_run": budget.runs_cases, "stopped": stopped,
                       "observed": observed,
                       **({"cost_model": budget.cost.to_json()} if budget.cost is not None else {}),
                       **({"est_basis": budget.est_basis} if budget.est_basis else {}),
                       **({"est_raw_run_s": round(budget.raw_run_s, 3)} if budget.raw_run_s is not None else {}),
                       **({"shards": list(budget.cases or ()), "unit": "device-seconds",
                           "wall_s": round(ab.wall_s, 2)} if budget.shards else {})})
    costs = {pool: pool_entry(items, whole[pool]) for pool, items in entries.items() if pool not in multi}
    for pool, entry in multi.items():   # a same-commit group of the pool (no A/B) is one of its groups
        entry["groups"] = [*entry.get("groups", []), *entries.get(pool, [])]
        costs[pool] = entry
    if costs:
        store.update_run_meta(ctx.run_key, {"ab": costs})
    if not updated and not seen:
        return summary
    rows = follow_sources([replace(c, judgement=_with_seen(updated.get((c.pool, c.case, c.metric), c.judgement),
                                                           seen.get((c.pool, c.case, c.metric))))
                           for c in summary.comparisons])   # derived rows take their sources' new verdicts
    store.save_comparisons(ctx.run_key, rows)
    return CompareSummary(summary.run_key, summary.suite, summary.sha, tuple(rows))
