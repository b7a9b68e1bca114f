"""The zlops JSON results format (``zlops-json``), schema_version 1: zlops' own harness contract.

A harness that can write JSON writes this and gets exact errors back when it gets it wrong; the
full specification with an example is in ``docs/formats.md``. In short::

    {"schema_version": 1,
     "harness": {"name": "demo-bench", "version": "1"},    # optional; extra keys allowed
     "context": {"device": "0", "rounds": 5},               # optional; free-form, kept
     "cases": [{"name": "softmax", "metric": "time", "unit": "ms", "lower_is_better": true,
                "samples": [1.21, 1.19, 1.20], "params": {"n": 4096}}]}

Samples are raw per-round values (never pre-aggregated); units and directions come from
:mod:`zlops.metrics`. Older schema versions are brought forward by :func:`upgrade` (STYLE rule 7).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zlops import metrics
from zlops.errors import ParseError
from zlops.formats._json import (
    error_at,
    find_nonfinite,
    from_validation,
    line_of,
    load_json,
    show,
)
from zlops.model import CaseResult

#: The version this zlops writes; the versions it reads are ``READABLE_VERSIONS``.
SCHEMA_VERSION = 1

#: version N -> function turning a version-N document into a version-N+1 one. Empty while only
#: version 1 exists; add ``2: _upgrade_1_to_2`` style entries, never edit old ones.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

READABLE_VERSIONS: tuple[int, ...] = (*sorted(_UPGRADES), SCHEMA_VERSION)

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class _Harness(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    name: str = Field(min_length=1)
    version: str | None = None


class _Case(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    metric: str
    unit: str
    lower_is_better: bool | None = None
    samples: list[FiniteFloat] = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name", "metric")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError(f"expected a non-blank string, got {show(v)}")
        return v


class _Document(BaseModel):
    # cases stay raw here and are validated one by one, so an error names its case index
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: int
    harness: _Harness | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    cases: list[Any]


@dataclass(frozen=True)
class ZlopsDocument:
    """A whole zlops-json file: the cases plus the run-level harness and context it carried."""

    schema_version: int
    cases: tuple[CaseResult, ...]
    harness: Mapping[str, Any] | None = None
    context: Mapping[str, Any] = field(default_factory=dict)


def upgrade(doc: dict[str, Any]) -> dict[str, Any]:
    """Bring a raw document of any readable schema_version up to :data:`SCHEMA_VERSION`.

    Raises ``ValueError`` for a version this zlops cannot read (newer, or never defined).
    """
    version = doc.get("schema_version")
    if type(version) is not int:  # bool is an int subclass, and true is no version
        raise ValueError(f"schema_version: expected an integer, got {show(version)}")
    if version > SCHEMA_VERSION:
        raise ValueError(f"schema_version {version} is newer than this zlops reads "
                         f"(reads {_versions_text()}); upgrade zlops")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"schema_version {version} is not a zlops-json version "
                         f"(this zlops reads {_versions_text()})")
    while version < SCHEMA_VERSION:
        doc = _UPGRADES[version](doc)
        version = doc["schema_version"]
    return doc


def _versions_text() -> str:
    return ", ".join(str(v) for v in READABLE_VERSIONS)


def parse(text: str, *, source: str) -> list[CaseResult]:
    """Parse zlops-json text into case results (the registry entry point; see module docstring)."""
    return list(parse_document(text, source=source).cases)


def parse_document(text: str, *, source: str) -> ZlopsDocument:
    """Parse zlops-json text, keeping the run-level ``harness`` and ``context`` too."""
    raw = load_json(text, source=source)
    if not isinstance(raw, dict):
        raise error_at(f"expected a JSON object at the top level, got {show(raw)}", (),
                       text=text, source=source)
    if "schema_version" not in raw:
        raise error_at(f"missing schema_version (this zlops reads {_versions_text()})", (),
                       text=text, source=source)
    try:
        raw = upgrade(raw)
    except ValueError as exc:
        raise ParseError(str(exc), path=source, line=line_of(text, ("schema_version",))) from None
    try:
        doc = _Document.model_validate(raw)
    except ValidationError as exc:
        raise from_validation(exc, text=text, source=source,
                              allowed=tuple(_Document.model_fields)) from None
    _reject_nonfinite(doc.context, ("context",), text=text, source=source)
    cases = tuple(_case(i, item, text=text, source=source) for i, item in enumerate(doc.cases))
    _reject_duplicates(cases, text=text, source=source)
    harness = None if doc.harness is None else doc.harness.model_dump()
    return ZlopsDocument(schema_version=doc.schema_version, cases=cases, harness=harness,
                         context=doc.context)


def _case(index: int, item: Any, *, text: str, source: str) -> CaseResult:
    where = ("cases", index)
    try:
        case = _Case.model_validate(item)
    except ValidationError as exc:
        raise from_validation(exc, prefix=where, text=text, source=source,
                              allowed=tuple(_Case.model_fields)) from None
    try:
        unit = metrics.unit_info(case.unit)
    except ValueError as exc:
        raise error_at(str(exc), (*where, "unit"), text=text, source=source) from None
    try:
        lower = metrics.lower_is_better(unit.symbol, case.lower_is_better)
    except ValueError as exc:
        raise error_at(str(exc), (*where, "lower_is_better"), text=text, source=source) from None
    _reject_nonfinite(case.params, (*where, "params"), text=text, source=source)
    return CaseResult(case=case.name, metric=case.metric, unit=unit.symbol, lower_is_better=lower,
                      samples=tuple(case.samples), params=case.params)


def _reject_nonfinite(value: Any, where: Sequence[str | int], *, text: str, source: str) -> None:
    bad = find_nonfinite(value, where)
    if bad is not None:
        raise error_at(f"expected a finite number, got {show(bad[1])} (JSON has no NaN/Infinity)",
                       bad[0], text=text, source=source)


def _reject_duplicates(cases: Sequence[CaseResult], *, text: str, source: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for i, case in enumerate(cases):
        first = seen.setdefault(case.key, i)
        if first != i:
            raise error_at(f"duplicate case (name {case.case!r}, metric {case.metric!r}); "
                           f"first defined at cases[{first}]", ("cases", i), text=text, source=source)


def dumps(cases: Sequence[CaseResult], *, harness: Mapping[str, Any] | None = None,
          context: Mapping[str, Any] | None = None) -> str:
    """Write case results as zlops-json (what a Python harness can call instead of hand-rolling it)."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    if harness is not None:
        doc["harness"] = dict(harness)
    if context:
        doc["context"] = dict(context)
    doc["cases"] = [
        {"name": c.case, "metric": c.metric, "unit": c.unit, "lower_is_better": c.lower_is_better,
         "samples": list(c.samples), **({"params": dict(c.params)} if c.params else {})}
        for c in cases
    ]
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
