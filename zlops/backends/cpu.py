"""The CPU backend: psutil enumeration and telemetry; it pins nothing."""

from __future__ import annotations

import platform
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from zlops.backends.base import DeviceBackend, DeviceInfo
from zlops.host.telemetry import TelemetrySample, TelemetrySampler


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Backend(DeviceBackend):
    def enumerate(self) -> list[DeviceInfo]:
        import psutil

        mem = psutil.virtual_memory()
        cpus = {"logical_cpus": psutil.cpu_count(), "physical_cpus": psutil.cpu_count(logical=False)}
        return [DeviceInfo(index=0, model=_cpu_model(), healthy=True,
                           memory_used_mib=(mem.total - mem.available) / 2**20, memory_total_mib=mem.total / 2**20,
                           extra=cpus)]

    def telemetry_sampler(self, devices: Sequence[int], out_dir: Path, *, interval_s: float = 1.0) -> TelemetrySampler:
        """The CPU's clock, temperature, utilization and memory, and beside them what else runs on
        the host (load average, other processes' CPU, steal; :mod:`zlops.host.contention`)."""
        import psutil

        from zlops.host.contention import HostContentionSampler, HostReading

        psutil.cpu_percent(None)  # prime the counter: the first call always answers 0.0

        def read(host: HostReading) -> Iterable[TelemetrySample]:
            freq = psutil.cpu_freq()
            temps: dict[str, Any] = getattr(psutil, "sensors_temperatures", dict)() or {}
            temp = max((t.current for group in temps.values() for t in group if t.current), default=None)
            mem = psutil.virtual_memory()
            return [TelemetrySample(index=int(d), sm_clock_mhz=freq.current if freq else None, temp_c=temp,
                                    util_pct=psutil.cpu_percent(None),
                                    mem_used_mib=(mem.total - mem.available) / 2**20, load1=host.load1,
                                    foreign_cpu_pct=host.foreign_cpu_pct, steal_pct=host.steal_pct)
                    for d in devices]

        return HostContentionSampler(out_dir, read, interval_s=interval_s)

    def identity(self, devices: Sequence[int]) -> dict[str, Any]:
        ident = super().identity(devices)
        ident.update(device_model=_cpu_model(), driver=platform.release(), toolkit=None)
        return ident
