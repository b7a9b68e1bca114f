"""What each backend calls the clock its telemetry samples, for every rendering: ``CPU``, ``SM``, ``AI Core``.

A CPU pool's ``sm_clock_mhz`` column is the CPU's clock, an Ascend NPU's the AI Core's, the GPUs' the
streaming multiprocessors'. Here, beside the backend registry whose aliases it resolves, so that
:mod:`zlops.host.telemetry` (which every backend's sampler builds on) imports no backend.
"""

from __future__ import annotations

#: What each backend's ``sm_clock_mhz`` column measures (one registry; every rendering asks it): a
#: CPU pool's clock is the CPU's, an Ascend NPU's the AI Core's, the GPUs' the streaming multiprocessors'.
CLOCK_NAMES: dict[str, str] = {"cpu": "CPU", "cuda": "SM", "musa": "SM", "rocm": "SM", "ascend": "AI Core"}


def clock_name(backend: str | None) -> str:
    """``CPU``, ``SM`` or ``AI Core`` for a backend (or an alias of one); ``device`` when unknown."""
    if not backend:
        return "device"
    from zlops.backends import resolve_backend_name  # the registry, not a backend module
    from zlops.errors import BackendUnavailable

    try:
        return CLOCK_NAMES.get(resolve_backend_name(backend), "device")
    except BackendUnavailable:
        return "device"


def clock_label(backend: str | None) -> str:
    """The clock in prose: ``CPU clock``, ``SM clock``, ``AI Core clock``."""
    return f"{clock_name(backend)} clock"


def clock_axis_label(backend: str | None) -> str:
    """The clock on a figure's axis: ``CPU MHz``, ``SM MHz``, ``AI Core MHz``."""
    return f"{clock_name(backend)} MHz"
