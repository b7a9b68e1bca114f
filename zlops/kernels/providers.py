"""Kernel inventory providers: one per toolchain, found by name, each saying what it can tell.

A provider is used around one shard: :meth:`Provider.prepare` (before the benchmark starts) returns
the environment the benchmark needs (Triton: its own ``TRITON_CACHE_DIR``, seeded from an earlier night's
when a :class:`~zlops.kernels.seed.SeedPlan` says where from) and what it saw before;
:meth:`Provider.collect` (after it ended) returns the :class:`~zlops.kernels.inventory.Inventory`, and
:meth:`Provider.release` removes what prepare staged.
Only the Triton provider reads kernels today. ``cuobjdump`` (CUDA extensions), ``ascend`` and
``musa`` are declared so a suite may name its toolchain, and answer "no inventory" with the reason
instead of guessing from something that is not the compiled code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from zlops.errors import ConfigError
from zlops.kernels import seed as seeding
from zlops.kernels import triton
from zlops.kernels.inventory import Inventory, SeedInfo, capped, none

log = logging.getLogger(__name__)

#: the folder of a shard's own Triton cache, inside its artifact folder
TRITON_CACHE_NAME = "triton_cache"


@dataclass(frozen=True)
class Prepared:
    """What a provider set up for one shard: the environment to add, and its state before the run."""

    provider: str
    env: dict[str, str] = field(default_factory=dict)
    cache_dir: Path | None = None
    before: frozenset[str] = frozenset()
    started_at: float = 0.0
    #: what was staged for the process to take (None: no seed was looked for), and where
    seed: SeedInfo | None = None
    seed_dir: Path | None = None


class Provider:
    """The base: a toolchain zlops cannot take an inventory of (the reason says why)."""

    name = "none"
    reason = "the suite declares no kernel toolchain (kernels: is not set)"

    def prepare(self, cache_dir: Path, *, seed: seeding.SeedPlan | None = None,
                suite_env: Mapping[str, str] | None = None) -> Prepared:
        """Before the benchmark: ``cache_dir`` is the shard's own kernel cache folder (when the toolchain
        has one), ``seed`` where to seed it from (None: not seeded), ``suite_env`` the suite's own env."""
        return Prepared(provider=self.name, started_at=time.time())

    def collect(self, prepared: Prepared, *, max_kernels: int) -> Inventory:
        return none(self.name, self.reason)

    def release(self, prepared: Prepared) -> None:
        """After the shard (collected or not): remove what :meth:`prepare` staged."""
        if prepared.seed_dir is not None:
            seeding.discard(prepared.seed_dir)


class TritonProvider(Provider):
    """A cache folder of the shard's own (``<artifact_dir>/triton_cache``, or one shared by the repeated
    runs of one commit on one device): every kernel the benchmark compiles or loads lands there, and
    nothing another commit's process compiles does. With a seed, the earlier night's complete kernel
    folders are staged beside it (``<cache>/../triton_seed``) and the process gets zlops' cache manager,
    which takes a kernel from there on a miss (zlops.kernels.seed)."""

    name = "triton"

    def prepare(self, cache_dir: Path, *, seed: seeding.SeedPlan | None = None,
                suite_env: Mapping[str, str] | None = None) -> Prepared:
        cache = cache_dir
        cache.mkdir(parents=True, exist_ok=True)
        env = {"TRITON_CACHE_DIR": str(cache)}
        info, staging = None, None
        if seed is not None:
            staging = cache.parent / seeding.SEED_DIR_NAME
            if "TRITON_CACHE_MANAGER" in (suite_env or {}):
                seeding.discard(staging)
                info = SeedInfo(run_key=seed.run_key, reason="the suite's env sets its own TRITON_CACHE_MANAGER")
            else:
                info = seeding.stage(seed, staging)
                if info.offered or info.launchers:
                    env.update(seeding.process_env(staging, suite_env or {}))
        return Prepared(provider=self.name, env=env, cache_dir=cache, before=triton.folder_names(cache),
                        started_at=time.time(), seed=info, seed_dir=staging)

    def collect(self, prepared: Prepared, *, max_kernels: int) -> Inventory:
        assert prepared.cache_dir is not None
        try:
            inv = triton.parse_cache(prepared.cache_dir, started_at=prepared.started_at, before=prepared.before)
        except OSError as exc:  # an unreadable cache: said, never a failed shard
            return Inventory(provider=self.name, state="error", reason=f"cannot read {prepared.cache_dir}: {exc}",
                             seed=prepared.seed)
        return capped(replace(inv, seed=prepared.seed), max_kernels)


class _Declared(Provider):
    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason


_PROVIDERS: dict[str, Provider] = {
    "triton": TritonProvider(),
    "cuobjdump": _Declared("cuobjdump", "the cuobjdump provider (CUDA extensions) is not implemented yet; "
                                        "zlops does not guess kernels from the extension's files"),
    "ascend": _Declared("ascend", "the Ascend kernel-package provider is not implemented yet"),
    "musa": _Declared("musa", "the MUSA kernel provider is not implemented yet"),
    "none": Provider(),
}
PROVIDER_NAMES = tuple(sorted(_PROVIDERS))


def get_provider(name: str) -> Provider:
    """The provider called ``name``; ConfigError naming the known ones otherwise."""
    try:
        return _PROVIDERS[name]
    except KeyError:
        raise ConfigError(f"unknown kernel provider {name!r}; known: {', '.join(PROVIDER_NAMES)}") from None
