"""Hold-out 3, commit C: a change to the source of argmax's non-inner Triton kernel (issues 22 and 25).

``argmax_kernel_non_inner``'s multi-tile branch, once its loop is done, reads the first ``N // DIV`` rows of its
column tile again when ``N * K >= 2**20`` (a leftover "re-check" of the kind that reaches main: the result is
the same, since an equal maximum never replaces the left-most index). Among FlagGems' core shapes only
``argmax`` over dim 1 of [1024, 1024, 1024] takes it (N * K = 2**20; [64, 512, 512] has 2**18, the others run
the inner kernel or the 1-D path): ~1/DIV more bytes read there. The kernel's compiled code changes for every
shape that runs the non-inner kernel, so attribution must say "kernel code changed" with both hashes, while
the measured time moves on one shape only.
Run in the trimmed tree's root: python3 v3_C_argmax_kernel.py DIV   (DIV 32: commit C; 64: the alternative C2)
"""

import sys

from _patch import replace_once

div = int(sys.argv[1]) if len(sys.argv) > 1 else 32
anchor = """            update = local_max > max_values
            max_values = tl.where(update, local_max, max_values)
            argmax_values = tl.where(update, start_n + local_argmax, argmax_values)
        offset_index = pid_m * K + k_offset
"""
changed = f"""            update = local_max > max_values
            max_values = tl.where(update, local_max, max_values)
            argmax_values = tl.where(update, start_n + local_argmax, argmax_values)
        if N * K >= 1048576:
            # injected (zlops hold-out 3): the first N // {div} rows once more
            n_again = N // {div}
            for start_n in range(0, n_again, TILE_N):
                n_offset = start_n + tl.arange(0, TILE_N)
                offset = pid_m * N * K + n_offset[:, None] * K + k_offset
                mask = k_offset < K and n_offset[:, None] < n_again
                inp_ptrs = inp + offset
                inp_vals = tl.load(inp_ptrs, mask=mask, other=min_value)
                local_max, local_argmax = tl.max(
                    inp_vals, 0, return_indices=True, return_indices_tie_break_left=True
                )
                update = local_max > max_values
                max_values = tl.where(update, local_max, max_values)
                argmax_values = tl.where(update, start_n + local_argmax, argmax_values)
        offset_index = pid_m * K + k_offset
"""
replace_once("src/flag_gems/ops/argmax.py", anchor, changed, where="the non-inner kernel's loop")
