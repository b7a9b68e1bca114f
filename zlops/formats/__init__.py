"""Results-format adapters: pure parse functions in a registry keyed by format name.

Each adapter is ``parse(text: str, *, source: str) -> list[CaseResult]``: no I/O, no device,
tested on recorded real output. :func:`parse_results` reads the file and calls the adapter.
Anchor: conbench ``benchadapt`` adapters (run, then a pure ``_transform_results``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from zlops.errors import ParseError
from zlops.formats._report import ParseReport
from zlops.model import CaseResult

Parser = Callable[..., list[CaseResult]]

#: format name -> module implementing ``parse(text, *, source)``; imported on first use.
_MODULES: dict[str, str] = {
    "zlops-json": "zlops.formats.zlops_json",
    "pytest-benchmark": "zlops.formats.pytest_benchmark",
    "simpler-strace": "zlops.formats.simpler_strace",
    "simpler-rounds-table": "zlops.formats.simpler_rounds_table",
    "simpler-benchmark-rounds": "zlops.formats.simpler_benchmark_rounds",
    "flaggems-record": "zlops.formats.flaggems_record",
    "collectives": "zlops.formats.collectives",
    "google-benchmark": "zlops.formats.google_benchmark",
}


def format_names() -> list[str]:
    return sorted(_MODULES)


def get_parser(fmt: str) -> Parser:
    try:
        module = _MODULES[fmt]
    except KeyError:
        raise ParseError(f"unknown results format {fmt!r}; known: {', '.join(format_names())}") from None
    parser: Parser = importlib.import_module(module).parse
    return parser


def parse_text(fmt: str, text: str, *, source: str = "<text>") -> list[CaseResult]:
    return get_parser(fmt)(text, source=source)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParseError("results file was not written by the benchmark", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(f"cannot read results file: {exc}", path=str(path)) from None


def parse_results(fmt: str, path: Path) -> list[CaseResult]:
    """Parse a results file; a missing, unreadable or malformed file raises ParseError naming it."""
    return parse_text(fmt, _read(path), source=str(path))


def parse_results_with_report(fmt: str, path: Path) -> ParseReport:
    """Like :func:`parse_results`, plus what the adapter left out (its ``parse_with_report``, where it
    has one; an adapter without one drops nothing it does not raise for)."""
    text = _read(path)
    get_parser(fmt)  # an unknown format raises here, listing the known ones
    with_report = getattr(importlib.import_module(_MODULES[fmt]), "parse_with_report", None)
    if with_report is None:
        return ParseReport(tuple(parse_text(fmt, text, source=str(path))))
    report: ParseReport = with_report(text, source=str(path))
    return report


def results_timer(fmt: str, path: Path, *, backend: str | None = None) -> str | None:
    """The timer a results file says its latencies were measured with (the format module's
    ``timer(text, backend=...)``), or None when the format does not say or the file cannot be read:
    FlagGems' record ``mode`` ``kernel`` is ``triton.do_bench``, ``cudagraph`` is
    ``triton.do_bench_cudagraph``, ``operator``/``wrapper`` a host wall clock."""
    module = _MODULES.get(fmt)
    timer = getattr(importlib.import_module(module), "timer", None) if module else None
    if timer is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found: str | None = timer(text, backend=backend)
    return found
