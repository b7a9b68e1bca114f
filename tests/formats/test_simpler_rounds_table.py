"""simpler-rounds-table adapter, on real `strace_timing --rounds-table` output (tests/data/simpler).

Broken inputs are derived in memory from the real tables. The HBG table (Host and Device only) is
the stub upstream's own test_benchmark_rounds.py feeds its harness, i.e. synthetic, and is marked so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_results
from zlops.formats.simpler_rounds_table import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "simpler"
BGEMM = "benchmark_bgemm_Case0_summary.log"
QWEN = "qwen3_14b_decode_StressBatch16Seq3500_summary.log"

# Synthetic: the fake `python3 -m ...strace_timing` output in upstream's tests/ut/py/test_benchmark_rounds.py.
HBG_STUB = """\
  Round      Host (us)   Device (us)
  ----------------------------------
  0              100.0          20.0
  Avg Host: 100.0 us  |  Avg Device: 20.0 us [1/1]  (1 rounds)
"""


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="t_summary.log")
    assert excinfo.value.path == "t_summary.log"
    return excinfo.value


def test_registered_and_reads_a_file() -> None:
    assert "simpler-rounds-table" in format_names()
    cases = parse_results("simpler-rounds-table", DATA / BGEMM)
    assert {c.case for c in cases} == {"benchmark_bgemm_Case0"}  # the file stem, less "_summary"


def test_100_round_table_with_trimmed_averages() -> None:
    got = {c.metric: c for c in parse(_text(BGEMM), source=BGEMM)}
    assert list(got) == ["host", "device", "effective", "orch", "sched"]
    assert all((c.unit, c.lower_is_better, len(c.samples)) == ("us", True, 100) for c in got.values())
    assert [got[m].samples[0] for m in got] == [93750.4, 1491.9, 1334.5, 1091.8, 1101.5]  # the cold round 0
    assert [got[m].samples[99] for m in got] == [61376.3, 1320.3, 1291.1, 1181.9, 1286.2]
    assert [got[m].params["avg_us"] for m in got] == [49890.9, 1419.8, 1390.0, 1302.2, 1383.1]
    assert got["host"].params["trimmed_avg_us"] == 48790.6
    assert got["device"].params["trimmed_avg_us"] == 1414.6
    assert "trimmed_avg_us" not in got["orch"].params
    assert got["device"].params == {"source_format": "rounds-table", "rounds": 100, "captured": 100,
                                    "avg_us": 1419.8, "resolution_us": 0.1, "trimmed_avg_us": 1414.6}
    assert sum(got["host"].samples) / 100 == pytest.approx(49890.9, abs=0.1)


def test_hidden_columns_hbg_stub() -> None:
    cases = parse(HBG_STUB, source="/x/alternating_matmul_add_Case1_summary.log")
    assert [(c.case, c.metric, c.samples) for c in cases] == [
        ("alternating_matmul_add_Case1", "host", (100.0,)), ("alternating_matmul_add_Case1", "device", (20.0,))]


def test_zero_rounds_are_no_sample_of_a_shown_column() -> None:
    text = _text(QWEN).replace("  2          3287481.5       34823.0", "  2          3287481.5           0.0")
    mean = (35161.8 + 34691.7 + 35118.1 + 35101.4) / 4
    text = text.replace("Avg Device: 34979.2 us [5/5]", f"Avg Device: {mean:.1f} us [4/5]")
    device = {c.metric: c for c in parse(text, source=QWEN)}["device"]
    assert device.samples == (35161.8, 34691.7, 35118.1, 35101.4)
    assert (device.params["rounds"], device.params["captured"]) == (5, 4)


def test_no_markers_means_measured_nothing() -> None:
    assert parse("No [STRACE] markers found.\n", source="x.log") == []


def test_torn_record_warning_merged_from_stderr_is_kept() -> None:
    text = ("warning: 2 of 82 [STRACE] records are incomplete and are excluded from the timing below\n"
            + _text(QWEN))
    assert {c.params["torn_records"] for c in parse(text, source=QWEN)} == {2}


@pytest.mark.parametrize(("edit", "line", "message"), [
    (lambda t: t.replace("  3          3499252.7       35118.1       35085.2       10164.9       35083.4\n", ""),
     6, "round 4 where round 3 was expected"),
    (lambda t: t.replace("35118.1       35085.2", "35118.1"), 6, "round 3 has 4 values for 5 columns"),
    (lambda t: t.replace("3499252.7", "3499252.7x"), 6, "expected a round row or the 'Avg Host"),
    (lambda t: t.replace("3499252.7", "3599252.7"), 8, "Avg Host is 3599927.9 us but its rows average"),
    (lambda t: t.replace("(5 rounds)", "(6 rounds)"), 8, "says 6 rounds but the table has 5 rows"),
    (lambda t: t.replace("[5/5]", "[4/5]"), 8, "[4/5] captured but the rows give [5/5]"),
    (lambda t: t.replace("|  Avg Orch: 10112.5 us  ", ""), 8, "the Avg line names"),
    (lambda t: t.split("  Avg Host")[0], 8, "input ends after 5 rounds"),
    (lambda t: t.replace("  ------", "  ======"), 2, "dashed rule"),
    (lambda t: t + "  Avg Host: 1.0 us  (1 rounds)\n", 9, "unexpected text after the rounds table"),
    (lambda t: "INFO starting\n" + t, 1, "unexpected text before the rounds table"),
    (lambda t: t + t, 9, "2 rounds tables in one file"),
    (lambda t: t.replace("Effective (us)", "Total (us)"), 1, "unknown rounds-table columns ['Total']"),
])
def test_truncated_or_garbled_tables_are_errors_with_a_line(edit, line: int, message: str) -> None:
    err = _err(edit(_text(QWEN)))
    assert message in str(err)
    assert err.line == line


def test_pre_strace_device_log_table_is_refused() -> None:
    old = "  Round     Elapsed (us)\n  -----     ------------\n  0               1.0\n\n  Avg: 1.0 us  (1 rounds)\n"
    assert "unknown rounds-table columns ['Elapsed']" in str(_err(old))


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty results file"),
    (("[mono_ns=1][T0x1][TIMING] emit_host_span: [STRACE] v=1 pid=1 tid=1 inv=1 hid=a depth=0 name=chip.run "
     "ts=1 dur=2\n"), "use format simpler-strace"),
    ('{"benchmarks": []}', "no strace_timing rounds table found"),
])
def test_wrong_input_is_refused(text: str, message: str) -> None:
    assert message in str(_err(text))


def test_a_host_of_zero_counts_in_the_writers_avg_but_is_no_sample() -> None:
    # derived: a round whose chip.run record was lost prints Host 0.0, and the writer averages it in
    text = _text(QWEN).replace("  2          3287481.5", "  2                0.0")
    mean = (4083456.1 + 3609239.8 + 0.0 + 3499252.7 + 3520209.5) / 5
    text = text.replace("Avg Host: 3599927.9 us", f"Avg Host: {mean:.1f} us")
    host = parse(text, source=QWEN)[0]
    assert host.samples == (4083456.1, 3609239.8, 3499252.7, 3520209.5)
    assert (host.params["rounds"], host.params["captured"]) == (5, 4)
