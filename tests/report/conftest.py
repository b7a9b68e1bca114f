"""Fixtures of the report tests; the builders live in report_factories (importable by name)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from report_factories import HEAD_SHA, T0, make_summary

from zlops.model import (
    CompareSummary,
    HistoryPoint,
    RunRecord,
    RunStatus,
    ShardOutcome,
    ShardStatus,
)


@pytest.fixture
def summary() -> CompareSummary:
    return make_summary()


@pytest.fixture
def run() -> RunRecord:
    return RunRecord(run_key="nightly-0302", kind="nightly", suite="kernels", sha=HEAD_SHA,
                     branch="main", status=RunStatus.DONE)


@pytest.fixture
def shards(tmp_path: Path) -> list[ShardOutcome]:
    root = tmp_path / "artifacts"
    return [
        ShardOutcome("npu", 0, "ascend", ShardStatus.OK, root / "npu-0", 0, T0,
                     T0 + timedelta(seconds=754)),
        ShardOutcome("cuda", 1, "cuda", ShardStatus.FAILED, root / "cuda-1", 3, T0,
                     T0 + timedelta(seconds=12.5), error="CUDA error: out of memory\ntraceback ..."),
    ]


@pytest.fixture
def history() -> list[HistoryPoint]:
    return [
        HistoryPoint(f"nightly-02{d:02d}", f"{d:07d}" + "c" * 33, T0 - timedelta(days=10 - d), "us",
                     (1230.0 + 5 * (d % 3), 1240.0 + 3 * (d % 4), 1255.0))
        for d in range(1, 11)
    ]
