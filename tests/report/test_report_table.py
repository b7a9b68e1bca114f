from __future__ import annotations

import dataclasses

from report_factories import BASE_SHA, comparison

from zlops.model import CompareSummary, Verdict
from zlops.report import cells, compare_table

GOLDEN = """\
Baseline: 1111111 -> HEAD: 2222222
Suite: kernels  Run: nightly-0302

### cuda

Case                     Base      HEAD     Delta  Change (%)  Verdict
-------------------  --------  --------  --------  ----------  -----------
attention (latency)      7 ms         -         -           -  MISSING
conv2d (latency)            -   3.25 ms         -           -  new
gemm (bandwidth)     900 GB/s  905 GB/s   +5 GB/s      +0.56%
  (latency)           12.5 ms  12.85 ms  +0.35 ms      +2.80%  ! potential

### npu

Case              Base       HEAD     Delta  Change (%)  Verdict
-----------  ---------  ---------  --------  ----------  -------------
add_fp32      890.3 us     850 us  -40.3 us      -4.53%  improved
matmul_bf16    1240 us    1608 us   +368 us     +29.66%  !! REGRESSION
softmax      480000 us  481000 us  +1000 us      +0.21%

Flagged:
  !! REGRESSION  npu / matmul_bf16 (latency): +29.66% (1240 us -> 1608 us; Base = baseline 1111111)
  ! potential    cuda / gemm (latency): +2.80% (12.5 ms -> 12.85 ms; Base = baseline 1111111)

Overall: 1 of 4 cases improved, 2 regressed (5 series judged)
"""


def test_golden_table(summary: CompareSummary) -> None:
    assert compare_table(summary) == GOLDEN


def test_table_is_deterministic_whatever_the_input_order(summary: CompareSummary) -> None:
    shuffled = dataclasses.replace(summary, comparisons=tuple(reversed(summary.comparisons)))
    assert compare_table(shuffled) == compare_table(summary)


def test_labels_override_the_header(summary: CompareSummary) -> None:
    first = compare_table(summary, base_label="main@1111111", head_label="pr-42").splitlines()[0]
    assert first == "Baseline: main@1111111 -> HEAD: pr-42"


def test_several_baselines_are_named_as_such() -> None:
    summary = CompareSummary("r", "kernels", "f" * 40, (
        comparison("npu", "a", Verdict.UNCHANGED, 10.0, 10.0),
        comparison("npu", "b", Verdict.UNCHANGED, 10.0, 10.0, base_sha="3" * 40),
    ))
    assert compare_table(summary).splitlines()[0] == "Baseline: several baselines -> HEAD: fffffff"


def test_single_metric_pool_has_plain_case_labels_and_no_flagged_list() -> None:
    summary = CompareSummary("r", "kernels", "f" * 40, (
        comparison("npu", "b", Verdict.UNCHANGED, 2.0, 2.0),
        comparison("npu", "a", Verdict.IMPROVED, 2.0, 1.0),
    ))
    lines = compare_table(summary).splitlines()
    assert lines[5:9] == [
        "Case  Base  HEAD  Delta  Change (%)  Verdict",
        "----  ----  ----  -----  ----------  --------",
        "a     2 us  1 us  -1 us     -50.00%  improved",
        "b     2 us  2 us   0 us      +0.00%",
    ]
    assert "Flagged:" not in lines
    assert lines[-1] == "Overall: 1 of 2 cases improved, 0 regressed"


def test_empty_summary() -> None:
    text = compare_table(CompareSummary("r", "kernels", "f" * 40, ()))
    assert "(no comparisons)" in text
    assert text.endswith("Overall: 0 of 0 cases improved, 0 regressed\n")


def test_value_formatting() -> None:
    assert cells.format_value(1240.1, "us") == "1240 us"
    assert cells.format_value(12.345678, "ms") == "12.35 ms"
    assert cells.format_value(480000.0, "us") == "480000 us"
    assert cells.format_value(0.0000123, "s") == "1.230e-05 s"
    assert cells.format_value(0.0000123, "furlongs") == "1.230e-05 furlongs"  # not in the registry
    assert cells.format_value(12.345678, "furlongs") == "12.35 furlongs"
    assert cells.format_value(3.0, "") == "3"
    assert cells.fmt_delta(-4.6, "us") == "-4.6 us"
    assert cells.fmt_delta(0.0, "us") == "0 us"
    assert cells.fmt_change(29.6612) == "+29.66%"
    assert cells.fmt_change(-0.0) == "+0.00%"
    assert cells.fmt_change(None) == "-"
    assert cells.short_sha(BASE_SHA) == "1111111"


def test_change_is_computed_when_the_judge_left_it_out() -> None:
    c = comparison("npu", "a", Verdict.UNCHANGED, 200.0, 201.0)
    c = dataclasses.replace(c, judgement=dataclasses.replace(c.judgement, change_pct=None))
    assert cells.fmt_change(cells.change_pct(c)) == "+0.50%"


def test_small_deltas_use_the_base_values_precision_not_exponents() -> None:
    assert cells.fmt_delta(-0.000421, "ms", scale=0.168) == "-0.0004 ms"
    assert cells.fmt_delta(0.002043, "ms", scale=0.7438) == "+0.002 ms"
    assert cells.fmt_delta(367.8, "us", scale=1240.0) == "+368 us"
    assert cells.fmt_delta(1e-9, "ms", scale=0.2) == "0 ms"


def test_a_big_table_is_brief_for_the_console_and_keeps_every_flag(summary: CompareSummary) -> None:
    """A 20,000-series night must not print 20,000 lines to a terminal or a task log: above ``max_rows``
    each pool is one line of counts, and the flagged series and the overall line stay whole."""
    brief = compare_table(summary, max_rows=3)
    assert "### npu: 3 series: 1 improved, 1 regression, 1 unchanged" in brief
    assert "### cuda: 4 series: 1 missing, 1 new, 1 potential, 1 unchanged" in brief
    assert "add_fp32" not in brief.split("Flagged:")[0]
    assert "(7 rows, above 3: the per-pool tables are in report.txt)" in brief
    assert brief.split("Flagged:")[1] == GOLDEN.split("Flagged:")[1]
    assert compare_table(summary, max_rows=7) == GOLDEN   # at or under the limit: the whole table
