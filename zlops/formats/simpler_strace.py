"""simpler ``[STRACE]`` marker logs (``simpler-strace``): per-round Host/Device/Effective/Orch/Sched.

The logic mirrors hw-native-sys/simpler ``simpler_setup/tools/strace_timing.py``
(``parse_spans``, ``count_record_heads``, ``invocation_spans``, ``group_invocations``,
``bucket_by_hid``, ``_round_metrics``, ``print_rounds_table``), so the averages this adapter
stores equal the ``Avg`` line that ``strace_timing <log> --rounds-table`` prints for the same log:

- a record is ``[STRACE] v=1 pid= tid= inv= hid= depth= name= ts= dur= [attrs]`` anywhere on a
  line; two records can share one physical line (forked ranks share the fd), the attrs run up
  to the next log prefix, the next ``[STRACE]`` or the end of line; an older emitter's trailing
  space after ``dur`` is stripped; names are percent-decoded; ``hid`` is lower-cased. One
  deliberate difference: the attrs must start with whitespace, so a garbled ``dur=35x6`` is a
  torn record here rather than upstream's silent ``dur=35``;
- ``node.*``, ``network1..3.*`` and ``ext.*`` spans carry no run epoch and are excluded;
- one round is one ``(pid, inv)``; the hid bucket with the most invocations is the rounds series
  (a once-seen hid is prefill); rounds are ordered by ``inv``;
- per round, in microseconds (ns / 1000): Host = ``chip.run``, Device =
  ``chip.run.runner_run.device_wall``, Orch/Sched = ``...device_wall.orch``/``.sched``, and
  Effective = max(orch end, sched end) - min(orch start, sched start) from their device-clock
  ``ts + dur`` (the merged window, not orch + sched);
- a metric is a sample only of the rounds where it is non-zero: the tool averages Device,
  Effective, Orch and Sched over their non-zero rounds and hides an all-zero column. It averages
  Host over *all* rounds, but every complete round has a ``chip.run`` root span, so a Host of 0
  only comes from a lost root record; such a round is no Host sample here (counted in
  ``params["rounds_without_host"]``), and the averages equal the tool's whenever no round lost it.

Torn records (``[STRACE] v=N`` heads that do not parse, and a record on an unterminated last
line, which the log was cut inside) are excluded, as upstream does, and counted:
``params["torn_records"]`` on every case, and one ``torn_record`` entry per loss in
:func:`parse_with_report`. Records of a version other than 1 are dropped the same way.

Case naming: the scene test prints ``=== Runtime: <rt>  Level: <n> ===`` and a label line
``  <Class>::<Case> ...`` then ``PASSED``/``FAILED: <exc>``; the label names the case and spans
belong to the label printed before them. A FAILED case yields no results and is reported
(``failed``). A log with no label is one case named after the file stem.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from zlops import metrics
from zlops.errors import ParseError
from zlops.formats._report import Dropped, ParseReport, stamp
from zlops.formats.simpler_rounds_table import COLUMNS, HEADER_RE, UNIT
from zlops.model import CaseResult

_HOST_LOG_PREFIX = r"\[mono_ns=\d+\]\[T0x[0-9a-fA-F]+\]\[[A-Z]+\]\s+[^:\r\n]+:\s+"
_STRACE_RE = re.compile(
    r"\[STRACE\]\s+v=(?P<v>\d+)\s+pid=(?P<pid>\d+)\s+tid=(?P<tid>\d+)\s+"
    r"inv=(?P<inv>\d+)\s+hid=(?P<hid>[0-9a-fA-F]+)\s+depth=(?P<depth>\d+)\s+"
    r"name=(?P<name>\S+)\s+ts=(?P<ts>\d+)\s+dur=(?P<dur>\d+)(?P<attrs>(?:\s.*?)?)"
    rf"(?={_HOST_LOG_PREFIX}|\[STRACE\]|\r?$)",
    re.MULTILINE,
)
_HEAD_RE = re.compile(r"\[STRACE\]\s+v=\d+")
_PERCENT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_RUNTIME_RE = re.compile(r"^=== Runtime: (?P<runtime>\S+)(?:\s+Level: (?P<level>\d+))?\s*===\s*$")
_LABEL = r"[A-Za-z_]\w*::\S+"
_LABEL_START_RE = re.compile(rf"^\s+(?P<label>{_LABEL}) \.\.\.(?P<rest>.*)$")
_LABEL_END_RE = re.compile(rf"^\s+(?P<label>{_LABEL}) (?P<status>PASSED|FAILED)(?::\s*(?P<detail>.*))?$")
_STATUS_RE = re.compile(r"^(?P<status>PASSED|FAILED)(?::\s*(?P<detail>.*))?$")

#: The four spans a round reads, by table column (Effective is derived from Orch and Sched).
SPAN_NAMES = {"Host": "chip.run", "Device": "chip.run.runner_run.device_wall",
              "Orch": "chip.run.runner_run.device_wall.orch", "Sched": "chip.run.runner_run.device_wall.sched"}
_EXCLUDED_WORDS = frozenset({"node", "network1", "network2", "network3", "ext"})
SUPPORTED_VERSION = 1


@dataclass(frozen=True)
class Span:
    pid: int
    inv: int
    hid: str
    name: str
    ts: int
    dur: int
    line: int


@dataclass
class _Section:
    """One scene-test case of the log: its label line and the spans printed after it."""

    label: str | None
    line: int
    runtime: str | None = None
    level: int | None = None
    status: str = "unfinished"
    detail: str = ""
    spans: list[Span] = field(default_factory=list)


def decode_field(text: str) -> str:
    """Reverse the emitter's percent-encoding; a truncation marker ``~`` is left in place."""
    return _PERCENT_RE.sub(lambda m: chr(int(m.group(1), 16)), text)


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse a ``[STRACE]`` log into per-round host/device/effective/orch/sched case results."""
    return list(parse_with_report(text, source=source).results)


def parse_with_report(text: str, *, source: str) -> ParseReport:
    """Like :func:`parse`, plus what was left out: torn records, failed cases (see module doc)."""
    lines = text.replace("\r\n", "\n").split("\n")  # a CRLF file read as bytes elsewhere
    dropped: list[Dropped] = []
    sections = _sections(lines)
    heads = 0
    excluded = 0
    for n, line in enumerate(lines, start=1):
        line_heads = len(_HEAD_RE.findall(line))
        if not line_heads:
            continue
        heads += line_heads
        parsed = 0
        matches = list(_STRACE_RE.finditer(line))
        if n == len(lines) and matches and line.strip():
            # the writer ends every record with a newline: a log ending without one was cut inside
            # its last record, whose dur or attrs may be short (upstream would read dur=12 of 1234)
            matches.pop()
        for m in matches:
            parsed += 1
            if int(m["v"]) != SUPPORTED_VERSION:
                dropped.append(Dropped("unsupported_version", m.group(0)[:60],
                                       f"[STRACE] v={m['v']}; this zlops reads v={SUPPORTED_VERSION}", n))
                continue
            name = decode_field(m["name"])
            if name.split(".", 1)[0] in _EXCLUDED_WORDS:
                excluded += 1
                continue
            span = Span(int(m["pid"]), int(m["inv"]), m["hid"].lower(), name, int(m["ts"]), int(m["dur"]), n)
            _section_at(sections, n).spans.append(span)
        for _ in range(line_heads - parsed):
            dropped.append(Dropped("torn_record", line.strip()[:80], "incomplete [STRACE] record, excluded", n))
    if heads == 0:
        _reject_other_formats(text, lines, source=source)
    results: list[CaseResult] = []
    single = len(sections) == 1
    for sec in sections:
        name = sec.label or PurePath(source).stem
        if sec.status == "failed":
            dropped.append(Dropped("failed", name, sec.detail or "the scene test reported FAILED", sec.line))
            continue
        if not sec.spans:
            if not single or sec.label is not None:
                dropped.append(Dropped("no_markers", name, "no [STRACE] span for this case", sec.line))
            continue
        results.extend(_case_results(name, sec))
    torn = sum(1 for d in dropped if d.kind == "torn_record")
    counts = {"torn_records": torn, "record_heads": heads, "excluded_spans": excluded}
    return ParseReport(stamp(results, counts), tuple(dropped))


def _sections(lines: Sequence[str]) -> list[_Section]:
    sections: list[_Section] = []
    runtime: str | None = None
    level: int | None = None
    for n, line in enumerate(lines, start=1):
        if (rt := _RUNTIME_RE.match(line)) is not None:
            runtime, level = rt["runtime"], (int(rt["level"]) if rt["level"] else None)
        elif (end := _LABEL_END_RE.match(line)) is not None:
            sec = next((s for s in reversed(sections) if s.label == end["label"]), None)
            if sec is None:
                sec = _Section(end["label"], n, runtime, level)
                sections.append(sec)
            _finish(sec, end["status"], end["detail"])
        elif (start := _LABEL_START_RE.match(line)) is not None:
            sec = _Section(start["label"], n, runtime, level)
            sections.append(sec)
            if (st := _STATUS_RE.match(start["rest"].strip())) is not None:
                _finish(sec, st["status"], st["detail"])
        elif sections and (st := _STATUS_RE.match(line.strip())) is not None:
            _finish(sections[-1], st["status"], st["detail"])
    return sections or [_Section(None, 1)]


def _finish(sec: _Section, status: str, detail: str | None) -> None:
    sec.status = status.lower()
    sec.detail = (detail or "").strip()


def _section_at(sections: Sequence[_Section], line: int) -> _Section:
    """The case a span on ``line`` belongs to: the last label printed before it (else the first)."""
    current = sections[0]
    for sec in sections:
        if sec.line <= line:
            current = sec
    return current


def _case_results(name: str, sec: _Section) -> list[CaseResult]:
    groups: dict[tuple[int, int], list[Span]] = {}
    for span in sec.spans:
        groups.setdefault((span.pid, span.inv), []).append(span)
    buckets: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key in sorted(groups):  # upstream: invocations by (pid, inv), hid of the first span
        buckets[groups[key][0].hid].append(key)
    hid, keys = max(buckets.items(), key=lambda kv: len(kv[1]))  # first-seen wins a tie, as upstream
    keys.sort(key=lambda k: k[1])
    rows = [_round_metrics(groups[k]) for k in keys]
    lower = metrics.lower_is_better(UNIT)
    base: dict[str, Any] = {"label": sec.label, "runtime": sec.runtime, "level": sec.level,
                            "status": sec.status if sec.label else "unknown", "hid": hid,
                            "rounds": len(rows), "other_invocations": len(groups) - len(keys),
                            "rounds_without_host": sum(r[0] == 0.0 for r in rows)}
    out = []
    for col, metric in COLUMNS.items():
        i = list(COLUMNS).index(col)
        samples = tuple(r[i] for r in rows if r[i] > 0.0)
        if not samples:
            continue  # the tool hides a column that is 0 in every round
        params = {**base, "captured": len(samples), "avg_us": sum(samples) / len(samples)}
        if col in ("Host", "Device") and len(samples) > 20:  # the tool's trimmed mean
            ordered = sorted(samples)[10:-10]
            params["trimmed_avg_us"] = sum(ordered) / len(ordered)
        out.append(CaseResult(case=name, metric=metric, unit=UNIT, lower_is_better=lower,
                              samples=samples, params=params))
    return out


def _round_metrics(spans: Sequence[Span]) -> tuple[float, float, float, float, float]:
    """(Host, Device, Effective, Orch, Sched) in us for one invocation; 0.0 where absent."""
    first: dict[str, Span] = {}
    for s in spans:  # upstream Invocation.by_name: the earliest span of each name
        if s.name not in first or s.ts < first[s.name].ts:
            first[s.name] = s

    def dur(col: str) -> float:
        span = first.get(SPAN_NAMES[col])
        return span.dur / 1000.0 if span is not None else 0.0

    windows = [s for s in (first.get(SPAN_NAMES["Orch"]), first.get(SPAN_NAMES["Sched"])) if s is not None]
    effective = 0.0
    if windows:
        effective = (max(s.ts + s.dur for s in windows) - min(s.ts for s in windows)) / 1000.0
    return (dur("Host"), dur("Device"), effective, dur("Orch"), dur("Sched"))


def _reject_other_formats(text: str, lines: Sequence[str], *, source: str) -> None:
    """A log with no marker measured nothing, unless it is plainly another format."""
    if not text.strip():
        raise ParseError("empty log (the benchmark wrote nothing)", path=source)
    first = next(i for i, line in enumerate(lines) if line.strip())
    head = lines[first].lstrip()
    if head[:1] in "{[":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            raise ParseError("this is a JSON document, not a simpler [STRACE] log", path=source, line=first + 1)
    table = next((i for i, line in enumerate(lines) if HEADER_RE.match(line)), None)
    if table is not None:
        raise ParseError("this is strace_timing --rounds-table output, not a [STRACE] log; "
                         "use format simpler-rounds-table (or simpler-benchmark-rounds)", path=source, line=table + 1)
