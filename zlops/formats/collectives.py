"""pypto-tooling collectives results (``collectives``): ``results.json`` or a per-round samples list.

The writer is georgebisbas/pypto-tooling ``profiling/collectives/run_sweep.py`` (``_cmd_pair_impl``
writes ``results.json``; ``_build_sample`` and ``_run_stack_multi`` write the per-round list to
the artifact bundle's ``cases/<case_id>/<stack>/timing.json`` and ``run.log``). Two inputs:

``results.json``: ``{"campaign", "timestamp", "case": <EquivalenceCase.canonical_dict()>,
"runs": [...]}``, one run per stack with ``case_id, stack, correctness ("pass"|"fail"),
execute_s_mean/_stdev/_median, device_wall_s_mean/_median (or null), setup_s (or null),
bw_execute_mb_s, wall_s_mean, wall_s_stdev, phase_means, n_warmup, n_timed, artifact_bundle``.
It holds summary statistics only, so each metric gets ONE sample, ``params["raw"]`` is false and
``params["samples_from"]`` says which statistic it is: ``execute_s`` <- ``execute_s_median``,
``device_wall_s`` <- ``device_wall_s_median``, ``wall_s`` <- ``wall_s_mean`` (the only wall
statistic: upstream's ``wall_s_stdev`` is in fact the *execute* stdev, so it is not used),
``bw_execute`` <- ``bw_execute_mb_s`` (the mean over timed rounds), ``setup_s`` <- ``setup_s``.

Per-round list: ``[{"round", "phase": "warmup[-k]"|"timed-k", "wall_s", "execute_s", "ok",
"bw_execute_mb_s", "setup_s"?, "phases"?, "per_rank_execute_s"?, "device_wall_s"?}, ...]``. The
raw samples are the timed rounds that are ``ok`` (``params["raw"]`` true): ``execute_s``,
``wall_s``, ``bw_execute`` (MB/s) and ``device_wall_s`` where present; ``setup_s`` is the one
value the first warmup round carries. The case is ``<case_id>/<stack>`` read from the bundle
path when the file sits at ``.../cases/<case_id>/<stack>/...``, else the file stem.

Units: times in seconds (``s``, lower is better), ``bw_execute`` in decimal ``MB/s`` (higher is
better). A run with ``correctness: "fail"`` and a failed round (``ok: false``) give no samples
and are reported (``failed`` / ``failed_round``); an empty ``runs`` list parses to ``[]``.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zlops import metrics
from zlops.formats._json import error_at, from_validation, load_json, show
from zlops.formats._report import Dropped, ParseReport, stamp
from zlops.model import CaseResult

Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Run(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    case_id: str = Field(min_length=1)
    stack: str = Field(min_length=1)
    correctness: Literal["pass", "fail"]
    execute_s_mean: Finite
    execute_s_stdev: Finite
    execute_s_median: Finite
    device_wall_s_mean: Finite | None = None
    device_wall_s_median: Finite | None = None
    setup_s: Finite | None = None
    bw_execute_mb_s: Finite
    wall_s_mean: Finite
    n_warmup: int = Field(ge=0)
    n_timed: int = Field(ge=0)
    phase_means: dict[str, Any] = Field(default_factory=dict)
    artifact_bundle: str | None = None


class _Results(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    campaign: str
    timestamp: str
    case: dict[str, Any]
    runs: list[Any]


class _Round(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    round: int = Field(ge=0)
    phase: str
    wall_s: Finite
    execute_s: Finite
    ok: bool
    bw_execute_mb_s: Finite
    setup_s: Finite | None = None
    device_wall_s: Finite | None = None
    per_rank_execute_s: list[Finite] | None = None


#: metric -> unit.
METRIC_UNITS = {"execute_s": "s", "device_wall_s": "s", "wall_s": "s", "bw_execute": "MB/s", "setup_s": "s"}


def _result(case: str, metric: str, samples: list[float], params: dict[str, Any]) -> CaseResult:
    unit = METRIC_UNITS[metric]
    return CaseResult(case=case, metric=metric, unit=unit, lower_is_better=metrics.lower_is_better(unit),
                      samples=tuple(samples), params=params)


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse a collectives ``results.json`` or per-round samples list into case results."""
    return list(parse_with_report(text, source=source).results)


def parse_with_report(text: str, *, source: str) -> ParseReport:
    """Like :func:`parse`, plus the failed runs and failed rounds that gave no samples."""
    raw = load_json(text, source=source)
    if isinstance(raw, list):
        return _rounds(raw, text=text, source=source)
    if isinstance(raw, dict) and "runs" in raw:
        return _summary(raw, text=text, source=source)
    raise error_at(f"expected a collectives results.json object (with 'runs') or a per-round samples list, "
                   f"got {show(raw) if not isinstance(raw, dict) else 'an object without runs'}", (),
                   text=text, source=source)


