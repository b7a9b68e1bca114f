"""What else runs beside a benchmark: host load, other processes' CPU, steal, foreign device processes.

Found: with load 5 on 2 cores, unchanged operators on a CPU pool were reported 95% and 23% better.
A measurement taken while other programs competed for the host says nothing about the code, so:

- the cpu backend's sampler records, beside its clock, the 1-minute load average, the CPU other
  processes used (``foreign_cpu_pct``: % of one CPU, so 180 means 1.8 cores) and the steal time.
  zlops' own processes are not foreign (:meth:`HostSampler.family`): the benchmark's tree, the
  zlops process and its ancestors, and every other zlops benchmark on the host with its zlops
  process, found through the device leases. A benchmark pinned to some CPUs is measured on those
  CPUs alone, from ``/proc/stat``, minus its own share;
- on accelerator pools a watch lists the processes on the shard's device during the run; one that is
  not of this process' tree and is visible in this pid namespace is foreign (a pid of another
  namespace, e.g. nvidia-smi in a container, cannot be attributed and is only recorded);
- both are summarized into the shard's telemetry summary (``contention.json`` holds what a CSV row
  cannot: the busiest foreign processes, the pinned CPUs, the foreign device processes), and
  :func:`shard_invalid_reason` turns a summary beyond the pool's limits into the reason the shard is
  INVALID, e.g. ``host busy: other processes used 87% CPU of pinned CPU 1 (limit 25%) during the run``;
- before a shard runs, :func:`wait_for_quiet` waits, bounded by ``contention_wait_s``, for the host
  to come under its limits.

The gate is on by default (``contention`` config section: 25% of one CPU, 10% steal, a 60 s wait;
:meth:`zlops.config.settings.Config.host_limits`); a pool's own keys win, ``null`` turns one figure's gate
off and ``gate: false`` / ``contention_gate: false`` measures and reports without gating.
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

from zlops.host.telemetry import CONTENTION_FILE, PollingSampler, TelemetrySample, TelemetrySampler

log = logging.getLogger(__name__)

#: a read this soon after the previous one is too short a window for a CPU share
_MIN_WINDOW_S = 0.2
_TOP = 5


#: the defaults of the ``contention`` config section: the gate is on unless a config turns it off
DEFAULT_MAX_FOREIGN_CPU_PCT = 25.0
DEFAULT_MAX_STEAL_PCT = 10.0
DEFAULT_CONTENTION_WAIT_S = 60.0


@dataclass(frozen=True)
class HostLimits:
    """A pool's contention limits; None means the figure is recorded but never gates a shard.

    ``enabled=False`` (``contention_gate: false``) turns the whole gate off, the foreign device
    process rule included: everything is still measured and kept in the shard's telemetry.
    """

    max_foreign_cpu_pct: float | None = None   # other processes' CPU, % of one CPU, mean over the run
    max_host_load: float | None = None         # 1-minute load average before the run (the wait's gate)
    max_steal_pct: float | None = None         # hypervisor steal, % of all CPU time, max over the run
    contention_wait_s: float = 0.0             # how long a shard waits for a quiet host before it runs
    enabled: bool = True

    @property
    def gates(self) -> bool:
        return self.enabled and any(v is not None for v in (self.max_foreign_cpu_pct, self.max_host_load,
                                                            self.max_steal_pct))


@dataclass(frozen=True)
class HostReading:
    """One window of the host: load average, other processes' CPU (% of one CPU), steal (%), and the
    CPUs the foreign share was measured on when the benchmark ran pinned (None: the whole host)."""

    load1: float | None
    foreign_cpu_pct: float | None
    steal_pct: float | None
    window_s: float = 0.0
    pinned: tuple[int, ...] | None = None


def own_pids(root: int | None = None) -> set[int]:
    """``root`` (default: this process) and every descendant: the benchmark and what it started."""
    import psutil

    root = os.getpid() if root is None else root
    try:
        proc = psutil.Process(root)
        return {root, *(c.pid for c in proc.children(recursive=True))}
    except psutil.Error:
        return {root}


def _start_ticks(pid: int) -> int | None:
    """Process ``pid``'s start in clock ticks since boot (with the pid, it names one process for good)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return int(text.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def lease_roots(locks_dir: Path | None) -> set[int]:
    """The zlops benchmarks running on this host now, from the device leases under ``locks_dir``
    (:mod:`zlops.host.locks`): for each lease whose benchmark still runs (its pid and start time as the
    holder wrote them), the benchmark's pid and the pid of the zlops process that holds the lease."""
    roots: set[int] = set()
    if locks_dir is None:
        return roots
    try:
        paths = sorted(locks_dir.glob("*.lock"))
    except OSError:
        return roots
    for path in paths:
        try:
            note = json.loads(path.read_text(encoding="utf-8") or "{}")
            bench, start = int(note["benchmark_pid"]), note.get("benchmark_start")
        except (OSError, ValueError, KeyError, TypeError):
            continue  # no benchmark runs under it (a lease being taken, or never used)
        now = _start_ticks(bench)
        if now is None or (start is not None and now != start):
            continue  # that benchmark ended (its pid may since be another program's)
        roots.add(bench)
        if isinstance(note.get("pid"), int):
            roots.add(note["pid"])
    return roots


