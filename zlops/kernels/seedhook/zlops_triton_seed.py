"""zlops' Triton cache manager: Triton's own file cache, which takes a kernel from a seed on a miss.

This file runs inside the benchmark process, not in zlops: zlops puts its folder on the process's
``PYTHONPATH`` and sets ``TRITON_CACHE_MANAGER=zlops_triton_seed:SeedingCacheManager`` and
``ZLOPS_TRITON_SEED_DIR`` (the seed zlops staged for this shard from an earlier night's cache,
zlops.kernels.seed). It imports nothing but the standard library and Triton (the suite's venv need not
have zlops), and it never makes a compile fail: whatever goes wrong while taking from the seed, Triton
compiles as it would have.

Why a cache manager and not a copy of the seed into ``TRITON_CACHE_DIR``: Triton writes nothing on a
cache hit, so after the shard a copied folder the process used cannot be told from one it never touched
(atime is off or relaxed on most mounts), and a kernel removed upstream would still be listed as one of
tonight's. Here a kernel folder enters the shard's cache only when the process asks Triton for that
cache key, so the cache holds exactly the kernels the process compiled or took from the seed; the ones it
took carry the seed's mark file (``.zlops-seed``: which run they came from).

On a miss of a kernel group (``get_group``: the compiler's lookup) the seed's folder of the same key is
taken whole: its files are hard-linked (copied across file systems) into the key folder through a
temporary name and ``os.replace``, the mark next, and the group file last, rewritten to name the files
where they now are (Triton's group file holds absolute paths, so the seed's would point at the earlier
night's folder). On a miss of a single file (``get_file``) only a compiled launcher module (``*.so``: the
launcher and ``cuda_utils`` Triton builds with the host compiler) is taken; an autotuner's cached timings
(``*.autotune.json``) are never, so tonight's autotuner measures on tonight's machine. With
``TRITON_ALWAYS_COMPILE`` set nothing is taken. Relies on ``FileCacheManager(key, override, dump)`` with
``cache_dir`` the key folder and ``put`` / ``_make_path``, as since Triton 3.0 at least (tested with 3.6.0).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import uuid

from triton.runtime.cache import FileCacheManager

#: the folder zlops staged the seed in: one folder per cache key, as in a Triton cache
SEED_ENV = "ZLOPS_TRITON_SEED_DIR"
#: in a kernel folder taken from the seed: where it came from (zlops.kernels.seed.MARK)
MARK = ".zlops-seed"
GROUP_PREFIX = "__grp__"
#: single files taken from the seed on a get_file miss: compiled launcher modules
TAKEN_FILE_SUFFIXES = (".so", ".pyd")
MAX_GROUP_BYTES = 1 << 20


def _regular(path: str) -> bool:
    """A regular file, not a symlink (never followed)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _off(value: str | None) -> bool:
    return (value or "").strip().lower() in ("", "0", "false", "no", "off")


class SeedingCacheManager(FileCacheManager):
    """Triton's FileCacheManager; a miss is looked up in ``$ZLOPS_TRITON_SEED_DIR/<key>`` first."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        super().__init__(key, override=override, dump=dump)
        seed = os.environ.get(SEED_ENV, "")
        self._seed: str | None = None
        if seed and not override and not dump and self.cache_dir and _off(os.environ.get("TRITON_ALWAYS_COMPILE")):
            self._seed = os.path.join(seed, self.key)

    def get_group(self, filename: str) -> dict[str, str] | None:
        group = super().get_group(filename)
        if group is None and self._seed is not None and self._take_group(GROUP_PREFIX + filename):
            group = super().get_group(filename)
        return group

    def get_file(self, filename: str) -> str | None:
        path = super().get_file(filename)
        if (path is None and self._seed is not None and filename.endswith(TAKEN_FILE_SUFFIXES)
                and os.path.basename(filename) == filename and self._take(filename)):
            path = super().get_file(filename)
        return path

    def _take_group(self, group_name: str) -> bool:
        """The seed's kernel folder of this key into the cache, the group file last; False: not taken."""
        assert self._seed is not None
        src = os.path.join(self._seed, group_name)
        if not _regular(src) or not _regular(os.path.join(self._seed, MARK)):
            return False
        try:
            if os.lstat(src).st_size > MAX_GROUP_BYTES:
                return False
            with open(src, encoding="utf-8") as f:
                children = json.load(f).get("child_paths")
            names = list(children) if isinstance(children, dict) else None
            if not names or not all(isinstance(n, str) and n and os.path.basename(n) == n and n != group_name
                                    and not n.startswith(".") and _regular(os.path.join(self._seed, n))
                                    for n in names):
                return False
            for name in (*names, MARK):
                self._link(os.path.join(self._seed, name), name)
            self.put(json.dumps({"child_paths": {n: self._make_path(n) for n in names}}), group_name, binary=False)
            return True
        except (OSError, ValueError, AttributeError):
            return False

    def _take(self, filename: str) -> bool:
        assert self._seed is not None
        src = os.path.join(self._seed, filename)
        if not _regular(src):
            return False
        try:
            self._link(src, filename)
            return True
        except OSError:
            return False

    def _link(self, src: str, name: str) -> None:
        """``src`` as ``<key folder>/<name>``, atomically: a hard link appears whole, so it is made in place
        when the name is free; else (the name taken, another file system, linking refused) a link or a
        copy to a temporary name replaces it."""
        dst = self._make_path(name)
        try:
            os.link(src, dst, follow_symlinks=False)
            return
        except OSError:
            pass
        tmp = self._make_path(f".zlops-tmp.{os.getpid()}.{uuid.uuid4().hex}")
        try:
            try:
                os.link(src, tmp, follow_symlinks=False)
            except OSError:  # a copy keeps the seed's mtime: the metadata stays no newer than the mark
                shutil.copy2(src, tmp, follow_symlinks=False)
            os.replace(tmp, dst)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
