"""Attribution of an alert's op: exactly one of four sentences, from two inventories."""

from __future__ import annotations

from pathlib import Path

from triton_cache_factory import flaggems_like, write_autotune

from zlops.kernels.attribution import (
    AUTOTUNE_CHANGED,
    KERNEL_CHANGED,
    NO_INVENTORY,
    OUTSIDE,
    attribute,
    identity_changes,
    kernel_matcher,
)
from zlops.kernels.inventory import Inventory, none
from zlops.kernels.triton import parse_cache


def _night(tmp_path: Path, name: str, **changed: dict) -> Inventory:
    flaggems_like(tmp_path / name, 20, changed=changed, size=300)
    return parse_cache(tmp_path / name)


def test_changed_kernel_is_named_with_both_hashes_and_its_launch_change(tmp_path: Path) -> None:
    base = _night(tmp_path, "base")
    head = _night(tmp_path, "head", amax_kernel={"num_warps": 8, "body": "BLOCK_SIZE=2048"})
    a = attribute(base, head, "amax")
    old = next(k for k in base.kernels if k.name == "amax_kernel").code_hash
    new = next(k for k in head.kernels if k.name == "amax_kernel").code_hash
    assert a.kind == KERNEL_CHANGED
    assert a.text == f"kernel code changed: amax_kernel (compiled code {old[:8]}.. -> {new[:8]}.., num_warps 4 -> 8)"
    # another op of the same nights: nothing of it changed
    b = attribute(base, head, "mean")
    assert b.kind == OUTSIDE and b.text.startswith("no compiled kernel of this op changed (3 kernel(s): "
                                                   "mean_dim_kernel_non_inner, mean_dim_kernel_non_inner_16, "
                                                   "mean_dim_kernel_non_inner_8): the change is outside the kernels")


def test_unchanged_op_is_outside_the_kernels(tmp_path: Path) -> None:
    a = attribute(_night(tmp_path, "a"), _night(tmp_path, "b"), "fill_scalar")
    assert a.kind == OUTSIDE and "launch path, Python, environment" in a.text


def test_new_and_gone_kernels(tmp_path: Path) -> None:
    base = _night(tmp_path, "base")
    head = Inventory(provider="triton", state="ok",
                     kernels=tuple(k for k in base.kernels if k.name != "amax_kernel"))
    assert attribute(base, head, "amax").text == "kernel code changed: amax_kernel (no longer compiled)"
    assert attribute(head, base, "amax").text.startswith("kernel code changed: amax_kernel (new kernel, compiled code ")


def test_different_autotune_pick_with_the_same_kernels(tmp_path: Path) -> None:
    for night, block in (("base", 64), ("head", 128)):
        flaggems_like(tmp_path / night, 5, size=100)
        write_autotune(tmp_path / night, "amax_kernel", [4096], [({"BLOCK": 64}, 0.2 if block == 64 else 0.3),
                                                                  ({"BLOCK": 128}, 0.25)])
    a = attribute(parse_cache(tmp_path / "base"), parse_cache(tmp_path / "head"), "amax")
    assert a.kind == AUTOTUNE_CHANGED
    assert a.text == "same compiled kernels, different autotune choice: amax_kernel at key [4096]: BLOCK 64 -> 128"


def test_no_inventory_on_either_side_or_for_the_op(tmp_path: Path) -> None:
    inv = _night(tmp_path, "a")
    assert attribute(None, inv, "amax").kind == NO_INVENTORY
    missing = attribute(inv, none("cuobjdump", "not implemented"), "amax")
    assert missing.kind == NO_INVENTORY and missing.text == "no inventory: tonight: not implemented"
    unmatched = attribute(inv, inv, "softmax")
    assert unmatched.kind == NO_INVENTORY and "belongs to op 'softmax'" in unmatched.text


