"""FlagGems ``--record log`` files (``flaggems-record``): one JSON ``BenchmarkResult`` per line.

The writer is FlagGems ``benchmark/conftest.py`` (a ``logging`` FileHandler with format
``[%(levelname)s] %(message)s``) logging ``BenchmarkResult.to_json()`` from
``benchmark/attri_util.py``; the reader this mirrors is ``benchmark/summary_for_plot.py``
(``parse_log``: the lines starting ``[INFO] {``, the ``[INFO] `` prefix cut, ``json.loads``)::

    [INFO] Benchmark record logger enabled                        (newer files only)
    [INFO] {"op_name": "abs", "dtype": "torch.float16", "mode": "kernel", "level": "core",
            "result": [{"shape_detail": [[64, 64]], "latency_base": 0.0051, "latency": 0.0071,
                        "speedup": 0.72, "tflops": 0.00058, "gbps": null, "error_msg": null, ...}]}

Both schemas are read: the 2024 one (``"mode": "cuda"``, no ``gbps*``/``compared_speedup``/
``error_msg``) and the current one. Query mode (``--query``) logs a Python ``dict`` repr (single
quotes) that also starts ``[INFO] {``, and a multi-line ``json.dumps(..., indent=2)`` starting
``[INFO] [``; both are skipped and counted (``query_line``). A header-only file holds no
results and parses to ``[]``.

Mapping, one case per (op, dtype, shape detail): ``<op>/<dtype>/(<shape>)`` with ``torch.``
dropped from the dtype and the shape detail rendered by :func:`shape_key` (``(64x64)``,
``(2x3, 2x3, 0.5, 1)``, ``(device="cuda", end=227)``). Metrics, each only where the row has it:
``latency`` (ms, FlagGems), ``latency_base`` (ms, the torch baseline), ``speedup`` (``x``, torch /
FlagGems, higher is better), ``gbps``/``gbps_base`` (GB/s), ``tflops`` (TFLOPS). Each row is one
measurement (a median over iterations, in kernel mode); a file holding the same case twice
(appended runs, or ``pytest --count``) gives one sample per row. A row with ``error_msg`` is no
sample: it is reported (``error_row``) and counted in every case's ``params["error_rows"]``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zlops import metrics
from zlops.errors import ParseError
from zlops.formats._json import from_validation
from zlops.formats._report import Dropped, ParseReport, stamp
from zlops.model import CaseResult

#: row key -> (metric, unit), in the order cases are emitted.
METRICS: dict[str, tuple[str, str]] = {
    "latency": ("latency", "ms"),
    "latency_base": ("latency_base", "ms"),
    "speedup": ("speedup", "x"),
    "gbps": ("gbps", "GB/s"),
    "gbps_base": ("gbps_base", "GB/s"),
    "tflops": ("tflops", "TFLOPS"),
}
_LOG_LINE_RE = re.compile(r"^\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] ")
#: FlagGems ``--mode`` (the record's ``mode``) -> the timer ``benchmark/base.py`` measures with
#: (``get_latency``); ``cuda`` is the 2024 name of ``kernel``
MODE_TIMERS: dict[str, str] = {
    "kernel": "triton.do_bench",
    "cuda": "triton.do_bench",
    "cudagraph": "triton.do_bench_cudagraph",
    "operator": "host-wall",
    "wrapper": "host-wall",
}
_MODE_RE = re.compile(r'"mode":\s*"([^"]*)"')
_RECORD_PREFIX = "[INFO] "


class _Record(BaseModel):
    # extra allowed: a later FlagGems may add keys; the ones read here are required
    model_config = ConfigDict(extra="allow", frozen=True)

    op_name: str = Field(min_length=1)
    dtype: str = Field(min_length=1)
    mode: str
    level: str
    result: list[dict[str, Any]]


def shape_key(detail: Any) -> str:
    """A stable, readable rendering of ``shape_detail`` for the case key.

    A list of shapes becomes ``64x64, 2x3`` (a shape is a list of ints; ``()`` for a 0-d one),
    other list items (scalars, nested values) their compact JSON; a dict becomes sorted
    ``key=<json>`` pairs; anything else its compact JSON.
    """
    if isinstance(detail, list):
        return ", ".join(_item(x) for x in detail)
    if isinstance(detail, dict):
        return ", ".join(f"{k}={_compact(detail[k])}" for k in sorted(detail))
    return _compact(detail)


def _item(x: Any) -> str:
    if isinstance(x, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in x):
        return "x".join(str(d) for d in x) if x else "()"
    return _compact(x)


def _compact(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse a FlagGems ``--record log`` file into latency/speedup/... case results."""
    return list(parse_with_report(text, source=source).results)


