"""Hold-out 2, commit K: a change to the source of sum's non-inner Triton kernel (on top of S).

``sum_dim_kernel_non_inner``'s multi-tile loop runs over ``N + N // 8`` rows and wraps its row offsets modulo
N, so every CTA reads the first eighth of its rows twice (a loop-bound bug of the kind that reaches main:
~12% more bytes; the sums are wrong, which FlagGems' performance mode does not check). The kernel's compiled
code changes, so every shape that takes the loop (``sum`` over dim 1 of [64, 512, 512] and [1024, 1024, 1024])
runs a new kernel (issue 25's "kernel code changed" case), while the wrapper is S's.
Run in the trimmed tree's root: python3 v2_K_sum_kernel.py
"""

from _patch import replace_once

anchor = """        for start_n in range(0, N, TILE_N):
            n_offsets = start_n + tl.arange(0, TILE_N)[:, None]
            inp_offsets = pid_m * N * K + n_offsets * K + k_offsets
"""
changed = """        for start_n in range(0, N + N // 8, TILE_N):
            n_offsets = (start_n + tl.arange(0, TILE_N)[:, None]) % N
            inp_offsets = pid_m * N * K + n_offsets * K + k_offsets
"""
replace_once("src/flag_gems/ops/sum.py", anchor, changed, where="the kernel's loop")
