"""The Triton provider on a real Triton cache: FlagGems ed2508bc on an H200, Triton 3.6.0
(tests/data/triton_cache_h200/, provenance there), and the attribution replayed on it.

What the capture showed: every cubin (and PTX) embeds the worktree path of the run that compiled it
(``/tmp/zh/worktrees/flaggems/9d950fede55c-7f80c0bf/...``, Triton's line info), so a raw file hash
would call every kernel of every night "changed"; the code hash leaves the source locations out.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from zlops.kernels.attribution import KERNEL_CHANGED, OUTSIDE, attribute
from zlops.kernels.codehash import code_digest, elf_digest
from zlops.kernels.inventory import Inventory
from zlops.kernels.triton import parse_cache

TGZ = Path(__file__).resolve().parents[1] / "data" / "triton_cache_h200" / "cache.tgz"
SEEN = {"mean_dim_kernel_non_inner", "amax_kernel", "fill_scalar_kernel", "_copy_kernel_kernel_rank_3"}
RUN_PATH = b"/tmp/zh/worktrees/flaggems/9d950fede55c-7f80c0bf/"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("h200")
    with tarfile.open(TGZ) as tar:
        tar.extractall(out, filter="data")
    return out / "cache"


def _parse(root: Path) -> Inventory:
    inv = parse_cache(root)
    assert inv.state == "ok"
    return inv


def _moved(cache: Path, to: Path, new_path: bytes) -> Path:
    """The cache as another worktree (same length path) would have compiled it: the same kernels."""
    shutil.copytree(cache, to)
    for f in to.rglob("*"):
        if f.is_file() and f.suffix in (".cubin", ".ptx", ".llir", ".source", ".ttir", ".ttgir"):
            f.write_bytes(f.read_bytes().replace(RUN_PATH, new_path))
    return to


def test_every_kernel_of_the_real_cache_is_read_with_its_launch_metadata(cache: Path) -> None:
    inv = _parse(cache)
    assert SEEN <= {k.name for k in inv.kernels}
    groups = sorted(cache.glob("*/__grp__*.json"))
    assert len(inv.kernels) == len(groups) == 19  # one per complete folder; the launcher .so folders are not kernels
    for k in inv.kernels:
        folder = cache / k.cache_key
        meta = json.loads((folder / f"{k.name}.json").read_text())
        assert k.binary == "cubin" and k.compiler_version == "3.6.0"
        assert k.code_hash == elf_digest((folder / f"{k.name}.cubin").read_bytes()) is not None
        assert (k.num_warps, k.num_stages, k.num_ctas) == (meta["num_warps"], meta["num_stages"], meta["num_ctas"])
        assert (k.backend, k.arch, k.shared) == ("cuda", "90", meta["shared"])
    assert {k.num_warps for k in inv.kernels if k.name == "mean_dim_kernel_non_inner"} == {16}
    assert inv.parse_s is not None and inv.parse_s < 2.0


def test_the_same_kernels_built_in_another_worktree_hash_the_same(cache: Path, tmp_path: Path) -> None:
    moved = _moved(cache, tmp_path / "moved", b"/tmp/zh/worktrees/flaggems/0123456789ab-deadbeef/")
    named = [f.relative_to(cache) for f in cache.glob("*/*.cubin") if RUN_PATH in f.read_bytes()]
    assert len(named) == 18  # of 19 cubins, 18 name the worktree they were compiled in
    assert all(hashlib.sha256((cache / f).read_bytes()).digest() != hashlib.sha256((moved / f).read_bytes()).digest()
               for f in named)
    a, b = _parse(cache), _parse(moved)
    assert sorted((k.name, k.code_hash) for k in a.kernels) == sorted((k.name, k.code_hash) for k in b.kernels)
    for op in ("amax", "mean", "fill_scalar", "add"):
        assert attribute(a, b, op).kind == OUTSIDE, op


def test_replayed_kernel_change_on_the_real_cache(cache: Path, tmp_path: Path) -> None:
    base = _parse(cache)
    head_root = _moved(cache, tmp_path / "head", b"/tmp/zh/worktrees/flaggems/0123456789ab-deadbeef/")
    amax = sorted((k for k in base.kernels if k.name == "amax_kernel"), key=lambda k: k.cache_key)[0]
    folder = head_root / amax.cache_key
    cubin = folder / "amax_kernel.cubin"
    data = bytearray(cubin.read_bytes())
    start = _text_offset(bytes(data), "amax_kernel")  # flip one byte of an instruction of .text.amax_kernel
    data[start + 16] ^= 0xFF
    cubin.write_bytes(bytes(data))
    meta = json.loads((folder / "amax_kernel.json").read_text())
    old_warps, meta["num_warps"] = meta["num_warps"], meta["num_warps"] * 2
    (folder / "amax_kernel.json").write_text(json.dumps(meta))
    head = _parse(head_root)
    new = code_digest(bytes(data), "cubin")
    assert new != amax.code_hash
    a = attribute(base, head, "amax")
    assert a.kind == KERNEL_CHANGED
    assert a.text == (f"kernel code changed: amax_kernel (compiled code {amax.code_hash[:8]}.. -> {new[:8]}.., "
                      f"num_warps {old_warps} -> {old_warps * 2})")
    for op in ("fill_scalar", "mean", "add"):
        assert attribute(base, head, op).kind == OUTSIDE, op


def _text_offset(elf: bytes, kernel: str) -> int:
    """File offset of the ``.text.<kernel>`` section of a cubin."""
    import struct

    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = elf[heads[shstrndx][4]:heads[shstrndx][4] + heads[shstrndx][5]]
    for name_off, _, _, _, offset, _ in heads:
        if names[name_off:names.index(b"\0", name_off)] == f".text.{kernel}".encode():
            return offset
    raise AssertionError(f"no .text.{kernel}")
