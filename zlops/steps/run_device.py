"""The device tasks (``run_<pool>_<device>``): one benchmark process on one device, then its ingest.

A shard's results are stored as soon as it finishes, so they are safe whatever happens to the other
devices; a shard an earlier attempt of the run measured is ingested from its artifacts, not measured
again. :func:`run_all_devices` is the CLI's fan-out (one thread per device, the device lock guards).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.errors import ZlopsError
from zlops.host import proc, telemetry
from zlops.model import ShardOutcome, ShardStatus
from zlops.progress import LogProgress, Progress
from zlops.run.runner import ShardSpec, outcome_from_manifest, read_manifest, run_shard
from zlops.steps.context import RunContext
from zlops.steps.prepare import plan_campaign, plan_partition, prepare
from zlops.steps.seeding import kernel_seed_plan

log = logging.getLogger(__name__)


class ShardNotOk(RuntimeError):
    """A device task's shard did not end OK (its record, with the reason, is stored): the task fails."""


@dataclass(frozen=True)
class DeviceDone:
    """What a device task hands on (its XCom)."""

    outcome: ShardOutcome

    def to_xcom(self) -> dict[str, Any]:
        o = self.outcome
        return {"pool": o.pool, "device": o.device, "status": o.status.value, "artifacts": str(o.artifact_dir),
                "seconds": o.duration_s}


def device_task(ctx: RunContext, pool: str, device: int) -> DeviceDone:
    """The Airflow device task: :func:`run_device`, failing the task (the shard is stored first) unless OK."""
    outcome = run_device(ctx, pool, device)
    if outcome.status is not ShardStatus.OK:
        raise ShardNotOk(f"shard {pool}/{device} {outcome.status.value}: {outcome.error}")
    return DeviceDone(outcome)


def ingest_shard(ctx: RunContext, outcome: ShardOutcome) -> ShardOutcome:
    """Read a finished shard (:func:`zlops.run.ingest.read_shard`: parse, FAILED on a malformed file, INVALID
    beside contention) and store shard + results in one transaction; nothing half-parsed reaches the store.
    """
    from zlops.run.ingest import read_shard

    manifest = read_manifest(outcome.artifact_dir) or {}
    summary = {**telemetry.summarize_dir(outcome.artifact_dir), "backend": outcome.backend}
    # a campaign lane's gang shards were each judged on their own telemetry (zlops.campaign.run.lane_shard):
    # its merged telemetry is kept, never a reason to drop every shard of the lane
    lane = bool(manifest.get("campaign_lane"))
    read = read_shard(ctx.config, ctx.suite_name, outcome, telemetry=None if lane else summary)
    # an invalid shard's results are kept as evidence; compare never judges them
    ctx.store.record_shard(ctx.run_key, read.outcome, read.results, telemetry=summary,
                                        identity=manifest.get("identity"))
    _ingest_kernels(ctx, read.outcome)
    return read.outcome


def _ingest_kernels(ctx: RunContext, outcome: ShardOutcome) -> None:
    """The shard's ``kernels.json`` (zlops.kernels) into the store; a malformed one is stored as an
    ``error`` inventory saying so, never a failed shard."""
    from zlops.kernels.inventory import Inventory, InventoryError, read_inventory

    try:
        inv = read_inventory(outcome.artifact_dir)
    except InventoryError as exc:
        log.warning("shard %s/%s: %s", outcome.pool, outcome.device, exc)
        inv = Inventory(provider=ctx.suite.kernels.provider if ctx.suite.kernels else "none", state="error",
                        reason=str(exc))
    if inv is not None:
        ctx.store.record_kernels(ctx.run_key, outcome.pool, outcome.device, inv)


def measured_shard(ctx: RunContext, pool: str, device: int) -> ShardOutcome | None:
    """The shard as an earlier attempt of this run measured it, when its artifacts say it finished OK
    (manifest of this run key and commit, status ok, results file present), else None.

    A re-run (an Airflow retry, ``zlops nightly --run-id`` after a database outage) ingests these
    instead of measuring again, so results already measured are never lost nor silently replaced;
    after ``--replace`` only shards measured since the replace count.
    """
    art = ctx.shard_dir(pool, device)
    manifest = read_manifest(art)
    if not manifest or manifest.get("run_key") != ctx.run_key or manifest.get("commit") != ctx.sha:
        return None
    if manifest.get("status") != ShardStatus.OK.value:
        return None  # a failed, skipped or unfinished shard is measured again
    try:
        outcome = outcome_from_manifest(manifest, art)
    except (KeyError, ValueError, TypeError):
        return None
    if outcome.results_file is None or not outcome.results_file.is_file():
        return None
    run = ctx.store.get_run(ctx.run_key)
    replaced_at = run.meta.get("replaced_at") if run is not None else None
    if replaced_at and (outcome.ended_at is None or outcome.ended_at < datetime.fromisoformat(replaced_at)):
        return None
    return outcome


