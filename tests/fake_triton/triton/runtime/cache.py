"""The file cache of Triton 3.6 (``triton/runtime/cache.py``), as far as zlops relies on it.

Kept to what the real one does: ``get_cache_manager(key)`` builds the class ``TRITON_CACHE_MANAGER``
names (``module:Class``, imported on use) or ``FileCacheManager`` with the base32 of the key; the
manager's ``cache_dir`` is ``$TRITON_CACHE_DIR/<key>``, created when the manager is; ``put`` writes
through a temporary folder and ``os.replace``; ``put_group`` writes ``__grp__<name>`` naming its
children by absolute path; ``get_group`` returns only the children that exist (a missing metadata
file is a miss for the compiler).
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import uuid


class CacheManager:
    def __init__(self, key, override=False, dump=False):
        pass


class FileCacheManager(CacheManager):
    def __init__(self, key, override=False, dump=False):
        self.key = key
        self.lock_path = None
        if dump or override:
            raise NotImplementedError("the fake cache has no dump or override folder")
        root = os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")
        self.cache_dir = os.path.join(root, self.key)
        self.lock_path = os.path.join(self.cache_dir, "lock")
        os.makedirs(self.cache_dir, exist_ok=True)

    def _make_path(self, filename):
        return os.path.join(self.cache_dir, filename)

    def has_file(self, filename):
        return os.path.exists(self._make_path(filename))

    def get_file(self, filename):
        return self._make_path(filename) if self.has_file(filename) else None

    def get_group(self, filename):
        grp = f"__grp__{filename}"
        if not self.has_file(grp):
            return None
        with open(self._make_path(grp)) as f:
            children = json.load(f).get("child_paths")
        if children is None:
            return None
        return {c: p for c, p in children.items() if os.path.exists(p)}

    def put_group(self, filename, group):
        return self.put(json.dumps({"child_paths": group}), f"__grp__{filename}", binary=False)

    def put(self, data, filename, binary=True):
        binary = isinstance(data, bytes)
        if not binary:
            data = str(data)
        path = self._make_path(filename)
        tmp_dir = os.path.join(self.cache_dir, f"tmp.pid_{os.getpid()}_{uuid.uuid4()}")
        os.makedirs(tmp_dir, exist_ok=True)
        tmp = os.path.join(tmp_dir, filename)
        with open(tmp, "wb" if binary else "w") as f:
            f.write(data)
        os.replace(tmp, path)
        os.removedirs(tmp_dir)
        return path


def _base32(key):
    return base64.b32encode(bytes.fromhex(key)).decode("utf-8").rstrip("=")


def get_cache_manager(key):
    name = os.environ.get("TRITON_CACHE_MANAGER")
    cls = FileCacheManager
    if name:
        module, cls_name = name.split(":", 1)
        cls = getattr(importlib.import_module(module), cls_name)
    return cls(_base32(key))
