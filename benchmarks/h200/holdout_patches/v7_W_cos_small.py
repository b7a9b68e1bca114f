"""Hold-out 7, commit W: cos gets a "small-tensor path" whose kernel does TERMS more dependent FMAs per element.

The change a maintainer might make: for small inputs (at most 65536 elements, launch-bound), ``cos`` goes through
a second ``pointwise_dynamic`` function, ``cos_func_small``, which evaluates the Taylor series of cos to TERMS
terms in nested (Horner) form for |x| < 1 and keeps ``tl.cos`` elsewhere (``tl.where``: both are computed). Each
term is one fused multiply-add that depends on the one before, so a thread's work grows by TERMS FMA latencies
(~4 cycles each): tens of nanoseconds on a kernel that the graph timer reads at 1-3 us. Of FlagGems' core shapes
(UnaryPointwiseBenchmark in ``benchmark/core_shapes.yaml``: [1073741824], [64, 64], [4096, 4096], [64, 512, 512],
[1024, 1024, 1024]) only [64, 64] (4096 elements) takes the new path: one launch-bound case, with a new compiled
kernel (a kernel-source change, unlike hold-outs 3-6's wrapper changes). ``cos_`` (in place) is unchanged.
The coefficients are written out (one line per term), so the kernel needs no constexpr arithmetic.

Run in the trimmed tree's root: python3 v7_W_cos_small.py TERMS   (16 ... 64: measured first under
``--mode cudagraph``; the candidate nearest +3% on cos (64, 64) is the nights' W)
"""

import sys

from _patch import replace_once

terms = int(sys.argv[1]) if len(sys.argv) > 1 else 32
assert 2 <= terms <= 256, "TERMS: the number of series terms (one dependent FMA each)"

# cos(x) = 1 - x^2/(1*2) (1 - x^2/(3*4) (1 - x^2/(5*6) (...))): innermost term first
lines = "\n".join(f"    p = 1.0 - (x2 * {1.0 / ((2 * k - 1) * (2 * k)):.9e}) * p" for k in range(terms, 0, -1))
kernel = f'''

@pointwise_dynamic(promotion_methods=[(0, "INT_TO_FLOAT")])
@triton.jit
def cos_func_small(x):
    # small tensors (launch-bound): the Taylor series of cos to {terms} terms in Horner form where |x| < 1
    xf = x.to(tl.float32)
    x2 = xf * xf
    p = x2 * 0.0 + 1.0
{lines}
    return tl.where(tl.abs(xf) < 1.0, p, tl.cos(xf))


def cos(A):
    logger.debug("GEMS COS")
    if A.numel() <= 65536:
        return cos_func_small(A)
    return cos_func(A)
'''
anchor = '''

def cos(A):
    logger.debug("GEMS COS")
    return cos_func(A)
'''
replace_once("src/flag_gems/ops/cos.py", anchor, kernel, where="cos's wrapper")
