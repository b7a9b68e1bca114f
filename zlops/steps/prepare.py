"""The ``env`` task: the commit's worktree and venv, and tonight's plan of a partitioned or campaign suite.

:func:`env` is the task's one call. When the environment fails, every planned shard is recorded FAILED
with the reason before the error is raised, so the report still says why nothing was measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from zlops.errors import ZlopsError
from zlops.host import envs, gitops
from zlops.host.locks import host_lock
from zlops.model import ShardOutcome, ShardStatus
from zlops.progress import LogProgress, Progress
from zlops.run.partition import Plan
from zlops.steps.context import Prepared, RunContext

READY = ".zlops-ready.json"


def prepare(ctx: RunContext, *, progress: Progress | None = None, use_cache: bool = True) -> Prepared:
    """The commit's worktree and its venv; idempotent (a second call on this host reuses both).

    Concurrent calls for one run on one host (two device tasks on a fresh host) take turns.
    """
    with host_lock(ctx.lock_path("prepare")):
        return _prepare(ctx, progress=progress, use_cache=use_cache)


def _prepare(ctx: RunContext, *, progress: Progress | None, use_cache: bool) -> Prepared:
    progress = progress or LogProgress()
    suite = ctx.suite
    mirror = gitops.ensure_mirror(suite.repo, ctx.mirror_path)
    ready = ctx.worktree / ".venv" / READY
    if ready.exists():
        data = json.loads(ready.read_text())
        return Prepared(ctx.worktree, ctx.worktree / ".venv", data["key"], True, 0.0)
    with progress.step("worktree", suite=ctx.suite_name, commit=ctx.sha[:12]):
        if not gitops.has_commit(mirror, ctx.sha):
            gitops.fetch_branch(mirror, suite.branch)
            gitops.fetch_commit(mirror, ctx.sha)
        gitops.add_worktree(mirror, ctx.sha, ctx.worktree)
    with progress.step("env", suite=ctx.suite_name, commit=ctx.sha[:12]):
        req = envs.EnvRequest(
            install=tuple(tuple(a) for a in suite.install), dependency_globs=tuple(suite.dependency_files),
            system_site_packages=suite.system_site_packages, python=suite.python or envs.base_python(),
            extra_env=tuple(sorted(suite.env.items())))
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        res = envs.ensure_env(ctx.worktree, req, ctx.config.envs_dir, log_path=ctx.run_dir / "env.log",
                              cache_size=ctx.config.env_cache_size, use_cache=use_cache)
    ready.write_text(json.dumps({"key": res.key, "reused": res.reused, "seconds": res.seconds, "tool": res.tool}))
    return Prepared(ctx.worktree, res.venv, res.key, res.reused, res.seconds)


# --- tonight's plan (partitioned and campaign suites) ---------------------------------------------

def plan_partition(ctx: RunContext, prepared: Prepared | None = None) -> dict[str, Plan]:
    """Tonight's partition plan per pool (``{}`` unless the suite has a ``partition`` section):
    the stored one, else made now and stored (zlops.run.sharding); one process per host at a time."""
    if ctx.suite.partition is None:
        return {}
    from zlops.run.sharding import plan_run

    with host_lock(ctx.lock_path("plan")):
        return plan_run(ctx.store, ctx, worktree=prepared.worktree if prepared else None,
                        venv=prepared.venv if prepared else None)


def plan_campaign(ctx: RunContext, prepared: Prepared | None = None) -> dict[str, Any]:
    """Tonight's campaign plan per pool (``{}`` unless the suite has a ``campaign`` section): the
    stored one, else made now and stored (zlops.campaign.run); one process per host at a time."""
    if ctx.suite.campaign is None:
        return {}
    from zlops.campaign.run import plan_campaign as make

    with host_lock(ctx.lock_path("plan")):
        return make(ctx.store, ctx, worktree=prepared.worktree if prepared else None,
                    venv=prepared.venv if prepared else None)


@dataclass(frozen=True)
class EnvReady:
    """What the env task hands on (its XCom): the environment and the partition made for tonight."""

    prepared: Prepared
    plans: dict[str, Plan]

    def to_xcom(self) -> dict[str, Any]:
        p = self.prepared
        return {"worktree": str(p.worktree), "env_key": p.env_key, "reused": p.env_reused, "seconds": p.env_seconds,
                "partition": {pool: plan.summary() for pool, plan in self.plans.items()}}


def env(ctx: RunContext, *, progress: Progress | None = None) -> EnvReady:
    """Worktree + venv of the commit (reused from the env cache when the dependencies are unchanged), and
    a partitioned suite's plan (which device runs which cases, zlops.run.partition), made once, here, before
    the device tasks fan out to their hosts. On failure every planned shard is recorded FAILED first."""
    try:
        prepared = prepare(ctx, progress=progress)
        plans = plan_partition(ctx, prepared)
    except ZlopsError as exc:
        record_env_failure(ctx, str(exc))
        raise
    return EnvReady(prepared, plans)


def record_env_failure(ctx: RunContext, error: str) -> None:
    """Every planned shard FAILED with the environment's error (what the report shows)."""
    store = ctx.store
    now = datetime.now(timezone.utc)
    for pool, backend, device in ctx.planned_shards():
        store.record_shard(ctx.run_key, ShardOutcome(
            pool=pool, device=device, backend=backend, status=ShardStatus.FAILED,
            artifact_dir=ctx.shard_dir(pool, device), exit_code=None, started_at=now, ended_at=now,
            error=f"worktree/environment failed: {error}"))
