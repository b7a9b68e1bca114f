"""Where a benchmark process's Triton kernel cache is seeded from (zlops.kernels.seed): a nightly shard's
(:func:`kernel_seed_plan`) and one run of an interleaved same-device comparison's (:func:`side_seed_plan`).

Part of a commit's workspace (the layer of ``steps/prepare.py`` and ``steps/cleanup.py``), so the A/B, the
paired nights and the device task share one rule without the judge importing the steps above it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zlops.steps.context import RunContext

if TYPE_CHECKING:
    from zlops.kernels.seed import SeedPlan


def kernel_seed_plan(ctx: RunContext, pool: str, device: int) -> SeedPlan | None:
    """Where the nightly shard's own Triton cache is seeded from (zlops.kernels.seed): the shard caches of
    the newest earlier accepted night of the suite on this pool, one store read. Every device of the pool,
    this device's first: a cache key covers the target (arch, ptxas), not the device, so another device's
    kernel of the same arch is the same compile, and a partitioned suite's cases move between devices;
    a kernel of another arch just misses. None: the suite records no Triton kernels."""
    from zlops.kernels.providers import TRITON_CACHE_NAME
    from zlops.kernels.seed import SeedPlan

    setting = ctx.suite.kernels
    if setting is None or setting.provider != "triton":
        return None
    if not setting.seed:
        return SeedPlan(reason="kernels.seed is off")
    found = ctx.store.kernel_seed_shards(ctx.suite_name, pool, run_key=ctx.run_key)
    if found is None:
        return SeedPlan(reason=f"no earlier accepted night of {ctx.suite_name} recorded kernels on pool {pool}")
    run_key, shards = found
    ordered = sorted(shards, key=lambda s: (s[0] != device, s[0]))
    return SeedPlan(run_key=run_key, caches=tuple(Path(d) / TRITON_CACHE_NAME for _, d in ordered),
                    max_bytes=setting.seed_max_mib << 20, max_folders=setting.seed_max_folders)


def side_seed_plan(ctx: RunContext, pool: str, device: int, *, tonight: bool = True) -> SeedPlan | None:
    """Where one run of an interleaved same-device comparison (an A/B or bisection run, a paired night's
    run) seeds its side's kernel cache from: tonight's shard caches of ``pool`` (``tonight``; this device's
    first), then those of the earlier night that seeded tonight's (:func:`kernel_seed_plan`).

    Both sides take the same folders: Triton's cache key covers the kernel's source, constexprs, options and
    target, so a folder under a key is the same compile whichever commit's process wrote it; a kernel the head
    changed misses for the base and is found in the earlier night's caches, or compiled. Without a seed the
    first run of each side compiled (and autotuned) every kernel: on the H200, FlagGems min, argmin and
    div_tensor's first A/B pair took 50.2 and 55.2 s against 23.1-29.1 s for the six runs after it (the
    cost model, learned from seeded nightly shards, said 25.1 s). None: the suite records no Triton kernels."""
    from zlops.kernels.providers import TRITON_CACHE_NAME
    from zlops.kernels.seed import SeedPlan

    earlier = kernel_seed_plan(ctx, pool, device)
    if earlier is None or (not earlier.caches and not ctx.suite.kernels.seed):
        return earlier
    devices = sorted((d for p, _, d in ctx.planned_shards() if p == pool), key=lambda d: (d != device, d))
    own = [ctx.shard_dir(pool, d) / TRITON_CACHE_NAME for d in devices] if tonight else []
    own = [c for c in own if c.is_dir()]
    caches = tuple(own) + tuple(c for c in earlier.caches if c not in own)
    if not caches:
        return earlier
    return SeedPlan(run_key=ctx.run_key if own else earlier.run_key, caches=caches,
                    max_bytes=earlier.max_bytes, max_folders=earlier.max_folders)
