"""The cuda backend: NVML (nvidia-ml-py, when importable) or nvidia-smi for enumeration, a streaming
``nvidia-smi --query-gpu ... -lms N`` for telemetry, ``CUDA_VISIBLE_DEVICES`` for pinning.

NVML is imported inside :func:`nvml_devices` only, never at package import (``pip install
'zlops[cuda]'`` provides it). nvidia-smi and NVML number devices in PCI bus order; so does CUDA
when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (the CUDA default, FASTEST_FIRST, may differ on mixed hosts).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from zlops.backends.base import DeviceBackend, DeviceInfo
from zlops.backends.parsers.nvidia_smi import (
    ENUM_FIELDS,
    TELEMETRY_FIELDS,
    parse_compute_app_pids,
    parse_compute_apps,
    parse_nvidia_smi,
    parse_nvidia_smi_samples,
    parse_version,
)
from zlops.backends.tools import StreamingSampler, missing_tool, requested_devices, run_tool
from zlops.host.telemetry import TelemetrySample, TelemetrySampler

log = logging.getLogger(__name__)

SMI = "nvidia-smi"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(code: int) -> str:
    """NVML's CUDA driver version integer (13000) as nvidia-smi prints it (13.0)."""
    return f"{code // 1000}.{code % 1000 // 10}"


def nvml_devices() -> list[DeviceInfo] | None:
    """Devices through NVML, or None when nvidia-ml-py is not installed or NVML cannot start
    (no driver, no permission); the caller then falls back to nvidia-smi.

    Memory in use is NVML's v2 ``used`` where available: the v1 figure also counts the memory the
    driver reserves, which is never zero, and nvidia-smi shows the v2 figure.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        log.info("NVML unavailable (%s); using nvidia-smi", exc)
        return None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        toolkit = _cuda_version(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        devices = []
        for i in range(int(pynvml.nvmlDeviceGetCount())):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                try:
                    mem = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
                except (AttributeError, TypeError, pynvml.NVMLError):
                    mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                devices.append(DeviceInfo(
                    index=i, model=_text(pynvml.nvmlDeviceGetName(handle)),
                    memory_used_mib=mem.used / 2**20, memory_total_mib=mem.total / 2**20,
                    processes=len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle)),
                    driver=driver, toolkit=toolkit,
                    extra={"uuid": _text(pynvml.nvmlDeviceGetUUID(handle)), "source": "nvml"}))
            except pynvml.NVMLError as exc:  # one broken GPU must not hide the others
                devices.append(DeviceInfo(index=i, model="unknown", healthy=False, driver=driver, toolkit=toolkit,
                                          extra={"error": str(exc), "source": "nvml"}))
        return devices
    finally:
        pynvml.nvmlShutdown()


def smi_devices() -> list[DeviceInfo]:
    """Devices through nvidia-smi: the query CSV, compute processes per GPU, the CUDA version."""
    devices = parse_nvidia_smi(run_tool([SMI, f"--query-gpu={','.join(ENUM_FIELDS)}", "--format=csv"]).stdout)
    apps = run_tool([SMI, "--query-compute-apps=gpu_uuid,pid", "--format=csv"], check=False)
    counts = parse_compute_apps(apps.stdout) if apps.ok else None
    version = run_tool([SMI, "--version"], check=False)
    toolkit = parse_version(version.stdout).get("cuda") if version.ok else None
    return [dataclasses.replace(
        d, toolkit=toolkit, extra={**d.extra, "source": "nvidia-smi"},
        processes=None if counts is None else counts.get(str(d.extra.get("uuid")), 0)) for d in devices]


def telemetry_argv(wanted: Sequence[int] | None, interval_s: float) -> list[str]:
    """The streaming query; no ``-i`` at all for every device (a bare ``-i`` would fail it)."""
    argv = [SMI, f"--query-gpu={','.join(TELEMETRY_FIELDS)}", "--format=csv,noheader,nounits",
            "-lms", str(max(1, round(interval_s * 1000)))]
    if wanted:
        argv += ["-i", ",".join(str(d) for d in wanted)]
    return argv


class Backend(DeviceBackend):
    reports_idleness = True

    def enumerate(self) -> list[DeviceInfo]:
        """NVML when nvidia-ml-py is importable and NVML starts, else nvidia-smi."""
        devices = nvml_devices()
        return devices if devices is not None else smi_devices()

    def telemetry_sampler(self, devices: Sequence[int], out_dir: Path, *, interval_s: float = 1.0) -> TelemetrySampler:
        """Streams ``nvidia-smi --query-gpu=... -lms N [-i d1,d2]`` beside the benchmark.

        ``-i 0,1`` on a host with only GPU 0 prints GPU 0 alone and exits 0 (seen on the H200),
        so a requested device without samples is named in telemetry.err, never dropped silently.
        """
        reason = missing_tool(SMI)
        if reason:
            return TelemetrySampler(out_dir, reason=reason)
        wanted = requested_devices(self.spec.visibility_env, devices)
        tz = datetime.now().astimezone().tzinfo  # nvidia-smi prints local time

        def parse(text: str) -> list[TelemetrySample]:
            return parse_nvidia_smi_samples(text, tz=tz)

        sampler = StreamingSampler(out_dir, telemetry_argv(wanted, interval_s), parse, wanted)
        if not devices:  # nothing named (zlops telemetry over every GPU): no device is the shard's
            return sampler
        from zlops.host.contention import DeviceProcessWatch

        return DeviceProcessWatch(sampler, devices, self.device_processes)  # a foreign process invalidates

    def device_processes(self) -> dict[int, list[tuple[int, str]]]:
        """GPU index -> [(pid, name)] of its compute processes (nvidia-smi's compute-apps query)."""
        apps = run_tool([SMI, "--query-compute-apps=gpu_uuid,pid,process_name", "--format=csv"]).stdout
        gpus = run_tool([SMI, "--query-gpu=index,uuid", "--format=csv"]).stdout
        return parse_compute_app_pids(apps, gpus)
