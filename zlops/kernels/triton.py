"""The Triton provider's parser: a ``TRITON_CACHE_DIR`` as a list of compiled kernels.

Triton keeps one folder per compiled kernel, named by its cache key, holding ``<kernel>.json`` (the
metadata: ``hash``, ``name``, ``num_warps``, ``num_stages``, ``num_ctas``, ``target`` {backend, arch},
``shared``, ``triton_version``, ...), the stages (``.source``, ``.ttir``, ``.ttgir``, ``.llir``, ``.ptx``)
and the binary (``.cubin`` on CUDA, ``.hsaco`` on ROCm), and a group file ``__grp__<kernel>.json``
written last, once the folder is complete. The autotuner, when it caches its results, adds
``<fn>.autotune.json`` (``key`` and ``configs_timings``) in a folder of its own.

:func:`parse_cache` reads a cache folder after a shard: per kernel its name, the sha256 of its compiled
code (the binary, else the most lowered text stage), its launch metadata and whether this shard
compiled it (its folder was not there before the shard and was written after the shard started) or
reused it, and the run it was seeded from when the process took it from a seed (zlops.kernels.seed: the
folder carries the seed's mark). The code hash leaves out the source paths and line numbers Triton's line info embeds
(:mod:`zlops.kernels.codehash`), so an unchanged kernel built in another worktree hashes the same. It
only reads files (pure with respect to the rest of zlops) and never follows a symlink.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from zlops.kernels.codehash import code_digest
from zlops.kernels.inventory import AutotunePick, Inventory, KernelRecord
from zlops.kernels.seed import read_mark

PROVIDER = "triton"
#: compiled code, most final first: the binary the driver loads, else the last text stage
BINARY_SUFFIXES = (".cubin", ".hsaco", ".ptx", ".amdgcn", ".llir")
GROUP_PREFIX = "__grp__"
AUTOTUNE_SUFFIX = ".autotune.json"
#: a metadata or autotune file larger than this is not read (a kernel's metadata is ~2 KB)
MAX_JSON_BYTES = 1 << 20
#: a compiled file larger than this is hashed whole, not parsed (a cubin is ~10-100 KB)
MAX_BINARY_BYTES = 64 << 20
#: a cache with more folders than this is not walked further (they are counted as dropped)
MAX_FOLDERS = 100_000
_SCALARS = (str, int, float, bool, type(None))


def _read_json(path: Path) -> Any:
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _code_hash(path: Path, suffix: str) -> str:
    """The digest of the compiled code without its source locations (zlops.kernels.codehash)."""
    if path.stat().st_size > MAX_BINARY_BYTES:  # not a kernel a benchmark launches; hash it plainly
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    return code_digest(path.read_bytes(), suffix.lstrip("."))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _constants(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The constexpr values the metadata names (Triton 2.x ``constants``; newer ones keep them in the
    key only): scalars only, keyed by name or position."""
    raw = meta.get("constants") if "constants" in meta else meta.get("constexprs")
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items() if isinstance(v, _SCALARS)}
    return {}


def _metadata_file(folder: Path, files: Collection[str]) -> tuple[str, Path] | None:
    """(kernel name, its metadata file): named by the group file when there is one."""
    groups = sorted(f for f in files if f.startswith(GROUP_PREFIX) and f.endswith(".json"))
    if groups:
        name = groups[0][len(GROUP_PREFIX):-len(".json")]
        if f"{name}.json" in files:
            return name, folder / f"{name}.json"
        return None
    metas = sorted(f for f in files if f.endswith(".json") and not f.endswith(AUTOTUNE_SUFFIX))
    return (metas[0][:-len(".json")], folder / metas[0]) if metas else None


