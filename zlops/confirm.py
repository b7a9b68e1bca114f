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
by :func:`zlops.judge.confirm_suspect`; the verdict's figures become the A/B's (runs included, so
later nights' noise model sees each run as a process). Anchors: Pinpoint ``run_test.py`` (A/B on
the same bot, randomized order, adding repeats while undecided); asv ``--interleave-rounds``.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from zlops import campaign_ab
from zlops.campaign import CampaignCase, CampaignPlan
from zlops.derived import follow_sources
from zlops.errors import DeviceBusy, ZlopsError
from zlops.ingest import read_shard
from zlops.judge import confirm_suspect
from zlops.model import CompareSummary, Comparison, Judgement, ShardStatus
from zlops.progress import LogProgress, Progress
from zlops.runner import ShardSpec, run_shard
from zlops.selection import selects_cases
from zlops.steps.cleanup import cleanup
from zlops.steps.context import Prepared, RunContext, open_store
from zlops.steps.prepare import prepare
from zlops.telemetry import summarize_dir

log = logging.getLogger(__name__)


def _excess(c: Comparison) -> float:
    """How far beyond its threshold a suspect is, as a ratio (either direction)."""
    worse, thr = c.judgement.worse_pct or 0.0, c.judgement.threshold_pct or 1.0
    return abs(worse) / thr


def _pick(suspects: list[Comparison], budget: int) -> list[Comparison]:
    return sorted(suspects, key=lambda c: (-_excess(c), c.pool, c.case, c.metric))[:budget]


@dataclass(frozen=True)
class PoolBudget:
    """What one pool's A/B may spend tonight and what it is expected to cost per run."""

    seconds: float                 # device seconds the A/B may take
    night_s: float                 # tonight's benchmark time on the pool (the budget's basis)
    run_s: float                   # estimated seconds of one A/B run of the chosen cases
    cases: tuple[str, ...] | None  # the cases an A/B run executes (None: the whole suite)
    #: a campaign suite's A/B: the shards one run executes, each on its gang (zlops.campaign_ab);
    #: then ``seconds``, ``night_s`` and ``run_s`` are device-seconds
    shards: tuple[CampaignCase, ...] = ()
    #: where every A/B run puts those shards (zlops.campaign_ab.ab_plan): the same devices for base and head
    plan: CampaignPlan | None = None


def pool_budget(ctx: RunContext, pool: str, suspects: list[Comparison]) -> tuple[PoolBudget, list[Comparison]]:
    """The budget of a pool's A/B, and the suspects it can afford (most severe first).

    Per-case cost is estimated from tonight's shards of the pool (their duration over their case
    count); a suite that cannot select cases costs a whole shard per run whatever is chosen.
    """
    cfg = ctx.config.noise
    store = open_store(ctx.config)
    shards = [o for o in store.shards(ctx.run_key) if o.pool == pool and o.status is ShardStatus.OK]
    durations = [o.duration_s for o in shards if o.duration_s]
    night_s = float(sum(durations)) if durations else 0.0
    per_shard = max(durations) if durations else 0.0
    seconds = cfg.ab_budget_s if cfg.ab_budget_s is not None else cfg.ab_budget_share * night_s
    ordered = _pick(suspects, cfg.ab_budget)
    if not selects_cases(ctx.suite):
        return PoolBudget(seconds, night_s, per_shard, None), ordered
    per_device_cases: dict[int, set[str]] = defaultdict(set)
    for p, device, res in store.results(ctx.run_key):
        if p == pool:
            per_device_cases[device].add(res.case)
    n_cases = max((len(v) for v in per_device_cases.values()), default=1) or 1
    per_case = per_shard / n_cases
    chosen: list[Comparison] = []
    for c in ordered:
        cases = {x.case for x in chosen} | {c.case}
        if chosen and 2 * cfg.ab_min_pairs * per_case * len(cases) > seconds:
            break
        chosen.append(c)
    cases = tuple(sorted({c.case for c in chosen}))
    return PoolBudget(seconds, night_s, per_case * len(cases), cases), chosen


def run_side(ctx: RunContext, side_ctx: RunContext, prepared: Prepared, pool: str,
              device: int, out: Path, cases: tuple[str, ...] | None) -> dict[tuple[str, str], float]:
    """One run of the suite (or of ``cases`` only) on one device; per (case, metric) the median of its samples.

    Used by the nightly's A/B and by bisection (zlops.bisect_run). A run that never started because the
    device stayed leased raises DeviceBusy; any other failure ZlopsError."""
    spec = ShardSpec(run_key=f"{ctx.run_key}:ab", suite_name=ctx.suite_name, suite=ctx.suite, sha=side_ctx.sha,
                     pool=pool, backend=ctx.config.pools[pool].backend, device=device,
                     worktree=prepared.worktree, venv=prepared.venv, artifact_dir=out, cases=cases)
    outcome = run_shard(spec, locks_dir=ctx.config.locks_dir, device_wait_s=ctx.config.device_wait_s)
    if outcome.status is ShardStatus.SKIPPED:
        raise DeviceBusy(f"A/B run in {out} skipped: {outcome.error}")
    if outcome.status is not ShardStatus.OK or outcome.results_file is None:
        raise ZlopsError(f"A/B run in {out} {outcome.status.value}: {outcome.error}")
    # parsed as the nightly parses its shards; an A/B measured beside a busy host confirms nothing: its
    # suspects stay suspects
    read = read_shard(ctx.config, ctx.suite_name, outcome, telemetry=summarize_dir(out))
    if read.outcome.status is ShardStatus.INVALID:
        raise ZlopsError(f"A/B run in {out} invalid: {read.outcome.error}")
    if not read.usable:
        raise ZlopsError(f"A/B run in {out}: {read.outcome.error}")
    return {(r.case, r.metric): r.median for r in read.results}


