"""Hold-out 6, commit W: var_mean's Python wrapper launches its Welford kernel once more (issue 22's ~3%).

In ``var_mean``'s dim branch, after ``dim_compress`` (a contiguous [M, N] copy with the reduced dims last), the
wrapper launches ``var_mean_welford_kernel`` a second time over the first ROWS of the M rows into two scratch
buffers: ROWS / M of the kernel's bytes again, and one launch. Of FlagGems' core shapes (UnaryReductionBenchmark's
in ``benchmark/core_shapes.yaml``: [1048576] (no dim: the other branch), [64, 64], [4096, 4096], [64, 512, 512],
[1024, 1024, 1024], reduced over dim 1) only [1024, 1024, 1024] has 2**30 elements, so only that case reaches the
new branch. M and N are not specialised by ``var_mean_welford_kernel`` (``do_not_specialize``), so no new kernel
variant is compiled: a wrapper change, not a kernel-source change.
Run in the trimmed tree's root: python3 v6_W_var_mean_wrapper.py ROWS   (262144 ... 655360: measured first, the
candidate nearest +3% on [1024, 1024, 1024] is the nights' W)
"""

import sys

from _patch import replace_once

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 524288
assert 1024 <= rows <= 2**20, "ROWS is a prefix of the 2**20 rows of [1024, 1024, 1024] reduced over dim 1"
anchor = """        with torch_device_fn.device(x.device):
            var_mean_welford_kernel[grid](
                x, var, mean, M, N, correction, BLOCK_N=BLOCK_N
            )
"""
extra = anchor + f"""            if x.numel() >= 2**30 and M >= {rows}:
                # injected regression (zlops hold-out 6): the same kernel once more over the
                # first {rows} of the M rows into scratch buffers
                scratch_var = torch.empty(({rows},), dtype=x.dtype, device=x.device)
                scratch_mean = torch.empty_like(scratch_var)
                var_mean_welford_kernel[({rows},)](
                    x, scratch_var, scratch_mean, {rows}, N, correction, BLOCK_N=BLOCK_N
                )
"""
replace_once("src/flag_gems/ops/var_mean.py", anchor, extra, where="var_mean's dim-branch launch")
