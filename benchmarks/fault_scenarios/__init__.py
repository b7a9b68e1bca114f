"""The fault matrix of ``benchmarks/faults.py``: one module per group of faults.

A scenario is a function ``(work: Path) -> Outcome`` registered with :func:`scenario`; it builds
its own upstream, config and home under ``work``, injects one fault into real ``zlops`` processes
and reports what survived. Adding a group (database, Slack, Airflow UI faults) is adding a module
here: :func:`discover` imports every module of this package whose name does not start with ``_``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Outcome:
    """What one fault did. ``survived``: zlops did what docs/faults.md promises for it."""

    survived: bool
    detail: str
    #: measurements (case x metric x shard) that should be stored once the fault has passed
    expected: int = 0
    stored: int = 0
    duplicate_rows: int = 0
    #: moments a benchmark found another one on its device (the benchmark's own probe)
    double_booked: int = 0
    #: secrets (a URL's token, an env: value) found in what zlops printed or stored
    secrets: int = 0
    skipped: str | None = None  # why the scenario could not run here (e.g. needs root)

    @property
    def lost(self) -> int:
        return max(0, self.expected - self.stored)


Scenario = Callable[[Path], Outcome]


@dataclass(frozen=True)
class Registered:
    group: str
    name: str
    fn: Scenario


_REGISTRY: list[Registered] = []


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    """Register a scenario of the calling module's group (the module's name)."""

    def register(fn: Scenario) -> Scenario:
        group = fn.__module__.rsplit(".", 1)[-1]
        _REGISTRY.append(Registered(group, name, fn))
        return fn

    return register


def discover() -> list[Registered]:
    """Every scenario of every group module, in module then definition order."""
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    return list(_REGISTRY)
