"""simpler-strace adapter, on real onboard [STRACE] logs (tests/data/simpler/PROVENANCE.md).

The reference is upstream's own output for the same log: the qwen3 pair is a real raw marker log
and the real `strace_timing --rounds-table` printed for it, so every per-round value and every Avg
computed here is checked against what the tool printed. (The 100-round bgemm summary fixture holds
only the table, not its 355 KB marker log, so it cannot serve that purpose; it is used by the
rounds-table tests.) Broken or edge-case inputs are derived in memory from the real logs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_results
from zlops.formats.simpler_rounds_table import parse as parse_table
from zlops.formats.simpler_strace import decode_field, parse, parse_with_report

DATA = Path(__file__).resolve().parents[1] / "data" / "simpler"
QWEN = "qwen3_14b_decode_StressBatch16Seq3500.log"
QWEN_TABLE = "qwen3_14b_decode_StressBatch16Seq3500_summary.log"
BGEMM = "bgemm_Case0_single_round_task.log"
LABEL = "TestQwen314BDecode::StressBatch16Seq3500"
METRICS = ["host", "device", "effective", "orch", "sched"]


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _by_metric(text: str, source: str = QWEN) -> dict[str, tuple[float, ...]]:
    return {r.metric: r.samples for r in parse(text, source=source)}


def test_registered_and_reads_a_file() -> None:
    assert "simpler-strace" in format_names()
    cases = parse_results("simpler-strace", DATA / QWEN)
    assert [(c.case, c.metric, c.unit, c.lower_is_better) for c in cases] == [
        (LABEL, m, "us", True) for m in METRICS]


def test_per_round_values_and_averages_equal_upstreams_own_table() -> None:
    ours = {r.metric: r for r in parse(_text(QWEN), source=QWEN)}
    table = {r.metric: r for r in parse_table(_text(QWEN_TABLE), source=QWEN_TABLE)}
    assert set(ours) == set(table) == set(METRICS)
    for metric in METRICS:
        # rows: the tool prints ns/1000 with one decimal
        assert [f"{v:.1f}" for v in ours[metric].samples] == [f"{v:.1f}" for v in table[metric].samples]
        # Avg line: equal to the printed value at the tool's 0.1 us precision
        assert f"{ours[metric].params['avg_us']:.1f}" == f"{table[metric].params['avg_us']:.1f}"
        assert abs(ours[metric].params["avg_us"] - table[metric].params["avg_us"]) <= 0.05
    assert [table[m].params["avg_us"] for m in METRICS] == [3599927.9, 34979.2, 34911.5, 10112.5, 34864.1]


def test_raw_samples_are_nanoseconds_over_1000_in_inv_order() -> None:
    got = _by_metric(_text(QWEN))
    assert got["host"] == (4083456.129, 3609239.787, 3287481.494, 3499252.706, 3520209.48)
    assert got["device"] == (35161.831, 34691.653, 34822.99, 35118.115, 35101.383)
    assert got["orch"][0] == 9905.792 and got["sched"][0] == 34727.788
    # Effective = max(orch end, sched end) - min(orch start, sched start), device clock, not orch+sched:
    # round 0: orch [146325, +9905792], sched [376898, +34727788] -> 35104686 - 146325 ns
    assert got["effective"][0] == 34958.361
    assert got["effective"][0] != pytest.approx(got["orch"][0] + got["sched"][0])


def test_params_name_the_run_and_count_what_was_read() -> None:
    host = parse(_text(QWEN), source=QWEN)[0]
    assert host.params == {
        "label": LABEL, "runtime": "tensormap_and_ringbuffer", "level": 2, "status": "passed",
        "hid": "c9672cb584dca489", "rounds": 5, "other_invocations": 0, "rounds_without_host": 0,
        "captured": 5, "avg_us": pytest.approx(3599927.9192), "torn_records": 0, "record_heads": 80,
        "excluded_spans": 0,
    }


def test_older_emitter_with_trailing_space_single_round() -> None:
    got = {r.metric: r for r in parse(_text(BGEMM), source=BGEMM)}
    assert got["host"].case == "TestBenchmarkBgemm::Case0"
    assert {m: r.samples for m, r in got.items()} == {
        "host": (286462.206,), "device": (1858.085,), "effective": (1416.797,), "orch": (1254.19,),
        "sched": (1192.239,)}
    assert got["host"].params["record_heads"] == 16 and got["host"].params["torn_records"] == 0


def test_two_records_on_one_physical_line_parse_the_same() -> None:
    text = _text(QWEN)
    # forked ranks share the fd: join every record line onto the one before it
    joined = re.sub(r"\n(?=\[mono_ns=\d+\]\[T0x[0-9a-f]+\]\[TIMING\] emit_host_span)", "", text)
    assert joined.count("\n") < text.count("\n") - 70
    assert _by_metric(joined) == _by_metric(text)
    # and two bare records with no log prefix between them
    bare = text.replace("run_epoch=5\n", "run_epoch=5 [STRACE] v=1 pid=3971958 tid=3971958 inv=9 "
                        "hid=00000000000000aa depth=0 name=chip.run ts=1 dur=5000\n")
    rep = parse_with_report(bare, source=QWEN)
    assert rep.results[0].params["other_invocations"] == 1  # the extra record was read, as prefill
    assert _by_metric(bare) == _by_metric(text)


def test_percent_encoded_names_are_decoded() -> None:
    assert decode_field("ext.my%20producer.x%3Dy~") == "ext.my producer.x=y~"
    text = _text(QWEN).replace("name=chip.run.runner_run.device_wall.orch ",
                               "name=chip%2Erun.runner_run.device_wall%2Eorch ")
    assert "%2E" in text
    assert _by_metric(text) == _by_metric(_text(QWEN))


def test_node_network_and_ext_spans_are_excluded() -> None:
    text = _text(QWEN)
    extra = "".join(
        f"[mono_ns=1][T0x1][TIMING] emit_host_span: [STRACE] v=1 pid=3971958 tid=7 inv={100 + k} "
        f"hid=eeeeeeeeeeeeeeee depth=0 name={word}.dispatch ts=1 dur={1000 + k}\n"
        for k, word in enumerate(["node", "network1", "network2", "network3", "ext.pypto"] * 3))
    # 15 one-span invocations of one hid would outnumber the 5 rounds if they were not excluded
    text = text.replace(f"  {LABEL} PASSED", extra + f"  {LABEL} PASSED")
    rep = parse_with_report(text, source=QWEN)
    assert rep.results[0].params["excluded_spans"] == 15
    assert {r.metric: r.samples for r in rep.results} == _by_metric(_text(QWEN))


def test_torn_records_are_excluded_and_counted() -> None:
    text = _text(QWEN)
    cut = text.index("name=chip.run ts=83799486262234")  # the last round's chip.run record
    torn = text[:cut - 40] + "\n" + text[cut + 60:]
    rep = parse_with_report(torn, source=QWEN)
    assert rep.counts() == {"torn_record": 1}
    (lost,) = rep.dropped
    assert lost.line == torn.count("\n", 0, cut - 40) + 1 == 91
    assert "incomplete [STRACE] record" in lost.reason
    host = rep.results[0]
    assert host.params["torn_records"] == 1 and host.params["record_heads"] == 80
    assert host.samples == (4083456.129, 3609239.787, 3287481.494, 3499252.706)  # round 4 lost its root
    assert host.params["rounds"] == 5 and host.params["rounds_without_host"] == 1
    assert all(r.params["torn_records"] == 1 for r in rep.results)  # visible through plain parse() too
    assert len(rep.results[1].samples) == 5  # device of round 4 is intact


def test_truncated_log_keeps_complete_records_and_counts_the_cut_one() -> None:
    text = _text(QWEN)
    cut = text.index("dur=3520209480")
    rep = parse_with_report(text[:cut - 7], source=QWEN)  # ends inside the last record
    assert rep.counts() == {"torn_record": 1}
    assert rep.results[0].params["status"] == "unfinished"
    assert len(rep.results[0].samples) == 4


def test_garbled_record_is_torn_not_a_measurement() -> None:
    # upstream's pattern would read dur=3516 here; a digit garbled into a letter must not pass as a value
    text = _text(QWEN).replace("dur=35161831 clk=dev", "dur=3516x831 clk=dev", 1)
    rep = parse_with_report(text, source=QWEN)
    assert rep.counts() == {"torn_record": 1}
    device = {r.metric: r for r in rep.results}["device"]
    assert device.samples == (34691.653, 34822.99, 35118.115, 35101.383)
    assert device.params["captured"] == 4 and device.params["rounds"] == 5


def test_unsupported_version_is_dropped_and_reported() -> None:
    text = _text(QWEN).replace("[STRACE] v=1 pid=3971958 tid=3971958 inv=5",
                               "[STRACE] v=2 pid=3971958 tid=3971958 inv=5")
    rep = parse_with_report(text, source=QWEN)
    assert rep.counts() == {"unsupported_version": 16}
    assert rep.results[0].params["rounds"] == 4


def test_once_seen_hid_is_prefill_not_a_round() -> None:
    prefill = ("[mono_ns=1][T0x1][TIMING] emit_host_span: [STRACE] v=1 pid=3971958 tid=3971958 inv=0 "
               "hid=ABCDEF0123456789 depth=0 name=chip.run ts=1 dur=999999999\n")
    text = _text(QWEN).replace(f"  {LABEL} ...\n", f"  {LABEL} ...\n{prefill}")
    rep = parse_with_report(text, source=QWEN)
    assert rep.results[0].params["other_invocations"] == 1
    assert rep.results[0].params["hid"] == "c9672cb584dca489"
    assert _by_metric(text) == _by_metric(_text(QWEN))


def test_hbg_like_log_hides_the_phase_metrics() -> None:
    text = "\n".join(line for line in _text(QWEN).split("\n") if ".orch " not in line and ".sched " not in line)
    assert [r.metric for r in parse(text, source=QWEN)] == ["host", "device"]


def test_failed_case_gives_no_results_and_is_reported() -> None:
    text = _text(QWEN).replace(f"  {LABEL} PASSED", f"  {LABEL} FAILED: golden mismatch at index 3")
    rep = parse_with_report(text, source=QWEN)
    assert rep.results == () and rep.measured_nothing
    (failed,) = rep.failed
    assert (failed.item, failed.reason, failed.line) == (LABEL, "golden mismatch at index 3", 4)


def test_two_cases_in_one_log_are_split_by_their_labels() -> None:
    rep = parse_with_report(_text(QWEN) + _text(BGEMM), source="two.log")
    assert sorted({r.case for r in rep.results}) == ["TestBenchmarkBgemm::Case0", LABEL]
    bgemm = {r.metric: r.samples for r in rep.results if r.case == "TestBenchmarkBgemm::Case0"}
    assert bgemm["host"] == (286462.206,)
    assert {r.metric: r.samples for r in rep.results if r.case == LABEL} == _by_metric(_text(QWEN))


def test_without_a_label_the_case_is_the_file_stem() -> None:
    text = "\n".join(line for line in _text(QWEN).split("\n") if LABEL not in line)
    cases = parse(text, source="/runs/7/benchmark_bgemm_Case0.log")
    assert {c.case for c in cases} == {"benchmark_bgemm_Case0"}
    assert cases[0].params["status"] == "unknown" and cases[0].params["label"] is None


def test_a_run_that_emitted_no_marker_measured_nothing() -> None:
    text = f"=== Runtime: tensormap_and_ringbuffer  Level: 2 ===\n  {LABEL} ...\n  {LABEL} PASSED\n"
    rep = parse_with_report(text, source=QWEN)
    assert rep.results == () and rep.measured_nothing
    assert [(d.kind, d.item) for d in rep.dropped] == [("no_markers", LABEL)]
    assert parse("some unrelated program output\n", source="x.log") == []


@pytest.mark.parametrize(("text", "message", "line"), [
    ("", "empty log", None),
    ('\n{"benchmarks": []}\n', "JSON document, not a simpler [STRACE] log", 2),
    (None, "use format simpler-rounds-table", 1),
])
def test_other_formats_are_refused_with_the_file_and_line(text: str | None, message: str, line: int | None) -> None:
    if text is None:
        text = _text(QWEN_TABLE)
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="run.log")
    assert message in str(excinfo.value)
    assert excinfo.value.path == "run.log" and excinfo.value.line == line


def test_crlf_text_parses_the_same() -> None:
    # parse_text callers may hand over a CRLF file read without newline translation
    assert _by_metric(_text(QWEN).replace("\n", "\r\n")) == _by_metric(_text(QWEN))


def test_log_cut_inside_the_last_records_dur_is_torn_not_a_short_value() -> None:
    text = _text(QWEN).split(f"  {LABEL} PASSED")[0].rstrip("\n")
    cut = text[: text.rindex("dur=3520209480") + len("dur=35202")]  # a valid-looking dur=35202
    rep = parse_with_report(cut, source=QWEN)
    assert rep.counts() == {"torn_record": 1}
    assert 35.202 not in rep.results[0].samples and len(rep.results[0].samples) == 4
