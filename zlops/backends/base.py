"""The device-backend interface: enumerate, pin, sample. Everything above it is vendor-neutral."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.errors import ZlopsError
from zlops.host.telemetry import TelemetrySampler

if TYPE_CHECKING:
    from zlops.backends.spec import BackendSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceInfo:
    """One device as its backend reports it."""

    index: int
    model: str
    healthy: bool = True
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    processes: int | None = None
    driver: str | None = None
    toolkit: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


#: the DeviceInfo.extra keys that name one physical device, most specific first (NVML / nvidia-smi UUID,
#: rocm-smi's unique id, npu-smi's and mthreads-gmi's bus or chip ids)
DEVICE_ID_KEYS: tuple[str, ...] = ("uuid", "unique_id", "serial", "pci.bus_id", "bus_id")


def device_id(info: DeviceInfo) -> str | None:
    """The id of the physical device behind ``info`` (``uuid:GPU-..``), None when its tool names none."""
    for key in DEVICE_ID_KEYS:
        value = info.extra.get(key)
        if value not in (None, "", "N/A"):
            return f"{key}:{value}"
    return None


class DeviceBackend:
    """Base backend: pinning comes from the spec's visibility variable; subclasses add the rest."""

    #: Whether "idle" means something here (device memory and processes are reported per device).
    #: False for the base and cpu backends, whose memory is never zero; see zlops.run.devices.
    reports_idleness: bool = False

    def __init__(self, spec: BackendSpec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    def pin_env(self, devices: Sequence[int]) -> dict[str, str]:
        """Environment that restricts a child process to ``devices`` (empty for backends that pin nothing)."""
        if self.spec.visibility_env is None:
            return {}
        return {self.spec.visibility_env: ",".join(str(int(d)) for d in devices)}

    def enumerate(self) -> list[DeviceInfo]:
        """Devices present on this host."""
        return []

    def telemetry_sampler(self, devices: Sequence[int], out_dir: Path, *, interval_s: float = 1.0) -> TelemetrySampler:
        """A sampler for ``devices``; the default samples nothing and records why in telemetry.err."""
        return TelemetrySampler(out_dir, reason=f"no telemetry sampler for backend {self.name} in this zlops version")

    def identity(self, devices: Sequence[int]) -> dict[str, Any]:
        """The backend's part of a run's identity (its caliber): backend, device model, driver and
        toolkit versions of ``devices`` (None where the tool is missing or does not say), and the
        spec's graph-capture support and default timer."""
        ident: dict[str, Any] = {
            "backend": self.name,
            "graph_capture_supported": self.spec.supports_graph_capture,
            "timer": self.spec.default_timer,
            "device_model": None, "driver": None, "toolkit": None, "device_ids": None,
        }
        try:
            infos = self.enumerate()
        except (ZlopsError, OSError) as exc:
            log.info("identity of %s without device details: %s", self.name, exc)
            return ident
        wanted = {int(d) for d in devices}
        chosen = [i for i in infos if i.index in wanted] or infos
        for key, values in (("device_model", [i.model for i in chosen]), ("driver", [i.driver for i in chosen]),
                            ("toolkit", [i.toolkit for i in chosen])):
            distinct = sorted({v for v in values if v})
            ident[key] = " + ".join(distinct) if distinct else None
        ids = [device_id(i) for i in chosen]
        ident["device_ids"] = ids if all(ids) else None
        return ident