def run_device(ctx: RunContext, pool: str, device: int, *, progress: Progress | None = None) -> ShardOutcome:
    """Run the suite on one device of one pool, then ingest it (its results are safe even if
    another device crashes later). A shard this run already measured is ingested from its artifacts."""
    progress = progress or LogProgress()
    pool_cfg = ctx.config.pools[pool]
    if device not in ctx.pool_devices(pool):
        raise ZlopsError(f"device {device} is not in pool {pool} (devices: {ctx.pool_devices(pool)})")
    done = measured_shard(ctx, pool, device)
    if done is not None:
        progress.note(f"shard {pool}/{device}: measured by an earlier attempt of this run; ingesting its artifacts")
        return ingest_shard(ctx, done)
    prepared = prepare(ctx, progress=progress)
    if ctx.suite.campaign is not None:  # this device's lane of gang shards (zlops.campaign.run)
        from zlops.campaign.run import run_lane

        plan = plan_campaign(ctx, prepared).get(pool)
        if plan is None:
            raise ZlopsError(f"campaign of {ctx.run_key} has no plan for pool {pool}")
        outcome = ingest_shard(ctx, run_lane(ctx, pool, device, prepared, plan, progress=progress))
        if outcome.status is not ShardStatus.OK:
            progress.note(f"campaign lane {pool}/{device} {outcome.status.value}: {outcome.error}")
        return outcome
    cases = None
    if ctx.suite.partition is not None:  # this device's share of the cases (zlops.run.sharding)
        plan = plan_partition(ctx, prepared).get(pool)
        cases = plan.cases_of(device) if plan is not None else None
        if cases is not None and not cases:
            progress.note(f"shard {pool}/{device}: the partition left no case for this device")
            outcome = ShardOutcome(pool=pool, device=device, backend=pool_cfg.backend, status=ShardStatus.OK,
                                   artifact_dir=ctx.shard_dir(pool, device), exit_code=None, started_at=None,
                                   ended_at=None)
            ctx.store.record_shard(ctx.run_key, outcome)
            return outcome
    if cases is None and ctx.config.measures_paired(pool):  # base and head interleaved (zlops.judge.paired)
        from zlops.judge.paired import run_paired_device

        paired = run_paired_device(ctx, pool, device, prepared, progress=progress)
        if paired is not None:
            if paired.status is not ShardStatus.OK:
                progress.note(f"shard {pool}/{device} {paired.status.value}: {paired.error}")
            return paired
        from zlops.judge.paired import relaxed_config

        ctx = dataclasses.replace(ctx, config=relaxed_config(ctx.config, pool))   # the pool's first night
    from zlops.host.contention import quiet_before_run  # let a busy host quiet down first (bounded)

    quiet_before_run(ctx.config.host_limits(pool), locks_dir=ctx.config.locks_dir, note=progress.note,
                     where=f"shard {pool}/{device}")
    spec = ShardSpec(run_key=ctx.run_key, suite_name=ctx.suite_name, suite=ctx.suite, sha=ctx.sha, pool=pool,
                     backend=pool_cfg.backend, device=device, worktree=prepared.worktree, venv=prepared.venv,
                     artifact_dir=ctx.shard_dir(pool, device), cases=cases,
                     kernel_seed=kernel_seed_plan(ctx, pool, device))
    with progress.step("run", suite=ctx.suite_name, commit=ctx.sha[:12], device=f"{pool}/{device}"):
        outcome = run_shard(spec, locks_dir=ctx.config.locks_dir, device_wait_s=ctx.config.device_wait_s,
                            require_idle=pool_cfg.idle_required)
        free_full_disk(ctx, f"{pool}/{device}", progress)
        outcome = ingest_shard(ctx, outcome)
    if outcome.status is not ShardStatus.OK:
        progress.note(f"shard {pool}/{device} {outcome.status.value}: {outcome.error}")
    return outcome


def free_full_disk(ctx: RunContext, shard: str, progress: Progress) -> bool:
    """When the disk holding the run's worktree is full as a shard ends (a benchmark filled it), remove
    the worktree (and the venv inside it) now, not at the end of the night: the shard's results, the
    store (often on the same disk) and the report need that space. A later step that needs the
    worktree (an A/B) prepares it again. True when it was removed."""
    from zlops.run.runner import disk_full
    from zlops.steps.cleanup import cleanup

    if not ctx.worktree.exists() or not disk_full(ctx.worktree):
        return False
    try:
        cleanup(ctx)
    except (OSError, ZlopsError) as exc:
        log.error("the disk under %s is full and the worktree could not be removed: %s", ctx.worktree, exc)
        return False
    progress.note(f"shard {shard}: the disk under {ctx.worktree} was full when the shard ended; removed the "
                  "worktree to free it")
    return True


def run_all_devices(ctx: RunContext, *, progress: Progress | None = None) -> list[ShardOutcome]:
    """Every planned shard, devices in parallel (one process per device; the device lock guards)."""
    shards = ctx.planned_shards()
    interrupted_here = False
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(shards))) as pool:
            futures = [pool.submit(run_device, ctx, p, d, progress=progress) for p, _, d in shards]
            outcomes = []
            try:
                for fut in futures:
                    # a bounded wait: a signal the kernel delivers to a worker or the sampler thread sets
                    # Python's flag but does not wake a main thread blocked on a lock; waking every second
                    # runs the handler (a SIGINT in CI found zlops still waiting 30 s later, 2026-12-04)
                    while not fut.done():
                        concurrent.futures.wait([fut], timeout=1.0)
                    try:
                        outcomes.append(fut.result())
                    except (ZlopsError, OSError) as exc:  # env/worktree failure: ingest() records the shard failed
                        log.error("device task failed: %s", exc)
            except BaseException as exc:
                # an interrupt lands in this (main) thread while the benchmarks run in the workers: end
                # their process groups now, or leaving this block would wait for every benchmark
                reason = "SIGINT" if isinstance(exc, KeyboardInterrupt) else getattr(exc, "signame",
                                                                                     type(exc).__name__)
                interrupted_here = proc.interrupt_all(reason) >= 0
                raise
            return outcomes
    finally:
        if interrupted_here:  # the workers are done (they recorded their shards): programs may run again
            proc.clear_interrupt()
