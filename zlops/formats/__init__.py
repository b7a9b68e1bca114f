"""Results-format adapters: pure parse functions in a registry keyed by format name.

Each adapter is ``parse(text: str, *, source: str) -> list[CaseResult]``: no I/O, no device,
tested on recorded real output. :func:`parse_results` reads the file and calls the adapter.
Anchor: conbench ``benchadapt`` adapters (run, then a pure ``_transform_results``).

May import: the vocabulary only (errors, model, metrics, safefiles) (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from pathlib import Path

from zlops.errors import ParseError
from zlops.formats._report import ParseReport
from zlops.model import CaseResult
from zlops.safefiles import DEFAULT_MAX_BYTES, UnsafeFile, read_untrusted

#: default bound on parsing one results file (config ``results_parse_timeout_s``)
DEFAULT_PARSE_TIMEOUT_S = 300.0

Parser = Callable[..., list[CaseResult]]

#: format name -> (module implementing ``parse(text, *, source)``, what the format is, in one line); the
#: module is imported on first use. ``zlops parse --help`` and its errors print the descriptions.
_FORMATS: dict[str, tuple[str, str]] = {
    "zlops-json": ("zlops.formats.zlops_json",
                   "zlops' own JSON (schema_version 1): cases, metric, unit, direction and raw samples"),
    "pytest-benchmark": ("zlops.formats.pytest_benchmark",
                         "pytest-benchmark's --benchmark-json file (a 'benchmarks' list with raw data)"),
    "simpler-strace": ("zlops.formats.simpler_strace",
                       "simpler run logs with [STRACE] marker lines (per-round Host/Device/Effective times)"),
    "simpler-rounds-table": ("zlops.formats.simpler_rounds_table",
                             "simpler's per-round table (strace_timing <log> --rounds-table)"),
    "simpler-benchmark-rounds": ("zlops.formats.simpler_benchmark_rounds",
                                 "simpler tools/benchmark_rounds.sh output (a rounds table per case)"),
    "flaggems-record": ("zlops.formats.flaggems_record",
                        "FlagGems --record log files (one [INFO] {JSON BenchmarkResult} line per op)"),
    "collectives": ("zlops.formats.collectives",
                    "pypto-tooling collectives results.json or a per-round timing list"),
    "google-benchmark": ("zlops.formats.google_benchmark",
                         "Google Benchmark JSON (--benchmark_format=json / --benchmark_out)"),
}
_MODULES: dict[str, str] = {name: module for name, (module, _) in _FORMATS.items()}


def format_names() -> list[str]:
    return sorted(_FORMATS)


def format_descriptions() -> dict[str, str]:
    """Format name -> one line saying what the format is (sorted by name)."""
    return {name: _FORMATS[name][1] for name in format_names()}


def detect_formats(text: str, *, exclude: str | None = None) -> dict[str, int]:
    """The formats that read ``text`` into at least one result, with their row counts: a hint for a
    file parsed with the wrong ``--format``. Pure; a format that raises does not fit."""
    fits: dict[str, int] = {}
    for name in format_names():
        if name == exclude:
            continue
        try:
            rows = parse_text(name, text, source="<detect>")
        except Exception:  # noqa: BLE001 - any refusal means "not this format"
            continue
        if rows:
            fits[name] = len(rows)
    return fits


def get_parser(fmt: str) -> Parser:
    try:
        module = _MODULES[fmt]
    except KeyError:
        raise ParseError(f"unknown results format {fmt!r}; known: {', '.join(format_names())}") from None
    parser: Parser = importlib.import_module(module).parse
    return parser


def parse_text(fmt: str, text: str, *, source: str = "<text>") -> list[CaseResult]:
    return get_parser(fmt)(text, source=source)


class ResultsRefused(ParseError):
    """The results file is not something zlops reads (zlops.safefiles), or its parsing ran too long."""


def _read(path: Path, *, root: Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The text of a results file, checked first (zlops.safefiles): a regular file, inside ``root``
    when given, at most ``max_bytes``; a FIFO, device, socket or symlink out of ``root`` is refused."""
    try:
        return read_untrusted(path, root=root, max_bytes=max_bytes).decode("utf-8")
    except FileNotFoundError:
        raise ParseError("results file was not written by the benchmark", path=str(path)) from None
    except UnsafeFile as exc:
        raise ResultsRefused(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(f"cannot read results file: {exc}", path=str(path)) from None


def _bounded(fn: Callable[[], list[CaseResult]], timeout_s: float | None, source: str) -> list[CaseResult]:
    """Run a parser with a deadline. A parser past it is abandoned (left to finish in a daemon
    thread) and the file is refused: one pathological results file must not stall the night."""
    if timeout_s is None:
        return fn()
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["out"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box["exc"] = exc

    worker = threading.Thread(target=target, name=f"parse {source}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise ResultsRefused(f"parsing took longer than {timeout_s:g} s (results_parse_timeout_s); refused",
                             path=source)
    if "exc" in box:
        raise box["exc"]  # type: ignore[misc]
    return box["out"]  # type: ignore[return-value]


def parse_results(fmt: str, path: Path, *, root: Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                  timeout_s: float | None = None) -> list[CaseResult]:
    """Parse a results file; a missing, unreadable, unsafe or malformed file raises ParseError naming it.

    ``root``: the shard folder the file must stay in (symlinks out of it are refused);
    ``max_bytes``: the size limit; ``timeout_s``: the bound on parsing (None: unbounded).
    """
    text = _read(path, root=root, max_bytes=max_bytes)
    return _bounded(lambda: parse_text(fmt, text, source=str(path)), timeout_s, str(path))


def detect_file_formats(path: Path, *, exclude: str | None = None) -> dict[str, int]:
    """:func:`detect_formats` of a results file (read as :func:`parse_results` reads it); {} when it
    cannot be read."""
    try:
        text = _read(path)
    except ParseError:
        return {}
    return detect_formats(text, exclude=exclude)


def parse_results_with_report(fmt: str, path: Path, *, root: Path | None = None) -> ParseReport:
    """Like :func:`parse_results`, plus what the adapter left out (its ``parse_with_report``, where it
    has one; an adapter without one drops nothing it does not raise for). ``root``: the folder the
    file must stay in, as for :func:`parse_results`."""
    text = _read(path, root=root)
    get_parser(fmt)  # an unknown format raises here, listing the known ones
    with_report = getattr(importlib.import_module(_MODULES[fmt]), "parse_with_report", None)
    if with_report is None:
        return ParseReport(tuple(parse_text(fmt, text, source=str(path))))
    report: ParseReport = with_report(text, source=str(path))
    return report


def results_timer(fmt: str, path: Path, *, backend: str | None = None, root: Path | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> str | None:
    """The timer a results file says its latencies were measured with (the format module's
    ``timer(text, backend=...)``), or None when the format does not say or the file cannot be read:
    FlagGems' record ``mode`` ``kernel`` is ``triton.do_bench``, ``cudagraph`` is
    ``triton.do_bench_cudagraph``, ``operator``/``wrapper`` a host wall clock.

    The file is read as :func:`parse_results` reads it (``root``, ``max_bytes``): a FIFO, a device or
    a symlink out of the shard folder is not read (None), never waited on or read without end."""
    module = _MODULES.get(fmt)
    timer = getattr(importlib.import_module(module), "timer", None) if module else None
    if timer is None:
        return None
    try:
        text = _read(path, root=root, max_bytes=max_bytes)
    except ParseError:
        return None
    found: str | None = timer(text, backend=backend)
    return found
