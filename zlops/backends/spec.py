"""What a backend is, as data (:class:`BackendSpec`); the registry of them is :data:`zlops.backends.SPECS`.

A module of its own so that :mod:`zlops.backends.base` can name the spec without importing the
registry that imports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendSpec:
    """What a backend is, as data: nothing here touches a device."""

    name: str
    aliases: tuple[str, ...]
    visibility_env: str | None          # None: the backend pins nothing (cpu)
    query_command: tuple[str, ...] | None
    supports_graph_capture: bool
    default_timer: str                  # "graph" | "direct"
    module: str