def _autotune_picks(path: Path) -> list[AutotunePick]:
    data = _read_json(path)
    if not isinstance(data, Mapping) or not isinstance(data.get("configs_timings"), list):
        return []
    best: tuple[float, dict[str, Any]] | None = None
    for entry in data["configs_timings"]:
        if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], Mapping):
            continue
        timing = entry[1][0] if isinstance(entry[1], list) and entry[1] else entry[1]
        if not isinstance(timing, (int, float)):
            continue
        cfg = entry[0]
        flat = {str(k): v for k, v in (cfg.get("kwargs") or {}).items() if isinstance(v, _SCALARS)}
        flat.update({k: cfg[k] for k in ("num_warps", "num_stages", "num_ctas", "maxnreg")
                     if isinstance(cfg.get(k), _SCALARS) and cfg.get(k) is not None})
        if best is None or timing < best[0]:
            best = (float(timing), flat)
    if best is None:
        return []
    kernel = path.name[:-len(AUTOTUNE_SUFFIX)]
    return [AutotunePick(kernel=kernel, key=json.dumps(data.get("key"), default=str), config=best[1])]


def parse_cache(cache_dir: Path, *, started_at: float | None = None,
                before: Collection[str] | None = None) -> Inventory:
    """The kernels in a Triton cache folder after a shard.

    ``before``: the folder names present before the shard started (their kernels were reused);
    ``started_at``: the shard's start (epoch seconds), for a folder not in ``before`` (or when
    ``before`` is None) a metadata file written since then means this process compiled it. Folders
    without a complete kernel (no metadata, or a group file whose metadata is missing: a compile that
    was cut off) are skipped. An absent folder is an empty inventory: nothing was compiled. A folder the
    process took from a seed (its mark, zlops.kernels.seed) was reused: ``compiled`` False, ``seeded_from``
    its run.
    """
    t0 = time.perf_counter()
    if not cache_dir.is_dir():
        return Inventory(provider=PROVIDER, state="ok", cache_dir=str(cache_dir),
                         parse_s=round(time.perf_counter() - t0, 6))
    kernels: list[KernelRecord] = []
    picks: list[AutotunePick] = []
    folders = sorted(p for p in cache_dir.iterdir() if p.is_dir() and not p.is_symlink())
    extra = max(0, len(folders) - MAX_FOLDERS)
    before_set = None if before is None else set(before)
    for folder in folders[:MAX_FOLDERS]:
        try:
            files = {p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink()}
        except OSError:
            continue
        for f in sorted(files):
            if f.endswith(AUTOTUNE_SUFFIX):
                picks.extend(_autotune_picks(folder / f))
        found = _metadata_file(folder, files)
        if found is None:
            continue
        name, meta_path = found
        meta = _read_json(meta_path)
        if not isinstance(meta, Mapping):
            continue
        binary = next((s for s in BINARY_SUFFIXES if f"{name}{s}" in files), None)
        code_hash = _code_hash(folder / f"{name}{binary}", binary) if binary else None
        target = meta.get("target") if isinstance(meta.get("target"), Mapping) else {}
        seeded_from = read_mark(folder, files, meta_path)
        if seeded_from is not None:
            compiled: bool | None = False
        elif before_set is not None and folder.name in before_set:
            compiled = False
        elif started_at is not None:
            compiled = meta_path.stat().st_mtime >= started_at - 1.0  # coarse filesystem clocks
        else:
            compiled = True if before_set is not None else None
        kernels.append(KernelRecord(
            name=str(meta.get("name") or name), cache_key=folder.name, code_hash=code_hash,
            binary=binary.lstrip(".") if binary else None, num_warps=_int(meta.get("num_warps")),
            num_stages=_int(meta.get("num_stages")), num_ctas=_int(meta.get("num_ctas")),
            backend=str(target.get("backend")) if target.get("backend") is not None else meta.get("backend_name"),
            arch=None if target.get("arch") is None else str(target.get("arch")), shared=_int(meta.get("shared")),
            constants=_constants(meta), compiler_version=meta.get("triton_version") or None, compiled=compiled,
            seeded_from=seeded_from))
    return Inventory(provider=PROVIDER, state="ok", kernels=tuple(kernels), autotune=tuple(picks),
                     dropped=extra, cache_dir=str(cache_dir), parse_s=round(time.perf_counter() - t0, 6))


def folder_names(cache_dir: Path) -> frozenset[str]:
    """The kernel folders present now (taken before a shard starts: what it may reuse)."""
    if not cache_dir.is_dir():
        return frozenset()
    return frozenset(p.name for p in cache_dir.iterdir() if p.is_dir())
