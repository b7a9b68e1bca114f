"""The ``ingest`` task: the run is complete before it is compared, every planned shard has a stored record."""

from __future__ import annotations

from zlops.model import ShardOutcome, ShardStatus
from zlops.run.runner import outcome_from_manifest, read_manifest
from zlops.steps.context import RunContext
from zlops.steps.run_device import ingest_shard


def ingest(ctx: RunContext) -> dict[str, int]:
    """Make the run complete before comparing: every planned shard has a stored record.

    A shard whose task died before storing is ingested from its manifest when its artifacts are on
    this host, otherwise recorded FAILED with the reason, so it shows in the report.
    """
    store = ctx.store
    stored = {(o.pool, o.device) for o in store.shards(ctx.run_key)}
    for pool, backend, device in ctx.planned_shards():
        if (pool, device) in stored:
            continue
        art = ctx.shard_dir(pool, device)
        manifest = read_manifest(art)
        if manifest is not None:
            ingest_shard(ctx, outcome_from_manifest(manifest, art))
        else:
            store.record_shard(ctx.run_key, ShardOutcome(
                pool=pool, device=device, backend=backend, status=ShardStatus.FAILED, artifact_dir=art,
                exit_code=None, started_at=None, ended_at=None,
                error="the device task never reported (crashed or killed before writing its manifest)"))
    if ctx.suite.campaign is not None:  # efficiency and stack ratios need every lane's results
        from zlops.campaign.run import store_derived

        store_derived(ctx, store)
    if ctx.suite.canary is not None:   # the recall canary beside its source (zlops.judge.canary), before compare
        from zlops.steps.canary import plant

        plant(ctx, store)
    counts: dict[str, int] = {}
    for o in store.shards(ctx.run_key):
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
    return counts
