"""pytest-benchmark's JSON (``--benchmark-json`` or a ``--benchmark-save`` file), versions 3.x-5.x.

The document is ``{"machine_info", "commit_info", "benchmarks": [...], "datetime", "version"}``;
each benchmark has ``name``, ``fullname``, ``group``, ``param``, ``params``, ``extra_info``,
``options`` and ``stats``. Its shape is the same from 3.1 to 5.3 (writer:
``pytest_benchmark.plugin.pytest_benchmark_generate_json`` and ``stats.Metadata.as_dict``); files
from before 3.1 lack ``stats.ops``.

Mapping (documented in ``docs/formats.md``): metric ``time``, unit ``s``. Samples are the raw
per-round times ``stats.data`` (seconds per iteration) when present: ``--benchmark-json`` always
writes them; ``--benchmark-save`` only with ``--benchmark-save-data``. Without them the one sample
is ``stats.median`` and ``params["raw"]`` is False, so downstream statistics know that the spread
is gone. The case is the benchmark ``name`` (``test_softmax[4096]``), or its ``fullname`` when
several benchmarks share that name (the same test name in two classes or files).
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zlops import metrics
from zlops.formats._json import (
    error_at,
    from_validation,
    load_json,
    replace_nonfinite,
    show,
)
from zlops.model import CaseResult

METRIC = "time"
UNIT = "s"

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]

#: The summary statistics kept in ``params["stats"]`` (all seconds, except the two counts).
KEPT_STATS = ("min", "max", "mean", "median", "stddev", "iqr", "rounds", "iterations")


class _Stats(BaseModel):
    # extra allowed: q1, q3, outliers ... and whatever a later version adds
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    min: FiniteFloat
    max: FiniteFloat
    mean: FiniteFloat
    median: FiniteFloat
    stddev: FiniteFloat
    iqr: FiniteFloat
    rounds: int = Field(ge=1)
    iterations: int = Field(ge=1)
    ops: FiniteFloat | None = None
    data: list[FiniteFloat] | None = Field(default=None, min_length=1)


class _Benchmark(BaseModel):
    # extra allowed: options, cprofile, and keys a pytest_benchmark_update_json hook adds
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    name: str = Field(min_length=1)
    fullname: str = Field(min_length=1)
    group: str | None = None
    param: str | None = None
    params: dict[str, Any] | None = None
    extra_info: dict[str, Any] = Field(default_factory=dict)
    stats: _Stats


class _Document(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    benchmarks: list[Any]
    version: str | None = None


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse pytest-benchmark JSON into one ``time`` case result per benchmark."""
    raw = load_json(text, source=source)
    if not isinstance(raw, dict):
        raise error_at(f"expected a JSON object at the top level, got {show(raw)}", (),
                       text=text, source=source)
    try:
        doc = _Document.model_validate(raw)
    except ValidationError as exc:
        raise from_validation(exc, text=text, source=source) from None
    benches = []
    for i, item in enumerate(doc.benchmarks):
        try:
            benches.append(_Benchmark.model_validate(item))
        except ValidationError as exc:
            raise from_validation(exc, prefix=("benchmarks", i), text=text, source=source) from None

    shared = {name for name, n in Counter(b.name for b in benches).items() if n > 1}
    lower = metrics.lower_is_better(UNIT)
    results: list[CaseResult] = []
    seen: dict[str, int] = {}
    for i, bench in enumerate(benches):
        case = bench.fullname if bench.name in shared else bench.name
        if case in seen:
            raise error_at(f"duplicate benchmark {case!r}; first at benchmarks[{seen[case]}]",
                           ("benchmarks", i, "fullname"), text=text, source=source)
        seen[case] = i
        results.append(CaseResult(case=case, metric=METRIC, unit=UNIT, lower_is_better=lower,
                                  samples=_samples(bench.stats), params=_params(bench)))
    return results


def _samples(stats: _Stats) -> tuple[float, ...]:
    return tuple(stats.data) if stats.data is not None else (stats.median,)


def _params(bench: _Benchmark) -> dict[str, Any]:
    stats = {key: getattr(bench.stats, key) for key in KEPT_STATS}
    if bench.stats.ops is not None:
        stats["ops"] = bench.stats.ops
    params = {
        "fullname": bench.fullname,
        "group": bench.group,
        "param": bench.param,
        "params": bench.params,
        "extra_info": bench.extra_info,
        "stats": stats,
        "raw": bench.stats.data is not None,
    }
    # A user's extra_info may hold NaN; the file is still valid results, and the stored params
    # must stay valid JSON, so such values are kept as the strings "NaN"/"Infinity".
    cleaned: dict[str, Any] = replace_nonfinite(params)
    return cleaned