def _summary(raw: dict[str, Any], *, text: str, source: str) -> ParseReport:
    try:
        doc = _Results.model_validate(raw)
    except ValidationError as exc:
        raise from_validation(exc, text=text, source=source) from None
    results: list[CaseResult] = []
    dropped: list[Dropped] = []
    for i, item in enumerate(doc.runs):
        try:
            run = _Run.model_validate(item)
        except ValidationError as exc:
            raise from_validation(exc, prefix=("runs", i), text=text, source=source) from None
        case = f"{run.case_id}/{run.stack}"
        if run.correctness != "pass":
            dropped.append(Dropped("failed", case, f"runs[{i}]: correctness is {run.correctness!r}"))
            continue
        if run.n_timed == 0 or run.execute_s_median <= 0.0:
            dropped.append(Dropped("no_timed_rounds", case, f"runs[{i}]: no timed round was measured"))
            continue
        base = {"campaign": doc.campaign, "timestamp": doc.timestamp, "stack": run.stack, "case_id": run.case_id,
                "raw": False, "n_warmup": run.n_warmup, "n_timed": run.n_timed,
                "artifact_bundle": run.artifact_bundle, **_case_params(doc.case)}
        stats = {"mean": run.execute_s_mean, "median": run.execute_s_median, "stdev": run.execute_s_stdev}
        results.append(_result(case, "execute_s", [run.execute_s_median],
                               {**base, "samples_from": "execute_s_median", "stats": stats}))
        if run.device_wall_s_median is not None:
            results.append(_result(case, "device_wall_s", [run.device_wall_s_median],
                                   {**base, "samples_from": "device_wall_s_median",
                                    "stats": {"mean": run.device_wall_s_mean, "median": run.device_wall_s_median}}))
        results.append(_result(case, "wall_s", [run.wall_s_mean],
                               {**base, "samples_from": "wall_s_mean",
                                "note": "upstream wall_s_stdev is the execute stdev; not used"}))
        if run.bw_execute_mb_s > 0.0:
            results.append(_result(case, "bw_execute", [run.bw_execute_mb_s],
                                   {**base, "samples_from": "bw_execute_mb_s (mean over timed rounds)"}))
        if run.setup_s is not None:
            results.append(_result(case, "setup_s", [run.setup_s], {**base, "samples_from": "setup_s"}))
    counts = {"failed_runs": sum(d.kind == "failed" for d in dropped)}
    return ParseReport(stamp(results, counts), tuple(dropped))


def _case_params(case: dict[str, Any]) -> dict[str, Any]:
    keys = ("variant", "p", "count", "dtype", "platform", "runtime", "n_bytes", "orch_profile", "measure")
    return {k: case[k] for k in keys if k in case}


def _rounds(raw: list[Any], *, text: str, source: str) -> ParseReport:
    rounds: list[_Round] = []
    for i, item in enumerate(raw):
        try:
            rounds.append(_Round.model_validate(item))
        except ValidationError as exc:
            raise from_validation(exc, prefix=(i,), text=text, source=source) from None
    case = _bundle_case(source)
    dropped: list[Dropped] = []
    series: dict[str, list[float]] = {m: [] for m in ("execute_s", "device_wall_s", "wall_s", "bw_execute")}
    timed = [r for r in rounds if r.phase.startswith("timed")]
    for r in rounds:
        if r.phase.startswith("timed") and not r.ok:
            dropped.append(Dropped("failed_round", case, f"round {r.round} ({r.phase}) is not ok"))
    for r in timed:
        if not r.ok:
            continue
        series["execute_s"].append(r.execute_s)
        series["wall_s"].append(r.wall_s)
        if r.bw_execute_mb_s > 0.0:
            series["bw_execute"].append(r.bw_execute_mb_s)
        if r.device_wall_s is not None:
            series["device_wall_s"].append(r.device_wall_s)
    setup = next((r.setup_s for r in rounds if r.setup_s is not None), None)
    base = {"raw": True, "n_warmup": sum(not r.phase.startswith("timed") for r in rounds), "n_timed": len(timed),
            "failed_rounds": len(dropped)}
    results = [_result(case, m, s, {**base, "samples_from": "timed rounds"}) for m, s in series.items() if s]
    if results and setup is not None:
        results.append(_result(case, "setup_s", [setup], {**base, "samples_from": "first warmup round"}))
    return ParseReport(tuple(results), tuple(dropped))


def _bundle_case(source: str) -> str:
    parts = PurePath(source).parts
    if len(parts) >= 4 and parts[-4] == "cases":
        return f"{parts[-3]}/{parts[-2]}"
    return PurePath(source).stem
