"""Confirm suspects before anyone is alerted: an interleaved A/B on the same device.

For the noise judge a change beyond its threshold is only a SUSPECT. Here each suspect pool gets a
same-device A/B: the baseline commit's worktree env (A) against tonight's (B), run in interleaved
pairs whose order is randomized (ABBA..., :func:`zlops.stats.interleaved_order`), at most
``noise.ab_budget`` suspects a night (largest excess over threshold first). Each run of the suite
command is one observation per case (its median), the two sides are judged with Mann-Whitney U and
a bootstrap CI of the median ratio (:func:`zlops.stats.confirm_ab`), and :func:`zlops.stats.decide`
turns the suspect into regression / severe (confirmed), unchanged (not reproduced), or leaves it a
suspect when the A/B cannot decide (then a second night can confirm it).
Anchors: Pinpoint ``run_test.py`` (A/B on the same bot, randomized order); asv ``--interleave-rounds``.
"""

from __future__ import annotations

import logging
import statistics
import zlib
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from zlops import pipeline
from zlops.errors import ParseError, ZlopsError
from zlops.formats import parse_results
from zlops.judge import confirm_suspect
from zlops.model import CompareSummary, Comparison, Judgement, ShardStatus, Verdict
from zlops.progress import LogProgress, Progress
from zlops.runner import ShardSpec, run_shard

log = logging.getLogger(__name__)


def _pick(suspects: list[Comparison], budget: int) -> list[Comparison]:
    def excess(c: Comparison) -> float:
        return (c.judgement.worse_pct or 0.0) - (c.judgement.threshold_pct or 0.0)

    return sorted(suspects, key=lambda c: (-excess(c), c.pool, c.case, c.metric))[:budget]


def _run_side(ctx: pipeline.RunContext, side_ctx: pipeline.RunContext, prepared: pipeline.Prepared, pool: str,
              device: int, out: Path, cases: tuple[str, ...] | None) -> dict[tuple[str, str], float]:
    """One run of the suite on one device; per (case, metric) the median of its samples.

    A partitioned suite (one that takes ``{cases}``) runs only the suspects' cases: an A/B must not
    cost the whole suite when one operator is in doubt.
    """
    spec = ShardSpec(run_key=f"{ctx.run_key}:ab", suite_name=ctx.suite_name, suite=ctx.suite, sha=side_ctx.sha,
                     pool=pool, backend=ctx.config.pools[pool].backend, device=device,
                     worktree=prepared.worktree, venv=prepared.venv, artifact_dir=out,
                     cases=cases if ctx.suite.partition is not None else None)
    outcome = run_shard(spec, locks_dir=ctx.config.locks_dir, device_wait_s=ctx.config.device_wait_s)
    if outcome.status is not ShardStatus.OK or outcome.results_file is None:
        raise ZlopsError(f"A/B run in {out} {outcome.status.value}: {outcome.error}")
    try:
        results = parse_results(ctx.suite.format, outcome.results_file, root=outcome.artifact_dir,
                                max_bytes=ctx.config.results_max_bytes(ctx.suite_name),
                                timeout_s=ctx.config.results_parse_timeout_s)
    except ParseError as exc:
        raise ZlopsError(f"A/B run in {out}: {exc}") from exc
    return {(r.case, r.metric): r.median for r in results}


def confirm_pool(ctx: pipeline.RunContext, pool: str, suspects: list[Comparison], *, pairs: int,
                 progress: Progress) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """Interleaved A/B of ``suspects`` (one pool, one baseline commit) on the pool's first device."""
    base_sha = suspects[0].base.sha if suspects[0].base else None
    if base_sha is None:
        raise ZlopsError("a suspect without a baseline cannot be confirmed by A/B")
    from zlops.stats import interleaved_order

    device = ctx.pool_devices(pool)[0]
    base_ctx = pipeline.RunContext(ctx.config, ctx.suite_name, f"{ctx.run_key}:ab-base", base_sha, ctx.auto_devices)
    samples: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    order = interleaved_order(pairs, seed=zlib.crc32(f"{ctx.run_key}/{pool}".encode()))
    try:
        with progress.step("ab", suite=ctx.suite_name, commit=f"{base_sha[:7]}..{ctx.sha[:7]}",
                           device=f"{pool}/{device}"):
            sides = {"A": (base_ctx, pipeline.prepare(base_ctx)), "B": (ctx, pipeline.prepare(ctx))}
            cases = tuple(sorted({c.case for c in suspects}))
            for i, side in enumerate(order):
                side_ctx, prepared = sides[side]
                medians = _run_side(ctx, side_ctx, prepared, pool, device,
                                    ctx.run_dir / "ab" / pool / f"{i:02d}{side}", cases)
                for c in suspects:
                    value = medians.get((c.case, c.metric))
                    if value is not None:
                        samples[(c.case, c.metric)][0 if side == "A" else 1].append(value)
    finally:
        pipeline.cleanup(base_ctx)
    return dict(samples)


def confirm(ctx: pipeline.RunContext, summary: CompareSummary, *, pools: list[str] | None = None,
            progress: Progress | None = None) -> CompareSummary:
    """Run the A/Bs of tonight's suspects (noise judge only) and store the updated verdicts."""

    progress = progress or LogProgress()
    cfg = ctx.config
    if cfg.judge != "noise" or cfg.noise.ab_pairs == 0:
        return summary
    suspects = [c for c in summary.comparisons if c.verdict is Verdict.SUSPECT and c.base is not None
                and (pools is None or c.pool in pools)]
    chosen = _pick(suspects, cfg.noise.ab_budget)
    if not chosen:
        return summary
    policy = cfg.noise.policy(cfg.thresholds_value())
    groups: dict[tuple[str, str], list[Comparison]] = defaultdict(list)
    for c in chosen:
        groups[(c.pool, c.base.sha if c.base else "")].append(c)
    updated: dict[tuple[str, str, str], Judgement] = {}
    for (pool, _), members in sorted(groups.items()):
        try:
            ab = confirm_pool(ctx, pool, members, pairs=cfg.noise.ab_pairs, progress=progress)
        except ZlopsError as exc:
            log.warning("A/B of pool %s failed, suspects stay suspects: %s", pool, exc)
            continue
        for c in members:
            base_s, head_s = ab.get((c.case, c.metric), ([], []))
            if len(base_s) < 2 or len(head_s) < 2:
                continue
            decided = confirm_suspect(c.judgement, base_s, head_s, lower_is_better=c.lower_is_better, policy=policy)
            note = (f"{decided.note} [A/B {len(base_s)}+{len(head_s)} runs on {pool}: "
                    f"base median {statistics.median(base_s):.6g}, head median {statistics.median(head_s):.6g}]")
            updated[(c.pool, c.case, c.metric)] = replace(decided, note=note)
    if not updated:
        return summary
    rows = [replace(c, judgement=updated.get((c.pool, c.case, c.metric), c.judgement)) for c in summary.comparisons]
    pipeline.open_store(cfg).save_comparisons(ctx.run_key, rows)
    return CompareSummary(summary.run_key, summary.suite, summary.sha, tuple(rows))