def test_suite_mapping_decides_which_kernels_belong_to_the_op(tmp_path: Path) -> None:
    base = _night(tmp_path, "base")
    head = _night(tmp_path, "head", _copy_kernel_kernel_rank_3={"body": "changed"})
    assert attribute(base, head, "to_copy").kind == NO_INVENTORY  # "to_copy" is in no kernel name
    mapped = attribute(base, head, "to_copy", mapping={"to_copy|copy_": r"^_copy_kernel"})
    assert mapped.kind == KERNEL_CHANGED and "_copy_kernel_kernel_rank_3 (compiled code" in mapped.text
    assert kernel_matcher("abs")("abs_func_kernel_rank_1") and not kernel_matcher("abs")("amax_kernel")
    # an op's name inside a longer word is another op's kernel (FlagGems: max / argmax, sum / cumsum)
    assert kernel_matcher("max")("max_kernel_1") and kernel_matcher("max")("_max_kernel")
    assert not kernel_matcher("max")("argmax_kernel_non_inner") and not kernel_matcher("sum")("cumsum_kernel")
    assert kernel_matcher("argmax")("argmax_kernel_non_inner")


def test_identity_differences_are_appended(tmp_path: Path) -> None:
    inv = _night(tmp_path, "a")
    ident = identity_changes({"driver": "550.54", "toolkit": "12.4", "python": "3.12"},
                             {"driver": "560.28", "toolkit": "12.4", "python": "3.12"},
                             base_telemetry={"sm_clock_median_mhz": 1980.0},
                             head_telemetry={"sm_clock_median_mhz": 1755.0})
    assert ident == ["driver 550.54 -> 560.28", "SM clock median 1980 -> 1755 MHz"]
    a = attribute(inv, inv, "amax", identity=ident)
    assert a.text.endswith("; run identity differs: driver 550.54 -> 560.28, SM clock median 1980 -> 1755 MHz")
    assert identity_changes({"driver": "x"}, {}) == []  # only what both sides recorded


def test_framework_versions_and_the_kernels_triton_version(tmp_path: Path) -> None:
    from triton_cache_factory import write_kernel

    write_kernel(tmp_path / "a", "amax_kernel", triton_version="3.5.0")
    write_kernel(tmp_path / "b", "amax_kernel", triton_version="3.6.0")
    a, b = parse_cache(tmp_path / "a"), parse_cache(tmp_path / "b")
    assert identity_changes({"framework": {"torch": "2.10.0", "triton": "3.5.0"}},
                            {"framework": {"torch": "2.11.0", "triton": "3.6.0"}}, base_inv=a, head_inv=b) == \
        ["torch 2.10.0 -> 2.11.0", "triton 3.5.0 -> 3.6.0"]
    assert identity_changes({}, {}, base_inv=a, head_inv=b) == ["triton 3.5.0 -> 3.6.0"]
    assert identity_changes({"pins": {"pto_isa.pin": "abc"}}, {"pins": {"pto_isa.pin": "def"}}) == \
        ["pin pto_isa.pin abc -> def"]


def test_variants_one_night_compiled_are_not_a_code_change_real_h200_record() -> None:
    """Hold-out 3 on the H200 (tests/data/flaggems_h200/holdout3_2026-12-02, nights 5 and 6, README-only commits):
    FlagGems' libtuner compiled two more max_kernel configs on night 5; night 6's alert (max 4096x4096) said
    "kernel code changed: max_kernel (variant 254e3310.. gone; ...)" although no variant's code changed."""
    import json

    from zlops.kernels.attribution import VARIANTS_CHANGED

    kernels = Path(__file__).resolve().parents[1] / "data" / "flaggems_h200" / "holdout3_2026-12-02" / "live" / "kernels"
    n5, n6 = (Inventory.from_dict(json.loads((kernels / f"{n}.json").read_text())) for n in ("n5-D3", "n6-D4"))
    a = attribute(n5, n6, "max")
    assert a.kind == VARIANTS_CHANGED, a.text
    assert a.text == ("same kernel code, different variants compiled (specialisations or autotune configs): "
                      "max_kernel (variants 254e3310.., 34a9091c.. not compiled tonight; 2 identical)")
    assert attribute(n6, n5, "max").text.endswith("max_kernel (variants 254e3310.., 34a9091c.. compiled only tonight; "
                                                  "2 identical)")
    # argmax and sub compiled the same code both nights
    assert attribute(n5, n6, "argmax").kind == OUTSIDE and attribute(n5, n6, "sub").kind == OUTSIDE
