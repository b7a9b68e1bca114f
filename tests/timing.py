"""How the few tests that judge real timings on this machine cope with its noise (the demo's nights, its
PR compare, the nightly DAG on the demo upstream: plain 2%/5% rule, numpy on 2 shared cores).

This is a shared VM. On 2026-12-01 its own A/A noise (one numpy op, fresh processes a few seconds
apart) was 1.5% at some minutes and 7-12% at others, for tens of minutes, with nothing of ours
running: untouched demo operators then move 7-30% between nights, beyond the 5% line these tests check.
So a failing attempt is (1) rerun after a pause (``TIMING_RERUNS``: a short burst passes), and (2) when
the host's A/A noise measured right after the failure is itself beyond :data:`NOISE_LIMIT_PCT`, the
attempt is reported as skipped with that figure: a verdict the data cannot carry is not given. On a quiet
host a broken judge or pipeline fails every attempt.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

TIMING_RERUNS = pytest.mark.flaky(reruns=2, reruns_delay=30)
#: the A/A spread of fresh processes beyond which the host cannot carry the demo's 5% verdicts
NOISE_LIMIT_PCT = 5.0

_PROBE = """
import json, time
import numpy as np
rng = np.random.default_rng(0)
x = rng.random(1_000_000)
a = rng.random((384, 384))
ops = {"cumsum": lambda: np.cumsum(x), "exp": lambda: np.exp(x), "matmul": lambda: a @ a}
out = {}
for name, fn in ops.items():
    fn()
    ts = []
    for _ in range(9):
        t = time.perf_counter()
        for _ in range(5):
            fn()
        ts.append((time.perf_counter() - t) / 5)
    out[name] = sorted(ts)[4]
print(json.dumps(out))
"""


def host_aa_noise(processes: int = 5) -> tuple[float, str]:
    """The host's own A/A noise now: the largest (max / min - 1) in % over numpy ops of their medians in
    ``processes`` fresh processes run one after another, and which op it was."""
    medians: dict[str, list[float]] = {}
    for _ in range(processes):
        done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                              check=True)
        for op, value in json.loads(done.stdout).items():
            medians.setdefault(op, []).append(float(value))
    spread = {op: (max(v) / min(v) - 1) * 100 for op, v in medians.items()}
    worst = max(spread, key=lambda op: spread[op])
    return spread[worst], f"{worst} medians {min(medians[worst]) * 1e3:.3f}-{max(medians[worst]) * 1e3:.3f} ms"


def current_test(test: Callable[..., Any]) -> str:
    """The running test's node id (``tests/test_demo.py::test_x[param]``), else the function's name."""
    running = os.environ.get("PYTEST_CURRENT_TEST", "")
    return running.rsplit(" (", 1)[0] if running else f"{test.__module__}::{test.__qualname__}"


def real_timings(test: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a test that judges real timings: reruns, and a skip with the figure when the host is too noisy."""

    @functools.wraps(test)
    def attempt(*args: Any, **kwargs: Any) -> Any:
        try:
            return test(*args, **kwargs)
        except AssertionError:
            noise, where = host_aa_noise()
            if noise > NOISE_LIMIT_PCT:
                # pytest reports a skip at the line that raised it (this file), so the reason names the test
                pytest.skip(f"{current_test(test)}: the host's own A/A noise is {noise:.1f}% right now "
                            f"({where} over 5 fresh processes), beyond the {NOISE_LIMIT_PCT:g}% these real-timing "
                            "verdicts are checked at: not judgeable on this host now")
            raise

    # serial: under xdist (scripts/test.sh) no other test runs beside it, as the verdicts it checks need a quiet host
    return pytest.mark.serial(TIMING_RERUNS(attempt))
