"""What else runs beside a benchmark: host load, other processes' CPU, steal, foreign device processes.

Found: with load 5 on 2 cores, unchanged operators on a CPU pool were reported 95% and 23% better.
A measurement taken while other programs competed for the host says nothing about the code, so:

- the cpu backend's sampler records, beside its clock, the 1-minute load average, the CPU other
  processes used (``foreign_cpu_pct``: % of one CPU, so 180 means 1.8 cores; the processes of this
  zlops process' own tree, the benchmark included, are not foreign) and the steal time;
- on accelerator pools a watch lists the processes on the shard's device during the run; one that is
  not of this process' tree and is visible in this pid namespace is foreign (a pid of another
  namespace, e.g. nvidia-smi in a container, cannot be attributed and is only recorded);
- both are summarized into the shard's telemetry summary (``contention.json`` holds what a CSV row
  cannot: the busiest foreign processes, the foreign device processes), and
  :func:`shard_invalid_reason` turns a summary beyond the pool's limits into the reason the shard is
  INVALID, e.g. ``host busy: other processes used 180% CPU (limit 25%) during the run``;
- before a shard runs, :func:`wait_for_quiet` waits, bounded by ``contention_wait_s``, for the host
  to come under its limits.

Limits (``max_foreign_cpu_pct``, ``max_host_load``, ``max_steal_pct``, ``contention_wait_s``) are
set per pool or globally under ``contention:`` (:meth:`zlops.config.Config.host_limits`); unset means
measured and reported, never a gate.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zlops.telemetry import PollingSampler, TelemetrySample, TelemetrySampler

log = logging.getLogger(__name__)

CONTENTION_FILE = "contention.json"
#: a read this soon after the previous one is too short a window for a CPU share
_MIN_WINDOW_S = 0.2
_TOP = 5


@dataclass(frozen=True)
class HostLimits:
    """A pool's contention limits; None means the figure is recorded but never gates a shard."""

    max_foreign_cpu_pct: float | None = None   # other processes' CPU, % of one CPU, mean over the run
    max_host_load: float | None = None         # 1-minute load average before the run (the wait's gate)
    max_steal_pct: float | None = None         # hypervisor steal, % of all CPU time, max over the run
    contention_wait_s: float = 0.0             # how long a shard waits for a quiet host before it runs

    @property
    def gates(self) -> bool:
        return any(v is not None for v in (self.max_foreign_cpu_pct, self.max_host_load, self.max_steal_pct))


@dataclass(frozen=True)
class HostReading:
    """One window of the host: load average, other processes' CPU (% of one CPU), steal (%)."""

    load1: float | None
    foreign_cpu_pct: float | None
    steal_pct: float | None
    window_s: float = 0.0


def own_pids(root: int | None = None) -> set[int]:
    """``root`` (default: this process) and every descendant: the benchmark and what it started."""
    import psutil

    root = os.getpid() if root is None else root
    try:
        proc = psutil.Process(root)
        return {root, *(c.pid for c in proc.children(recursive=True))}
    except psutil.Error:
        return {root}


class HostSampler:
    """Reads the CPU other processes used since the previous read (per-process CPU-time deltas).

    ``own`` returns the pids that are not foreign (default: this process' tree, re-read each time,
    so the benchmark started after the sampler counts as own). Totals over every read are kept
    for the summary: the mean foreign share over the whole run and the busiest foreign processes.
    """

    def __init__(self, *, own: Callable[[], set[int]] = own_pids,
                 clock: Callable[[], float] = time.monotonic) -> None:
        import psutil

        self._psutil = psutil
        self._own = own
        self._clock = clock
        self._lock = threading.Lock()
        self._cpu: dict[int, float] = {}
        self.foreign_cpu_s = 0.0
        self.wall_s = 0.0
        self.by_process: dict[int, tuple[str, float]] = {}
        self._steal = self._cpu_times()
        self._cpu, _ = self._snapshot(set())
        self._last = clock()

    def _cpu_times(self) -> tuple[float, float] | None:
        t = self._psutil.cpu_times()
        steal = getattr(t, "steal", None)
        return None if steal is None else (float(steal), float(sum(t)))

    def _snapshot(self, own: set[int]) -> tuple[dict[int, float], dict[int, str]]:
        cpu: dict[int, float] = {}
        names: dict[int, str] = {}
        for p in self._psutil.process_iter(["pid", "name", "cpu_times"]):
            info = p.info
            times = info.get("cpu_times")
            if times is None or info["pid"] in own:
                continue
            cpu[info["pid"]] = float(times.user + times.system)
            names[info["pid"]] = info.get("name") or "?"
        return cpu, names

    def read(self) -> HostReading:
        with self._lock:
            now = self._clock()
            window = now - self._last
            try:
                load1: float | None = os.getloadavg()[0]
            except OSError:
                load1 = None
            if window < _MIN_WINDOW_S:
                return HostReading(load1, None, None, window)
            own = self._own()
            cpu, names = self._snapshot(own)
            used = 0.0
            for pid, total in cpu.items():
                # a process seen before: what it used since; a new one: all it used (it started in the window)
                delta = max(0.0, total - self._cpu.get(pid, 0.0))
                if delta:
                    used += delta
                    name, before = self.by_process.get(pid, (names[pid], 0.0))
                    self.by_process[pid] = (name, before + delta)
            self._cpu = cpu
            steal_pct = None
            steal = self._cpu_times()
            if steal is not None and self._steal is not None and steal[1] > self._steal[1]:
                steal_pct = 100.0 * (steal[0] - self._steal[0]) / (steal[1] - self._steal[1])
            self._steal = steal
            self._last = now
            self.foreign_cpu_s += used
            self.wall_s += window
            return HostReading(load1, 100.0 * used / window, steal_pct, window)

    def totals(self, top_n: int = _TOP) -> dict[str, Any]:
        """Mean foreign CPU over every read so far and the ``top_n`` busiest foreign processes
        (name, pid, % of one CPU)."""
        with self._lock:
            if self.wall_s <= 0:
                return {}
            top = sorted(self.by_process.items(), key=lambda kv: -kv[1][1])[:top_n]
            return {"foreign_cpu_mean_pct": round(100.0 * self.foreign_cpu_s / self.wall_s, 1),
                    "foreign_top": [[name, pid, round(100.0 * cpu / self.wall_s, 1)] for pid, (name, cpu) in top
                                    if cpu > 0]}


