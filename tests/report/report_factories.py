"""Builders of report test data: a small summary covering every verdict across two pools."""

from __future__ import annotations

from datetime import datetime, timezone

from zlops.model import (
    BaselinePoint,
    CompareSummary,
    Comparison,
    Judgement,
    Summary,
    Verdict,
)

BASE_SHA = "1111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
HEAD_SHA = "2222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
T0 = datetime(2025, 3, 1, 2, 0, tzinfo=timezone.utc)


def comparison(
    pool: str, case: str, verdict: Verdict, base: float | None, head: float | None, *,
    metric: str = "latency", unit: str = "us", lower_is_better: bool = True,
    worse_pct: float | None = None, base_sha: str = BASE_SHA,
) -> Comparison:
    change = None if base is None or head is None else (head - base) / base * 100
    if worse_pct is None and change is not None:
        worse_pct = change if lower_is_better else -change
    return Comparison(
        suite="kernels", pool=pool, case=case, metric=metric, unit=unit,
        lower_is_better=lower_is_better,
        base=None if base is None else BaselinePoint("nightly-0301", base_sha, unit, base, 1),
        head=None if head is None else Summary(head, 1),
        judgement=Judgement(verdict, change, worse_pct, None),
    )


def make_summary() -> CompareSummary:
    V = Verdict
    return CompareSummary(
        run_key="nightly-0302", suite="kernels", sha=HEAD_SHA,
        comparisons=(
            comparison("npu", "matmul_bf16", V.REGRESSION, 1240.0, 1607.8),
            comparison("npu", "add_fp32", V.IMPROVED, 890.3, 850.0),
            comparison("npu", "softmax", V.UNCHANGED, 480000.0, 481000.0),
            comparison("cuda", "gemm", V.POTENTIAL, 12.5, 12.85, unit="ms"),
            comparison("cuda", "gemm", V.UNCHANGED, 900.0, 905.0, metric="bandwidth",
                       unit="GB/s", lower_is_better=False),
            comparison("cuda", "conv2d", V.NEW, None, 3.25, unit="ms"),
            comparison("cuda", "attention", V.MISSING, 7.0, None, unit="ms"),
        ),
    )
