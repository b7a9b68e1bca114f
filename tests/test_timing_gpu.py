"""zlops.timing on a real CUDA device (run on the H200; skipped where there is no GPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

from zlops.timing import time_op  # noqa: E402


def test_graph_timer_on_cuda_and_launch_overhead_removed() -> None:
    x = torch.randn(64, 512, device="cuda")
    graph = time_op(lambda: torch.softmax(x, -1), op="softmax_small", backend="cuda", rounds=5)
    direct = time_op(lambda: torch.softmax(x, -1), op="softmax_small", backend="cuda", timer="direct", rounds=5)
    assert graph.timer == "graph" and graph.fallback is None and direct.timer == "direct"
    assert graph.median_ms < direct.median_ms  # a tiny kernel: direct timing is mostly launch overhead


def test_refused_capture_falls_back_and_leaves_the_rng_usable() -> None:
    mask = torch.rand(1 << 20, device="cuda") > 0.5
    t = time_op(lambda: torch.nonzero(mask), op="nonzero_1M", backend="cuda", rounds=3)
    assert t.timer == "direct" and t.fallback and "capture" in t.fallback
    # without zlops' repair this raised "Offset increment outside graph capture encountered unexpectedly"
    y = torch.rand(1 << 20, device="cuda")
    after = time_op(lambda: y * 2, op="mul_after", backend="cuda", rounds=3)
    assert after.timer == "graph" and torch.rand(8, device="cuda").sum().item() > 0