class HostContentionSampler(PollingSampler):
    """The cpu backend's sampler: its telemetry rows carry the host readings; on stop, one last read
    closes the window and ``contention.json`` keeps the run's totals."""

    def __init__(self, out_dir: Path, read: Callable[[HostReading], Iterable[TelemetrySample]], *,
                 interval_s: float = 1.0, host: HostSampler | None = None) -> None:
        self.host = host or HostSampler()
        super().__init__(out_dir, lambda: read(self.host.read()), interval_s=interval_s)

    def start(self) -> None:
        (self.out_dir / CONTENTION_FILE).unlink(missing_ok=True)  # a retried shard's last attempt
        super().start()

    def stop(self) -> None:
        super().stop()
        try:
            self.host.read()
            merge_contention(self.out_dir, self.host.totals())
        except Exception as exc:  # noqa: BLE001 - evidence, never a reason to lose the benchmark
            log.warning("host contention totals not written: %s", exc)


def merge_contention(out_dir: Path, values: Mapping[str, Any]) -> None:
    """Add ``values`` to the shard's contention.json (written atomically)."""
    path = out_dir / CONTENTION_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data.update(values)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)


def read_contention(out_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((out_dir / CONTENTION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# --- foreign processes on an accelerator --------------------------------------------------------

DeviceLister = Callable[[], Mapping[int, list[tuple[int, str]]] | None]


@dataclass
class _Seen:
    foreign: dict[int, str] = field(default_factory=dict)
    elsewhere: dict[int, str] = field(default_factory=dict)
    polls: int = 0
    error: str = ""


class DeviceProcessWatch(TelemetrySampler):
    """Wraps a backend's telemetry sampler; meanwhile lists the processes on ``devices`` (``lister``:
    device -> [(pid, name)], None when the tool cannot say) at start and every ``interval_s`` until
    the benchmark ends, and keeps in ``contention.json`` the foreign ones it saw."""

    def __init__(self, inner: TelemetrySampler, devices: Iterable[int], lister: DeviceLister, *,
                 interval_s: float = 2.0, own: Callable[[], set[int]] = own_pids) -> None:
        super().__init__(inner.out_dir)
        self.inner = inner
        self.devices = {int(d) for d in devices}
        self._lister = lister
        self._interval = interval_s
        self._own = own
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = _Seen()

    def start(self) -> None:
        (self.out_dir / CONTENTION_FILE).unlink(missing_ok=True)  # a retried shard's last attempt
        self.inner.start()
        self._thread = threading.Thread(target=self._loop, name="zlops-device-procs", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        import psutil

        try:
            listing = self._lister()
        except Exception as exc:  # noqa: BLE001 - the watch is evidence; a failing tool ends it quietly
            self._seen.error = f"{type(exc).__name__}: {exc}"
            return
        if listing is None:
            return
        self._seen.polls += 1
        own = self._own()
        for device, procs in listing.items():
            if device not in self.devices:
                continue
            for pid, name in procs:
                if pid in own:
                    continue
                if psutil.pid_exists(pid):
                    self._seen.foreign.setdefault(pid, name)
                else:  # another pid namespace (a container): cannot be told apart from the benchmark
                    self._seen.elsewhere.setdefault(pid, name)

    def _loop(self) -> None:
        while True:
            self._poll()
            if self._stop.wait(self._interval):
                return

    def stop(self) -> None:
        # no last poll: a process that starts after the benchmark ended did not share the device with it
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.inner.stop()
        seen = self._seen
        values: dict[str, Any] = {"device_process_polls": seen.polls,
                                  "foreign_device_processes": [[pid, n] for pid, n in sorted(seen.foreign.items())]}
        if seen.elsewhere:
            values["unattributed_device_processes"] = [[pid, n] for pid, n in sorted(seen.elsewhere.items())]
        if seen.error:
            values["device_process_error"] = seen.error
        try:
            merge_contention(self.out_dir, values)
        except OSError as exc:
            log.warning("device process watch not written: %s", exc)


# --- the gate -------------------------------------------------------------------------------------

def _limit(pool_config: Any, name: str) -> float | None:
    value = pool_config.get(name) if isinstance(pool_config, Mapping) else getattr(pool_config, name, None)
    return None if value is None else float(value)


def shard_invalid_reason(telemetry_summary: Mapping[str, Any] | None, pool_config: Any) -> str | None:
    """Why a shard's measurement cannot be judged, from its telemetry summary; None when it can.

    ``pool_config`` is anything with ``max_foreign_cpu_pct`` / ``max_steal_pct`` (a
    :class:`HostLimits`, a pool's config, or a mapping). A foreign process on the shard's device
    (``foreign_device_processes``) always invalidates; the host figures only beyond a set limit.
    """
    t = telemetry_summary or {}
    reasons = []
    procs = t.get("foreign_device_processes") or []
    if procs:
        named = ", ".join(f"pid {pid} ({name})" for pid, name in procs[:3]) + (" ..." if len(procs) > 3 else "")
        reasons.append(f"device shared: {len(procs)} foreign process(es) on the device during the run: {named}")
    cpu, cpu_limit = t.get("foreign_cpu_mean_pct"), _limit(pool_config, "max_foreign_cpu_pct")
    if cpu is not None and cpu_limit is not None and float(cpu) > cpu_limit:
        top = t.get("foreign_top") or []
        busiest = (" (busiest: " + ", ".join(f"{n} pid {pid} {pct:g}%" for n, pid, pct in top[:3]) + ")") if top else ""
        reasons.append(f"host busy: other processes used {float(cpu):.0f}% CPU (limit {cpu_limit:g}%) "
                       f"during the run{busiest}")
    steal, steal_limit = t.get("steal_max_pct"), _limit(pool_config, "max_steal_pct")
    if steal is not None and steal_limit is not None and float(steal) > steal_limit:
        reasons.append(f"host busy: the hypervisor stole {float(steal):.0f}% of the CPU time (limit {steal_limit:g}%)")
    return "; ".join(reasons) or None


def busy_reason(reading: HostReading, limits: HostLimits) -> str | None:
    """Why the host is too busy to start a shard now (None when it is quiet enough)."""
    out = []
    if limits.max_foreign_cpu_pct is not None and reading.foreign_cpu_pct is not None \
            and reading.foreign_cpu_pct > limits.max_foreign_cpu_pct:
        out.append(f"other processes use {reading.foreign_cpu_pct:.0f}% CPU (limit {limits.max_foreign_cpu_pct:g}%)")
    if limits.max_host_load is not None and reading.load1 is not None and reading.load1 > limits.max_host_load:
        out.append(f"load average {reading.load1:.2f} (limit {limits.max_host_load:g})")
    if limits.max_steal_pct is not None and reading.steal_pct is not None and reading.steal_pct > limits.max_steal_pct:
        out.append(f"steal {reading.steal_pct:.0f}% (limit {limits.max_steal_pct:g}%)")
    return "; ".join(out) or None


@dataclass(frozen=True)
class QuietWait:
    quiet: bool
    waited_s: float
    last: HostReading | None
    reason: str | None       # why the host was still busy when the wait ended


def wait_for_quiet(limits: HostLimits, *, sampler: HostSampler | None = None, window_s: float = 1.0,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> QuietWait:
    """Measure the host in windows of ``window_s`` until it is under ``limits`` or
    ``limits.contention_wait_s`` has passed (at least one window is always measured)."""
    if not limits.gates:
        return QuietWait(True, 0.0, None, None)
    sampler = sampler or HostSampler(clock=clock)
    start = clock()
    while True:
        sleep(window_s)
        reading = sampler.read()
        why = busy_reason(reading, limits)
        waited = clock() - start
        if why is None:
            return QuietWait(True, waited, reading, None)
        if waited >= limits.contention_wait_s:
            return QuietWait(False, waited, reading, why)
