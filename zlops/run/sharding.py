"""Partitioned suites within a run: the case list, the weights from earlier nights, tonight's plan.

A suite with a ``partition`` section runs each case on ONE device of a pool instead of every case on
every device. The plan (:mod:`zlops.run.partition`) is made once per run, by the ``env`` task (or, from
the shell, by the first device of ``zlops nightly``), and kept in the run's meta as
``meta["partition"][pool]``, so every device task, on whatever host, runs exactly its share and a
retried task the same share. Making it is deterministic (sorted names, stored history), so two
hosts that both find no plan yet compute the same one.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from zlops.config.settings import SuiteConfig, check_case_names, command_placeholders
from zlops.errors import ConfigError, ProcessError, ZlopsError
from zlops.host import proc
from zlops.model import RunRecord, ShardStatus
from zlops.run.partition import Plan, make_plan, shard_case_seconds

if TYPE_CHECKING:
    from zlops.steps.context import RunContext
    from zlops.store import Store

log = logging.getLogger(__name__)

LIST_TIMEOUT_S = 300.0


def list_cases(suite: SuiteConfig, *, worktree: Path | None, venv: Path | None) -> list[str]:
    """The suite's case names: the configured list, or what ``list_command`` prints (one a line,
    blank lines and ``#`` comments ignored), run in the worktree with the suite's venv."""
    part = suite.partition
    if part is None:
        raise ConfigError("this suite has no partition section")
    if part.cases is not None:
        return list(part.cases)
    if worktree is None or part.list_command is None:
        raise ZlopsError("listing the cases needs the commit's worktree (run prepare first)")
    try:
        done = proc.run(part.list_command, cwd=worktree, env=proc.build_env(suite.env, venv=venv),
                        timeout=LIST_TIMEOUT_S, what="partition list_command")
    except ProcessError as exc:
        raise ZlopsError(f"partition.list_command failed: {exc}") from exc
    cases = [line.strip() for line in done.stdout.splitlines() if line.strip() and not line.startswith("#")]
    try:
        check_case_names(cases, comma_joined="cases" in command_placeholders(suite.command))
    except ValueError as exc:
        raise ZlopsError(f"partition.list_command {part.list_command} printed unusable case names: {exc}") from None
    return cases


def measured_per_round(store: Store, suite_name: str, pool: str, *, runs: int, default_rounds: int,
                       exclude_run_key: str | None = None) -> dict[str, float]:
    """Per-round seconds of each case on ``pool``: the median over the newest ``runs`` accepted
    nightlies that ran it there (:func:`zlops.run.partition.shard_case_seconds` per shard)."""
    per_case: dict[str, list[float]] = defaultdict(list)
    used = 0
    for run in store.list_runs(suite=suite_name, kind="nightly", limit=200):
        if used >= runs:
            break
        if not run.accepted or run.run_key == exclude_run_key:
            continue
        shards = [s for s in store.shards(run.run_key) if s.pool == pool and s.status is ShardStatus.OK]
        if not shards:
            continue
        used += 1
        extras = store.shard_extras(run.run_key)
        by_shard = defaultdict(list)
        for p, device, result in store.results(run.run_key):
            if p == pool:
                by_shard[device].append(result)
        for s in shards:
            identity = (extras.get((pool, s.device)) or {}).get("identity") or {}
            rounds = identity.get("rounds")
            rounds = rounds if isinstance(rounds, int) and rounds >= 1 else default_rounds
            for case, seconds in shard_case_seconds(by_shard.get(s.device, []), s.duration_s, rounds).items():
                per_case[case].append(seconds)
    return {case: statistics.median(values) for case, values in per_case.items()}


def stored_plans(run: RunRecord | None) -> dict[str, Plan]:
    raw = (run.meta.get("partition") if run is not None else None) or {}
    return {pool: Plan.from_dict(data) for pool, data in raw.items()}


def plan_run(store: Store, ctx: RunContext, *, worktree: Path | None, venv: Path | None) -> dict[str, Plan]:
    """Tonight's plan of every pool of a partitioned suite: the stored one, else a new LPT plan
    (weights from the pool's earlier nights, scaled to tonight's rounds), stored with the run."""
    run = store.get_run(ctx.run_key)
    if run is None:
        raise ZlopsError(f"unknown run {ctx.run_key!r}: run the fetch step first")
    plans = stored_plans(run)
    if plans or ctx.suite.partition is None:
        return plans
    cases = list_cases(ctx.suite, worktree=worktree, venv=venv)
    for pool in ctx.suite.pools:
        per_round = measured_per_round(store, ctx.suite_name, pool, runs=ctx.suite.partition.history_runs,
                                       default_rounds=ctx.suite.rounds, exclude_run_key=ctx.run_key)
        plans[pool] = make_plan(pool, cases, ctx.pool_devices(pool), per_round, ctx.suite.rounds)
        log.info("partition plan of %s: %s", ctx.run_key, plans[pool].summary())
    store.upsert_run(replace(run, meta={"partition": {p: plan.to_dict() for p, plan in plans.items()}}))
    return plans
