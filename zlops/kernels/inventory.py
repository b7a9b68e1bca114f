"""A shard's kernel inventory: the compiled kernels one benchmark process used, as plain values.

Written by a provider (:mod:`zlops.kernels.providers`) into the shard's bundle as ``kernels.json``
(``schema_version`` 2; version 1, before the seeded cache, is read as a version 2 without a seed), stored
with the run (``kernel_inventories`` / ``kernels``, migration 0010),
and compared per alert by :mod:`zlops.kernels.attribution`. An inventory is either ``ok`` (the
kernels found, possibly none), ``none`` (the suite's toolchain has no provider that can tell: the
reason says so) or ``error`` (the provider could not read what it should have: the reason names it).
A provider never guesses: "no inventory" is an answer, not a gap to fill.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zlops.errors import ZlopsError

INVENTORY_FILE = "kernels.json"
SCHEMA_VERSION = 2
#: the versions :meth:`Inventory.from_dict` reads (older ones through :func:`upgrade`)
READ_VERSIONS = (1, 2)
#: kernels kept per shard unless the suite says otherwise (``kernels.max_per_shard``)
DEFAULT_MAX_KERNELS = 2000
STATES = ("ok", "none", "error")


class InventoryError(ZlopsError):
    """A kernels.json that cannot be read back (wrong version, bad shape)."""


@dataclass(frozen=True)
class KernelRecord:
    """One compiled kernel of a shard.

    ``cache_key`` is the provider's own key of the compiled artifact (Triton: the cache folder name),
    ``code_hash`` the sha256 of its compiled code (``binary`` names which file: cubin, hsaco, ptx, llir),
    ``compiled``: True when this process compiled it, False when it reused it (it was in the cache before the
    shard started, or it was taken from the seed), None when the provider cannot tell; ``seeded_from``: the
    run whose cache it was taken from (zlops.kernels.seed), None when it was not seeded.
    """

    name: str
    cache_key: str
    code_hash: str | None
    binary: str | None
    num_warps: int | None = None
    num_stages: int | None = None
    num_ctas: int | None = None
    backend: str | None = None
    arch: str | None = None
    shared: int | None = None
    constants: Mapping[str, Any] = field(default_factory=dict)
    compiler_version: str | None = None
    compiled: bool | None = None
    seeded_from: str | None = None

    def __post_init__(self) -> None:
        if self.seeded_from is not None and self.compiled:
            raise ValueError("KernelRecord: a seeded kernel was reused, not compiled (compiled must not be True)")
        if not self.name:
            raise ValueError("KernelRecord.name must not be empty")
        if not self.cache_key:
            raise ValueError("KernelRecord.cache_key must not be empty")

    @property
    def launch(self) -> dict[str, Any]:
        """The launch choices that are not the code itself (what an autotune pick changes)."""
        return {"num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas,
                **{str(k): v for k, v in sorted(self.constants.items())}}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cache_key": self.cache_key, "code_hash": self.code_hash, "binary": self.binary,
                "num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas,
                "backend": self.backend, "arch": self.arch, "shared": self.shared,
                "constants": dict(sorted(self.constants.items())), "compiler_version": self.compiler_version,
                "compiled": self.compiled, "seeded_from": self.seeded_from}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelRecord:
        def opt_int(key: str) -> int | None:
            v = data.get(key)
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        constants = data.get("constants") or {}
        if not isinstance(constants, Mapping):
            raise InventoryError(f"kernel {data.get('name')!r}: constants must be an object")
        compiled = data.get("compiled")
        return cls(name=str(data["name"]), cache_key=str(data["cache_key"]),
                   code_hash=data.get("code_hash") or None, binary=data.get("binary") or None,
                   num_warps=opt_int("num_warps"), num_stages=opt_int("num_stages"), num_ctas=opt_int("num_ctas"),
                   backend=data.get("backend") or None, arch=None if data.get("arch") is None else str(data["arch"]),
                   shared=opt_int("shared"), constants=dict(constants),
                   compiler_version=data.get("compiler_version") or None,
                   compiled=compiled if isinstance(compiled, bool) else None,
                   seeded_from=str(data["seeded_from"]) if data.get("seeded_from") else None)

    @property
    def reuse(self) -> str:
        """How this process got it: ``compiled``, ``reused``, ``reused (seeded from <run>)`` or ``unknown``."""
        if self.seeded_from is not None:
            return f"reused (seeded from {self.seeded_from})"
        return {True: "compiled", False: "reused", None: "unknown"}[self.compiled]


@dataclass(frozen=True)
class AutotunePick:
    """What an autotuner chose for one kernel and one tuning key (Triton's ``*.autotune.json``)."""

    kernel: str
    key: str
    config: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "key": self.key, "config": dict(sorted(self.config.items()))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AutotunePick:
        return cls(kernel=str(data["kernel"]), key=str(data["key"]), config=dict(data.get("config") or {}))


@dataclass(frozen=True)
class SeedInfo:
    """Where a shard's kernel cache was seeded from (zlops.kernels.seed), or why it was not.

    ``offered``: the kernel folders staged for the process to take on a cache miss (and ``launchers``: the
    compiled launcher modules); which of them it took is in the kernels' ``seeded_from``. ``skipped``:
    the source folders left out, by reason (``incomplete``, ``symlink``, ``over_bound``, ``autotune``).
    """

    run_key: str | None
    sources: tuple[str, ...] = ()
    offered: int = 0
    launchers: int = 0
    bytes: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    linked: bool | None = None
    stage_s: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"run_key": self.run_key, "sources": list(self.sources), "offered": self.offered,
                "launchers": self.launchers, "bytes": self.bytes, "skipped": dict(sorted(self.skipped.items())),
                "linked": self.linked, "stage_s": self.stage_s, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeedInfo:
        skipped = data.get("skipped") or {}
        if not isinstance(skipped, Mapping):
            raise InventoryError("seed.skipped must be an object")
        linked = data.get("linked")
        return cls(run_key=data.get("run_key") or None, sources=tuple(str(s) for s in data.get("sources") or ()),
                   offered=int(data.get("offered") or 0), launchers=int(data.get("launchers") or 0),
                   bytes=int(data.get("bytes") or 0), skipped={str(k): int(v) for k, v in skipped.items()},
                   linked=linked if isinstance(linked, bool) else None, stage_s=data.get("stage_s"),
                   reason=str(data.get("reason") or ""))


@dataclass(frozen=True)
class Inventory:
    """The kernels of one shard, or why there are none (``state`` and ``reason``)."""

    provider: str
    state: str
    kernels: tuple[KernelRecord, ...] = ()
    autotune: tuple[AutotunePick, ...] = ()
    reason: str = ""
    #: kernels found beyond the cap, dropped (their names, at most 20, in ``dropped_names``)
    dropped: int = 0
    dropped_names: tuple[str, ...] = ()
    cache_dir: str | None = None
    parse_s: float | None = None
    #: the seed of the shard's cache (None: not seeded, and none was looked for)
    seed: SeedInfo | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"Inventory.state must be one of {', '.join(STATES)}, got {self.state!r}")
        if self.state != "ok" and not self.reason:
            raise ValueError("Inventory.reason must say why there is no inventory")

    @property
    def usable(self) -> bool:
        return self.state == "ok"

    @property
    def seeded(self) -> int:
        """The kernels this process took from the seed."""
        return sum(1 for k in self.kernels if k.seeded_from is not None)

    def summary(self) -> str:
        """One line: ``triton: 12 kernels (10 compiled here, 2 reused)`` or ``no inventory: ...``; with a seed
        ``(2 compiled here, 10 reused, 10 seeded from <run>: 10 of 11 offered)``."""
        if not self.usable:
            return f"no inventory ({self.provider}): {self.reason}"
        compiled = sum(1 for k in self.kernels if k.compiled)
        reused = sum(1 for k in self.kernels if k.compiled is False)
        seed = ""
        if self.seed is not None and self.seed.offered:
            seed = f", {self.seeded} seeded from {self.seed.run_key}: {self.seeded} of {self.seed.offered} offered"
        dropped = f"; {self.dropped} more dropped over the cap" if self.dropped else ""
        no_seed = f"; no seed: {self.seed.reason}" if self.seed is not None and self.seed.reason else ""
        return (f"{self.provider}: {len(self.kernels)} kernels ({compiled} compiled here, {reused} reused{seed})"
                f"{dropped}{no_seed}")

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "provider": self.provider, "state": self.state,
                "reason": self.reason, "cache_dir": self.cache_dir, "parse_s": self.parse_s,
                "dropped": self.dropped, "dropped_names": list(self.dropped_names),
                "kernels": [k.to_dict() for k in self.kernels], "autotune": [a.to_dict() for a in self.autotune],
                "seed": None if self.seed is None else self.seed.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "kernels.json") -> Inventory:
        version = data.get("schema_version")
        if version not in READ_VERSIONS:
            raise InventoryError(f"{source}: schema_version {version!r} is not one of "
                                 f"{', '.join(map(str, READ_VERSIONS))}; re-run the shard with this zlops")
        data = upgrade(data)
        seed = data.get("seed")
        if seed is not None and not isinstance(seed, Mapping):
            raise InventoryError(f"{source}: seed must be an object")
        try:
            return cls(provider=str(data["provider"]), state=str(data["state"]), reason=str(data.get("reason") or ""),
                       kernels=tuple(KernelRecord.from_dict(k) for k in data.get("kernels") or ()),
                       autotune=tuple(AutotunePick.from_dict(a) for a in data.get("autotune") or ()),
                       dropped=int(data.get("dropped") or 0), dropped_names=tuple(data.get("dropped_names") or ()),
                       cache_dir=data.get("cache_dir"), parse_s=data.get("parse_s"),
                       seed=None if seed is None else SeedInfo.from_dict(seed))
        except (KeyError, TypeError, ValueError) as exc:
            raise InventoryError(f"{source}: not a kernel inventory: {exc}") from exc


