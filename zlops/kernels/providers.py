"""Kernel inventory providers: one per toolchain, found by name, each saying what it can tell.

A provider is used around one shard: :meth:`Provider.prepare` (before the benchmark starts) returns
the environment the benchmark needs (Triton: its own ``TRITON_CACHE_DIR``) and what it saw before;
:meth:`Provider.collect` (after it ended) returns the :class:`~zlops.kernels.inventory.Inventory`.
Only the Triton provider reads kernels today. ``cuobjdump`` (CUDA extensions), ``ascend`` and
``musa`` are declared so a suite may name its toolchain, and answer "no inventory" with the reason
instead of guessing from something that is not the compiled code.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from zlops.errors import ConfigError
from zlops.kernels import triton
from zlops.kernels.inventory import Inventory, capped, none

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


class Provider:
    """The base: a toolchain zlops cannot take an inventory of (the reason says why)."""

    name = "none"
    reason = "the suite declares no kernel toolchain (kernels: is not set)"

    def prepare(self, cache_dir: Path) -> Prepared:
        """Before the benchmark: ``cache_dir`` is the shard's own kernel cache folder (when the toolchain
        has one)."""
        return Prepared(provider=self.name, started_at=time.time())

    def collect(self, prepared: Prepared, *, max_kernels: int) -> Inventory:
        return none(self.name, self.reason)


class TritonProvider(Provider):
    """A cache folder of the shard's own (``<artifact_dir>/triton_cache``, or one shared by the repeated
    runs of one commit on one device): every kernel the benchmark compiles or loads lands there, and
    nothing another commit's process compiles does."""

    name = "triton"

    def prepare(self, cache_dir: Path) -> Prepared:
        cache = cache_dir
        cache.mkdir(parents=True, exist_ok=True)
        return Prepared(provider=self.name, env={"TRITON_CACHE_DIR": str(cache)}, cache_dir=cache,
                        before=triton.folder_names(cache), started_at=time.time())

    def collect(self, prepared: Prepared, *, max_kernels: int) -> Inventory:
        assert prepared.cache_dir is not None
        try:
            inv = triton.parse_cache(prepared.cache_dir, started_at=prepared.started_at, before=prepared.before)
        except OSError as exc:  # an unreadable cache: said, never a failed shard
            return Inventory(provider=self.name, state="error", reason=f"cannot read {prepared.cache_dir}: {exc}")
        return capped(inv, max_kernels)


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
