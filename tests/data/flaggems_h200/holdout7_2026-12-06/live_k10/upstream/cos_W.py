# Copyright 2026 FlagOS Contributors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

import logging

import triton
import triton.language as tl

from flag_gems.utils import pointwise_dynamic

logger = logging.getLogger(__name__)


@pointwise_dynamic(promotion_methods=[(0, "INT_TO_FLOAT")])
@triton.jit
def cos_func(x):
    return tl.cos(x.to(tl.float32))


@pointwise_dynamic(promotion_methods=[(0, "INT_TO_FLOAT")])
@triton.jit
def cos_func_small(x):
    # small tensors (launch-bound): the Taylor series of cos to 10 terms in Horner form where |x| < 1
    xf = x.to(tl.float32)
    x2 = xf * xf
    p = x2 * 0.0 + 1.0
    p = 1.0 - (x2 * 2.631578947e-03) * p
    p = 1.0 - (x2 * 3.267973856e-03) * p
    p = 1.0 - (x2 * 4.166666667e-03) * p
    p = 1.0 - (x2 * 5.494505495e-03) * p
    p = 1.0 - (x2 * 7.575757576e-03) * p
    p = 1.0 - (x2 * 1.111111111e-02) * p
    p = 1.0 - (x2 * 1.785714286e-02) * p
    p = 1.0 - (x2 * 3.333333333e-02) * p
    p = 1.0 - (x2 * 8.333333333e-02) * p
    p = 1.0 - (x2 * 5.000000000e-01) * p
    return tl.where(tl.abs(xf) < 1.0, p, tl.cos(xf))


def cos(A):
    logger.debug("GEMS COS")
    if A.numel() <= 65536:
        return cos_func_small(A)
    return cos_func(A)


def cos_(A):
    logger.debug("GEMS COS_")
    cos_func(A, out0=A)
    return A
