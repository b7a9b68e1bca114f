"""simpler's per-round table (``simpler-rounds-table``): ``strace_timing <log> --rounds-table``.

The writer is ``print_rounds_table`` in hw-native-sys/simpler
``simpler_setup/tools/strace_timing.py``; ``tools/benchmark_rounds.sh`` embeds the same table
per case (see :mod:`zlops.formats.simpler_benchmark_rounds`, which reuses :func:`read_table`)::

      Round      Host (us)   Device (us)  Effective (us)     Orch (us)    Sched (us)
      ------------------------------------------------------------------------------
      0          4083456.1       35161.8       34958.4        9905.8       34727.8
      Avg Host: 3599927.9 us  |  Avg Device: 34979.2 us [5/5]  |  ...  (5 rounds)
      Trimmed Avg Host: ... us  |  Trimmed Avg Device: ... us  (dropped 10 low + 10 high, 80 rounds used)

Rules mirrored from the writer: values are microseconds with one decimal (ns / 1000); a column
whose every round is 0 is hidden (HBG shows only Host and Device); Host is averaged over all
rounds, every other column over its non-zero rounds only; ``Avg Device`` carries
``[captured/total]``; ``No [STRACE] markers found.`` means no rounds at all.

Mapping: one case per file, named after the file (its stem, less a trailing ``_summary``);
metrics ``host``, ``device``, ``effective``, ``orch``, ``sched`` in ``us``, lower is better;
samples are the printed per-round values (0.1 us resolution) of the rounds where the metric is
non-zero (what the Avg line averages, except that the writer also counts a Host of 0, which only a
lost ``chip.run`` record produces). The Avg line is checked against the rows, so a missing or
garbled row is an error rather than a silently different mean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from zlops import metrics
from zlops.errors import ParseError
from zlops.model import CaseResult

#: Table column -> zlops metric name, in the writer's print order.
COLUMNS: dict[str, str] = {"Host": "host", "Device": "device", "Effective": "effective",
                           "Orch": "orch", "Sched": "sched"}
UNIT = "us"
NO_MARKERS = "No [STRACE] markers found."
#: The printed values have one decimal, so a mean of them and the printed mean differ by <= 0.1.
AVG_TOLERANCE_US = 0.1 + 1e-6

HEADER_RE = re.compile(r"^\s*Round\s+(?P<cols>\w+ \(us\).*)$")
_COL_RE = re.compile(r"(\w+) \(us\)")
_RULE_RE = re.compile(r"^\s*-{6,}\s*$")
_ROW_RE = re.compile(r"^\s*(?P<i>\d+)(?P<vals>(?:\s+\d+(?:\.\d+)?)+)\s*$")
_AVG_LINE_RE = re.compile(r"^\s*Avg Host: .*\((?P<n>\d+) rounds\)\s*$")
_AVG_ITEM_RE = re.compile(r"Avg (?P<col>\w+): (?P<v>\d+(?:\.\d+)?) us(?: \[(?P<cap>\d+)/(?P<tot>\d+)\])?")
_TRIM_LINE_RE = re.compile(r"^\s*Trimmed Avg Host: .*\(dropped \d+ low \+ \d+ high, \d+ rounds used\)\s*$")
#: strace_timing's stderr warning about torn records, kept when a harness merged stderr in.
TORN_WARNING_RE = re.compile(r"^warning: (?P<torn>\d+) of (?P<heads>\d+) \[STRACE\] records are incomplete")


class TableTruncated(ParseError):
    """The input ended inside a rounds table (before its ``Avg Host:`` line)."""


@dataclass(frozen=True)
class RoundsTable:
    """One parsed ``--rounds-table``: columns, per-round rows, and the printed averages."""

    columns: tuple[str, ...]
    rows: tuple[tuple[float, ...], ...]
    avg: Mapping[str, float]
    trimmed_avg: Mapping[str, float]
    captured: tuple[int, int] | None  # Avg Device's [captured/total]
    line: int  # 1-based line of the header

    def samples(self, column: str) -> tuple[float, ...]:
        """The rounds' values of ``column``, leaving out the rounds where it is 0 (not measured).

        The writer averages every column but Host over exactly these; a Host of 0 only comes from a
        round whose ``chip.run`` record was lost, and is no sample either (see ``simpler-strace``).
        """
        i = self.columns.index(column)
        return tuple(r[i] for r in self.rows if r[i] > 0.0)

    def writer_mean(self, column: str) -> float:
        """The mean as the writer computes it: Host over all rounds, the others over non-zero ones."""
        i = self.columns.index(column)
        values = [r[i] for r in self.rows] if column == "Host" else list(self.samples(column))
        return sum(values) / len(values) if values else 0.0

    def case_results(self, case: str, extra: Mapping[str, Any]) -> list[CaseResult]:
        """One CaseResult per column that has samples; ``extra`` is merged into params."""
        out = []
        for col in self.columns:
            samples = self.samples(col)
            if not samples:
                continue
            params: dict[str, Any] = {**extra, "rounds": len(self.rows), "captured": len(samples),
                                      "avg_us": self.avg[col], "resolution_us": 0.1}
            if col in self.trimmed_avg:
                params["trimmed_avg_us"] = self.trimmed_avg[col]
            out.append(CaseResult(case=case, metric=COLUMNS[col], unit=UNIT,
                                  lower_is_better=metrics.lower_is_better(UNIT), samples=samples,
                                  params=params))
        return out


def read_table(lines: Sequence[str], start: int, *, source: str) -> tuple[RoundsTable, int]:
    """Parse the table whose header is ``lines[start]``; return it and the index after it.

    Raises :class:`TableTruncated` when the lines end before the Avg line, and ParseError
    (naming the line) for anything that does not fit the writer's grammar.
    """
    header = HEADER_RE.match(lines[start])
    if header is None:
        raise ParseError("expected a 'Round  Host (us) ...' table header", path=source, line=start + 1)
    columns = tuple(_COL_RE.findall(header["cols"]))
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or not columns or columns[0] != "Host":
        raise ParseError(f"unknown rounds-table columns {unknown or list(columns)} (expected Host first, then "
                         f"some of {', '.join(COLUMNS)}); an older device-log table is not supported",
                         path=source, line=start + 1)
    i = start + 1
    if _at_end(lines, i):
        raise TableTruncated("input ends after the table header", path=source, line=start + 1)
    if not _RULE_RE.match(lines[i]):
        raise ParseError("expected the dashed rule under the table header", path=source, line=i + 1)
    i += 1
    rows: list[tuple[float, ...]] = []
    while i < len(lines) and (row := _ROW_RE.match(lines[i])) is not None:
        values = tuple(float(v) for v in row["vals"].split())
        if int(row["i"]) != len(rows):
            raise ParseError(f"round {row['i']} where round {len(rows)} was expected (a row is missing?)",
                             path=source, line=i + 1)
        if len(values) != len(columns):
            raise ParseError(f"round {row['i']} has {len(values)} values for {len(columns)} columns",
                             path=source, line=i + 1)
        rows.append(values)
        i += 1
    if _at_end(lines, i):
        raise TableTruncated(f"input ends after {len(rows)} rounds, before the 'Avg Host:' line",
                             path=source, line=i + 1)
    avg_line = _AVG_LINE_RE.match(lines[i])
    if avg_line is None:
        raise ParseError(f"expected a round row or the 'Avg Host: ... (N rounds)' line, got {lines[i].strip()!r}",
                         path=source, line=i + 1)
    table = _check_avg(columns, rows, lines[i], int(avg_line["n"]), source=source, line=i + 1, header=start + 1)
    i += 1
    if i < len(lines) and _TRIM_LINE_RE.match(lines[i]):
        trimmed = {m["col"]: float(m["v"]) for m in _AVG_ITEM_RE.finditer(lines[i].replace("Trimmed ", ""))}
        table = RoundsTable(table.columns, table.rows, table.avg, trimmed, table.captured, table.line)
        i += 1
    return table, i


def _at_end(lines: Sequence[str], i: int) -> bool:
    return all(not line.strip() for line in lines[i:])


def _check_avg(columns: tuple[str, ...], rows: list[tuple[float, ...]], text: str, n: int, *,
               source: str, line: int, header: int) -> RoundsTable:
    items = list(_AVG_ITEM_RE.finditer(text))
    avg = {m["col"]: float(m["v"]) for m in items}
    if tuple(avg) != columns:
        raise ParseError(f"the Avg line names {list(avg)} but the header has {list(columns)}", path=source, line=line)
    if n != len(rows):
        raise ParseError(f"the Avg line says {n} rounds but the table has {len(rows)} rows (truncated or garbled?)",
                         path=source, line=line)
    captured = None
    for m in items:
        if m["cap"] is not None:
            captured = (int(m["cap"]), int(m["tot"]))
    table = RoundsTable(columns, tuple(rows), avg, {}, captured, header)
    if "Device" in columns and captured is not None:
        want = (len(table.samples("Device")), n)
        if captured != want:
            raise ParseError(f"Avg Device says [{captured[0]}/{captured[1]}] captured but the rows give "
                             f"[{want[0]}/{want[1]}]", path=source, line=line)
    for col in columns:
        mean = table.writer_mean(col)
        if abs(mean - avg[col]) > AVG_TOLERANCE_US:
            raise ParseError(f"Avg {col} is {avg[col]} us but its rows average {mean:.2f} us "
                             f"(a row is missing or garbled)", path=source, line=line)
    return table


def case_name(source: str) -> str:
    """The case a lone table is filed under: the file stem, less a trailing ``_summary``."""
    stem = PurePath(source).stem
    return stem.removesuffix("_summary") or stem


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse one ``strace_timing --rounds-table`` output into per-metric case results."""
    lines = text.replace("\r\n", "\n").split("\n")  # a CRLF file read as bytes elsewhere
    headers = [i for i, line in enumerate(lines) if HEADER_RE.match(line)]
    if not headers:
        if any(line.strip() == NO_MARKERS for line in lines):
            return []  # the run emitted no markers: it measured nothing
        if not text.strip():
            raise ParseError("empty results file (the harness wrote nothing)", path=source)
        hint = ("it holds [STRACE] markers: use format simpler-strace" if "[STRACE]" in text
                else f"expected a 'Round  Host (us) ...' header or {NO_MARKERS!r}")
        raise ParseError(f"no strace_timing rounds table found; {hint}", path=source,
                         line=_first_content_line(lines))
    if len(headers) > 1:
        raise ParseError(f"{len(headers)} rounds tables in one file (lines {headers[0] + 1} and {headers[1] + 1}); "
                         "benchmark_rounds.sh output is format simpler-benchmark-rounds", path=source,
                         line=headers[1] + 1)
    extra: dict[str, Any] = {"source_format": "rounds-table"}
    for j in range(headers[0]):
        line = lines[j].strip()
        if not line:
            continue
        torn = TORN_WARNING_RE.match(line)
        if torn is not None:  # strace_timing's stderr, merged in by the harness: keep the count
            extra["torn_records"] = int(torn["torn"])
        elif not line.startswith("warning: "):
            raise ParseError(f"unexpected text before the rounds table: {line[:60]!r}", path=source, line=j + 1)
    table, end = read_table(lines, headers[0], source=source)
    leftover = next((j for j in range(end, len(lines)) if lines[j].strip()), None)
    if leftover is not None:
        raise ParseError(f"unexpected text after the rounds table: {lines[leftover].strip()[:60]!r}",
                         path=source, line=leftover + 1)
    return table.case_results(case_name(source), extra)


def _first_content_line(lines: Sequence[str]) -> int | None:
    return next((i + 1 for i, line in enumerate(lines) if line.strip()), None)
