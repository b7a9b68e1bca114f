"""simpler ``tools/benchmark_rounds.sh`` stdout (``simpler-benchmark-rounds``).

The grammar follows the script's ``echo``/``printf`` statements (hw-native-sys/simpler
``tools/benchmark_rounds.sh``, the ``[STRACE]``-based version that renders every case with
``strace_timing --rounds-table``); no real capture of it is public::

    Runtime: tensormap_and_ringbuffer
    ================================================================          (per example)
      benchmark_bgemm
    ================================================================
      ---- Case0 [parallel] ----                   (or "---- parallel ----" without a case)
      Round      Host (us)  ...                    the case's rounds table, or one of
      FAILED: benchmark run returned non-zero      (counted as failed by the script)
      (no benchmark timing data - are SIMPLER_HOST_STRACE markers visible?)   (failed too)
      SKIPPED: no test_*.py found in <dir>         (not counted by the script)
    ...  Performance Summary (<rt>)  block: "<example> (<Case>)  <mode>  <Avg values or ->"
    ...  Serial vs Parallel Delta (<rt>)  block (optional, derived, ignored)
      Benchmark complete (<rt>): P passed, F failed (T total)

Mapping: one case per measured ``---- <Case> [mode] ----`` block, named ``<example> (<Case>)``
like the script's summary label (``<example>`` without a case; `` [serial]`` appended for the
``--serial-orch-sched`` rerun); metrics and samples come from its rounds table exactly as in
:mod:`zlops.formats.simpler_rounds_table`. ``params`` carry runtime, example, case, mode and the
file-level ``failed_cases``/``skipped_cases`` counts; :func:`parse_with_report` lists each
failed or skipped case with its reason. The summary rows and the footer counts are checked
against the case blocks. ``ERROR:`` lines (the script aborted before measuring) raise ParseError.
Output without the footer (the script was killed) keeps the complete cases and reports the
truncation (``params["complete"]`` is false).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zlops.errors import ParseError
from zlops.formats._report import Dropped, ParseReport, stamp
from zlops.formats.simpler_rounds_table import COLUMNS, HEADER_RE, RoundsTable, TableTruncated, read_table
from zlops.model import CaseResult

_RULE_RE = re.compile(r"^={20,}$")
_RUNTIME_RE = re.compile(r"^Runtime: (?P<rt>\S+)\s*$")
_CASE_RE = re.compile(r"^  ---- (?:(?P<case>\S+) \[(?P<mode>\w+)\]|(?P<only_mode>\w+)) ----$")
_FAILED_RE = re.compile(r"^  FAILED: (?P<why>.*)$")
_NO_TIMING_RE = re.compile(r"^  \(no benchmark timing data.*\)$")
_SKIPPED_RE = re.compile(r"^  SKIPPED: (?P<why>.*)$")
_ERROR_RE = re.compile(r"^ERROR: .*$")
_SUMMARY_TITLE_RE = re.compile(r"^Performance Summary \((?P<rt>\S+)\)$")
_DELTA_TITLE_RE = re.compile(r"^Serial vs Parallel Delta \((?P<rt>\S+)\)$")
_FOOTER_RE = re.compile(
    r"^Benchmark complete \((?P<rt>\S+)\): (?P<p>\d+) passed, (?P<f>\d+) failed \((?P<t>\d+) total\)$")
_SUMMARY_HEADER_RE = re.compile(r"^  Example\s+Mode\s+(?P<cols>.*)$")
_SUMMARY_ROW_RE = re.compile(r"^  (?P<label>.+?)\s{2,}(?P<mode>parallel|serial|default)\s{2,}(?P<vals>.*?)\s*$")
_IGNORED_RE = re.compile(r"^(?:Verbose log: .*|  Verbose log saved to: .*)$")


@dataclass
class _State:
    runtime: str | None = None
    example: str | None = None
    case: str | None = None
    mode: str | None = None
    case_line: int = 0
    pending: bool = False  # a case line was read and its table / FAILED / SKIPPED line not yet
    section: str = "cases"  # "cases" | "summary" | "delta" | "footer"

    def open_case(self, case: str | None, mode: str, line: int, source: str) -> None:
        self.close(source)
        self.case, self.mode, self.case_line, self.pending = case, mode, line, True

    def close(self, source: str) -> None:
        """A case must print something before the next case or block starts."""
        if self.pending:
            raise ParseError(f"case {_label(self)!r} printed neither a rounds table nor a FAILED/SKIPPED line",
                             path=source, line=self.case_line)

    def resolve(self) -> None:
        self.case = self.mode = None
        self.pending = False


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse benchmark_rounds.sh stdout into per-case host/device/effective/orch/sched results."""
    return list(parse_with_report(text, source=source).results)


