"""Same-gang A/B confirmation of a campaign suite's suspects (the campaign side of :mod:`zlops.judge.confirm`).

A campaign shard holds P devices (:mod:`zlops.campaign.plan`), so the one-device A/B of
:func:`zlops.judge.confirm.run_side` cannot re-run it. Here a suspect series is traced back to the
shards (case, P, variant, stack, size) of tonight's stored plan that produce it:

- a measured series ``<stem>/p<P>/<variant>/<stack>``: its own shard;
- an efficiency ``efficiency_p<P>`` of ``<stem>/<variant>/<stack>``: the shards at ``P`` and at the
  group's smallest planned P (``E(P)`` is computed from both);
- a stack ratio ``ratio_<a>_over_<b>`` of ``<stem>/p<P>/<variant>``: the shards of stacks ``a`` and ``b``.

One A/B run of a side runs exactly those shards, packed over the pool's devices like a night
(:func:`ab_plan`: the gang LPT of :mod:`zlops.campaign.plan` on tonight's seconds), so a P=1 shard runs
on one device while another runs beside it; the plan is made once per A/B, so every run of both
sides puts each shard on the same devices in the same order (the same gang for base and head). Each
shard runs under a gang lease (:func:`zlops.run.runner.run_shard` with ``gang``), one thread per lane,
waiting for the shards planned before it on its devices (:func:`run_packed`); each shard is read like
a lane's (:func:`zlops.campaign.run.read_campaign_shard`, i.e. :func:`zlops.run.ingest.read_shard`
with the shard's own telemetry: malformed is FAILED, contended is INVALID, as for every shard) and derives
the derived series of that run (:func:`zlops.campaign.scaling.derive`), so an efficiency or a ratio gets one
value per A/B run, like a measured series. The interleaving, the pairs added while undecided, the
budget and the judgement are :mod:`zlops.judge.confirm`'s own.

Cost is counted in device-seconds: a shard of P devices that took ``s`` seconds costs ``P*s``.
Tonight's campaign time on the pool (the budget's basis for ``noise.ab_budget_share``) is the sum
of its shards' device-seconds; an A/B run's estimate is the sum of its shards' typical device-seconds
(:func:`typical_device_seconds`: the median of tonight and the last nights) times what earlier A/B
runs realised against that sum (:func:`realised_factor`).
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from zlops.campaign import scaling
from zlops.campaign.plan import CampaignCase, CampaignPlan, Placement, make_plan
from zlops.campaign.run import read_campaign_shard, stored_plans
from zlops.errors import DeviceBusy, HostBusy, ZlopsError
from zlops.host.telemetry import summarize_dir
from zlops.judge import canary
from zlops.model import CaseResult, Comparison, ShardStatus, canary_source
from zlops.run.runner import ShardSpec, run_shard

if TYPE_CHECKING:
    from zlops.judge.budget import PoolBudget
    from zlops.steps.context import Prepared, RunContext

T = TypeVar("T")
_EFF = re.compile(r"^efficiency_p(\d+)$")
_RATIO = re.compile(r"^ratio_(.+)_over_(.+)$")


def _stem(shard: CampaignCase) -> str:
    return shard.stem


def shards_of(suspect_case: str, metric: str, shards: Sequence[CampaignCase]) -> tuple[CampaignCase, ...]:
    """The shards of ``shards`` (one pool's plan) whose results make the series ``(suspect_case, metric)``;
    empty when none of them does (a series this plan cannot re-measure). A recall canary's series is made
    by its source's shards (zlops.judge.canary)."""
    suspect_case = canary_source(suspect_case)
    eff, ratio = _EFF.match(metric), _RATIO.match(metric)
    if eff is not None:
        group = [s for s in shards if f"{_stem(s)}/{s.variant}/{s.stack}" == suspect_case]
        if not group:
            return ()
        p, p_min = int(eff.group(1)), min(s.p for s in group)
        need = [s for s in group if s.p in (p, p_min)]
        return tuple(sorted(need)) if {s.p for s in need} == {p, p_min} and p != p_min else ()
    if ratio is not None:
        pair = (ratio.group(1), ratio.group(2))
        need = [s for s in shards if f"{_stem(s)}/p{s.p}/{s.variant}" == suspect_case and s.stack in pair]
        return tuple(sorted(need)) if {s.stack for s in need} == set(pair) else ()
    return tuple(s for s in shards if s.series_case == suspect_case)


def tonight_device_seconds(ctx: RunContext, pool: str) -> dict[str, float]:
    """Device-seconds of each campaign shard measured tonight on ``pool`` (by ``shard_id``): its
    seconds (``params["campaign"]["duration_s"]``) times its P."""
    from zlops.steps.context import open_store

    out: dict[str, float] = {}
    for p, _device, r in open_store(ctx.config).results(ctx.run_key):
        shard = r.params.get("campaign") if p == pool and isinstance(r.params, Mapping) else None
        if isinstance(shard, Mapping) and isinstance(shard.get("duration_s"), (int, float)):
            out[str(shard["shard_id"])] = float(shard["duration_s"]) * int(shard["p"])
    return out


#: the share by which the chosen shards' ``min_pairs`` pairs must fit under the budget: realised runs wander
#: around their estimate (gloo on a shared 2-core host: +14% on an A/B chosen to fill 595 of 600 device-s,
#: which then stopped at 4 pairs, where nothing decides), and the budget is a hard limit
HEADROOM = 1.25


def choose(ordered: Sequence[Comparison], planned: Sequence[CampaignCase], cost: Mapping[str, float], *,
           seconds: float, min_pairs: int) -> tuple[list[Comparison], tuple[CampaignCase, ...], float]:
    """The suspects an A/B of ``seconds`` device-seconds can afford, and the shards one run executes.

    Greedy in the order given (most severe first): a suspect joins when ``min_pairs`` pairs of the
    union of the chosen suspects' shards still fit with :data:`HEADROOM`, else it is passed over and the next
    one is tried
    (a suspect whose shards are already chosen, e.g. wall_s beside execute_s of one shard, costs
    nothing more). A suspect no planned shard produces is left out. When nothing fits, the most
    severe re-measurable suspect alone is returned, so the caller can say why its A/B was skipped.
    Returns (suspects, shards by P then series, device-seconds of one run); a shard not measured
    tonight is costed at the mean of those that were."""
    typical = sum(cost.values()) / len(cost) if cost else 0.0

    def run_cost(shards: set[CampaignCase]) -> float:
        return sum(cost.get(s.shard_id, typical) for s in shards)

    chosen: list[Comparison] = []
    shards: set[CampaignCase] = set()
    first: tuple[Comparison, set[CampaignCase]] | None = None
    for c in ordered:
        mine = set(shards_of(c.case, c.metric, planned))
        if not mine:
            continue
        first = first or (c, mine)
        union = shards | mine
        if 2 * min_pairs * run_cost(union) * HEADROOM > seconds:
            continue
        chosen.append(c)
        shards = union
    if not chosen and first is not None:
        chosen, shards = [first[0]], first[1]
    ordered_shards = tuple(sorted(shards, key=lambda s: (s.p, s.series_case)))
    return chosen, ordered_shards, run_cost(shards)


@dataclass(frozen=True)
class CampaignCosting:
    """What a campaign pool's A/B runs cost tonight, in device-seconds: each planned shard's typical
    device-seconds (:func:`typical_device_seconds`) times the realised/estimated factor of earlier A/Bs
    (:func:`realised_factor`)."""

    night_s: float                         # tonight's campaign device-seconds on the pool
    planned: tuple[CampaignCase, ...]      # tonight's planned shards
    raw: Mapping[str, float]               # device-seconds per shard id, before the factor
    factor: float
    learnt: str
    nights: int
    devices: tuple[int, ...]

    def shards(self, suspects: Sequence[Comparison]) -> tuple[CampaignCase, ...]:
        """The shards one run needs to measure ``suspects``, by P then series."""
        union = {s for c in suspects for s in shards_of(c.case, c.metric, self.planned)}
        return tuple(sorted(union, key=lambda s: (s.p, s.series_case)))

    def run_cost(self, shards: Sequence[CampaignCase]) -> float:
        """Device-seconds of one run of ``shards`` (a shard not measured tonight: the mean of those that were)."""
        cost = {k: v * self.factor for k, v in self.raw.items()}
        typical = sum(cost.values()) / len(cost) if cost else 0.0
        return sum(cost.get(s.shard_id, typical) for s in shards)

    def plan(self, pool: str, shards: Sequence[CampaignCase]) -> CampaignPlan:
        return ab_plan(pool, shards, self.devices, self.raw)

    def est_basis(self, shards: Sequence[CampaignCase]) -> str:
        run_s = self.run_cost(shards)
        return (f"the {len(shards)} shards' device-seconds ({run_s / self.factor:.1f}, the median of "
                f"{'tonight' if self.nights <= 1 else f'tonight and {self.nights - 1} earlier nights'})"
                + (f" x {self.factor:.2f}, the realised/estimated ratio of {self.learnt}" if self.learnt else ""))


def costing(ctx: RunContext, pool: str) -> CampaignCosting:
    """The pool's :class:`CampaignCosting` tonight (its stored plan, tonight's and the last nights' shard
    seconds, earlier A/Bs' realised/estimated factor). Raises ZlopsError without a stored plan."""
    run = ctx.store.get_run(ctx.run_key)
    plan = stored_plans(run.meta if run is not None else {}).get(pool)
    if plan is None:
        raise ZlopsError(f"run {ctx.run_key} has no campaign plan for pool {pool}: nothing to re-run")
    tonight = tonight_device_seconds(ctx, pool)
    cost, nights = typical_device_seconds(ctx, pool, tonight)
    factor, learnt = realised_factor(ctx, pool)
    return CampaignCosting(float(sum(tonight.values())), tuple(p.shard for p in plan.placements), cost, factor,
                           learnt, nights, tuple(ctx.pool_devices(pool)))


def pool_budget(ctx: RunContext, pool: str, ordered: Sequence[Comparison], *,
                spent_s: float = 0.0) -> tuple[PoolBudget, list[Comparison]]:
    """The budget of a campaign pool's A/B (:func:`zlops.judge.budget.budget_seconds`: the larger of
    ``noise.ab_budget_share`` of tonight's campaign device-seconds on the pool and ``noise.ab_budget_floor_s``
    on each of the pool's devices, or ``noise.ab_budget_s``), less ``spent_s`` (the pool's A/Bs against other
    baseline commits tonight), and the suspects it can afford
    (:func:`choose`; ``ordered`` is most severe first)."""
    from zlops.judge.budget import PoolBudget, budget_seconds, less_spent

    cfg = ctx.config.noise
    c = costing(ctx, pool)
    budget = less_spent(budget_seconds(cfg, c.night_s, devices=len(c.devices)), spent_s)
    chosen, shards, run_s = choose(ordered, c.planned, {k: v * c.factor for k, v in c.raw.items()},
                                   seconds=budget.seconds, min_pairs=cfg.ab_min_pairs)
    return PoolBudget(budget.seconds, c.night_s, run_s, tuple(s.series_case for s in shards), shards=shards,
                      plan=c.plan(pool, shards), basis=budget.basis, est_basis=c.est_basis(shards),
                      raw_run_s=run_s / c.factor), chosen


#: the nights (tonight included) whose shard seconds make a campaign A/B run's estimate
COST_NIGHTS = 5


def typical_device_seconds(ctx: RunContext, pool: str, tonight: Mapping[str, float]) -> tuple[dict[str, float], int]:
    """Device-seconds of each shard measured tonight on ``pool``: the median of tonight's and of the last
    ``COST_NIGHTS - 1`` nightlies' (P x ``params["campaign"]["duration_s"]``), and how many nights that
    spans at most. One night's seconds are one process each and wander with the host (gloo on a shared
    2-core host: a P=1 shard took 26.7 s on a night and 13.2 s in the A/B that followed it)."""
    from zlops.steps.context import open_store

    store = open_store(ctx.config)
    per: dict[str, list[float]] = {k: [v] for k, v in tonight.items()}
    nights = 1
    for run in store.list_runs(suite=ctx.suite_name, kind="nightly", limit=COST_NIGHTS * 4):
        if nights >= COST_NIGHTS:
            break
        if run.run_key == ctx.run_key:
            continue
        seen = {}
        for p, _device, r in store.results(run.run_key):
            shard = r.params.get("campaign") if p == pool and isinstance(r.params, Mapping) else None
            if isinstance(shard, Mapping) and isinstance(shard.get("duration_s"), (int, float)):
                seen[str(shard["shard_id"])] = float(shard["duration_s"]) * int(shard["p"])
        for sid, value in seen.items():
            if sid in per:
                per[sid].append(value)
        nights += bool(seen)
    return {k: statistics.median(v) for k, v in per.items()}, nights


#: the realised/estimated ratio of earlier campaign A/Bs is trusted within these bounds. Never below 1: an
#: estimate too high only leaves a suspect for the next night, one too low ends the A/B before its first
#: decision and wastes all of it (gloo on a shared 2-core host: a factor of 0.53 learnt from one A/B whose
#: runs happened to be fast, then the next night's runs cost 2.3x the estimate and stopped at 2 pairs)
FACTOR_BOUNDS = (1.0, 3.0)


def realised_factor(ctx: RunContext, pool: str) -> tuple[float, str]:
    """How much an A/B run of gang shards cost, against what tonight's device-seconds of its shards said
    (``realised_run_s / est_raw_run_s`` of the pool's A/Bs on the last nights, run meta ``ab``): the median,
    bounded by :data:`FACTOR_BOUNDS`; ``(1.0, "")`` before any A/B ran.

    Measured, not assumed (issue 22): gloo on a shared 2-core host, the shards of one A/B run cost 42%
    more device-seconds than the night's (P=1 shards packed side by side on two CPU "devices" slow each
    other, and a night's shards ran beside other lanes' too), so an A/B chosen to afford 5 pairs stopped
    at 4, where no rank test can decide."""
    from zlops.judge.budget import COST_HISTORY_RUNS
    from zlops.steps.context import open_store

    ratios = []
    for run in open_store(ctx.config).list_runs(suite=ctx.suite_name, kind="nightly", limit=COST_HISTORY_RUNS):
        entry = ((run.meta or {}).get("ab") or {}).get(pool) if run.run_key != ctx.run_key else None
        if not isinstance(entry, Mapping) or entry.get("unit") != "device-seconds":
            continue
        # against the estimate before any factor (est_raw_run_s; older records: est_run_s had none)
        est, real = entry.get("est_raw_run_s", entry.get("est_run_s")), entry.get("realised_run_s")
        if isinstance(est, (int, float)) and isinstance(real, (int, float)) and est > 0 and real > 0:
            ratios.append(float(real) / float(est))
    if not ratios:
        return 1.0, ""
    ratios.sort()
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    lo, hi = FACTOR_BOUNDS
    return min(max(median, lo), hi), f"{len(ratios)} earlier A/B{'s' if len(ratios) != 1 else ''}"


def ab_plan(pool: str, shards: Sequence[CampaignCase], devices: Sequence[int],
            cost: Mapping[str, float]) -> CampaignPlan:
    """Where every run of an A/B puts ``shards``: the night's gang LPT (:func:`zlops.campaign.plan.make_plan`)
    over the pool's ``devices``, weighted by tonight's seconds of each shard (``cost`` is device-seconds,
    P x seconds). Deterministic, so base and head runs place each shard alike. A shard wider than the
    pool stays unplaced (:func:`run_side` refuses such a plan)."""
    seconds = {s.shard_id: cost[s.shard_id] / s.p for s in shards if s.shard_id in cost}
    return make_plan(pool, shards, devices, seconds)


def run_packed(plan: CampaignPlan, run_one: Callable[[Placement], T]) -> list[tuple[Placement, T | Exception]]:
    """Run every placement of ``plan`` with ``run_one``: one thread per lane (the first device of a
    placement's window), each lane in placing order, a placement starting once the placements planned
    before it on any of its devices (``after``) have ended, whether they succeeded or not.

    The placing order of :func:`zlops.campaign.plan.gang_lpt` is a topological order of ``after``, so no
    lane waits on one that waits on it. Returns (placement, result or the Exception it raised) in
    placing order; anything else than an Exception (an interrupt) propagates once every lane ended.
    """
    ended = {p.shard.shard_id: threading.Event() for p in plan.placements}
    lanes = sorted({p.lane for p in plan.placements})

    def lane(device: int) -> dict[str, T | Exception]:
        done: dict[str, T | Exception] = {}
        for pl in (p for p in plan.placements if p.lane == device):
            try:
                for before in pl.after:
                    if before in ended:
                        ended[before].wait()
                done[pl.shard.shard_id] = run_one(pl)
            except Exception as exc:  # noqa: BLE001 - recorded; the caller decides what a failed shard means
                done[pl.shard.shard_id] = exc
            finally:
                ended[pl.shard.shard_id].set()
        return done

    results: dict[str, T | Exception] = {}
    if lanes:
        with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="zlops-ab-lane") as pool:
            for part in pool.map(lane, lanes):
                results.update(part)
    return [(p, results[p.shard.shard_id]) for p in plan.placements]


