"""simpler-benchmark-rounds adapter.

SYNTHETIC INPUT: no real capture of `tools/benchmark_rounds.sh` stdout exists publicly. The inputs
here are assembled from the script's own echo/printf statements (hw-native-sys/simpler
tools/benchmark_rounds.sh, the [STRACE]-based version: example blocks, `---- <Case> [mode] ----`,
FAILED/SKIPPED/no-timing lines, the Performance Summary printf widths, the footer) around two REAL
rounds tables (tests/data/simpler/*_summary.log). The per-case numbers are therefore real; the
framing is built from the documented grammar.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_text
from zlops.formats.simpler_benchmark_rounds import parse, parse_with_report
from zlops.formats.simpler_rounds_table import parse as parse_table

DATA = Path(__file__).resolve().parents[1] / "data" / "simpler"
RT = "tensormap_and_ringbuffer"
RULE = "=" * 64
COLS = ["Host", "Device", "Effective", "Orch", "Sched"]
BGEMM_AVG = ["49890.9", "1419.8", "1390.0", "1302.2", "1383.1"]
QWEN_AVG = ["3599927.9", "34979.2", "34911.5", "10112.5", "34864.1"]
NO_TIMING = "  (no benchmark timing data \u2014 are SIMPLER_HOST_STRACE markers visible?)"


def _table(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").rstrip("\n").split("\n")


BGEMM = _table("benchmark_bgemm_Case0_summary.log")
QWEN = _table("qwen3_14b_decode_StressBatch16Seq3500_summary.log")
HBG = ["  Round      Host (us)   Device (us)", "  ----------------------------------",
       "  0              100.0          20.0", "  Avg Host: 100.0 us  |  Avg Device: 20.0 us [1/1]  (1 rounds)"]


def _block(title: str) -> list[str]:
    return ["", RULE, f"  {title}", RULE]


def _summary(rows: list[tuple[str, str, list[str]]], cols: list[str] = COLS) -> list[str]:
    def cells(values: list[str]) -> str:
        return "".join(f"  {v:>14}" if c == "Effective" else f"  {v:>12}" for c, v in zip(cols, values, strict=True))
    out = [*_block(f"Performance Summary ({RT})"), ""]
    out.append(f"  {'Example':<40}  {'Mode':<8}" + cells([f"{c} (us)" for c in cols]))
    out.append(f"  {'-' * 40}  {'-' * 8}" + cells(["-" * (14 if c == "Effective" else 12) for c in cols]))
    out += [f"  {label:<40}  {mode:<8}" + cells(values) for label, mode, values in rows]
    return out


def _footer(passed: int, failed: int) -> list[str]:
    return _block(f"Benchmark complete ({RT}): {passed} passed, {failed} failed ({passed + failed} total)")


def _output(*, footer: bool = True) -> str:
    lines = ["", f"Runtime: {RT}"]
    lines += [*_block("alternating_matmul_add"), "  ---- Case1 [parallel] ----",
              "  FAILED: benchmark run returned non-zero"]
    lines += [*_block("benchmark_bgemm"), "  ---- Case0 [parallel] ----", *BGEMM]
    lines += [*_block("paged_attention_unroll"), "  ---- Case1 [parallel] ----", NO_TIMING]
    lines += [*_block("batch_paged_attention"), "  ---- Case1 [parallel] ----",
              "  SKIPPED: no test_*.py found in /opt/sim/tests/st/a5/tensormap_and_ringbuffer/batch_paged_attention"]
    lines += [*_block("qwen3_14b_decode"), "  ---- StressBatch16Seq3500 [parallel] ----", *QWEN]
    lines += _summary([("benchmark_bgemm (Case0)", "parallel", BGEMM_AVG),
                       ("qwen3_14b_decode (StressBatch16Seq3500)", "parallel", QWEN_AVG)])
    if footer:
        lines += _footer(2, 2)
    return "\n".join(lines) + "\n"


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="bench.out")
    assert excinfo.value.path == "bench.out"
    return excinfo.value


def test_registered() -> None:
    assert "simpler-benchmark-rounds" in format_names()
    assert len(parse_text("simpler-benchmark-rounds", _output())) == 10


def test_cases_metrics_and_samples_come_from_each_case_table() -> None:
    text = _output()
    cases = parse(text, source="bench.out")
    assert [(c.case, c.metric) for c in cases] == [
        (label, m) for label in ("benchmark_bgemm (Case0)", "qwen3_14b_decode (StressBatch16Seq3500)")
        for m in ("host", "device", "effective", "orch", "sched")]
    alone = parse_table("\n".join(QWEN) + "\n", source="q.log")
    assert [c.samples for c in cases[5:]] == [c.samples for c in alone]
    assert cases[0].samples[:2] == (93750.4, 54350.1) and len(cases[0].samples) == 100
    assert all((c.unit, c.lower_is_better) == ("us", True) for c in cases)
    assert cases[0].params == {
        "runtime": RT, "example": "benchmark_bgemm", "case": "Case0", "mode": "parallel", "rounds": 100,
        "captured": 100, "avg_us": 49890.9, "resolution_us": 0.1, "trimmed_avg_us": 48790.6,
        "failed_cases": 2, "skipped_cases": 1, "complete": True}


def test_failures_and_skips_are_reported_not_dropped_silently() -> None:
    text = _output()
    rep = parse_with_report(text, source="bench.out")
    assert [(d.item, d.reason, d.line) for d in rep.failed] == [
        ("alternating_matmul_add (Case1)", "benchmark run returned non-zero", _line_of(text, "  FAILED")),
        ("paged_attention_unroll (Case1)", NO_TIMING.strip(), _line_of(text, "  (no benchmark timing"))]
    ((skip_item, skip_reason),) = [(d.item, d.reason) for d in rep.skipped]
    assert skip_item == "batch_paged_attention (Case1)" and skip_reason.startswith("no test_*.py found in /opt")
    assert rep.counts() == {"failed": 2, "skipped": 1}


def test_all_cases_failed_measures_nothing_but_says_why() -> None:
    lines = ["", f"Runtime: {RT}", *_block("benchmark_bgemm"), "  ---- Case0 [parallel] ----",
             "  FAILED: benchmark run returned non-zero", *_footer(0, 1)]
    rep = parse_with_report("\n".join(lines) + "\n", source="bench.out")
    assert rep.measured_nothing and [d.item for d in rep.failed] == ["benchmark_bgemm (Case0)"]


def test_serial_orch_sched_rerun_is_its_own_case() -> None:
    lines = ["", f"Runtime: {RT}", *_block("qwen3_14b_decode"),
             "  ---- StressBatch16Seq3500 [parallel] ----", *QWEN,
             "  ---- StressBatch16Seq3500 [serial] ----", *QWEN]
    lines += _summary([("qwen3_14b_decode (StressBatch16Seq3500)", "parallel", QWEN_AVG),
                       ("qwen3_14b_decode (StressBatch16Seq3500)", "serial", QWEN_AVG)])
    lines += [
        *_block(f"Serial vs Parallel Delta ({RT})"), "",
        f"  {'Example':<40}  {'Metric':<8}  {'Parallel':>12}  {'Serial':>12}  {'Delta':>12}  {'Change (%)':>12}",
        f"  {'-' * 40}  {'-' * 8}  {'-' * 12}  {'-' * 12}  {'-' * 12}  {'-' * 12}",
        (f"  {'qwen3_14b_decode (StressBatch16Seq3500)':<40}  {'Host':<8}  {3599927.9:12.1f}  {3599927.9:12.1f}"
         f"  {0.0:+12.1f}  {0.0:+12.2f}")]
    lines += _footer(2, 0)
    cases = parse("\n".join(lines) + "\n", source="bench.out")
    assert sorted({c.case for c in cases}) == ["qwen3_14b_decode (StressBatch16Seq3500)",
                                               "qwen3_14b_decode (StressBatch16Seq3500) [serial]"]
    serial = [c for c in cases if c.case.endswith("[serial]")]
    assert [c.metric for c in serial] == ["host", "device", "effective", "orch", "sched"]
    assert {c.params["mode"] for c in serial} == {"serial"}


def test_host_build_graph_default_mode_without_a_case_list() -> None:
    lines = ["", "Runtime: host_build_graph", *_block("alternating_matmul_add"), "  ---- default ----", *HBG,
             *_block("Performance Summary (host_build_graph)"), "",
             f"  {'Example':<40}  {'Mode':<8}  {'Host (us)':>12}  {'Device (us)':>12}",
             f"  {'-' * 40}  {'-' * 8}  {'-' * 12}  {'-' * 12}",
             f"  {'alternating_matmul_add':<40}  {'default':<8}  {'100.0':>12}  {'20.0':>12}",
             *_block("Benchmark complete (host_build_graph): 1 passed, 0 failed (1 total)")]
    cases = parse("\n".join(lines) + "\n", source="bench.out")
    assert [(c.case, c.metric, c.samples, c.params["mode"], c.params["runtime"]) for c in cases] == [
        ("alternating_matmul_add", "host", (100.0,), "default", "host_build_graph"),
        ("alternating_matmul_add", "device", (20.0,), "default", "host_build_graph")]


def test_output_cut_inside_a_table_keeps_the_complete_cases() -> None:
    text = _output()
    cut = text.index("  3          3499252.7")
    rep = parse_with_report(text[:cut], source="bench.out")
    assert {c.case for c in rep.results} == {"benchmark_bgemm (Case0)"}
    assert [(d.kind, d.item) for d in rep.dropped if d.kind == "truncated"] == [
        ("truncated", "qwen3_14b_decode (StressBatch16Seq3500)")]
    assert all(c.params["complete"] is False for c in rep.results)


def test_output_without_footer_is_reported_truncated() -> None:
    rep = parse_with_report(_output(footer=False), source="bench.out")
    assert len(rep.results) == 10
    assert [d.item for d in rep.of_kind("truncated")] == ["(output)"]
    assert rep.results[0].params["complete"] is False


def test_summary_row_must_repeat_the_case_average() -> None:
    text = _output().replace("     49890.9", "     49990.9", 1)
    err = _err(text)
    assert "summary Host for 'benchmark_bgemm (Case0)' is 49990.9 but its table says 49890.9" in str(err)
    assert err.line == _line_of(text, "  benchmark_bgemm (Case0)")


def test_summary_row_without_a_table_is_an_error() -> None:
    old = "  qwen3_14b_decode (StressBatch16Seq3500)  "
    text = _output().replace(old, "  qwen3_14b_decode (Case9)".ljust(len(old)))
    assert "summary row 'qwen3_14b_decode (Case9)' [parallel] has no rounds table above" in str(_err(text))


def test_footer_counts_must_match_the_cases() -> None:
    text = _output().replace("2 passed, 2 failed (4 total)", "3 passed, 2 failed (5 total)")
    err = _err(text)
    assert "footer says 3 passed, 2 failed but the output holds 2 measured and 2 failed" in str(err)


def test_script_error_line_is_a_parse_error() -> None:
    text = "ERROR: benchmark workload 'alternating_matmul_add' not found for a5 + host_build_graph.\n"
    err = _err(text)
    assert "aborted before measuring: ERROR: benchmark workload" in str(err) and err.line == 1


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace("  ---- Case0 [parallel] ----\n", ""), "a rounds table outside"),
    (lambda t: t.replace("  ---- Case0 [parallel] ----", "  ---- Case0 [parallel] ----\n  Log: /tmp/x.log"),
     "unexpected line in benchmark_rounds.sh output: 'Log: /tmp/x.log'"),
    (lambda t: t.replace(f"Runtime: {RT}\n", ""), "no 'Runtime: <rt>' line"),
    (lambda t: "", "empty output"),
])
def test_garbled_output_is_an_error(edit, message: str) -> None:
    assert message in str(_err(edit(_output())))


def test_a_strace_log_is_not_benchmark_rounds_output() -> None:
    text = (DATA / "bgemm_Case0_single_round_task.log").read_text(encoding="utf-8")
    err = _err(text)
    assert "unexpected line" in str(err) and err.line == 1


def test_a_case_that_printed_nothing_is_an_error() -> None:
    text = _output().replace("  FAILED: benchmark run returned non-zero\n", "")
    err = _err(text)
    assert "case 'alternating_matmul_add (Case1)' printed neither a rounds table nor a FAILED/SKIPPED" in str(err)
    assert err.line == _line_of(text, "  ---- Case1 [parallel] ----")


def test_output_cut_right_after_a_case_line() -> None:
    text = _output()
    rep = parse_with_report(text[:text.index("  ---- StressBatch16Seq3500") + 45], source="bench.out")
    assert [(d.kind, d.item) for d in rep.of_kind("truncated")] == [
        ("truncated", "qwen3_14b_decode (StressBatch16Seq3500)")]
    assert {c.case for c in rep.results} == {"benchmark_bgemm (Case0)"}
