"""The rerun policy of the few tests that judge real timings on this machine (the demo's nights, its PR
compare, the nightly DAG on the demo upstream).

This is a shared 2-core VM: a burst of the host's noise (A/A medians of one numpy cumsum at 6.3 ms and
7.6 ms in two processes a minute apart, 2026-12-01) moves untouched operators by 7-10% for minutes at a
time, beyond the demo's plain 5% line. Such a test reruns after a pause; a broken judge or pipeline
fails every attempt, and pytest's summary lists each rerun.
"""

from __future__ import annotations

import pytest

TIMING_RERUNS = pytest.mark.flaky(reruns=3, reruns_delay=30)