def parse_with_report(text: str, *, source: str) -> ParseReport:
    """Like :func:`parse`, plus the FAILED / SKIPPED cases and a truncation, each with its line."""
    lines = text.replace("\r\n", "\n").split("\n")  # a CRLF file read as bytes elsewhere
    if not text.strip():
        raise ParseError("empty output (benchmark_rounds.sh printed nothing)", path=source)
    st = _State()
    tables: dict[str, tuple[RoundsTable, dict[str, Any]]] = {}
    dropped: list[Dropped] = []
    summary: list[tuple[int, str, str, list[str], list[str]]] = []
    summary_cols: list[str] = []
    footer: tuple[int, re.Match[str]] | None = None
    i = 0
    while i < len(lines):
        line, n = lines[i], i + 1
        if not line.strip() or _IGNORED_RE.match(line) or _RULE_RE.match(line):
            i += 1
            continue
        if _ERROR_RE.match(line):
            raise ParseError(f"benchmark_rounds.sh aborted before measuring: {line.strip()}", path=source, line=n)
        if (rt := _RUNTIME_RE.match(line)) is not None:
            st.runtime = rt["rt"]
        elif i > 0 and i + 1 < len(lines) and _RULE_RE.match(lines[i - 1]) and _RULE_RE.match(lines[i + 1]):
            st.close(source)
            footer = _title(st, line.strip(), n, footer)
        elif (m := _CASE_RE.match(line)) is not None and st.section == "cases":
            _need(st.example, "a case line before any example block", source, n)
            st.open_case(m["case"], m["mode"] or m["only_mode"], n, source)
        elif st.section == "cases" and HEADER_RE.match(line):
            label = _need(_label(st), "a rounds table outside a '---- <Case> [mode] ----' block", source, n)
            try:
                table, i = read_table(lines, i, source=source)
            except TableTruncated:
                if any(_FOOTER_RE.match(x.strip()) for x in lines[i:]):
                    raise
                dropped.append(Dropped("truncated", label, "output ends inside this case's rounds table", n))
                st.resolve()
                break
            if label in tables:
                raise ParseError(f"case {label!r} appears twice", path=source, line=n)
            tables[label] = (table, {"runtime": st.runtime, "example": st.example, "case": st.case,
                                     "mode": st.mode})
            st.resolve()
            continue
        elif st.section == "cases" and (m := _FAILED_RE.match(line) or _NO_TIMING_RE.match(line)) is not None:
            label = _need(_label(st), "a FAILED line outside a case block", source, n)
            dropped.append(Dropped("failed", label, m.groupdict().get("why") or line.strip(), n))
            st.resolve()
        elif st.section == "cases" and (m := _SKIPPED_RE.match(line)) is not None:
            dropped.append(Dropped("skipped", _need(_label(st), "a SKIPPED line outside a case", source, n),
                                   m["why"], n))
            st.resolve()
        elif st.section == "summary" and (m := _SUMMARY_HEADER_RE.match(line)) is not None:
            summary_cols = [c.removesuffix(" (us)") for c in re.split(r"\s{2,}", m["cols"].strip())]
        elif st.section == "summary" and re.match(r"^  -{40}\s", line):
            pass
        elif st.section == "summary" and (m := _SUMMARY_ROW_RE.match(line)) is not None:
            summary.append((n, m["label"], m["mode"], m["vals"].split(), summary_cols))
        elif st.section == "delta":
            pass  # derived from the summary; nothing new in it
        else:
            hint = "; it holds [STRACE] markers: use format simpler-strace" if "[STRACE]" in text else ""
            raise ParseError(f"unexpected line in benchmark_rounds.sh output: {line.strip()[:60]!r}{hint}",
                             path=source, line=n)
        i += 1
    if st.runtime is None:
        raise ParseError("no 'Runtime: <rt>' line; is this benchmark_rounds.sh output?", path=source,
                         line=next((k + 1 for k, x in enumerate(lines) if x.strip()), None))
    _check_summary(summary, tables, source=source)
    if footer is not None:
        _check_footer(footer, tables, dropped, source=source)
    elif st.pending:
        dropped.append(Dropped("truncated", _label(st) or "?", "output ends before this case printed anything",
                               st.case_line))
    elif not any(d.kind == "truncated" for d in dropped):
        dropped.append(Dropped("truncated", "(output)", "no 'Benchmark complete' footer: the script did not finish",
                               len(lines)))
    results = [r for label, (table, extra) in tables.items() for r in table.case_results(label, extra)]
    counts = {"failed_cases": sum(d.kind == "failed" for d in dropped),
              "skipped_cases": sum(d.kind == "skipped" for d in dropped), "complete": footer is not None}
    return ParseReport(stamp(results, counts), tuple(dropped))


