"""Hold-out 5, commit W: amin's Python wrapper launches its reduction kernel once more (issue 22's ~3%).

In ``amin``'s dim branch, after ``dim_compress`` (a contiguous [M, N] copy with the reduced dims last), the wrapper
launches ``amin_kernel`` a second time over the first ROWS of the M rows into a scratch buffer: ROWS / M of the
kernel's bytes again, and one launch. Of FlagGems' core shapes (UnaryReductionBenchmark's in
``benchmark/core_shapes.yaml``: [1048576], [64, 64], [4096, 4096], [64, 512, 512], [1024, 1024, 1024], reduced over
dim 1) only [1024, 1024, 1024] has 2**30 elements, so only that case reaches the new branch. M is an autotune key of
``amin_kernel``, so the process tunes one more specialisation of the same kernel source (in its warm-up): a wrapper
change, not a kernel-source change.
Run in the trimmed tree's root: python3 v5_W_amin_wrapper.py ROWS   (65536 ... 524288: measured first; the first
lease's ground truth put 65536/131072/196608 at +0.41/+0.84/+1.17% of 7.86 ms, so the nights' candidates are
393216 and 524288)
"""

import sys

from _patch import replace_once

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 524288
assert 1024 <= rows <= 2**20, "ROWS is a prefix of the 2**20 rows of [1024, 1024, 1024] reduced over dim 1"
anchor = """        with torch_device_fn.device(inp.device):
            amin_kernel[grid](inp, out, M, N)
"""
extra = anchor + f"""            if inp.numel() >= 2**30 and M >= {rows}:
                # injected regression (zlops hold-out 5): the same kernel once more over the
                # first {rows} of the M rows into a scratch buffer
                scratch = torch.empty(({rows},), dtype=dtype, device=inp.device)
                amin_kernel[lambda meta: (triton.cdiv({rows}, meta["BLOCK_M"]),)](
                    inp, scratch, {rows}, N
                )
"""
replace_once("src/flag_gems/ops/amin.py", anchor, extra, where="amin's dim-branch launch")
