"""Tiny pytest-benchmark suite used only to record real ``--benchmark-json`` fixtures.

Not part of zlops' own test run (``tests/conftest.py`` ignores ``tests/data``). See
``../PROVENANCE.md`` for the exact commands. The class re-uses the name ``test_sort`` on
purpose so the recorded output has two benchmarks sharing a ``name`` (only ``fullname`` differs).
"""

from __future__ import annotations

import random

import numpy as np
import pytest


def _data(n: int) -> list[float]:
    rng = random.Random(n)
    return [rng.random() for _ in range(n)]


@pytest.mark.parametrize("n", [256, 4096])
def test_sort(benchmark, n):
    data = _data(n)
    result = benchmark.pedantic(sorted, args=(data,), rounds=5, iterations=10)
    assert len(result) == n


@pytest.mark.benchmark(group="numpy")
def test_matmul(benchmark):
    a = np.arange(64 * 64, dtype=np.float64).reshape(64, 64)
    benchmark.extra_info["shape"] = [64, 64]
    benchmark.extra_info["dtype"] = "float64"
    result = benchmark.pedantic(np.matmul, args=(a, a), rounds=5, iterations=10)
    assert result.shape == (64, 64)


class TestNumpy:
    @pytest.mark.parametrize("n", [256])
    def test_sort(self, benchmark, n):
        data = np.array(_data(n))
        result = benchmark.pedantic(np.sort, args=(data,), rounds=5, iterations=10)
        assert result.shape == (n,)
