"""Seed a shard's own Triton cache from an earlier night's, so unchanged kernels are not compiled again.

A nightly shard with ``kernels: triton`` gets an empty ``TRITON_CACHE_DIR`` of its own (so its inventory
holds only what its process used), which made a FlagGems process compile its ~19 kernels every night:
+1.25 s and +4.89 s on the H200 over a warm shared cache. Triton's cache key covers the kernel's source
(and its line), the constexprs and compile options, the target (arch, ptxas version) and Triton itself,
so a folder of an earlier night under the same key is the same compile: reusing it is safe, and a
changed kernel misses and is compiled.

How (docs/kernels.md "Seeded cache"):

1. :func:`stage` (zlops, before the process starts) links the complete kernel folders of the earlier
   night's shard caches (the same device's first) into ``<shard>/triton_seed/<key>/``: hard links, or
   copies across file systems (Triton writes every cache file through a temporary name and ``os.replace``,
   never in place, so a linked file never changes under either night). Only a folder whose group file
   names files that are all there is taken (a compile cut off is not), never through a symlink, within
   ``max_bytes`` and ``max_folders``; each gets the mark file (:data:`MARK`: the run it came from).
2. The process runs with :data:`MANAGER` (``seedhook/zlops_triton_seed.py``, on its ``PYTHONPATH``): on a
   cache miss it takes that key's folder from the seed into its own cache, mark included.
3. After the shard the parser (:func:`zlops.kernels.triton.parse_cache`) reads the shard's cache: a folder
   with the mark was taken from the seed (``compiled: false``, ``seeded_from``); the seed folders the
   process never asked for are not in its cache, so not in its inventory. :func:`discard` removes the
   staged seed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zlops.kernels.inventory import SeedInfo

log = logging.getLogger(__name__)

#: the staged seed, in the shard's artifact folder (removed after the shard)
SEED_DIR_NAME = "triton_seed"
#: in a kernel folder taken from the seed: ``{"run_key": ..., "source": ...}`` (the hook's MARK)
MARK = ".zlops-seed"
#: the cache manager the process gets, and where its module lives
HOOK_DIR = Path(__file__).resolve().parent / "seedhook"
HOOK_MODULE = "zlops_triton_seed"
MANAGER = f"{HOOK_MODULE}:SeedingCacheManager"
SEED_ENV = "ZLOPS_TRITON_SEED_DIR"
GROUP_PREFIX = "__grp__"
AUTOTUNE_SUFFIX = ".autotune.json"
LAUNCHER_SUFFIXES = (".so", ".pyd")
#: a group file larger than this is not a Triton group file (one is ~1 KB)
MAX_GROUP_BYTES = 1 << 20
DEFAULT_MAX_MIB = 512
DEFAULT_MAX_FOLDERS = 5000


@dataclass(frozen=True)
class SeedPlan:
    """Where a shard's kernel cache is seeded from (found in the store by zlops.steps.run_device), or
    why it is not: ``caches`` the earlier night's shard caches, the same device's first."""

    run_key: str | None = None
    caches: tuple[Path, ...] = ()
    reason: str = ""
    max_bytes: int = DEFAULT_MAX_MIB << 20
    max_folders: int = DEFAULT_MAX_FOLDERS

    def __post_init__(self) -> None:
        if self.caches and not self.run_key:
            raise ValueError("SeedPlan.run_key must name the run the caches belong to")
        if not self.caches and not self.reason:
            raise ValueError("SeedPlan.reason must say why there is nothing to seed from")
        if self.max_bytes < 1 or self.max_folders < 1:
            raise ValueError("SeedPlan.max_bytes and max_folders must be positive")


@dataclass(frozen=True)
class _Entry:
    files: tuple[str, ...]
    size: int
    kernel: bool


@dataclass
class _Tally:
    offered: int = 0
    launchers: int = 0
    size: int = 0
    copied: int = 0
    linked: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def _lstat_regular(path: Path) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _entry(folder: Path) -> _Entry | str | None:
    """A complete cache entry (a kernel: its group file and every file it names; or a lone launcher
    module), else the reason it is not taken; None for an empty folder (Triton makes the key folder of
    every lookup, hit or not)."""
    files: dict[str, int] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return "incomplete"
    for name in names:
        try:
            st = os.lstat(folder / name)
        except OSError:
            return "incomplete"
        if stat.S_ISLNK(st.st_mode):
            return "symlink"  # not something Triton writes: the whole folder is left out
        if stat.S_ISREG(st.st_mode) and not name.startswith("."):
            files[name] = st.st_size  # sub-folders (a put's tmp.pid_*) and dot files are not part of it
    groups = [n for n in files if n.startswith(GROUP_PREFIX) and n.endswith(".json")]
    if not files:
        return None
    if not groups:
        if len(files) == 1 and next(iter(files)).endswith(LAUNCHER_SUFFIXES):
            name = next(iter(files))
            return _Entry((name,), files[name], kernel=False)
        return "autotune" if any(n.endswith(AUTOTUNE_SUFFIX) for n in files) else "incomplete"
    if len(groups) > 1 or files[groups[0]] > MAX_GROUP_BYTES:
        return "incomplete"
    try:
        children = json.loads((folder / groups[0]).read_text(encoding="utf-8")).get("child_paths")
    except (OSError, ValueError, AttributeError):
        return "incomplete"
    if not isinstance(children, Mapping) or not children:
        return "incomplete"
    names_ok = all(isinstance(n, str) and n in files and n != groups[0] for n in children)
    if not names_ok or f"{groups[0][len(GROUP_PREFIX):]}" not in children:
        return "incomplete"  # a compile cut off, or a group naming its metadata file that is not there
    kept = (*sorted(children), groups[0])
    return _Entry(kept, sum(files[n] for n in kept), kernel=True)


def _place(src: str, dst: str, tally: _Tally) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
        tally.linked += 1
    except OSError:  # another file system, a link count limit, protected_hardlinks: a copy, its mtime kept
        shutil.copy2(src, dst, follow_symlinks=False)
        tally.copied += 1


def _stage_one(folder: str, entry: _Entry, dst: str, mark: str | None, tally: _Tally) -> bool:
    """The folder's files (and a kernel's mark) into ``dst``. The staged seed is this shard's alone and
    read only once the process starts, so a folder is built in place; one that fails is removed."""
    try:
        os.mkdir(dst)
        for name in entry.files:
            src = os.path.join(folder, name)
            if _lstat_regular(Path(src)) is None:
                raise FileNotFoundError(src)
            _place(src, os.path.join(dst, name), tally)
        if entry.kernel and mark is not None:
            _place(mark, os.path.join(dst, MARK), _Tally())
    except OSError as exc:
        log.debug("seed folder %s not staged: %s", folder, exc)
        shutil.rmtree(dst, ignore_errors=True)
        return False
    return True


def stage(plan: SeedPlan, staging: Path) -> SeedInfo:
    """Stage ``plan``'s caches into ``staging`` (emptied first) and say what was staged. Never raises for
    a bad seed: an unreadable source is skipped and counted."""
    t0 = time.perf_counter()
    shutil.rmtree(staging, ignore_errors=True)
    if not plan.caches:
        return SeedInfo(run_key=plan.run_key, reason=plan.reason, stage_s=0.0)
    staging.mkdir(parents=True, exist_ok=True)
    tally = _Tally()
    seen: set[str] = set()
    sources: list[str] = []
    for cache in plan.caches:
        try:
            if cache.is_symlink() or not cache.is_dir():
                tally.skipped["missing"] += 1
                continue
            folders = sorted(os.listdir(cache))
        except OSError:
            tally.skipped["missing"] += 1
            continue
        # one mark per source, linked into each of its kernel folders (written before them: a folder's
        # metadata is never newer than its mark, zlops.kernels.seed.read_mark)
        mark = str(staging / f".mark-{len(sources)}")
        try:
            Path(mark).write_text(json.dumps({"run_key": plan.run_key, "source": str(cache)}), encoding="utf-8")
        except OSError:
            tally.skipped["missing"] += 1
            continue
        sources.append(str(cache))
        for name in folders:
            folder = cache / name
            if name in seen or name.startswith("."):
                continue
            if folder.is_symlink():
                tally.skipped["symlink"] += 1
                continue
            if not folder.is_dir():
                continue
            if tally.offered + tally.launchers >= plan.max_folders:
                tally.skipped["over_bound"] += 1
                continue
            entry = _entry(folder)
            if entry is None:
                continue
            if isinstance(entry, str):
                tally.skipped[entry] += 1
                continue
            if tally.size + entry.size > plan.max_bytes:
                tally.skipped["over_bound"] += 1
                continue
            if _stage_one(str(folder), entry, str(staging / name), mark, tally):
                seen.add(name)
                tally.size += entry.size
                if entry.kernel:
                    tally.offered += 1
                else:
                    tally.launchers += 1
            else:
                tally.skipped["incomplete"] += 1
    if tally.skipped["over_bound"]:
        log.warning("kernel seed from %s: %d cache folders over the bound (%d folders, %d MiB) left out",
                    plan.run_key, tally.skipped["over_bound"], plan.max_folders, plan.max_bytes >> 20)
    reason = ""
    if not tally.offered:
        reason = (f"the caches of {plan.run_key} hold no complete kernel folder "
                  f"({', '.join(str(c) for c in plan.caches)})") if sources else (
                  f"the caches of {plan.run_key} are not on this host ({', '.join(str(c) for c in plan.caches)}: "
                  "removed, on another host's disk, or not kept in its shard folders)")
    return SeedInfo(run_key=plan.run_key, sources=tuple(sources), offered=tally.offered, launchers=tally.launchers,
                    bytes=tally.size, skipped={k: v for k, v in sorted(tally.skipped.items()) if v},
                    linked=None if not (tally.linked or tally.copied) else tally.copied == 0,
                    stage_s=round(time.perf_counter() - t0, 6), reason=reason)


def process_env(staging: Path, suite_env: Mapping[str, str]) -> dict[str, str]:
    """What the benchmark process needs to take from the seed: the cache manager, where its module is
    (before the suite's own ``PYTHONPATH``), and the staged seed."""
    path = os.pathsep.join(p for p in (str(HOOK_DIR), suite_env.get("PYTHONPATH", "")) if p)
    return {"TRITON_CACHE_MANAGER": MANAGER, SEED_ENV: str(staging), "PYTHONPATH": path}


def read_mark(folder: Path, files: Sequence[str] | set[str], meta_path: Path) -> str | None:
    """The run a cache folder was taken from, when it carries the seed's mark and its metadata is the
    seed's (not written since: a compile of the same key after it was taken would be this process's)."""
    if MARK not in files:
        return None
    mark_path = folder / MARK
    st = _lstat_regular(mark_path)
    if st is None or st.st_size > 4096:
        return None
    try:
        data = json.loads(mark_path.read_text(encoding="utf-8"))
        if meta_path.stat().st_mtime_ns > st.st_mtime_ns:
            return None
    except (OSError, ValueError):
        return None
    run = data.get("run_key") if isinstance(data, Mapping) else None
    return str(run) if run else None


def discard(staging: Path) -> None:
    """Remove the staged seed after the shard (the folders the process took are in its own cache)."""
    shutil.rmtree(staging, ignore_errors=True)
