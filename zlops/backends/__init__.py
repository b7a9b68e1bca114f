"""Device backends, declared as data and found through a registry.

A pool's ``backend`` (or ``ZL_BACKEND`` for ad-hoc CLI use) names one of these specs. The spec is
plain data (name, aliases, visibility variable, query command, capabilities); the class that
enumerates, pins and samples lives in ``zlops.backends.<name>`` and is imported only when that
backend is used, so no vendor SDK is imported at package import time.
Anchors: FlagGems ``runtime/backend/_<vendor>/__init__.py`` vendor descriptors; asv ``environment.py``.

May import: host (the subprocess gateway, telemetry samplers, contention) and the vocabulary; the config and
everything above use it (the layers in docs/design/layers.md; tests/test_layers.py enforces them).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from zlops.backends.spec import BackendSpec
from zlops.errors import BackendUnavailable

if TYPE_CHECKING:
    from zlops.backends.base import DeviceBackend


SPECS: dict[str, BackendSpec] = {
    s.name: s
    for s in (
        BackendSpec("cuda", ("nvidia",), "CUDA_VISIBLE_DEVICES", ("nvidia-smi",), True, "graph",
                    "zlops.backends.cuda"),
        BackendSpec("musa", ("mthreads", "moore"), "MUSA_VISIBLE_DEVICES", ("mthreads-gmi",), True, "graph",
                    "zlops.backends.musa"),
        BackendSpec("ascend", ("npu", "huawei"), "ASCEND_RT_VISIBLE_DEVICES", ("npu-smi", "info"), False,
                    "direct", "zlops.backends.ascend"),
        BackendSpec("rocm", ("amd", "hip"), "HIP_VISIBLE_DEVICES", ("rocm-smi", "--json"), True, "graph",
                    "zlops.backends.rocm"),
        BackendSpec("cpu", (), None, None, False, "direct", "zlops.backends.cpu"),
    )
}

_ALIASES: dict[str, str] = {a: s.name for s in SPECS.values() for a in (s.name, *s.aliases)}


def backend_names() -> list[str]:
    """Every accepted spelling, canonical names first."""
    return sorted(SPECS) + sorted(a for a in _ALIASES if a not in SPECS)


def resolve_backend_name(name: str) -> str:
    """Canonical backend name for ``name`` or an alias; an unknown name lists the valid ones."""
    key = name.strip().lower()
    try:
        return _ALIASES[key]
    except KeyError:
        valid = ", ".join(f"{s.name} ({', '.join(s.aliases)})" if s.aliases else s.name for s in SPECS.values())
        raise BackendUnavailable(f"unknown backend {name!r}; valid backends: {valid}") from None


def get_spec(name: str) -> BackendSpec:
    return SPECS[resolve_backend_name(name)]


def get_backend(name: str | None = None) -> DeviceBackend:
    """The backend object for ``name`` (or ``ZL_BACKEND``); imports its module on first use."""
    if name is None:
        name = os.environ.get("ZL_BACKEND")
        if not name:
            raise BackendUnavailable("no backend named: set ZL_BACKEND or a pool's backend")
    spec = get_spec(name)
    module = importlib.import_module(spec.module)
    backend: DeviceBackend = module.Backend(spec)
    return backend
