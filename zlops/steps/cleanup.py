"""The ``cleanup`` tasks: remove the run's worktree on each host that prepared one, whatever happened."""

from __future__ import annotations

import logging

from zlops.config.settings import Config
from zlops.host import gitops
from zlops.steps.context import RunContext, context_for, open_store

log = logging.getLogger(__name__)


def cleanup_task(config: Config, suite_name: str, run_key: str) -> bool:
    """The Airflow task (trigger rule ALL_DONE): a run that was never recorded (its fetch failed) has
    nothing to clean; otherwise :func:`cleanup`. True when a worktree was looked for."""
    if open_store(config).get_run(run_key) is None:
        log.info("run %s was never recorded; nothing to clean", run_key)
        return False
    cleanup(context_for(config, suite_name, run_key))
    return True


def cleanup(ctx: RunContext) -> None:
    """Remove the run's worktree (and the venv inside it); the env template stays in the cache."""
    mirror_path = ctx.mirror_path
    if not (mirror_path / "HEAD").exists():
        return
    gitops.remove_worktree(gitops.mirror_of(ctx.suite.repo, mirror_path), ctx.worktree)
