"""The ascend backend. Pinning comes from the spec's visibility variable; enumeration and telemetry are
added with the device-backends work (issue 3)."""

from __future__ import annotations

from zlops.backends.base import DeviceBackend


class Backend(DeviceBackend):
    pass
