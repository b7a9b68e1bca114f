"""Hold-out 2, commit K: a change to the source of sum's non-inner Triton kernel.

``sum_dim_kernel_non_inner``'s multi-tile loop gets a ``tl.debug_barrier()`` after each tile's accumulate (a
debugging leftover of the kind that reaches main): the kernel's compiled code changes (a CTA-wide barrier in
the loop), so every shape that takes the loop (``sum`` over dim 1 of [64, 512, 512] and [1024, 1024, 1024])
runs a new kernel (issue 25's "kernel code changed" case). Applied on top of S.
Run in the trimmed tree's root: python3 v2_K_sum_kernel.py
"""

from pathlib import Path

p = Path("src/flag_gems/ops/sum.py")
src = p.read_text()
anchor = """            inp = tl.load(input_ptr + inp_offsets, mask=mask, other=0).to(cdtype)
            sum += inp
        out = tl.sum(sum, axis=0, keep_dims=True)
"""
assert src.count(anchor) == 1, "sum.py changed upstream: the kernel's loop is not where it was"
p.write_text(src.replace(anchor, anchor.replace("            sum += inp\n", "            sum += inp\n            tl.debug_barrier()\n")))
