"""The ascend backend: ``npu-smi info`` for enumeration and (polled) telemetry,
``ASCEND_RT_VISIBLE_DEVICES`` for pinning.

Indices are logical device ids, the ones ``ASCEND_RT_VISIBLE_DEVICES`` takes: resolved through
``npu-smi info -m`` when it answers, else the order of the chips in the table (see
:mod:`zlops.backends.parsers.npu_smi`). npu-smi has no streaming mode, so telemetry polls the full
table; it is slow on real hosts (about half a second), so intervals below 1 s buy nothing.
No Ascend hardware was available to this project: everything here is tested on Huawei's
documented outputs and on the fake ``tests/fakebin/npu-smi``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zlops.backends.base import DeviceBackend, DeviceInfo
from zlops.backends.parsers.npu_smi import parse_npu_smi, parse_npu_smi_pids, parse_npu_smi_samples
from zlops.backends.tools import polling_sampler, requested_devices, run_tool
from zlops.errors import ZlopsError
from zlops.host.telemetry import TelemetrySample, TelemetrySampler

SMI = "npu-smi"


def _mapping_text() -> str | None:
    """``npu-smi info -m``, or None where it fails (older tools, no permission)."""
    try:
        done = run_tool([SMI, "info", "-m"], check=False)
    except ZlopsError:
        return None
    return done.stdout if done.ok else None


class Backend(DeviceBackend):
    reports_idleness = True

    def enumerate(self) -> list[DeviceInfo]:
        """Chips of ``npu-smi info``; memory is HBM where the table has it, processes from its
        process table (None on layouts without one)."""
        table = run_tool([SMI, "info"]).stdout
        return parse_npu_smi(table, _mapping_text())

    def telemetry_sampler(self, devices: Sequence[int], out_dir: Path, *, interval_s: float = 1.0) -> TelemetrySampler:
        """Polls ``npu-smi info``: power (W), temperature (C), AICore (%) as utilization, HBM in use (MiB)."""
        wanted = requested_devices(self.spec.visibility_env, devices)
        mapping: list[str | None] = []  # fetched on the first poll, inside the sampler's guard

        def parse(text: str) -> list[TelemetrySample]:
            if not mapping:
                mapping.append(_mapping_text())
            return parse_npu_smi_samples(text, mapping[0])

        sampler = polling_sampler(out_dir, [SMI, "info"], parse, wanted, interval_s=interval_s)
        if not devices:
            return sampler
        from zlops.host.contention import DeviceProcessWatch

        return DeviceProcessWatch(sampler, devices, self.device_processes)  # a foreign process invalidates

    def device_processes(self) -> dict[int, list[tuple[int, str]]] | None:
        """Logical device index -> [(pid, name)] from ``npu-smi info``'s process table (None when the
        layout has none)."""
        return parse_npu_smi_pids(run_tool([SMI, "info"]).stdout, _mapping_text())
