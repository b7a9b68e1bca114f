"""Hold-out 2, commit S: sum's wrapper launches its (unchanged) non-inner kernel a second time.

In ``sum_dim_comm``'s ``K > 1`` branch, when the input has >= 2**28 elements, the wrapper launches
``sum_dim_kernel_non_inner`` once more with the same grid, M and K and ``N // 32`` into a scratch buffer: it
reads the first 1/32 of the input again (~3% more bytes, one more launch). M, K and the heuristics' TILE_K,
TILE_N, ONE_TILE_PER_CTA and num_warps are those of the first launch, and N // 32 (32 for the 1024^3 shape)
is divisible by 16 like N, so Triton reuses the compiled kernel: no compiled code changes, only the Python
wrapper (issue 25's "no compiled kernel changed" case). Only ``sum/float16/(1024x1024x1024, 1)`` takes it.
Run in the trimmed tree's root: python3 v2_S_sum_wrapper.py
"""

from _patch import replace_once

anchor = """                sum_dim_kernel_non_inner[grid](
                    out,
                    inp,
                    M,
                    N,
                    K,
                )
"""
extra = anchor + """                if inp.numel() >= 2**28:
                    # injected regression (zlops hold-out 2): the same kernel once more over the
                    # first 1/32 of the input into a scratch buffer, only above 2**28 elements
                    scratch = torch.empty_like(out)
                    sum_dim_kernel_non_inner[grid](
                        scratch,
                        inp,
                        M,
                        N // 32,
                        K,
                    )
"""
replace_once("src/flag_gems/ops/sum.py", anchor, extra, where="the anchor")
