"""Hold-out 4, commit W: argmin's Python wrapper launches its split-K kernel once more (issue 22's ~3%).

In ``argmin``'s split-K branch (N % 64 == 0, K % 32 == 0, M % 8 == 0: of FlagGems' core shapes, argmin over dim 1
of [1024, 1024, 1024] is the one above 2**30 elements), the wrapper launches ``argmin_split_K_kernel_merged`` a
second time over the first MROWS of the M rows (a contiguous prefix viewed as [MROWS, N, K]) into a scratch
buffer: MROWS / M of the bytes again, on a grid of MROWS / 8 x K / 32 programs, and one launch. M is a constexpr
and an autotune key of that kernel, so the process compiles (and autotunes) one more specialisation of the same
kernel source: a wrapper change, not a kernel-source change.
Run in the trimmed tree's root: python3 v4_W_argmin_wrapper.py MROWS   (8, 32 or 64: measured first, on the H200)
"""

import sys

from _patch import replace_once

mrows = int(sys.argv[1]) if len(sys.argv) > 1 else 32
assert mrows % 8 == 0 and 8 <= mrows <= 512, "MROWS keeps M % 8 == 0 (the split-K branch's condition)"
anchor = """                    argmin_split_K_kernel_merged[grid_for_split_K](
                        inp,
                        out_index,
                        M,
                        N,
                        K,
                        dtype=triton_dtype,
                    )
"""
extra = anchor + f"""                    if inp.numel() >= 2**30 and M >= {mrows}:
                        # injected regression (zlops hold-out 4): the same kernel once more over the
                        # first {mrows} of the M rows into a scratch buffer
                        part = inp.reshape(-1)[: {mrows} * N * K].view({mrows}, N, K)
                        scratch = torch.empty(({mrows}, K), dtype=torch.int64, device=inp.device)
                        argmin_split_K_kernel_merged[(triton.cdiv({mrows}, 8), triton.cdiv(K, 32))](
                            part, scratch, {mrows}, N, K, dtype=triton_dtype
                        )
"""
replace_once("src/flag_gems/ops/argmin.py", anchor, extra, where="the split-K launch")