def parse_with_report(text: str, *, source: str) -> ParseReport:
    """Like :func:`parse`, plus the skipped query-mode lines and the ``error_msg`` rows."""
    lines = text.replace("\r\n", "\n").split("\n")  # a CRLF file read as bytes elsewhere
    dropped: list[Dropped] = []
    cases: dict[tuple[str, str], list[float]] = {}
    params: dict[str, dict[str, Any]] = {}
    in_dump = False
    records = 0
    for n, line in enumerate(lines, start=1):
        if in_dump and not _LOG_LINE_RE.match(line):
            continue  # inside a query-mode multi-line json.dumps(indent=2) message
        in_dump = False
        if not line.strip():
            continue
        if not _LOG_LINE_RE.match(line):
            raise ParseError(f"expected '[LEVEL] message' log lines, got {line.strip()[:60]!r}; "
                             "is this a FlagGems --record log file?", path=source, line=n)
        if line.startswith("[INFO] ["):
            in_dump = True
            dropped.append(Dropped("query_line", line[:60], "query-mode multi-line dump, no measurement", n))
            continue
        if not line.startswith("[INFO] {"):
            continue  # "[INFO] Benchmark record logger enabled", warnings ...
        body = line[len(_RECORD_PREFIX):]
        try:
            raw = json.loads(body)
        except ValueError as exc:
            if _is_python_dict(body):
                dropped.append(Dropped("query_line", body[:60], "query-mode Python dict, no measurement", n))
                continue
            raise ParseError(f"record is not valid JSON ({exc}); truncated or garbled line?", path=source,
                             line=n) from None
        records += 1
        _record(raw, n, body=body, source=source, cases=cases, params=params, dropped=dropped)
    results = []
    for (case, key), samples in cases.items():
        metric, unit = METRICS[key]
        results.append(CaseResult(case=case, metric=metric, unit=unit, lower_is_better=metrics.lower_is_better(unit),
                                  samples=tuple(samples), params={**params[case], "repeats": len(samples)}))
    counts = {"records": records, "error_rows": sum(d.kind == "error_row" for d in dropped),
              "query_lines_skipped": sum(d.kind == "query_line" for d in dropped)}
    return ParseReport(stamp(results, counts), tuple(dropped))


def timer(text: str, *, backend: str | None = None) -> str | None:
    """The timer behind a record file's latencies, from its records' ``mode`` (:data:`MODE_TIMERS`):
    ``triton.do_bench`` for kernel mode (``triton.do_bench_npu`` on Ascend, where FlagGems swaps it
    in), several joined with ``+`` when the file mixes modes, None for a file without records."""
    modes = sorted({m.group(1) for line in text.splitlines() if line.startswith("[INFO] {")
                    for m in [_MODE_RE.search(line)] if m})
    timers = []
    for mode in modes:
        t = MODE_TIMERS.get(mode, f"flaggems-{mode}")
        if backend == "ascend" and t == "triton.do_bench":
            t = "triton.do_bench_npu"
        if t not in timers:
            timers.append(t)
    return "+".join(timers) or None


def _is_python_dict(body: str) -> bool:
    try:
        return isinstance(ast.literal_eval(body), dict)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return body.startswith("{'")


def _record(raw: Any, n: int, *, body: str, source: str, cases: dict[tuple[str, str], list[float]],
            params: dict[str, dict[str, Any]], dropped: list[Dropped]) -> None:
    try:
        rec = _Record.model_validate(raw)
    except ValidationError as exc:
        err = from_validation(exc, text=body, source=source)  # locate inside this line's JSON
        detail = str(err).removeprefix(f"{source}:{err.line}: " if err.line is not None else f"{source}: ")
        raise ParseError(f"record: {detail}", path=source, line=n) from None
    dtype = rec.dtype.removeprefix("torch.")
    for j, row in enumerate(rec.result):
        if "shape_detail" not in row:
            raise ParseError(f"result[{j}]: missing shape_detail", path=source, line=n)
        case = f"{rec.op_name}/{dtype}/({shape_key(row['shape_detail'])})"
        first = params.get(case)
        if first is not None and (first["mode"], first["level"]) != (rec.mode, rec.level):
            raise ParseError(f"{case} was recorded in mode {first['mode']}/{first['level']} and again in "
                             f"{rec.mode}/{rec.level}: one file must hold one measurement mode", path=source, line=n)
        if row.get("error_msg") is not None:
            dropped.append(Dropped("error_row", case, str(row["error_msg"])[:200], n))
            continue
        found = False
        for key in METRICS:
            value = row.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ParseError(f"result[{j}].{key}: expected a number, got {value!r}", path=source, line=n)
            if not math.isfinite(value):
                dropped.append(Dropped("nonfinite", f"{case} {key}", f"{key} is {value}", n))
                continue
            cases.setdefault((case, key), []).append(float(value))
            found = True
        if not found:
            dropped.append(Dropped("empty_row", case, "no latency, speedup, gbps or tflops in the row", n))
        params.setdefault(case, {"op": rec.op_name, "dtype": rec.dtype, "shape_detail": row["shape_detail"],
                                 "legacy_shape": row.get("legacy_shape"), "mode": rec.mode, "level": rec.level})

