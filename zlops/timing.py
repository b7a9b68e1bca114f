"""Timers for Python harnesses: graph replay where the backend can capture, direct timing otherwise.

``time_op(fn, op=..., backend=...)`` times one operator call and returns raw per-round samples in
milliseconds with the timer that produced them, so a row says how it was measured:

- **graph**: ``calls_per_graph`` calls are captured once into a device graph and the graph is
  replayed; each sample is (elapsed of ``replays`` replays) / (replays x calls_per_graph). This
  removes the Python launch path, which dominates small kernels (the seed measured batch_norm
  0.0758 ms direct vs 0.0089 ms captured on an S5000; GEMMs unchanged).
- **direct**: each sample is the median over ``iters`` timed calls (device events when the backend
  has them, ``perf_counter`` on the CPU). ``ZL_DIRECT_REPEAT=N`` repeats the whole measurement N
  times in fresh calls and keeps, per round, the median over the N calls: the layer an inner median
  cannot see (clock ramps, another process arriving).

The timer comes from the backend's capability flags. A capture the device refuses (RNG seeding,
a capture-illegal stream op) falls back to direct for that shape, recorded in ``fallback``; a
capture failure that leaves the device context unusable raises :class:`CapturePoisoned` (a
fallback latency measured in a dead context would be a lie); a kernel that fails eagerly re-raises
(a broken kernel is not a measurement). ``deny_ops`` (or ``ZL_CAPTURE_DENY=op1,op2``) skips the
capture attempt for operators known to poison the context. The device interface (synchronize,
Event, Stream, graph class) comes from the backend (:func:`device_interface`), never from
``torch.cuda`` by name. Nothing here imports torch until a device backend is used.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from zlops.backends import get_spec

log = logging.getLogger(__name__)

#: error wording per backend: a capture the runtime refuses (fall back) vs one that poisons the context
REFUSED_MARKERS: dict[str, tuple[str, ...]] = {
    "cuda": ("operation not permitted when stream is capturing", "cudaErrorStreamCaptureUnsupported",
             "cudaErrorStreamCaptureInvalidated", "cudaErrorStreamCaptureImplicit", "stream is capturing",
             "not supported during capture", "capture", "current_seed", "CUDA generator"),
    "rocm": ("operation not permitted when stream is capturing", "hipErrorStreamCaptureUnsupported",
             "stream is capturing", "capture"),
    "musa": ("operation not permitted when stream is capturing", "MUSAGeneratorImpl::current_seed",
             "stream is capturing", "capture"),
}
POISONED_MARKERS: dict[str, tuple[str, ...]] = {
    "musa": ("MUSA error: unknown error",),
}


class CapturePoisoned(RuntimeError):
    """A capture attempt left the device context unusable: the operator is capture-incompatible."""


@dataclass(frozen=True)
class DeviceInterface:
    """What the timers need from a device runtime, supplied by the backend."""

    name: str
    synchronize: Callable[[], None]
    event: Callable[[], Any] | None          # returns an event with record() and elapsed_time(other) in ms
    stream: Callable[[], Any] | None          # a new side stream
    stream_context: Callable[[Any], Any] | None
    current_stream: Callable[[], Any] | None
    graph_class: type | None                  # CUDAGraph / MUSAGraph / NPUGraph
    graph_context: Callable[..., Any] | None  # torch.cuda.graph-like context manager (graph, stream=...)
    #: after a refused capture: re-balances runtime state the failed capture left behind
    repair: Callable[[], None] | None = None
    #: raises when the context cannot run work any more (allocation, RNG, sync)
    health_check: Callable[[], None] | None = None

    @property
    def can_capture(self) -> bool:
        return self.graph_class is not None and self.graph_context is not None


def _torch_interface(name: str, module: Any, graph_attr: str, device: str) -> DeviceInterface:
    import torch

    def event() -> Any:
        return module.Event(enable_timing=True)

    graph_class = getattr(module, graph_attr, None)
    graph_context = getattr(module, "graph", None)

    def repair() -> None:
        # Seen on an H200 (torch 2.11): after a refused capture (torch.nonzero) the default generator
        # stays registered to the dead capture and every later torch.rand* raises "Offset increment
        # outside graph capture encountered unexpectedly". Restoring the generator state or deleting
        # the graph does not help; one complete trivial capture does (benchmarks/h200/capture_repair.py).
        if graph_class is None or graph_context is None:
            return
        x = torch.zeros(1, device=device)
        with graph_context(graph_class()):
            x.add_(1)
        module.synchronize()

    def health_check() -> None:
        torch.rand(8, device=device).sum().item()
        module.synchronize()

    return DeviceInterface(
        name=name, synchronize=module.synchronize, event=event, stream=module.Stream,
        stream_context=module.stream, current_stream=module.current_stream,
        graph_class=graph_class, graph_context=graph_context, repair=repair, health_check=health_check)


def device_interface(backend: str) -> DeviceInterface:
    """The device runtime of ``backend``: torch.cuda (cuda, rocm), torch.musa, torch.npu, or the CPU."""
    spec = get_spec(backend)
    if spec.name == "cpu":
        return DeviceInterface("cpu", lambda: None, None, None, None, None, None, None)
    import torch  # the harness's own torch; only imported when a device backend is used

    if spec.name in ("cuda", "rocm"):
        return _torch_interface(spec.name, torch.cuda, "CUDAGraph", "cuda")
    if spec.name == "musa":
        import torch_musa  # noqa: F401  (registers torch.musa)

        return _torch_interface("musa", torch.musa, "MUSAGraph", "musa")
    import torch_npu  # noqa: F401  (registers torch.npu)

    return _torch_interface("ascend", torch.npu, "NPUGraph", "npu")


def classify_capture_error(backend: str, exc: BaseException) -> str:
    """'poisoned', 'refused' or 'kernel' for an exception raised while capturing."""
    text = f"{type(exc).__name__}: {exc}"
    name = get_spec(backend).name
    if any(m in text for m in POISONED_MARKERS.get(name, ())):
        return "poisoned"
    if any(m.lower() in text.lower() for m in REFUSED_MARKERS.get(name, ())):
        return "refused"
    return "kernel"


@dataclass(frozen=True)
class Timing:
    """Samples of one operator (ms), and how they were measured."""

    op: str
    samples: tuple[float, ...]
    timer: str                       # "graph" | "direct"
    fallback: str | None = None      # why a graph-capable backend timed this directly
    direct_repeat: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.samples))

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timer": self.timer, "direct_repeat": self.direct_repeat}
        if self.fallback:
            out["fallback"] = self.fallback
        return {**out, **self.extra}


def _env_list(name: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in os.environ.get(name, "").split(",") if x.strip())


def direct_repeat_from_env() -> int:
    raw = os.environ.get("ZL_DIRECT_REPEAT", "1").strip() or "1"
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"ZL_DIRECT_REPEAT must be a positive integer, got {raw!r}") from None
    if n < 1:
        raise ValueError(f"ZL_DIRECT_REPEAT must be a positive integer, got {n}")
    return n


def _elapsed_ms(dev: DeviceInterface, body: Callable[[], None]) -> float:
    if dev.event is None:
        t0 = time.perf_counter()
        body()
        return (time.perf_counter() - t0) * 1e3
    start, end = dev.event(), dev.event()
    start.record()
    body()
    end.record()
    dev.synchronize()
    return float(start.elapsed_time(end))


def _direct_once(fn: Callable[[], Any], dev: DeviceInterface, iters: int) -> float:
    """Median over ``iters`` individually timed calls (one round)."""
    per_call = [_elapsed_ms(dev, fn) for _ in range(iters)]
    return float(statistics.median(per_call))


def time_direct(fn: Callable[[], Any], dev: DeviceInterface, *, rounds: int, iters: int, repeat: int) -> list[float]:
    """Direct timing: per round, the median over ``repeat`` fresh measurements of a median of ``iters`` calls."""
    samples = []
    for _ in range(rounds):
        calls = [_direct_once(fn, dev, iters) for _ in range(repeat)]
        samples.append(float(statistics.median(calls)))
    return samples


def _capture(fn: Callable[[], Any], dev: DeviceInterface, calls_per_graph: int) -> Any:
    assert dev.graph_class is not None and dev.graph_context is not None and dev.stream is not None
    side = dev.stream()
    with dev.stream_context(side) if dev.stream_context else _null():  # warm the side stream like torch's docs
        fn()
    dev.synchronize()
    graph = dev.graph_class()
    with dev.graph_context(graph):
        for _ in range(calls_per_graph):
            fn()
    dev.synchronize()
    return graph


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def time_graph(graph: Any, dev: DeviceInterface, *, rounds: int, replays: int, calls_per_graph: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        def body() -> None:
            for _ in range(replays):
                graph.replay()

        samples.append(_elapsed_ms(dev, body) / (replays * calls_per_graph))
    return samples


def _context_alive(dev: DeviceInterface) -> bool:
    """After a failed capture: repair what the runtime left behind, then prove the context still works."""
    try:
        dev.synchronize()
        if dev.repair is not None:
            dev.repair()
        if dev.health_check is not None:
            dev.health_check()
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return False
    return True


def time_op(fn: Callable[[], Any], *, op: str, backend: str, timer: str | None = None, rounds: int = 5,
            iters: int = 20, warmup: int = 3, calls_per_graph: int = 10, replays: int = 20,
            deny_ops: Sequence[str] | None = None, direct_repeat: int | None = None,
            interface: DeviceInterface | None = None) -> Timing:
    """Time ``fn`` (one operator call) on ``backend``; see the module docstring for the policy."""
    dev = interface or device_interface(backend)
    spec = get_spec(backend)
    chosen = timer or (spec.default_timer if spec.supports_graph_capture else "direct")
    if chosen not in ("graph", "direct"):
        raise ValueError(f"timer must be 'graph' or 'direct', got {chosen!r}")
    repeat = direct_repeat if direct_repeat is not None else direct_repeat_from_env()
    deny = set(deny_ops if deny_ops is not None else _env_list("ZL_CAPTURE_DENY"))
    for _ in range(warmup):  # eager first: a kernel that fails here is broken, not capture-incompatible
        fn()
    dev.synchronize()
    fallback = None
    if chosen == "graph":
        if not dev.can_capture:
            fallback = f"backend {spec.name} exposes no graph class"
        elif op in deny:
            fallback = "capture denied for this operator (deny list)"
        else:
            try:
                graph = _capture(fn, dev, calls_per_graph)
            except Exception as exc:
                kind = classify_capture_error(spec.name, exc)
                if kind == "poisoned" or not _context_alive(dev):
                    raise CapturePoisoned(f"BENCHMARK_CAPTURE_POISONED op={op}: capture left the {spec.name} "
                                          f"context unusable: {exc}") from exc
                if kind == "kernel":
                    raise
                fallback = f"capture refused: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                log.info("op %s: %s; timing directly", op, fallback)
            else:
                samples = time_graph(graph, dev, rounds=rounds, replays=replays, calls_per_graph=calls_per_graph)
                return Timing(op, tuple(samples), "graph", None, 1,
                              {"calls_per_graph": calls_per_graph, "replays": replays})
    samples = time_direct(fn, dev, rounds=rounds, iters=iters, repeat=repeat)
    return Timing(op, tuple(samples), "direct", fallback, repeat, {"iters": iters})
