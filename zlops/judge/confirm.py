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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zlops.campaign import ab as campaign_ab
from zlops.errors import DeviceBusy, HostBusy, ZlopsError
from zlops.host.telemetry import summarize_dir
from zlops.judge.budget import COST_HISTORY_RUNS, PoolBudget, budget_seconds, less_spent
from zlops.judge.derived import follow_sources
from zlops.judge.interleave import CostModel, Pairs, learn_cost, run_pairs
from zlops.judge.judges import ab_can_still_decide, confirm_suspect
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


def _excess(c: Comparison) -> float:
    """How far beyond its threshold a suspect is, as a ratio (either direction)."""
    worse, thr = c.judgement.worse_pct or 0.0, c.judgement.threshold_pct or 1.0
    return abs(worse) / thr


def _pick(suspects: list[Comparison], budget: int) -> list[Comparison]:
    return sorted(suspects, key=lambda c: (-_excess(c), c.pool, c.case, c.metric))[:budget]


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


def pool_budget(ctx: RunContext, pool: str, suspects: list[Comparison], *,
                spent_s: float = 0.0, kept_s: float = 0.0) -> tuple[PoolBudget, list[Comparison]]:
    """The budget of a pool's A/B, and the suspects it can afford (most severe first).

    The budget is :func:`budget_seconds` of tonight's benchmark time on the pool, less ``spent_s``: what
    the pool's earlier A/Bs tonight spent and ``kept_s``, what is kept for its later ones (suspects against
    another baseline commit share the pool's one budget, :func:`confirm`). A run's cost comes
    from the pool's cost model (:func:`zlops.judge.interleave.learn_cost` on tonight's shards and earlier A/B
    runs: a fixed start-up plus a per-case time), so packing several suspects' cases into one run
    costs little more than one; suspects are added most severe first while ``ab_min_pairs`` pairs of
    the union of their cases fit. A suite that cannot select cases costs a whole shard per run.
    """
    cfg = ctx.config.noise
    store = open_store(ctx.config)
    shards = [o for o in store.shards(ctx.run_key) if o.pool == pool and o.status is ShardStatus.OK]
    durations = [o.duration_s for o in shards if o.duration_s]
    night_s = float(sum(durations)) if durations else 0.0
    per_shard = max(durations) if durations else 0.0
    budget = less_spent(budget_seconds(cfg, night_s), spent_s, kept_s)
    ordered = _pick(suspects, cfg.ab_budget)
    per_device_cases: dict[int, set[str]] = defaultdict(set)
    for p, device, res in store.results(ctx.run_key):
        if p == pool:
            per_device_cases[device].add(res.case)
    tonight = [(len(per_device_cases.get(o.device, ())), float(o.duration_s)) for o in shards if o.duration_s]
    n_cases = max((len(v) for v in per_device_cases.values()), default=1) or 1
    if not selects_cases(ctx.suite):
        return PoolBudget(budget.seconds, night_s, per_shard, None, basis=budget.basis), ordered
    try:
        cost = learn_cost(observed_runs(ctx, store, pool, tonight))
    except ValueError:   # nothing timed tonight (every shard failed): a whole shard per run, said so
        cost = CostModel(per_shard, 0.0, "no process timed: a whole shard per run")
    universe = sorted({case for v in per_device_cases.values() for case in v})

    def run_cost(cases: set[str]) -> float:
        # what a run of these suspects' cases executes (FlagGems: every shape of their ops) at the model's cost
        n = len(selected_cases(ctx.suite, sorted(cases), universe))
        return min(cost.estimate(n), per_shard or math.inf) if n < n_cases else (per_shard or cost.estimate(n))

    chosen: list[Comparison] = []
    for c in ordered:
        cases = {x.case for x in chosen} | {c.case}
        if chosen and 2 * cfg.ab_min_pairs * run_cost(cases) > budget.seconds:
            continue   # a cheaper suspect further down may still fit beside the chosen ones
        chosen.append(c)
    cases = tuple(sorted({c.case for c in chosen}))
    runs = len(selected_cases(ctx.suite, list(cases), universe)) if cases else 0
    return PoolBudget(budget.seconds, night_s, run_cost(set(cases)), cases, basis=budget.basis, cost=cost,
                      runs_cases=runs), chosen


