"""The Triton cache parser and the inventory values: synthetic caches in Triton 3.x's exact layout."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from triton_cache_factory import flaggems_like, write_autotune, write_kernel

from zlops.errors import ConfigError
from zlops.kernels.codehash import text_digest
from zlops.kernels.inventory import (
    INVENTORY_FILE,
    Inventory,
    InventoryError,
    capped,
    merge,
    read_inventory,
    write_inventory,
)
from zlops.kernels.providers import PROVIDER_NAMES, TritonProvider, get_provider
from zlops.kernels.triton import parse_cache


def test_each_kernel_has_name_code_hash_and_launch_metadata(tmp_path: Path) -> None:
    folder = write_kernel(tmp_path, "amax_kernel", num_warps=8, num_stages=2, constants={"BLOCK_M": 64})
    inv = parse_cache(tmp_path)
    assert inv.state == "ok" and len(inv.kernels) == 1
    k = inv.kernels[0]
    assert k.name == "amax_kernel" and k.cache_key == folder.name
    assert k.binary == "cubin"
    assert k.code_hash == hashlib.sha256((folder / "amax_kernel.cubin").read_bytes()).hexdigest()
    assert (k.num_warps, k.num_stages, k.num_ctas, k.backend, k.arch, k.shared) == (8, 2, 1, "cuda", "90", 2048)
    assert dict(k.constants) == {"BLOCK_M": 64} and k.compiler_version == "3.6.0"
    assert k.compiled is None  # neither a start time nor a listing before: cannot tell


def test_code_hash_follows_the_binary_and_falls_back_to_ptx(tmp_path: Path) -> None:
    a = parse_cache(write_kernel(tmp_path / "a", "k", body="v1").parent).kernels[0]
    b = parse_cache(write_kernel(tmp_path / "b", "k", body="v2").parent).kernels[0]
    c = parse_cache(write_kernel(tmp_path / "c", "k", body="v1").parent).kernels[0]
    assert a.code_hash != b.code_hash and a.code_hash == c.code_hash
    folder = write_kernel(tmp_path / "d", "k", binary=False)
    d = parse_cache(folder.parent).kernels[0]
    assert d.binary == "ptx" and d.code_hash == text_digest((folder / "k.ptx").read_bytes(), "ptx")


def test_compiled_here_or_reused(tmp_path: Path) -> None:
    old = write_kernel(tmp_path, "fill_scalar_kernel", mtime=time.time() - 3600)
    before = {old.name}
    start = time.time()
    write_kernel(tmp_path, "amax_kernel")
    inv = parse_cache(tmp_path, started_at=start, before=before)
    by_name = {k.name: k.compiled for k in inv.kernels}
    assert by_name == {"fill_scalar_kernel": False, "amax_kernel": True}
    # without the listing, the mtime decides
    assert {k.name: k.compiled for k in parse_cache(tmp_path, started_at=start).kernels} == by_name
    assert "1 compiled here, 1 reused" in inv.summary()


def test_incomplete_folders_and_strays_are_skipped(tmp_path: Path) -> None:
    write_kernel(tmp_path, "amax_kernel")
    cut = write_kernel(tmp_path, "sum_kernel_1")
    (cut / "sum_kernel_1.json").unlink()          # group file names a metadata file that is not there
    (tmp_path / "stray.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    assert [k.name for k in parse_cache(tmp_path).kernels] == ["amax_kernel"]
    assert parse_cache(tmp_path / "missing").kernels == ()  # nothing compiled: an empty, usable inventory


def test_autotune_pick_is_the_fastest_config(tmp_path: Path) -> None:
    write_autotune(tmp_path, "mm_kernel", [1024, 1024, "torch.float16"],
                   [({"BLOCK_M": 64, "num_warps": 4}, 0.31), ({"BLOCK_M": 128, "num_warps": 8}, 0.22)])
    (pick,) = parse_cache(tmp_path).autotune
    assert pick.kernel == "mm_kernel" and pick.config["BLOCK_M"] == 128 and pick.config["num_warps"] == 8


def test_cap_keeps_the_same_kernels_every_night_and_says_what_it_dropped(tmp_path: Path) -> None:
    flaggems_like(tmp_path, 30, size=200)
    inv = parse_cache(tmp_path)
    small = capped(inv, 10)
    assert len(small.kernels) == 10 and small.dropped == 20 and small.dropped_names
    assert [k.name for k in small.kernels] == sorted(k.name for k in inv.kernels)[:10]
    assert "20 more dropped" in small.summary()
    assert capped(inv, 100) is inv


def test_inventory_json_round_trip_and_version_check(tmp_path: Path) -> None:
    flaggems_like(tmp_path / "c", 5, size=100)
    write_autotune(tmp_path / "c", "mm_kernel", [1], [({"BLOCK_M": 64}, 0.1)])
    inv = parse_cache(tmp_path / "c")
    write_inventory(tmp_path, inv)
    back = read_inventory(tmp_path)
    assert back is not None and back.kernels == inv.kernels and back.autotune == inv.autotune
    data = json.loads((tmp_path / INVENTORY_FILE).read_text())
    data["schema_version"] = 99
    (tmp_path / INVENTORY_FILE).write_text(json.dumps(data))
    with pytest.raises(InventoryError, match="schema_version 99"):
        read_inventory(tmp_path)
    assert read_inventory(tmp_path / "nowhere") is None


def test_merge_counts_one_kernel_of_two_devices_once(tmp_path: Path) -> None:
    flaggems_like(tmp_path / "d0", 4, size=100)
    flaggems_like(tmp_path / "d1", 4, size=100)
    merged = merge([parse_cache(tmp_path / "d0"), parse_cache(tmp_path / "d1")])
    assert merged is not None and len(merged.kernels) == 4
    assert merge([]) is None


def test_providers_without_a_reader_say_no_inventory(tmp_path: Path) -> None:
    assert {"triton", "cuobjdump", "ascend", "musa", "none"} == set(PROVIDER_NAMES)
    for name in ("cuobjdump", "ascend", "musa", "none"):
        p = get_provider(name)
        prepared = p.prepare(tmp_path)
        assert prepared.env == {}
        inv = p.collect(prepared, max_kernels=10)
        assert inv.state == "none" and not inv.kernels and inv.reason
        assert inv.summary().startswith(f"no inventory ({name}): ")
    with pytest.raises(ConfigError, match="known: ascend, cuobjdump"):
        get_provider("nvcc")


def test_triton_provider_points_the_process_at_its_own_cache(tmp_path: Path) -> None:
    p = TritonProvider()
    cache = tmp_path / "shard" / "triton_cache"
    prepared = p.prepare(cache)
    assert prepared.env == {"TRITON_CACHE_DIR": str(cache)} and cache.is_dir()
    write_kernel(cache, "amax_kernel")
    inv = p.collect(prepared, max_kernels=10)
    assert [(k.name, k.compiled) for k in inv.kernels] == [("amax_kernel", True)]


def test_an_inventory_without_kernels_must_say_why() -> None:
    with pytest.raises(ValueError, match="reason"):
        Inventory(provider="triton", state="none")


PTX = b"""//
// Generated by LLVM NVPTX Back-End
.version 8.7
.target sm_90a
.visible .entry amax_kernel(
	.param .u64 .ptr .global .align 1 amax_kernel_param_0
)
{
	.loc	1 69 0                          // amax.py:69:0
	mov.u32 	%r1, %ctaid.x;
	.loc	1 71 12                         // amax.py:71:12
	ret;
}
	.file	1 "/tmp/zh/worktrees/flaggems/9d950fede55c-7f80c0bf/src/flag_gems/ops/amax.py"
	.section	.debug_abbrev
	{
.b8 1
	}
"""


def test_ptx_hash_leaves_out_source_paths_and_lines_but_not_code() -> None:
    moved = PTX.replace(b"9d950fede55c-7f80c0bf", b"0123456789ab-deadbeef").replace(b"1 69 0", b"1 75 0")
    assert text_digest(moved, "ptx") == text_digest(PTX, "ptx")
    assert text_digest(PTX.replace(b"%ctaid.x", b"%ctaid.y"), "ptx") != text_digest(PTX, "ptx")
    ll = b'define void @k() !dbg !4 {\n  %5 = shl i32 %4, 10, !dbg !8\n}\n!4 = !DIFile(filename: "/tmp/a/x.py")\n'
    assert text_digest(ll.replace(b"/tmp/a", b"/tmp/b").replace(b"!dbg !8", b"!dbg !9"), "llir") == \
        text_digest(ll, "llir")
    assert text_digest(ll.replace(b"10", b"11"), "llir") != text_digest(ll, "llir")