def parse_proc_stat(text: str) -> dict[int, tuple[float, float]]:
    """Per CPU of ``/proc/stat``: (busy, all) in clock ticks since boot. Busy is user, nice, system,
    irq and softirq; idle, iowait and steal are not (guest time is already inside user)."""
    out: dict[int, tuple[float, float]] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit():
            continue
        try:
            v = [float(x) for x in rest.split()[:8]]
        except ValueError:
            continue
        user, nice, system, idle, iowait, irq, softirq, steal = v + [0.0] * (8 - len(v))
        out[int(name[3:])] = (user + nice + system + irq + softirq,
                              user + nice + system + idle + iowait + irq + softirq + steal)
    return out


def _read_proc_stat() -> dict[int, tuple[float, float]]:
    try:
        return parse_proc_stat(Path("/proc/stat").read_text(encoding="ascii", errors="replace"))
    except OSError:
        return {}


def cpu_list(cpus: Iterable[int]) -> str:
    """The CPUs as ``taskset`` writes them: ``0-3,6`` for {0, 1, 2, 3, 6}."""
    runs: list[list[int]] = []
    for c in sorted(set(cpus)):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _tick_s() -> float:
    try:
        return 1.0 / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 0.01


class HostSampler:
    """Reads what other programs did on the host since the previous read.

    Not foreign (zlops' own): this process and its descendants (the benchmark, a telemetry tool),
    its ancestors (pytest, the Airflow task runner, a Celery worker), and every other zlops
    benchmark running on this host with the zlops process that started it and that process' tree,
    found through the device leases under ``locks_dir`` (the config's ``locks_dir``). ``own``
    replaces all of that with a fixed rule (tests).

    Where the benchmark runs pinned (the CPU affinity of this process' descendants is a strict
    subset of the host's CPUs: ``taskset -c {device}`` in the suite's command, a cpuset), the
    foreign share is measured on those CPUs only: their busy time from ``/proc/stat`` minus what
    this process' tree used. That also counts programs the process list cannot see (another pid
    namespace, the kernel) and never a zlops benchmark pinned to other CPUs. Elsewhere it is the
    CPU time of every foreign process. Totals over every read are kept for the summary: the mean
    foreign share over the whole run and the busiest foreign processes.
    """

    def __init__(self, *, own: Callable[[], set[int]] | None = None, locks_dir: Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        import psutil

        self._psutil = psutil
        self._own = own
        self.locks_dir = locks_dir
        self._clock = clock
        self._lock = threading.Lock()
        self.foreign_cpu_s = 0.0
        self.wall_s = 0.0
        self.by_process: dict[int, tuple[str, float]] = {}
        self.pinned: tuple[int, ...] | None = None   # the benchmark's CPUs, when it ran pinned
        self.benchmark: int | None = None              # the benchmark's pid, once the runner names it
        self._steal = self._cpu_times()
        self._stat = _read_proc_stat()
        self._cpu, _, self._parents = self._snapshot()
        self._last = clock()

    def _cpu_times(self) -> tuple[float, float] | None:
        t = self._psutil.cpu_times()
        steal = getattr(t, "steal", None)
        return None if steal is None else (float(steal), float(sum(t)))

    def _snapshot(self) -> tuple[dict[int, float], dict[int, str], dict[int, int]]:
        """Every visible process: CPU seconds used by it and by the children it reaped, name, parent."""
        cpu: dict[int, float] = {}
        names: dict[int, str] = {}
        parents: dict[int, int] = {}
        for p in self._psutil.process_iter(["pid", "ppid", "name", "cpu_times"]):
            info = p.info
            t = info.get("cpu_times")
            if t is None:
                continue
            cpu[info["pid"]] = float(t.user + t.system + getattr(t, "children_user", 0.0)
                                     + getattr(t, "children_system", 0.0))
            names[info["pid"]] = info.get("name") or "?"
            parents[info["pid"]] = info.get("ppid") or 0
        return cpu, names, parents

    def _deltas(self, cpu: Mapping[int, float]) -> dict[int, float]:
        """CPU seconds each process used since the previous read, counting a process that ended in
        between where its time went: a process' figure includes the children it reaped, so the
        time an ended process had used by the previous read (already counted) is taken off the
        nearest live ancestor that reaped it. A benchmark's worker that exits between two reads
        is thus its benchmark's time, never "other processes'"."""
        prev, parents = self._cpu, self._parents
        gone = set(prev) - set(cpu)
        counted: dict[int, float] = {}
        for pid in gone:
            up = parents.get(pid, 0)
            while up in gone:
                up = parents.get(up, 0)
            counted[up] = counted.get(up, 0.0) + prev[pid]
        # a process seen before: what it used since; a new one: all it used (it started in the window)
        return {pid: max(0.0, total - prev[pid] - counted.get(pid, 0.0)) if pid in prev else total
                for pid, total in cpu.items()}

    def family(self, parents: Mapping[int, int]) -> tuple[set[int], set[int], set[int]]:
        """(zlops' own processes, this process' tree, the benchmark's tree) among ``parents``
        (pid -> parent pid). The benchmark's tree is this process' descendants until the runner
        names the benchmark (:attr:`benchmark`)."""
        if self._own is not None:
            own = self._own()
            return own, own, set()
        children: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
            children.setdefault(ppid, []).append(pid)

        def tree(root: int) -> set[int]:
            out, todo = {root}, [root]
            while todo:
                for child in children.get(todo.pop(), ()):
                    if child not in out:
                        out.add(child)
                        todo.append(child)
            return out

        me = os.getpid()
        own = tree(me)
        zlops = set(own)
        up = parents.get(me, 0)
        while up > 0 and up not in zlops:  # pytest, the Airflow task runner, a Celery worker, ...
            zlops.add(up)
            up = parents.get(up, 0)
        for root in lease_roots(self.locks_dir):  # other zlops benchmarks on this host
            zlops |= tree(root)
        bench = tree(self.benchmark) & own if self.benchmark in parents else own - {me}
        return zlops, own, bench

    @staticmethod
    def _pinned_cpus(bench: set[int], online: set[int]) -> tuple[int, ...] | None:
        """The CPUs the benchmark's processes may run on, when that is a strict subset of ``online``."""
        cpus: set[int] = set()
        for pid in bench:
            try:
                cpus |= set(os.sched_getaffinity(pid))
            except (OSError, AttributeError):
                continue
        cpus &= online
        return tuple(sorted(cpus)) if cpus and cpus != online else None

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
            cpu, names, parents = self._snapshot()
            zlops, _own, bench = self.family(parents)
            deltas = self._deltas(cpu)
            self._cpu, self._parents = cpu, parents
            used = 0.0
            for pid, delta in deltas.items():
                if delta and pid not in zlops:
                    used += delta
                    name, before = self.by_process.get(pid, (names[pid], 0.0))
                    self.by_process[pid] = (name, before + delta)
            stat = _read_proc_stat()
            pinned = self._pinned_cpus(bench, set(stat)) if stat else None
            if pinned is None and not bench and self._own is None:
                pinned = self.pinned  # the benchmark ended in this window: the CPUs it ran on
            if pinned is not None:
                # the pinned CPUs' busy time less the benchmark's (and this process', which reaps it)
                busy = sum(stat[c][0] - self._stat.get(c, stat[c])[0] for c in pinned) * _tick_s()
                mine = sum(deltas.get(pid, 0.0) for pid in bench | {os.getpid()})
                used = max(0.0, busy - mine)
                self.pinned = pinned
            self._stat = stat
            steal_pct = None
            steal = self._cpu_times()
            if steal is not None and self._steal is not None and steal[1] > self._steal[1]:
                steal_pct = 100.0 * (steal[0] - self._steal[0]) / (steal[1] - self._steal[1])
            self._steal = steal
            self._last = now
            self.foreign_cpu_s += used
            self.wall_s += window
            return HostReading(load1, 100.0 * used / window, steal_pct, window, pinned)

    def totals(self, top_n: int = _TOP) -> dict[str, Any]:
        """Mean foreign CPU over every read so far, the CPUs it was measured on when the benchmark
        ran pinned, and the ``top_n`` busiest foreign processes (name, pid, % of one CPU)."""
        with self._lock:
            if self.wall_s <= 0:
                return {}
            top = sorted(self.by_process.items(), key=lambda kv: -kv[1][1])[:top_n]
            out: dict[str, Any] = {
                "foreign_cpu_mean_pct": round(100.0 * self.foreign_cpu_s / self.wall_s, 1),
                "foreign_top": [[name, pid, round(100.0 * cpu / self.wall_s, 1)] for pid, (name, cpu) in top
                                if cpu > 0]}
            if self.pinned is not None:
                out["foreign_cpu_pinned"] = list(self.pinned)
            return out


class HostContentionSampler(PollingSampler):
    """The cpu backend's sampler: its telemetry rows carry the host readings; on stop, one last read
    closes the window and ``contention.json`` keeps the run's totals."""

    def __init__(self, out_dir: Path, read: Callable[[HostReading], Iterable[TelemetrySample]], *,
                 interval_s: float = 1.0, host: HostSampler | None = None) -> None:
        self.host = host or HostSampler()
        super().__init__(out_dir, lambda: read(self.host.read()), interval_s=interval_s)

    def attach(self, *, locks_dir: Path | None = None, benchmark_pid: int | None = None) -> None:
        if locks_dir is not None:
            self.host.locks_dir = locks_dir
        if benchmark_pid is not None:
            self.host.benchmark = benchmark_pid

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

    def attach(self, *, locks_dir: Path | None = None, benchmark_pid: int | None = None) -> None:
        self.inner.attach(locks_dir=locks_dir, benchmark_pid=benchmark_pid)

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


def _enabled(pool_config: Any) -> bool:
    value = pool_config.get("enabled", True) if isinstance(pool_config, Mapping) \
        else getattr(pool_config, "enabled", True)
    return bool(value)


def _where(pinned: Iterable[int] | None) -> str:
    """``of pinned CPU 1`` / ``of pinned CPUs 2-3`` where the share was measured on the benchmark's
    own CPUs, else nothing (the whole host)."""
    cpus = list(pinned or ())
    if not cpus:
        return ""
    return f" of pinned CPU{'s' if len(cpus) > 1 else ''} {cpu_list(cpus)}"


def shard_invalid_reason(telemetry_summary: Mapping[str, Any] | None, pool_config: Any) -> str | None:
    """Why a shard's measurement cannot be judged, from its telemetry summary; None when it can.

    ``pool_config`` is anything with ``max_foreign_cpu_pct`` / ``max_steal_pct`` / ``enabled`` (a
    :class:`HostLimits`, a pool's config, or a mapping). A foreign process on the shard's device
    (``foreign_device_processes``) invalidates while the gate is enabled; the host figures only
    beyond a set limit. The reason names the figure and the limit, e.g. ``host busy: other processes
    used 87% CPU of pinned CPU 1 (limit 25%) during the run``.
    """
    if not _enabled(pool_config):
        return None
    t = telemetry_summary or {}
    reasons = []
    procs = t.get("foreign_device_processes") or []
    if procs:
        named = ", ".join(f"pid {pid} ({name})" for pid, name in procs[:3]) + (" ..." if len(procs) > 3 else "")
        reasons.append(f"device shared: {len(procs)} foreign process(es) on the device during the run: {named}")
    cpu, cpu_limit = t.get("foreign_cpu_mean_pct"), _limit(pool_config, "max_foreign_cpu_pct")
    if cpu is not None and cpu_limit is not None and float(cpu) > cpu_limit:
        top = t.get("foreign_top") or []
        busiest = (" (busiest on the host: " + ", ".join(f"{n} pid {pid} {pct:g}%" for n, pid, pct in top[:3]) + ")"
                   if top else "")
        reasons.append(f"host busy: other processes used {float(cpu):.0f}% CPU{_where(t.get('foreign_cpu_pinned'))} "
                       f"(limit {cpu_limit:g}%) during the run{busiest}")
    steal, steal_limit = t.get("steal_max_pct"), _limit(pool_config, "max_steal_pct")
    if steal is not None and steal_limit is not None and float(steal) > steal_limit:
        reasons.append(f"host busy: the hypervisor stole {float(steal):.0f}% of the CPU time (limit {steal_limit:g}%)")
    return "; ".join(reasons) or None


def busy_reason(reading: HostReading, limits: HostLimits) -> str | None:
    """Why the host is too busy to start a shard now (None when it is quiet enough)."""
    if not limits.enabled:
        return None
    out = []
    if limits.max_foreign_cpu_pct is not None and reading.foreign_cpu_pct is not None \
            and reading.foreign_cpu_pct > limits.max_foreign_cpu_pct:
        out.append(f"other processes use {reading.foreign_cpu_pct:.0f}% CPU{_where(reading.pinned)} "
                   f"(limit {limits.max_foreign_cpu_pct:g}%)")
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


def quiet_before_run(limits: HostLimits, *, locks_dir: Path | None, note: Callable[[str], None], where: str) -> None:
    """Before a shard starts: wait (bounded by ``limits.contention_wait_s``) for the host to quiet and say so
    through ``note``; a host still busy is run anyway (the run's own figures decide whether it is valid).
    The one rule for one-device shards (``zlops.steps.run_device``) and gang shards (``zlops.campaign.run``)."""
    if not (limits.gates and limits.contention_wait_s > 0):
        return
    waited = wait_for_quiet(limits, locks_dir=locks_dir)
    if waited.quiet and waited.waited_s > 2:
        note(f"{where}: waited {waited.waited_s:.0f} s for the host to quiet down")
    elif not waited.quiet:
        note(f"{where}: host still busy after {waited.waited_s:.0f} s ({waited.reason}); "
             "running anyway, the run's own figures decide whether it is valid")


def wait_for_quiet(limits: HostLimits, *, sampler: HostSampler | None = None, window_s: float = 1.0,
                   locks_dir: Path | None = None, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> QuietWait:
    """Measure the host in windows of ``window_s`` until it is under ``limits`` or
    ``limits.contention_wait_s`` has passed (at least one window is always measured)."""
    if not limits.gates:
        return QuietWait(True, 0.0, None, None)
    sampler = sampler or HostSampler(locks_dir=locks_dir, clock=clock)
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
