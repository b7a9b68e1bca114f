"""Synthetic Triton caches in the layout Triton 3.x writes (tests of zlops.kernels; no GPU needed).

One folder per compiled kernel, named by a base32 cache key, holding ``<name>.json`` (metadata as
Triton 3.6 writes it: hash, target, num_warps, num_stages, num_ctas, shared, triton_version, name,
...), ``.source``, ``.ttir``, ``.ttgir``, ``.llir``, ``.ptx``, ``.cubin`` and ``__grp__<name>.json``
(the group file naming the others, written last). Sizes are realistic: the real FlagGems capture
held 79 files in 1.1 MB for ~10 kernels.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

STAGES = (".source", ".ttir", ".ttgir", ".llir", ".ptx", ".cubin")


def write_kernel(cache_dir: Path, name: str, *, body: str = "v1", num_warps: int = 4, num_stages: int = 3,
                 arch: int = 90, backend: str = "cuda", triton_version: str = "3.6.0",
                 constants: dict[str, Any] | None = None, group: bool = True, binary: bool = True,
                 size: int = 12_000, mtime: float | None = None) -> Path:
    """Write one compiled kernel; its compiled code depends on ``name``, ``body``, ``num_warps``,
    ``num_stages`` and ``constants`` (as Triton's would). Returns its folder."""
    ident = json.dumps([name, body, num_warps, num_stages, constants or {}, arch], sort_keys=True)
    digest = hashlib.sha256(ident.encode()).digest()
    key = base64.b32encode(digest).decode().rstrip("=")
    folder = cache_dir / key
    folder.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "hash": digest.hex(), "target": {"backend": backend, "arch": arch, "warp_size": 32},
        "num_warps": num_warps, "num_ctas": 1, "num_stages": num_stages, "maxnreg": None,
        "cluster_dims": [1, 1, 1], "ptx_version": None, "enable_fp_fusion": True, "launch_cooperative_grid": False,
        "supported_fp8_dtypes": ["fp8e4b15", "fp8e4nv", "fp8e5"], "default_dot_input_precision": "tf32",
        "allowed_dot_input_precisions": ["tf32", "tf32x3", "ieee"], "max_num_imprecise_acc_default": 1073741824,
        "extern_libs": [["libdevice", "/opt/libdevice.10.bc"]], "debug": False, "backend_name": backend,
        "sanitize_overflow": True, "arch": f"sm{arch}", "triton_version": triton_version, "tensordesc_meta": [],
        "shared": 1024 * num_stages, "tmem_size": 0, "global_scratch_size": 0, "global_scratch_align": 1,
        "profile_scratch_size": 0, "profile_scratch_align": 1, "name": name,
    }
    if constants is not None:
        meta["constants"] = constants
    paths = {}
    for suffix in STAGES:
        if suffix == ".cubin" and not binary:
            continue
        blob = (ident + suffix).encode() * (size // (len(ident) + 8) + 1)
        p = folder / f"{name}{suffix}"
        p.write_bytes(blob[:size])
        paths[f"{name}{suffix}"] = str(p)
    (folder / f"{name}.json").write_text(json.dumps(meta), encoding="utf-8")
    paths[f"{name}.json"] = str(folder / f"{name}.json")
    if group:
        (folder / f"__grp__{name}.json").write_text(json.dumps({"child_paths": paths}), encoding="utf-8")
    if mtime is not None:
        for p in folder.iterdir():
            os.utime(p, (mtime, mtime))
    return folder


def write_autotune(cache_dir: Path, fn: str, key: list[Any], configs: list[tuple[dict[str, Any], float]]) -> Path:
    """An autotuner's cached results (``<fn>.autotune.json``: key and configs_timings) in a folder of its own."""
    digest = hashlib.sha256(json.dumps([fn, key]).encode()).digest()
    folder = cache_dir / base64.b32encode(digest).decode().rstrip("=")
    folder.mkdir(parents=True, exist_ok=True)
    data = {"key": key, "configs_timings": [[{"kwargs": kw, "num_warps": kw.pop("num_warps", 4),
                                              "num_stages": kw.pop("num_stages", 2), "num_ctas": 1, "maxnreg": None,
                                              "pre_hook": None}, [t, t, t]] for kw, t in configs]}
    path = folder / f"{fn}.autotune.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


FLAGGEMS_KERNELS = ("mean_dim_kernel_non_inner", "amax_kernel", "fill_scalar_kernel", "_copy_kernel_kernel_rank_3",
                    "abs_func_kernel_rank_1", "sum_kernel_1", "sum_kernel_2", "exp_func_kernel_rank_1")


def flaggems_like(cache_dir: Path, n: int = 100, *, changed: dict[str, dict[str, Any]] | None = None,
                  size: int = 12_000) -> list[Path]:
    """``n`` kernels named like FlagGems' (its names, then specializations ``<name>_<i>``); ``changed``
    gives write_kernel overrides per kernel name (a changed block size, another num_warps)."""
    out = []
    for i in range(n):
        base = FLAGGEMS_KERNELS[i % len(FLAGGEMS_KERNELS)]
        name = base if i < len(FLAGGEMS_KERNELS) else f"{base}_{i}"
        out.append(write_kernel(cache_dir, name, size=size, **(changed or {}).get(name, {})))
    return out


def compile_like_triton(name: str, source: str, *, num_warps: int = 4, arch: int = 90, size: int = 2_000) -> str:
    """What ``triton.compiler.compile`` does with the cache, through whichever ``triton.runtime.cache`` is
    importable (the real one, or tests/fake_triton): the key from the source and options, a
    ``get_group`` lookup of ``<name>.json``, and on a miss the stages ``put`` one by one, the metadata, and
    the group file last. Returns ``hit`` or ``compiled``; the compiled code depends on source and options."""
    from triton.runtime.cache import get_cache_manager

    key = hashlib.sha256(json.dumps(["3.6.0", name, source, num_warps, arch]).encode()).hexdigest()
    manager = get_cache_manager(key)
    meta_name = f"{name}.json"
    group = manager.get_group(meta_name) or {}
    if group.get(meta_name) is not None:
        for path in group.values():  # CompiledKernel reads the binary and the metadata
            Path(path).read_bytes()
        return "hit"
    paths = {}
    ident = f"{name}|{source}|{num_warps}|{arch}"
    for suffix in STAGES:
        blob = (ident + suffix).encode() * (size // (len(ident) + 8) + 1)
        paths[f"{name}{suffix}"] = manager.put(blob[:size], f"{name}{suffix}")
    meta = {"hash": key, "target": {"backend": "cuda", "arch": arch, "warp_size": 32}, "num_warps": num_warps,
            "num_ctas": 1, "num_stages": 3, "shared": 0, "triton_version": "3.6.0", "name": name}
    paths[meta_name] = manager.put(json.dumps(meta), meta_name, binary=False)
    manager.put_group(meta_name, paths)
    return "compiled"


def launcher_like_triton(c_source: str) -> str:
    """What ``triton.runtime.build.compile_module_from_src`` does with the cache: ``get_file`` of the built
    module, else build it (here: write bytes) and ``put`` it. Returns ``hit`` or ``built``."""
    from triton.runtime.cache import get_cache_manager

    manager = get_cache_manager(hashlib.sha256(c_source.encode()).hexdigest())
    name = "__triton_launcher.cpython-311-x86_64-linux-gnu.so"
    if manager.get_file(name) is not None:
        return "hit"
    manager.put(b"\x7fELF" + c_source.encode(), name, binary=True)
    return "built"
