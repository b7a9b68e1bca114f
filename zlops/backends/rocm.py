"""The rocm backend (AMD, and Hygon DCU builds of rocm-smi): ``rocm-smi --json`` for enumeration and
(polled) telemetry, ``HIP_VISIBLE_DEVICES`` for pinning.

rocm-smi's card numbers are its own device order, which HIP follows on single-vendor hosts.
Its JSON carries no per-card process count, so idleness can only be judged on VRAM in use.
No ROCm hardware was available to this project: the parser is tested on two recorded outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zlops.backends.base import DeviceBackend, DeviceInfo
from zlops.backends.parsers.rocm_smi import parse_rocm_smi, parse_rocm_smi_samples
from zlops.backends.tools import polling_sampler, requested_devices, run_tool
from zlops.host.telemetry import TelemetrySampler

SMI = "rocm-smi"
#: gpustack's enumeration query (the recorded fixtures come from it) plus the driver version.
ENUM_ARGV = (SMI, "--showid", "--showproductname", "--showmeminfo", "vram", "--showuse", "--showuniqueid",
             "--showdriverversion", "--json")
TELEMETRY_ARGV = (SMI, "--showuse", "--showpower", "--showtemp", "--showmeminfo", "vram", "--showclocks", "--json")


class Backend(DeviceBackend):
    reports_idleness = True

    def enumerate(self) -> list[DeviceInfo]:
        """Cards of ``rocm-smi --json``: model, VRAM used/total (MiB), driver version."""
        return parse_rocm_smi(run_tool(list(ENUM_ARGV)).stdout)

    def telemetry_sampler(self, devices: Sequence[int], out_dir: Path, *, interval_s: float = 1.0) -> TelemetrySampler:
        """Polls rocm-smi: sclk/mclk (MHz), edge temperature (C), package power (W), use (%), VRAM (MiB)."""
        wanted = requested_devices(self.spec.visibility_env, devices)
        return polling_sampler(out_dir, list(TELEMETRY_ARGV), parse_rocm_smi_samples, wanted, interval_s=interval_s)