@dataclass
class PoolAB:
    """What one pool's A/B measured: per series the base and head run values, and what it cost."""

    samples: dict[tuple[str, str], tuple[list[float], list[float]]]
    runs: int
    seconds: float
    budget: PoolBudget
    stopped: str
    wall_s: float = 0.0   # wall-clock seconds of the whole A/B, both sides' preparation included


def confirm_pool(ctx: RunContext, pool: str, suspects: list[Comparison], *, progress: Progress,
                 budget: PoolBudget, decide_fn: object = None) -> PoolAB:
    """Interleaved A/B of ``suspects`` (one pool, one baseline commit) on the pool's first device, or,
    for a campaign suite (``budget.plan``), of the suspects' shards packed over the pool's devices
    (zlops.campaign_ab).

    Runs ``ab_min_pairs`` pairs, then adds pairs while ``decide_fn(samples)`` reports undecided
    suspects, up to ``ab_pairs``, never starting a pair the remaining budget cannot pay for.
    """
    cfg = ctx.config.noise
    base_sha = suspects[0].base.sha if suspects[0].base else None
    if base_sha is None:
        raise ZlopsError("a suspect without a baseline cannot be confirmed by A/B")
    from zlops.stats import interleaved_order

    devices = ctx.pool_devices(pool)
    device = devices[0]
    if budget.shards and budget.plan is None:
        raise ZlopsError(f"the campaign A/B of pool {pool} has no plan of its shards")
    where = f"{pool}/{device}" if budget.plan is None else \
        f"{pool}/{','.join(map(str, sorted({d for p in budget.plan.placements for d in p.devices})))}"
    base_ctx = RunContext(ctx.config, ctx.suite_name, f"{ctx.run_key}:ab-base", base_sha, ctx.auto_devices)
    samples: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    order = interleaved_order(max(cfg.ab_pairs, cfg.ab_min_pairs), seed=zlib.crc32(f"{ctx.run_key}/{pool}".encode()))
    spent, runs, stopped = 0.0, 0, "max pairs"
    wall0 = time.monotonic()
    try:
        with progress.step("ab", suite=ctx.suite_name, commit=f"{base_sha[:7]}..{ctx.sha[:7]}",
                           device=where):
            sides = {"A": (base_ctx, prepare(base_ctx)), "B": (ctx, prepare(ctx))}
            run_s = budget.run_s
            for pair in range(len(order) // 2):
                if pair >= cfg.ab_min_pairs and decide_fn is not None and not decide_fn(dict(samples)):  # type: ignore[operator]
                    stopped = "decided"
                    break
                if pair >= 1 and spent + 2 * run_s > budget.seconds:
                    stopped = f"budget ({budget.seconds:.0f} s) spent"
                    break
                for i in (2 * pair, 2 * pair + 1):
                    side = order[i]
                    side_ctx, prepared = sides[side]
                    out = ctx.run_dir / "ab" / pool / f"{i:02d}{side}"
                    if budget.plan is not None:   # device-seconds of the gang shards, lanes in parallel
                        medians, took = campaign_ab.run_side(ctx, side_ctx, prepared, pool, out, budget.plan)
                    else:
                        t0 = time.monotonic()
                        medians = run_side(ctx, side_ctx, prepared, pool, device, out, budget.cases)
                        took = time.monotonic() - t0
                    spent += took
                    runs += 1
                    run_s = max(run_s, took) if runs <= 2 else (spent / runs)
                    for c in suspects:
                        value = medians.get((c.case, c.metric))
                        if value is not None:
                            samples[(c.case, c.metric)][0 if side == "A" else 1].append(value)
    finally:
        cleanup(base_ctx)
    return PoolAB(dict(samples), runs, spent, budget, stopped, wall_s=time.monotonic() - wall0)


def confirm(ctx: RunContext, summary: CompareSummary, *, pools: list[str] | None = None,
            progress: Progress | None = None) -> CompareSummary:
    """Run the A/Bs of tonight's suspects (noise judge only) and store the updated verdicts.

    The run's meta records, per pool, what the A/B cost against tonight's benchmark time.
    """
    progress = progress or LogProgress()
    cfg = ctx.config
    if cfg.judge != "noise" or cfg.noise.ab_pairs == 0:
        return summary
    # a derived row (speedup, TFLOPS ...) follows its source's A/B: never A/B'd on its own (zlops.derived)
    suspects = [c for c in summary.comparisons if c.verdict.awaiting_confirmation and c.base is not None
                and (pools is None or c.pool in pools) and not c.follows]
    if not suspects:
        return summary
    from zlops import judging

    run = open_store(cfg).get_run(ctx.run_key)
    setup, _ = judging.for_run(run.meta if run is not None else None, cfg)
    policy = setup.policy or cfg.noise.policy(setup.thresholds)
    groups: dict[tuple[str, str], list[Comparison]] = defaultdict(list)
    for c in suspects:
        groups[(c.pool, c.base.sha if c.base else "")].append(c)
    updated: dict[tuple[str, str, str], Judgement] = {}
    costs: dict[str, dict[str, float | int | str]] = {}
    for (pool, base_sha), members in sorted(groups.items()):
        if ctx.suite.campaign is not None:   # the suspects' shards on their gangs (zlops.campaign_ab)
            budget, chosen = campaign_ab.pool_budget(ctx, pool, _pick(members, cfg.noise.ab_budget))
        else:
            budget, chosen = pool_budget(ctx, pool, members)
        if not chosen:
            continue
        need = 2 * cfg.noise.ab_min_pairs * budget.run_s
        if need > budget.seconds:   # an A/B that cannot reach its first decision is time thrown away
            costs[pool] = {"runs": 0, "seconds": 0.0, "night_s": round(budget.night_s, 2),
                           "budget_s": round(budget.seconds, 2), "suspects": len(members), "confirmed": 0,
                           "stopped": f"skipped: {cfg.noise.ab_min_pairs} pairs need ~{need:.0f} s, the budget is "
                                      f"{budget.seconds:.0f} s (noise.ab_budget_share / ab_budget_s); suspects "
                                      "wait for a second night"}
            skipped = (f"[A/B on {pool} skipped: {cfg.noise.ab_min_pairs} pairs need ~{need:.0f} s, the budget is "
                       f"{budget.seconds:.0f} s]")
            for c in members:   # the reason a suspect stays one is said beside it, in every rendering
                updated[(c.pool, c.case, c.metric)] = replace(
                    c.judgement, note=f"{c.judgement.note} {skipped}" if c.judgement.note else skipped)
            continue

        def judged(samples: dict[tuple[str, str], tuple[list[float], list[float]]],
                   chosen: list[Comparison] = chosen,
                   base_sha: str = base_sha) -> dict[tuple[str, str, str], Judgement]:
            out = {}
            for c in chosen:
                base_s, head_s = samples.get((c.case, c.metric), ([], []))
                if len(base_s) >= 2 and len(head_s) >= 2:
                    out[(c.pool, c.case, c.metric)] = confirm_suspect(
                        c.judgement, base_s, head_s, lower_is_better=c.lower_is_better, policy=policy,
                        base_label=f"A/B base {base_sha[:7]}")
            return out

        def undecided(samples: dict[tuple[str, str], tuple[list[float], list[float]]],
                      chosen: list[Comparison] = chosen) -> bool:
            done = judged(samples, chosen)
            return any(c.verdict.awaiting_confirmation if (j := done.get((c.pool, c.case, c.metric))) is None
                       else j.verdict.awaiting_confirmation for c in chosen)

        try:
            ab = confirm_pool(ctx, pool, chosen, progress=progress, budget=budget, decide_fn=undecided)
        except ZlopsError as exc:
            log.warning("A/B of pool %s failed, suspects stay suspects: %s", pool, exc)
            costs[pool] = {"error": str(exc)[:300]}
            continue
        cost = f"{ab.runs} runs, {ab.seconds:.0f} s" if not budget.shards else \
            f"{ab.runs} runs of {len(budget.shards)} gang shards, {ab.seconds:.0f} device-s"
        for key, j in judged(ab.samples).items():
            updated[key] = replace(j, note=f"{j.note} [A/B on {pool}: {cost}]")
        costs[pool] = {"runs": ab.runs, "seconds": round(ab.seconds, 2), "night_s": round(budget.night_s, 2),
                       "budget_s": round(budget.seconds, 2), "suspects": len(members), "confirmed": len(chosen),
                       "cases": len(budget.cases) if budget.cases is not None else "all", "stopped": ab.stopped,
                       **({"shards": list(budget.cases or ()), "unit": "device-seconds",
                           "wall_s": round(ab.wall_s, 2)} if budget.shards else {})}
    store = open_store(cfg)
    if costs:
        store.update_run_meta(ctx.run_key, {"ab": costs})
    if not updated:
        return summary
    rows = follow_sources([replace(c, judgement=updated.get((c.pool, c.case, c.metric), c.judgement))
                           for c in summary.comparisons])   # derived rows take their sources' new verdicts
    store.save_comparisons(ctx.run_key, rows)
    return CompareSummary(summary.run_key, summary.suite, summary.sha, tuple(rows))
