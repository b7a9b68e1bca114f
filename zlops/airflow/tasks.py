"""The nightly's reusable Airflow tasks; each body is one call into a module of :mod:`zlops.steps`.

Tasks do not pass paths to each other: every task derives the run key from its DAG run id and the
suite, and the commit from the store, so a task retried on another worker (or host) rebuilds
what it needs. Heavy modules are imported inside the task bodies to keep DAG parsing fast.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import TriggerRule, get_current_context, task

from zlops.airflow import device_pool_name, device_task_id
from zlops.config.settings import Config

log = logging.getLogger(__name__)


def _config() -> Config:
    from zlops.config.settings import config_from_env

    return config_from_env()


def _run_key(suite: str) -> str:
    from zlops.steps.context import make_run_key

    return make_run_key("nightly", suite, get_current_context()["dag_run"].run_id)


def _ctx(suite: str) -> Any:
    from zlops.steps.context import context_for

    return context_for(_config(), suite, _run_key(suite))


@task(retries=2, retry_delay=timedelta(minutes=2))
def fetch(suite: str) -> dict[str, Any]:
    """Mirror, fetch the branch, resolve the commit (the ``sha`` param pins one), record the run
    (the ``promote`` param, a boolean, lets the promote step accept an older or caliber-break run).

    Clearing a completed, accepted DAG run fails here (its results stand); ``zlops nightly --run-id
    <run id> --replace`` re-measures it on purpose."""
    from zlops.airflow.links import airflow_meta
    from zlops.steps.fetch import fetch_for_trigger

    context = get_current_context()
    dag_run = context["dag_run"]  # the zlops pages link back to it
    return fetch_for_trigger(_config(), suite, run_key=_run_key(suite), params=context["params"],
                             links=airflow_meta(dag_run.dag_id, dag_run.run_id)).to_xcom()


@task(retries=1, retry_delay=timedelta(minutes=1))
def prepare(suite: str) -> dict[str, Any]:
    """Worktree + venv of the commit (reused from the env cache when the dependencies are unchanged).

    When it fails, every planned shard is recorded FAILED with the reason before the task fails, so
    the report still says why nothing was measured. A partitioned suite's plan (which device runs
    which cases, zlops.run.partition) is made here, once, before the device tasks fan out to their hosts.
    """
    from zlops.steps.prepare import env

    return env(_ctx(suite)).to_xcom()


@task(retries=0)
def run_device(suite: str, pool: str, device: int) -> dict[str, Any]:
    """One benchmark process on one device (the task's Airflow pool has one slot per device)."""
    from zlops.steps.run_device import device_task

    return device_task(_ctx(suite), pool, device).to_xcom()


@task(trigger_rule=TriggerRule.ALL_DONE)
def ingest(suite: str) -> dict[str, int]:
    """Every planned shard has a stored record (crashed device tasks are recorded FAILED)."""
    from zlops.steps.ingest import ingest as do_ingest

    return do_ingest(_ctx(suite))


@task
def compare(suite: str) -> dict[str, Any]:
    from zlops.steps.compare import compare_task

    return compare_task(_ctx(suite))


@task
def confirm(suite: str, pool: str) -> dict[str, Any]:
    """Same-device A/B of the pool's suspects (noise judge); runs in the pool's first device's pool."""
    from zlops.steps.confirm import confirm_pool

    return confirm_pool(_ctx(suite), pool).to_xcom()


def _slack_client(config: Config) -> Any:
    """The Slack provider's hook client on the configured connection, else a bot token from the env."""
    if config.slack is None:
        return None
    from zlops.slack.outbox import client_from_env, with_retries

    try:
        from airflow.providers.slack.hooks.slack import SlackHook
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:
        return client_from_env(config.slack.token_env, base_url=config.slack.base_url)
    try:
        return with_retries(SlackHook(slack_conn_id=config.slack.conn_id).client)
    except AirflowNotFoundException:
        log.info("no Airflow connection %r; trying $%s", config.slack.conn_id, config.slack.token_env)
        return client_from_env(config.slack.token_env, base_url=config.slack.base_url)


@task
def report(suite: str) -> dict[str, Any]:
    from zlops.steps.report import report as do_report

    ctx = _ctx(suite)
    return do_report(ctx, slack_client=_slack_client(ctx.config)).to_xcom()


@task(retries=0)
def flush_outbox() -> dict[str, Any]:
    """Send what the Slack outbox holds (what an outage left, replies, summaries): the zlops_outbox DAG.

    Never fails for Slack: what is not taken now stays in the outbox for the next run of the DAG.
    """
    from zlops.slack.outbox import flush_outbox as do_flush
    from zlops.steps.context import open_store

    config = _config()
    report = do_flush(open_store(config), _slack_client(config))
    log.info("%s", report.line())
    out: dict[str, Any] = {"sent": len(report.sent), "failed": len(report.failed), "waiting": len(report.waiting),
                           "abandoned": len(report.abandoned), "stopped": report.stopped}
    if any(s.forge is not None for s in config.suites.values()):  # checks on pull requests wait here too
        from zlops.airflow.forge import connection_secrets
        from zlops.forge.lifecycle import flush as flush_checks

        checks = flush_checks(open_store(config), config, connection_secrets)
        log.info("forge %s", checks.line())
        out["checks"] = {"sent": len(checks.sent), "failed": len(checks.failed), "waiting": len(checks.waiting),
                         "abandoned": len(checks.abandoned), "stopped": checks.stopped}
    return out


@task(retries=1, retry_delay=timedelta(minutes=5))
def post_digest(days: int = 7) -> dict[str, Any]:
    """The weekly trust ledger (zlops.triage.trust) of the ``days`` before the run's schedule point, queued in the
    outbox and flushed: the zlops_digest DAG. Queuing one window again returns the same message."""
    from airflow.configuration import conf

    from zlops.steps.context import open_store
    from zlops.triage.trust import ledger_lines
    from zlops.triage.trust import post_digest as do_post

    config = _config()
    if config.slack is None:
        log.info("the config has no slack section: no digest to post")
        return {"posted": False}
    context = get_current_context()
    until = context.get("logical_date") or context["dag_run"].run_after
    base = conf.get("api", "base_url", fallback=None)
    done = do_post(open_store(config), channel=config.slack.channel, client=_slack_client(config), days=days,
                   until=until, page_url=f"{base.rstrip('/')}/zlops/trust" if base else None)
    log.info("digest %s: %s", "sent" if done.sent else "queued", " | ".join(ledger_lines(done.ledger)))
    return {"notification": done.notification_id, "run_key": done.run_key, "sent": done.sent}


@task
def promote(suite: str) -> dict[str, Any]:
    """Accept the run as a baseline only when it moves the baseline forward on the branch line
    (zlops.judge.promotion); the decision's reason is kept in the run's meta and returned."""
    from zlops.steps.promote import promote_task

    return promote_task(_ctx(suite)).to_xcom()


@task(trigger_rule=TriggerRule.ALL_DONE)
def cleanup(suite: str) -> None:
    """Remove the worktree; runs whatever happened upstream (one per host: each host prepared its own)."""
    from zlops.steps.cleanup import cleanup_task

    cleanup_task(_config(), suite, _run_key(suite))


@task(trigger_rule=TriggerRule.ONE_FAILED, retries=0)
def watcher() -> None:
    """Fails the DAG run when any task failed, although cleanup (the other leaf) succeeded."""
    raise RuntimeError("a task of this run failed; see the failed task's log")


def nightly_pipeline(config: Config, suite: str, *, device_pools: bool = True) -> Sequence[Any]:
    """Wire fetch -> env -> run per device -> ingest -> compare -> report -> promote -> cleanup
    (and report -> request_bisect, which asks the zlops_bisect DAG to bisect confirmed regressions).

    Each device task gets its device's Airflow pool (one slot) and, when the pool names a host,
    that host's Celery queue (``Config.queue_of``); the other steps run on the default queue. Every
    host that ran device tasks prepared its own worktree, so each also gets a ``cleanup_<queue>``.
    Call inside a DAG context; returns every task.
    """
    f = fetch.override(task_id="fetch")(suite)
    env = prepare.override(task_id="env")(suite)
    devices = []
    for pool_name in config.suite(suite).pools:
        pool = config.pools[pool_name]
        if pool.explicit_devices is None:
            raise ValueError(f"pool {pool_name} uses devices: auto, which the CLI resolves per run; a DAG needs "
                             "the pool's devices listed (one Airflow pool with one slot per device)")
        for device in pool.explicit_devices:
            extra: dict[str, Any] = {"task_id": device_task_id(pool_name, device)}
            if device_pools:
                extra["pool"] = device_pool_name(pool_name, device)
            if queue := config.queue_of(pool_name):
                extra["queue"] = queue
            devices.append(run_device.override(**extra)(suite, pool_name, device))
    i = ingest.override(task_id="ingest")(suite)
    c = compare.override(task_id="compare")(suite)
    confirms = []
    for pool_name in config.suite(suite).pools:  # one after another: each rewrites the run's comparisons
        pool = config.pools[pool_name]
        extra = {"task_id": f"confirm_{pool_name}"}
        if device_pools:
            extra["pool"] = device_pool_name(pool_name, (pool.explicit_devices or [0])[0])
        if queue := config.queue_of(pool_name):
            extra["queue"] = queue
        confirms.append(confirm.override(**extra)(suite, pool_name))
    r = report.override(task_id="report")(suite)
    from zlops.airflow.bisect_tasks import request_bisect

    rb = request_bisect.override(task_id="request_bisect")(suite)
    p = promote.override(task_id="promote_baseline")(suite)
    host_queues = sorted({q for q in (config.queue_of(n) for n in config.suite(suite).pools) if q})
    cleanups = [cleanup.override(task_id="cleanup")(suite),
                *(cleanup.override(task_id=f"cleanup_{q}", queue=q)(suite) for q in host_queues)]
    w = watcher.override(task_id="watcher")()
    f >> env >> devices >> i >> c
    chain_from = c
    for step in confirms:
        chain_from >> step
        chain_from = step
    chain_from >> r >> p >> cleanups
    r >> rb  # the report's confirmed regressions -> the zlops_bisect DAG (an asset event)
    tasks = [f, env, *devices, i, c, *confirms, r, rb, p, *cleanups]
    tasks >> w  # type: ignore[operator]
    return [*tasks, w]