def run_side(ctx: RunContext, side_ctx: RunContext, prepared: Prepared, pool: str, out: Path,
             plan: CampaignPlan) -> tuple[dict[tuple[str, str], float], float]:
    """One A/B run of one side: the shards of ``plan`` (:func:`ab_plan`) on their devices, lanes in
    parallel (:func:`run_packed`), each under a gang lease, then the derived series of this run.
    Returns per (case, metric) the run's value (a measured series' median, a derived series' one
    value) and the device-seconds the run took (each shard's seconds times its P).

    A shard that never started because its devices stayed leased raises DeviceBusy; a failed or
    malformed shard ZlopsError (its suspects stay suspects); a run whose only fault is shards measured
    beside a busy host HostBusy with the run's device-seconds, so :func:`zlops.judge.interleave.run_pairs`
    discards the pair and runs it again once the host quiets, as for a one-device A/B."""
    campaign = ctx.suite.campaign
    if campaign is None:
        raise ZlopsError(f"suite {ctx.suite_name} is not a campaign")
    if plan.unplaced:
        raise ZlopsError(f"{', '.join(s.series_case for s in plan.unplaced)} need more devices than pool {pool} "
                         f"has ({len(plan.devices)})")
    pool_cfg = ctx.config.pools[pool]
    device_s = 0.0
    lock = threading.Lock()

    def one(pl: Placement) -> list[CaseResult]:
        nonlocal device_s
        shard, art = pl.shard, out / pl.shard.shard_id
        spec = ShardSpec(run_key=f"{ctx.run_key}:ab", suite_name=ctx.suite_name, suite=ctx.suite, sha=side_ctx.sha,
                         pool=pool, backend=pool_cfg.backend, device=pl.devices[0], worktree=prepared.worktree,
                         venv=prepared.venv, artifact_dir=art, variant=shard.variant, gang=pl.devices,
                         placeholders=tuple(shard.placeholders(pl.devices).items()))
        t0 = time.monotonic()
        outcome = run_shard(spec, locks_dir=ctx.config.locks_dir, device_wait_s=ctx.config.device_wait_s,
                            require_idle=pool_cfg.idle_required)
        with lock:
            device_s += (time.monotonic() - t0) * shard.p
        if outcome.status is ShardStatus.SKIPPED:
            raise DeviceBusy(f"A/B shard {shard.series_case} in {art} skipped: {outcome.error}")
        if outcome.status is not ShardStatus.OK or outcome.results_file is None:
            raise ZlopsError(f"A/B shard {shard.series_case} in {art} {outcome.status.value}: {outcome.error}")
        read = read_campaign_shard(ctx, shard, outcome, telemetry={**summarize_dir(art), "backend": pool_cfg.backend})
        if read.outcome.status is ShardStatus.INVALID:   # the contention gate: the pair runs again once quiet
            raise HostBusy(f"A/B shard {shard.series_case} in {art} invalid: {read.outcome.error}",
                           seconds=(outcome.duration_s or 0.0) * shard.p)
        if not read.usable:
            raise ZlopsError(f"A/B shard {shard.series_case} in {art}: {read.outcome.error}")
        return list(read.results)

    results: list[CaseResult] = []
    failures: list[Exception] = []
    for _pl, got in run_packed(plan, one):
        if isinstance(got, Exception):
            failures.append(got)
        else:
            results += got
    if failures:   # a busy gang first (the caller says the devices were held), a failure, then a busy host
        worst = next((f for f in failures if isinstance(f, DeviceBusy)), None) or \
            next((f for f in failures if not isinstance(f, HostBusy)), failures[0])
        if isinstance(worst, HostBusy):   # only contended shards: what the whole run cost (zlops.judge.interleave)
            raise HostBusy(str(worst), seconds=device_s)
        raise worst
    derived = scaling.derive(results, campaign.ratios, metric=campaign.scaling_metric)
    # a recall canary's sides are its source's runs, the head scaled on a planted night (zlops.judge.canary)
    return {(r.case, r.metric): r.median for r in (*canary.ab_results(ctx, side_ctx, results), *derived)}, device_s
