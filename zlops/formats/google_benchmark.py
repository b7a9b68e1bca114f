"""Google Benchmark JSON (``google-benchmark``): ``--benchmark_format=json`` / ``--benchmark_out``.

The writer is google/benchmark ``src/json_reporter.cc`` (``JSONReporter::PrintRunData``;
``json_schema_version`` 1 in the ``context``). The document is ``{"context": {...},
"benchmarks": [...]}``; each entry has ``name``, ``run_name``, ``run_type`` (``iteration`` or
``aggregate``), ``repetitions``, ``repetition_index`` (iterations only), ``threads``,
``iterations``, ``real_time``, ``cpu_time``, ``time_unit`` (``ns``/``us``/``ms``/``s``), optional
``bytes_per_second``/``items_per_second``, user counters, ``aggregate_name``/``aggregate_unit``
(aggregates) and ``error_occurred``/``error_message`` (a run that called ``SkipWithError``).

Mapping, one case per ``run_name`` (``BM_sort/4096``, ``BM_x/threads:4``):

- ``real_time`` and ``cpu_time`` in the file's ``time_unit``; ``bytes_per_second`` (``B/s``) and
  ``items_per_second`` (``items/s``), higher is better; other user counters are not metrics
  (their unit and direction are unknown) and are listed in ``params["counters"]``;
- samples are the raw per-repetition values of the ``iteration`` entries, in repetition order;
  aggregates (``mean``, ``median``, ``stddev``, ``cv``, BigO/RMS) are ignored when iterations are
  present. With ``--benchmark_report_aggregates_only`` only aggregates exist: the one sample is
  the ``median`` (else the ``mean``) and ``params["raw"]`` is false;
- an entry with ``error_occurred`` (``SkipWithError``) gives no sample; it is reported
  (``error``) and counted in every case's ``params["error_runs"]``; an entry with only an
  ``error_message`` (``SkipWithMessage``) likewise (``skipped``, ``params["skipped_runs"]``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zlops import metrics
from zlops.formats._json import error_at, from_validation, line_of, load_json, replace_nonfinite, show
from zlops.formats._report import Dropped, ParseReport, stamp
from zlops.model import CaseResult

Finite = Annotated[float, Field(allow_inf_nan=False)]

#: entry key -> unit of the metric of that name (the time unit comes from the entry).
RATE_UNITS = {"bytes_per_second": "B/s", "items_per_second": "items/s"}
TIME_METRICS = ("real_time", "cpu_time")
#: keys of an entry that are not user counters.
_KNOWN = frozenset({"name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
                    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
                    "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "label",
                    "big_o", "rms", "complexity_n", "skipped", "skip_message", *RATE_UNITS})


class _Entry(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(min_length=1)
    run_name: str | None = None
    run_type: Literal["iteration", "aggregate"] = "iteration"
    repetitions: int | None = None
    repetition_index: int | None = None
    threads: int | None = None
    iterations: int | None = None
    real_time: Finite | None = None
    cpu_time: Finite | None = None
    time_unit: Literal["ns", "us", "ms", "s"] = "ns"
    aggregate_name: str | None = None
    error_occurred: bool = False
    error_message: str | None = None
    label: str | None = None


class _Document(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    context: dict[str, Any] = Field(default_factory=dict)
    benchmarks: list[Any]


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse Google Benchmark JSON into real_time/cpu_time/throughput case results."""
    return list(parse_with_report(text, source=source).results)


def parse_with_report(text: str, *, source: str) -> ParseReport:
    """Like :func:`parse`, plus the entries that reported an error."""
    raw = load_json(text, source=source)
    if not isinstance(raw, dict) or "benchmarks" not in raw:
        raise error_at(f"expected a Google Benchmark JSON object with 'context' and 'benchmarks', got "
                       f"{'an object without benchmarks' if isinstance(raw, dict) else show(raw)}", (),
                       text=text, source=source)
    try:
        doc = _Document.model_validate(raw)
    except ValidationError as exc:
        raise from_validation(exc, text=text, source=source) from None
    groups: dict[str, list[tuple[int, _Entry, dict[str, Any]]]] = {}
    dropped: list[Dropped] = []
    for i, item in enumerate(doc.benchmarks):
        try:
            entry = _Entry.model_validate(item)
        except ValidationError as exc:
            raise from_validation(exc, prefix=("benchmarks", i), text=text, source=source) from None
        run = entry.run_name or entry.name
        if entry.error_occurred or entry.error_message is not None:
            # SkipWithError sets error_occurred; SkipWithMessage writes only the message
            kind = "error" if entry.error_occurred else "skipped"
            dropped.append(Dropped(kind, run, entry.error_message or "error_occurred",
                                   line_of(text, ("benchmarks", i))))
            continue
        for key in TIME_METRICS:
            if getattr(entry, key) is None:
                raise error_at("missing required key", ("benchmarks", i, key), text=text, source=source)
        groups.setdefault(run, []).append((i, entry, item))
    results: list[CaseResult] = []
    for run, members in groups.items():
        results.extend(_case(run, members, text=text, source=source))
    context = {k: doc.context[k] for k in ("library_version", "json_schema_version", "executable", "num_cpus",
                                           "mhz_per_cpu", "library_build_type") if k in doc.context}
    counts = {"error_runs": sum(d.kind == "error" for d in dropped),
              "skipped_runs": sum(d.kind == "skipped" for d in dropped), "context": replace_nonfinite(context)}
    return ParseReport(stamp(results, counts), tuple(dropped))


def _case(run: str, members: Sequence[tuple[int, _Entry, dict[str, Any]]], *, text: str,
          source: str) -> list[CaseResult]:
    iterations = [m for m in members if m[1].run_type == "iteration"]
    if iterations:
        chosen, raw_samples, how = sorted(iterations, key=lambda m: m[1].repetition_index or 0), True, "repetitions"
    else:
        by_name = {m[1].aggregate_name: m for m in members}
        pick = by_name.get("median") or by_name.get("mean")
        if pick is None:
            return []  # only stddev/cv/BigO: nothing that is a measurement
        chosen, raw_samples, how = [pick], False, f"aggregate {pick[1].aggregate_name}"
    units = {m[1].time_unit for m in chosen}
    if len(units) > 1:
        raise error_at(f"benchmark {run!r} mixes time units {sorted(units)}", ("benchmarks", chosen[0][0]),
                       text=text, source=source)
    unit = units.pop()
    first = chosen[0][1]
    counters = sorted({k for m in chosen for k in m[2] if k not in _KNOWN})
    params: dict[str, Any] = {"raw": raw_samples, "samples_from": how, "repetitions": first.repetitions,
                              "threads": first.threads, "iterations": [m[1].iterations for m in chosen],
                              "label": first.label, "counters": counters}
    out = [CaseResult(case=run, metric=key, unit=unit, lower_is_better=metrics.lower_is_better(unit),
                      samples=tuple(float(getattr(m[1], key)) for m in chosen), params=params)
           for key in TIME_METRICS]
    for key, rate_unit in RATE_UNITS.items():
        values = [v for v in (_finite_number(m[2].get(key)) for m in chosen) if v is not None]
        if len(values) == len(chosen):  # a rate missing from some repetition is no series
            out.append(CaseResult(case=run, metric=key, unit=rate_unit,
                                  lower_is_better=metrics.lower_is_better(rate_unit),
                                  samples=tuple(values), params=params))
    return out


def _finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite JSON number, else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
