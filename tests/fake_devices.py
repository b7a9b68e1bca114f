"""Put the fake device tools of tests/fakebin on PATH for one test.

zlops runs every tool with an allowlisted environment (zlops.host.proc.build_env), which drops the fakes'
FAKE_* control variables; tests widen the allowlist for themselves rather than zlops widening it
for everyone. The interpreter's own directory goes on PATH too, so ``#!/usr/bin/env python3``
finds a Python even where the system has none.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from zlops.host import proc

FAKEBIN = Path(__file__).resolve().parent / "fakebin"


def use_fakebin(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    """Fakes first on PATH, ``FAKE_*`` passed to child processes, and ``env`` set (e.g. FAKE_NPU_BUSY="2,3")."""
    path = os.pathsep.join([str(FAKEBIN), str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setattr(proc, "ENV_ALLOWLIST", (*proc.ENV_ALLOWLIST, "FAKE_*"))
    for key in [k for k in os.environ if k.startswith("FAKE_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
