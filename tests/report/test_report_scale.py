"""Reports of a 20,000-series night: tables grouped by operator family, the urgent rows first, quiet families folded."""

from __future__ import annotations

import re
import time

from report_factories import HEAD_SHA, comparison

from zlops.model import CompareSummary, RunRecord, RunStatus, Verdict
from zlops.report import markdown_report
from zlops.report.cells import GROUP_ROWS, family_groups
from zlops.report.html import html_report

OPS = [f"op{i:03d}" for i in range(200)]


def _big() -> CompareSummary:
    """20,000 rows: 200 operators x 100 FlagGems-style cases on one pool; op150 regressed in two cases,
    op007 has a suspect, op042 an improvement; everything else unchanged."""
    rows = []
    for op in OPS:
        for j in range(100):
            case = f"{op}/float16/({1024 * (j + 1)}x64)"
            verdict, head = Verdict.UNCHANGED, 101.0
            if (op, j) in (("op150", 3), ("op150", 70)):
                verdict, head = Verdict.REGRESSION, 130.0 if j == 3 else 112.0
            elif (op, j) == ("op007", 9):
                verdict, head = Verdict.SUSPECT, 104.0
            elif (op, j) == ("op042", 0):
                verdict, head = Verdict.IMPROVED, 90.0
            rows.append(comparison("npu", case, verdict, 100.0, head))
    return CompareSummary("nightly-0302", "kernels", HEAD_SHA, tuple(rows))


def test_families_order_the_urgent_first_and_rows_inside_them() -> None:
    groups = family_groups(_big().comparisons)
    assert [g.family for g in groups[:3]] == ["op150", "op007", "op042"]
    assert [c.verdict for c in groups[0].rows[:3]] == [Verdict.REGRESSION, Verdict.REGRESSION, Verdict.UNCHANGED]
    assert groups[0].rows[0].case == "op150/float16/(4096x64)"          # the worse of the two first
    assert groups[0].summary() == "op150: 100 cases, 2 flagged"
    assert groups[1].summary() == "op007: 100 cases, 1 awaiting confirmation"
    assert all(g.quiet for g in groups[3:]) and [g.family for g in groups[3:6]] == ["op000", "op001", "op002"]
    assert groups[3].summary() == "op000: 100 cases, all unchanged"


def test_markdown_and_html_of_20000_rows_read_from_the_regressions_down() -> None:
    summary = _big()
    run = RunRecord("nightly-0302", "nightly", "kernels", HEAD_SHA, "main", RunStatus.DONE)
    t0 = time.perf_counter()
    md = markdown_report(summary, run=run, shards=[])
    html = html_report(summary, run=run, shards=[])
    took = time.perf_counter() - t0
    table = md[md.index("## Comparison"):md.index("## Flagged")]
    assert "20000 rows in 200 operator families; 3 with something to read come first" in table
    assert "| op150 | 100 | 2 | 0 | 0 | 0 | 98 |" in table                  # the family index
    headings = re.findall(r"^#### (.+)$", table, flags=re.M)
    assert headings == ["op150: 100 cases, 2 flagged", "op007: 100 cases, 1 awaiting confirmation",
                        "op042: 100 cases, 1 improved"]
    assert table.count("<details><summary>") == 197 and "<summary>op199: 100 cases, all unchanged</summary>" in table
    first = table.index("| **op150/float16/(4096x64)** |")
    assert first < table.index("| **op150/float16/(72704x64)** |") < table.index("| op150/float16/(1024x64) |")
    assert table.count("\n| op") + table.count("\n| **op") == 20000 + 200   # every row, plus the index
    comp = html[html.index("<h2>Comparison</h2>"):]
    assert comp.count("<details open>") == 3 and comp.count("<details>") == 197
    assert comp.index("<summary>op150: 100 cases, 2 flagged</summary>") < comp.index("<summary>op000:")
    assert comp.count('<tr class="unchanged">') == 20000 - 4
    assert took < 20, took   # a report step of a 20,000-series night renders its tables in seconds


def test_a_small_table_stays_one_table_ordered_by_family() -> None:
    summary = CompareSummary("n", "kernels", HEAD_SHA, (
        comparison("npu", "softmax_8192", Verdict.UNCHANGED, 1.0, 1.0),
        comparison("npu", "add_fp32", Verdict.UNCHANGED, 1.0, 1.0),
        comparison("npu", "softmax_1024", Verdict.REGRESSION, 1.0, 1.2)))
    assert len(summary.comparisons) <= GROUP_ROWS
    run = RunRecord("n", "nightly", "kernels", HEAD_SHA, "main", RunStatus.DONE)
    table = markdown_report(summary, run=run, shards=[]).split("## Comparison", 1)[1].split("## Flagged", 1)[0]
    cases = re.findall(r"^\| \**([a-z_0-9]+)\** \|", table, flags=re.M)
    assert cases == ["softmax_1024", "softmax_8192", "add_fp32"] and "<details>" not in table
