"""Hold-out 3, commit W: argmax's Python wrapper launches its unchanged non-inner kernel once more (issue 22's ~3%).

In ``argmax``'s ``K > 1`` branch, for an input of 2**30 elements or more (of FlagGems' core shapes only argmax
over dim 1 of [1024, 1024, 1024]), the wrapper launches ``argmax_kernel_non_inner`` a second time over the first
64 x NROWS x K elements (a contiguous prefix viewed as [64, NROWS, K]) into a scratch buffer: 64 * NROWS / 2**20
of the bytes again, and one launch. M = 64, N = NROWS and K = 1024 give the kernel the heuristics values of the
real call (TILE_K 512, TILE_N 64, ONE_TILE_PER_CTA false, 4 warps) and the same integer specialisation (all
divisible by 16), so the process runs the one compiled kernel it already had: no compiled code changes.
Run in the trimmed tree's root: python3 v3_W_argmax_wrapper.py NROWS   (256: W1, 1/64 of the bytes; 384: W2)
"""

import sys

from _patch import replace_once

nrows = int(sys.argv[1]) if len(sys.argv) > 1 else 256
assert nrows % 16 == 0 and 128 < nrows <= 1024, "NROWS keeps the kernel's heuristics and specialisation"
anchor = """                argmax_kernel_non_inner[grid](
                    inp,
                    out_index,
                    M,
                    N,
                    K,
                )
"""
extra = anchor + f"""                if inp.numel() >= 2**30 and M >= 64:
                    # injected regression (zlops hold-out 3): the unchanged kernel once more over the
                    # first 64 x {nrows} x K elements into a scratch buffer
                    part = inp.reshape(-1)[: 64 * {nrows} * K].view(64, {nrows}, K)
                    scratch = torch.empty((64, K), dtype=torch.int64, device=inp.device)
                    argmax_kernel_non_inner[
                        lambda meta: (64, triton.cdiv(K, meta["TILE_K"]))
                    ](part, scratch, 64, {nrows}, K)
"""
replace_once("src/flag_gems/ops/argmax.py", anchor, extra, where="the non-inner launch")