def run_side(ctx: RunContext, side_ctx: RunContext, prepared: Prepared, pool: str,
              device: int, out: Path, cases: tuple[str, ...] | None) -> dict[tuple[str, str], float]:
    """One run of the suite (or of ``cases`` only) on one device; per (case, metric) the median of its samples.

    Used by the nightly's A/B and by bisection (zlops.bisect.run). A run that never started because the
    device stayed leased raises DeviceBusy; any other failure ZlopsError."""
    spec = ShardSpec(run_key=f"{ctx.run_key}:ab", suite_name=ctx.suite_name, suite=ctx.suite, sha=side_ctx.sha,
                     pool=pool, backend=ctx.config.pools[pool].backend, device=device,
                     worktree=prepared.worktree, venv=prepared.venv, artifact_dir=out, cases=cases,
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
    pairs: Pairs | None = None


def confirm_pool(ctx: RunContext, pool: str, suspects: list[Comparison], *, progress: Progress,
                 budget: PoolBudget, decide_fn: object = None, folder: str = "") -> PoolAB:
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
                              (lambda samples: not decide_fn(samples)))  # type: ignore[operator]
    finally:
        cleanup(base_ctx)
    return PoolAB(pairs.samples, pairs.runs, pairs.seconds, budget, pairs.stopped,
                  wall_s=time.monotonic() - wall0, pairs=pairs)


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
    if j.verdict.awaiting_confirmation:
        return "inconclusive"
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
    # a derived row (speedup, TFLOPS ...) follows its source's A/B: never A/B'd on its own (zlops.judge.derived);
    # a paired pool's verdicts already come from interleaved same-device runs (zlops.judge.paired): its
    # inconclusive series stay suspects with their figures, no second A/B
    suspects = [c for c in summary.comparisons if c.verdict.awaiting_confirmation and c.base is not None
                and (pools is None or c.pool in pools) and not c.follows and not cfg.measures_paired(c.pool)]
    if not suspects:
        return summary
    from zlops.judge import setup as judging

    run = open_store(cfg).get_run(ctx.run_key)
    setup, _ = judging.for_run(run.meta if run is not None else None, cfg)
    policy = setup.policy or cfg.noise.policy(setup.thresholds)
    groups: dict[tuple[str, str], list[Comparison]] = defaultdict(list)
    for c in suspects:
        groups[(c.pool, c.base.sha if c.base else "")].append(c)
    store = open_store(cfg)

    def budget_of(pool: str, members: list[Comparison], **kw: float) -> tuple[PoolBudget, list[Comparison]]:
        if ctx.suite.campaign is not None:   # the suspects' shards on their gangs (zlops.campaign.ab)
            return campaign_ab.pool_budget(ctx, pool, _pick(members, cfg.noise.ab_budget), **kw)
        return pool_budget(ctx, pool, members, **kw)

    # One budget per pool and night. Suspects against different baseline commits need one A/B each: a
    # series judged against last night (tonight's new suspects) and one still awaiting confirmation, judged
    # against the night before its pending ones (a suspect carried over). They share the pool's budget, the
    # newest base first (tonight's question), each earlier A/B keeping room for the later ones' first
    # decision (ab_min_pairs pairs) where the budget holds both. Measured on the H200 (hold-out 2, night
    # K, docs/evidence/h200_holdout2): two A/Bs each took the whole 300 s budget, in base-sha order, 384 s,
    # and the +18% suspect's A/B came last and was cut off; ordering by the suspects' size instead gives a
    # carried-over noisy small shape (+329%) the budget before a quiet series' +99.7% (the abs replay,
    # tests/pipeline/test_flaggems_replay.py).
    started: dict[str, float] = {}   # one read per distinct base run (a group or two), not per suspect
    for key in {c.base.run_key for c in suspects if c.base is not None}:
        run_ = store.get_run(key)
        started[key] = run_.started_at.timestamp() if run_ is not None and run_.started_at is not None else 0.0

    def base_started(members: list[Comparison]) -> float:
        return max((started.get(c.base.run_key, 0.0) for c in members if c.base is not None), default=0.0)

    order = sorted(groups, key=lambda k: (k[0], -base_started(groups[k]), -max(_excess(c) for c in groups[k]),
                                          k[1]))
    n_bases = Counter(pool for pool, _ in groups)
    first_need: dict[tuple[str, str], float] = {}
    for key in order:
        # a group whose baseline is tonight's commit runs no A/B (below): no room is kept for it
        if n_bases[key[0]] > 1 and key[1] != ctx.sha:
            est, _ = budget_of(key[0], groups[key])
            first_need[key] = 2 * cfg.noise.ab_min_pairs * est.run_s
    spent: dict[str, float] = defaultdict(float)
    entries: dict[str, list[dict[str, Any]]] = defaultdict(list)
    updated: dict[tuple[str, str, str], Judgement] = {}
    whole: dict[str, tuple[float, str]] = {}   # each pool's budget tonight, before it is shared out
    for i, (pool, base_sha) in enumerate(order):
        members = groups[(pool, base_sha)]
        kept = sum(first_need.get(k, 0.0) for k in order[i + 1:] if k[0] == pool)
        budget, chosen = budget_of(pool, members, spent_s=spent[pool])
        if pool not in whole:   # nothing spent yet on this pool: its budget is whole
            whole[pool] = (budget.seconds, budget.basis)
        if kept and budget.seconds - kept >= first_need.get((pool, base_sha), 0.0):
            budget, chosen = budget_of(pool, members, spent_s=spent[pool], kept_s=kept)
        if not chosen:
            continue
        need = 2 * cfg.noise.ab_min_pairs * budget.run_s
        if base_sha == ctx.sha:
            # the suspects' baseline is tonight's commit itself (a night of the same commit, or the night after
            # a confirmed change): an A/B would run one commit against itself, an A/A test that can show no code
            # change; on the H200 such A/Bs took 180-254 s of a 300 s floor a night (hold-out 3, night 2)
            why = (f"its baseline is this commit itself ({base_sha[:7]}): an A/B would compare the commit with "
                   "itself and can show no code change")
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

        max_pairs = max(cfg.noise.ab_pairs, cfg.noise.ab_min_pairs)
        futile: list[int] = []   # pairs at which the A/B stopped because no remaining pair could decide

        def undecided(samples: dict[tuple[str, str], tuple[list[float], list[float]]],
                      chosen: list[Comparison] = chosen, futile: list[int] = futile,
                      max_pairs: int = max_pairs) -> bool:
            done = judged(samples, chosen)
            open_ = [c for c in chosen
                     if (c.verdict.awaiting_confirmation if (j := done.get((c.pool, c.case, c.metric))) is None
                         else j.verdict.awaiting_confirmation)]
            if not open_:
                return False
            # futility: stop when none of the open suspects could be decided by the pairs still allowed
            for c in open_:
                base_s, head_s = samples.get((c.case, c.metric), ([], []))
                if ab_can_still_decide(c.judgement, base_s, head_s, remaining_pairs=max_pairs - len(base_s),
                                       lower_is_better=c.lower_is_better, policy=policy):
                    return True
            futile.append(max((len(v[0]) for v in samples.values()), default=0))
            return False

        try:
            ab = confirm_pool(ctx, pool, chosen, progress=progress, budget=budget, decide_fn=undecided,
                              folder=base_sha[:12] if n_bases[pool] > 1 else "")
        except ZlopsError as exc:
            log.warning("A/B of pool %s failed, suspects stay suspects: %s", pool, exc)
            entries[pool].append({"base": base_sha[:12], "error": str(exc)[:300]})
            continue
        spent[pool] += ab.seconds
        unit = "s" if not budget.shards else "device-s"
        cost = (f"{ab.runs} runs, {ab.seconds:.0f} {unit} (estimated {budget.run_s * ab.runs:.0f}), "
                f"budget {budget.seconds:.0f} {unit}")
        if budget.shards:
            cost = f"{ab.runs} runs of {len(budget.shards)} gang shards, " + cost.split(", ", 1)[1]
        if ab.pairs is not None and ab.pairs.discarded:
            cost += f"; {len(ab.pairs.discarded)} busy pair(s) re-run"
        outcomes: dict[str, int] = defaultdict(int)
        decided = judged(ab.samples)
        for key, j in decided.items():
            updated[key] = replace(j, note=f"{j.note} [A/B on {pool}: {cost}]")
            outcomes[_outcome(j)] += 1
        left = [c for c in members if (c.pool, c.case, c.metric) not in decided]
        for c in left:   # beyond the budget, or no value in the A/B's runs: said beside it
            why = "not in tonight's A/B (budget)" if c not in chosen else "the A/B runs measured no value"
            updated[(c.pool, c.case, c.metric)] = replace(
                c.judgement, note=f"{c.judgement.note} [{why}]" if c.judgement.note else f"[{why}]")
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
    costs = {pool: pool_entry(items, whole[pool]) for pool, items in entries.items()}
    if costs:
        store.update_run_meta(ctx.run_key, {"ab": costs})
    if not updated:
        return summary
    rows = follow_sources([replace(c, judgement=updated.get((c.pool, c.case, c.metric), c.judgement))
                           for c in summary.comparisons])   # derived rows take their sources' new verdicts
    store.save_comparisons(ctx.run_key, rows)
    return CompareSummary(summary.run_key, summary.suite, summary.sha, tuple(rows))