def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``kernels.json`` of an older schema as the current one: version 1 (before the seeded cache) had
    no ``seed`` and no kernel was seeded."""
    out = dict(data)
    if out.get("schema_version") == 1:
        kernels = out.get("kernels") or ()
        out.update(schema_version=2, seed=None,
                   kernels=[{**k, "seeded_from": None} if isinstance(k, Mapping) else k for k in kernels])
    return out


def none(provider: str, reason: str) -> Inventory:
    """The explicit "no inventory" of a provider that cannot tell."""
    return Inventory(provider=provider, state="none", reason=reason)


def capped(inv: Inventory, max_kernels: int) -> Inventory:
    """``inv`` with at most ``max_kernels`` kernels (sorted by name, then key, so the cut is the same
    every night); the rest are counted in ``dropped`` and their first 20 names kept."""
    if len(inv.kernels) <= max_kernels:
        return inv
    ordered = sorted(inv.kernels, key=lambda k: (k.name, k.cache_key))
    kept, cut = ordered[:max_kernels], ordered[max_kernels:]
    return replace(inv, kernels=tuple(kept), dropped=inv.dropped + len(cut),
                   dropped_names=tuple(dict.fromkeys(k.name for k in cut))[:20])


def write_inventory(artifact_dir: Path, inv: Inventory) -> Path:
    """Write ``kernels.json`` into the shard's folder (atomically) and return its path."""
    path = artifact_dir / INVENTORY_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(inv.to_dict(), indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def read_inventory(artifact_dir: Path) -> Inventory | None:
    """The shard's ``kernels.json``, None when there is none; InventoryError when it is malformed."""
    path = artifact_dir / INVENTORY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InventoryError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: expected an object")
    return Inventory.from_dict(data, source=str(path))


def merge(inventories: Sequence[Inventory]) -> Inventory | None:
    """The inventories of one pool's shards as one (the same kernel on two devices counts once, by
    (name, code_hash, launch)); None when there are none; not ok when none of them is."""
    usable = [i for i in inventories if i.usable]
    if not inventories:
        return None
    if not usable:
        return inventories[0]
    seen: dict[tuple[Any, ...], KernelRecord] = {}
    for inv in usable:
        for k in inv.kernels:
            seen.setdefault((k.name, k.code_hash, json.dumps(k.launch, sort_keys=True, default=str)), k)
    picks = {(a.kernel, a.key, json.dumps(dict(a.config), sort_keys=True, default=str)): a
             for inv in usable for a in inv.autotune}
    return Inventory(provider=usable[0].provider, state="ok", kernels=tuple(seen.values()),
                     autotune=tuple(picks.values()), dropped=sum(i.dropped for i in usable))
