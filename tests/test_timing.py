"""zlops.timing against a stub device interface: the policy is arithmetic and needs no GPU.

The stub keeps a fake device clock: each kernel call advances it by the kernel's cost, each Python
launch by a launch overhead that graph replay does not pay, exactly the difference the timers exist
to separate. The real CUDA path is exercised on the H200 (docs/evidence/h200.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from zlops.timing import CapturePoisoned, DeviceInterface, Timing, classify_capture_error, time_op


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.capturing = False
        self.dead = False


class StubDevice:
    """A device whose kernels cost ``kernel_ms`` and whose launches cost ``launch_ms`` more."""

    def __init__(self, kernel_ms: float = 0.010, launch_ms: float = 0.005, capture_error: str | None = None,
                 poison: bool = False, drift: list[float] | None = None) -> None:
        self.clock = Clock()
        self.kernel_ms = kernel_ms
        self.launch_ms = launch_ms
        self.capture_error = capture_error
        self.poison = poison
        self.drift = list(drift or [])
        self.captures = 0
        self.calls = 0

    def kernel(self) -> None:
        if self.clock.capturing:
            if self.capture_error:
                if self.poison:
                    self.clock.dead = True
                raise RuntimeError(self.capture_error)
            self.graph_calls += 1
            return
        self.calls += 1
        bump = self.drift.pop(0) if self.drift else 0.0
        self.clock.now += self.kernel_ms + self.launch_ms + bump

    def interface(self) -> DeviceInterface:
        stub = self

        class Event:
            def record(self) -> None:
                self.t = stub.clock.now

            def elapsed_time(self, other: Any) -> float:
                return other.t - self.t

        class Graph:
            def __init__(self) -> None:
                stub.captures += 1
                stub.graph_calls = 0
                self.n = 0

            def replay(self) -> None:
                stub.clock.now += self.n * stub.kernel_ms

        @contextlib.contextmanager
        def graph_context(graph: Graph) -> Iterator[None]:
            stub.clock.capturing = True
            try:
                yield
            finally:
                stub.clock.capturing = False
            graph.n = stub.graph_calls

        def synchronize() -> None:
            if stub.clock.dead:
                raise RuntimeError("device context lost")

        return DeviceInterface("stub", synchronize, Event, object, lambda s: contextlib.nullcontext(),
                               lambda: None, Graph, graph_context)


def test_graph_replay_removes_launch_overhead() -> None:
    stub = StubDevice(kernel_ms=0.010, launch_ms=0.005)
    t = time_op(stub.kernel, op="tanh", backend="cuda", interface=stub.interface(), rounds=4)
    assert t.timer == "graph" and t.fallback is None
    assert len(t.samples) == 4
    assert t.median_ms == pytest.approx(0.010)
    direct = time_op(stub.kernel, op="tanh", backend="cuda", timer="direct", interface=stub.interface(), rounds=4)
    assert direct.timer == "direct" and direct.median_ms == pytest.approx(0.015)


def test_backends_without_capture_time_directly() -> None:
    stub = StubDevice()
    t = time_op(stub.kernel, op="add", backend="ascend", interface=stub.interface())
    assert t.timer == "direct" and t.fallback is None and stub.captures == 0


def test_refused_capture_falls_back_to_direct_and_says_why() -> None:
    stub = StubDevice(capture_error="CUDA error: operation not permitted when stream is capturing")
    t = time_op(stub.kernel, op="sort", backend="cuda", interface=stub.interface())
    assert t.timer == "direct"
    assert t.fallback is not None and "operation not permitted when stream is capturing" in t.fallback
    assert t.params()["fallback"] == t.fallback
    assert t.median_ms == pytest.approx(0.015)


def test_a_capture_that_kills_the_context_is_not_a_measurement() -> None:
    stub = StubDevice(capture_error="MUSA error: unknown error", poison=True)
    with pytest.raises(CapturePoisoned, match="BENCHMARK_CAPTURE_POISONED op=unique2"):
        time_op(stub.kernel, op="unique2", backend="musa", interface=stub.interface())


def test_a_context_found_dead_after_any_capture_error_is_poisoned() -> None:
    stub = StubDevice(capture_error="stream is capturing", poison=True)
    with pytest.raises(CapturePoisoned):
        time_op(stub.kernel, op="rand", backend="cuda", interface=stub.interface())


def test_a_kernel_error_during_capture_is_re_raised() -> None:
    stub = StubDevice(capture_error="CUDA error: an illegal memory access was encountered")
    with pytest.raises(RuntimeError, match="illegal memory access"):
        time_op(stub.kernel, op="gather", backend="cuda", interface=stub.interface())


def test_deny_list_skips_the_capture_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    stub = StubDevice(capture_error="MUSA error: unknown error", poison=True)
    t = time_op(stub.kernel, op="unique2", backend="musa", interface=stub.interface(), deny_ops=["unique2"])
    assert t.timer == "direct" and "deny list" in (t.fallback or "") and stub.captures == 0
    monkeypatch.setenv("ZL_CAPTURE_DENY", "perf_sort, unique2")
    stub2 = StubDevice(capture_error="MUSA error: unknown error", poison=True)
    t2 = time_op(stub2.kernel, op="perf_sort", backend="musa", interface=stub2.interface())
    assert t2.timer == "direct" and stub2.captures == 0


def test_direct_repeat_keeps_the_median_over_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 rounds x 3 repeats x 2 iters: one repeat of each round is hit by a 1 ms stall
    stall = [0.0] * 3 + []  # warmup calls
    per_round = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]  # repeat 1 stalls both iters, repeats 2-3 clean
    stub = StubDevice(kernel_ms=0.010, launch_ms=0.0, drift=stall + per_round * 3)
    monkeypatch.setenv("ZL_DIRECT_REPEAT", "3")
    t = time_op(stub.kernel, op="add", backend="ascend", interface=stub.interface(), rounds=3, iters=2)
    assert t.direct_repeat == 3
    assert all(s == pytest.approx(0.010) for s in t.samples)  # the stalled call is outvoted
    stub1 = StubDevice(kernel_ms=0.010, launch_ms=0.0, drift=stall + per_round[:2] * 3)
    t1 = time_op(stub1.kernel, op="add", backend="ascend", interface=stub1.interface(), rounds=3, iters=2,
                 direct_repeat=1)
    assert all(s == pytest.approx(1.010) for s in t1.samples)  # without repeats the stall is the sample


@pytest.mark.parametrize("bad", ["0", "-2", "three"])
def test_direct_repeat_must_be_positive(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("ZL_DIRECT_REPEAT", bad)
    stub = StubDevice()
    with pytest.raises(ValueError, match="ZL_DIRECT_REPEAT"):
        time_op(stub.kernel, op="add", backend="ascend", interface=stub.interface())


def test_cpu_backend_uses_wall_clock() -> None:
    calls = []
    t = time_op(lambda: calls.append(1), op="noop", backend="cpu", rounds=2, iters=3, warmup=1)
    assert isinstance(t, Timing) and t.timer == "direct" and len(t.samples) == 2 and len(calls) == 1 + 2 * 3


def test_error_wording_is_per_backend() -> None:
    err = RuntimeError("MUSA error: unknown error")
    assert classify_capture_error("musa", err) == "poisoned"
    assert classify_capture_error("cuda", err) == "kernel"
    assert classify_capture_error("mthreads", RuntimeError("MUSAGeneratorImpl::current_seed is not callable")) == \
        "refused"


def _with_state(stub: StubDevice, *, repairable: bool) -> tuple[DeviceInterface, list[str]]:
    """A stub whose failed capture breaks 'RNG' until one complete capture runs (as torch does)."""
    calls: list[str] = []
    base = stub.interface()
    broken = {"rng": False}
    original = stub.kernel

    def kernel() -> None:
        if stub.clock.capturing and stub.capture_error:
            broken["rng"] = True
        original()

    stub.kernel = kernel  # type: ignore[method-assign]

    def repair() -> None:
        calls.append("repair")
        if repairable:
            broken["rng"] = False

    def health() -> None:
        calls.append("health")
        if broken["rng"]:
            raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")

    import dataclasses

    return dataclasses.replace(base, repair=repair, health_check=health), calls


def test_a_refused_capture_is_repaired_before_direct_timing() -> None:
    stub = StubDevice(capture_error="CUDA error: operation failed due to a previous error during capture")
    dev, calls = _with_state(stub, repairable=True)
    t = time_op(stub.kernel, op="nonzero_1M", backend="cuda", interface=dev)
    assert t.timer == "direct" and "previous error during capture" in (t.fallback or "")
    assert calls == ["repair", "health"]


def test_an_unrepairable_context_after_a_refused_capture_is_poisoned() -> None:
    stub = StubDevice(capture_error="CUDA error: operation failed due to a previous error during capture")
    dev, calls = _with_state(stub, repairable=False)
    with pytest.raises(CapturePoisoned, match="nonzero_1M"):
        time_op(stub.kernel, op="nonzero_1M", backend="cuda", interface=dev)
    assert calls == ["repair", "health"]
