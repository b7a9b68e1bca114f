"""The musa backend (Moore Threads): the ``mthreads-gmi`` table for enumeration, ``mthreads-gmi --json``
polled for telemetry, ``MUSA_VISIBLE_DEVICES`` for pinning.

mthreads-gmi has no CSV query mode, so telemetry parses ``--json`` and strips the units glued to
each value. No Moore Threads hardware was available to this project and no real ``--json``
output was found: the JSON parser follows the campaign notes (seeds/003) and is tested on a
synthetic document; the table parser is tested on a real 1.14.0 capture.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zlops.backends.base import DeviceBackend, DeviceInfo
from zlops.backends.parsers.mthreads_gmi import parse_mthreads_gmi, parse_mthreads_gmi_json, parse_mthreads_gmi_pids
from zlops.backends.tools import polling_sampler, requested_devices, run_tool
from zlops.host.telemetry import TelemetrySampler

GMI = "mthreads-gmi"


class Backend(DeviceBackend):
    reports_idleness = True

    def enumerate(self) -> list[DeviceInfo]:
        """Devices of the default ``mthreads-gmi`` table (memory ``used(total)`` and its process table)."""
        return parse_mthreads_gmi(run_tool([GMI]).stdout)

    def telemetry_sampler(self, devices: Sequence[int], out_dir: Path, *, interval_s: float = 1.0) -> TelemetrySampler:
        """Polls ``mthreads-gmi --json``: the same columns as cuda (clocks, temperature, power, utilization, memory)."""
        wanted = requested_devices(self.spec.visibility_env, devices)
        sampler = polling_sampler(out_dir, [GMI, "--json"], parse_mthreads_gmi_json, wanted, interval_s=interval_s)
        if not devices:
            return sampler
        from zlops.host.contention import DeviceProcessWatch

        return DeviceProcessWatch(sampler, devices, self.device_processes)  # a foreign process invalidates

    def device_processes(self) -> dict[int, list[tuple[int, str]]]:
        """Device index -> [(pid, name)] from the default table's process section."""
        return parse_mthreads_gmi_pids(run_tool([GMI]).stdout)