def _title(st: _State, title: str, n: int, footer: tuple[int, re.Match[str]] | None
           ) -> tuple[int, re.Match[str]] | None:
    """A ``====`` framed title: an example name, the summary, the delta table or the footer."""
    if _SUMMARY_TITLE_RE.match(title):
        st.section = "summary"
    elif _DELTA_TITLE_RE.match(title):
        st.section = "delta"
    elif (m := _FOOTER_RE.match(title)) is not None:
        st.section = "footer"
        return (n, m)
    else:
        st.section, st.example, st.case, st.mode = "cases", title, None, None
    return footer


def _label(st: _State) -> str | None:
    if st.example is None or st.mode is None:
        return None
    label = f"{st.example} ({st.case})" if st.case else st.example
    return f"{label} [serial]" if st.mode == "serial" else label


def _need(value: str | None, what: str, source: str, n: int) -> str:
    if value is None:
        raise ParseError(f"{what}; the output is garbled", path=source, line=n)
    return value


def _check_summary(rows: Sequence[tuple[int, str, str, list[str], list[str]]],
                   tables: dict[str, tuple[RoundsTable, dict[str, Any]]], *, source: str) -> None:
    """Every summary row must repeat its case's Avg values (the script greps them from there)."""
    for n, label, mode, values, cols in rows:
        key = f"{label} [serial]" if mode == "serial" else label
        if key not in tables:
            raise ParseError(f"summary row {label!r} [{mode}] has no rounds table above", path=source, line=n)
        if len(values) != len(cols):
            raise ParseError(f"summary row has {len(values)} values for {len(cols)} columns", path=source, line=n)
        avg = tables[key][0].avg
        for col, value in zip(cols, values, strict=True):
            if col not in COLUMNS:
                raise ParseError(f"unknown summary column {col!r}", path=source, line=n)
            printed = avg.get(col)
            if (value == "-") != (printed is None) or (printed is not None and float(value) != printed):
                raise ParseError(f"summary {col} for {label!r} is {value} but its table says "
                                 f"{'-' if printed is None else printed}", path=source, line=n)


def _check_footer(footer: tuple[int, re.Match[str]], tables: dict[str, Any], dropped: Sequence[Dropped], *,
                  source: str) -> None:
    n, m = footer
    passed, failed = int(m["p"]), int(m["f"])
    ours = (len(tables), sum(d.kind == "failed" for d in dropped))
    if (passed, failed) != ours or int(m["t"]) != passed + failed:
        raise ParseError(f"footer says {passed} passed, {failed} failed but the output holds {ours[0]} measured "
                         f"and {ours[1]} failed cases (lost or garbled lines?)", path=source, line=n)
