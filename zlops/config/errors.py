"""pydantic's validation report on a config file, as sentences a person can act on.

Every line names the key path, what the key accepts and the value it got, in YAML words::

    zlops.yaml: pools.h200.devices: expected a list of device numbers like [0, 1] or 'auto', got nothing (an empty value)
    zlops.yaml: suites.demo-ops.rounds: expected an integer >= 1 and <= 100000, got 'five'

What a key accepts is read from the model's own type annotations and ``Field`` constraints (or a
field's ``json_schema_extra={"accepts": ...}`` where the generic words would be clumsy), so it never
leaks pydantic's internal names (``list[int]``, ``literal['auto']``, ``NoneType``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import annotated_types as at
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

#: error types that mean "the value has the wrong type or is out of range": said as "expected ..., got ..."
_EXPECTATION_ERRORS = frozenset({
    "bool_parsing", "bool_type", "dict_type", "model_type", "model_attributes_type", "list_type", "tuple_type",
    "int_parsing", "int_type", "int_from_float", "float_parsing", "float_type", "finite_number", "string_type",
    "literal_error", "path_type", "is_instance_of", "greater_than", "greater_than_equal", "less_than",
    "less_than_equal", "too_short", "too_long", "string_too_short", "string_too_long", "string_pattern_mismatch",
    "none_required", "union_tag_invalid", "enum", "multiple_of",
})
_SIMPLE = {bool: "true or false", int: "an integer", float: "a number", str: "a string", Path: "a path"}
_EXAMPLES = {int: "[0, 1]", float: "[0.5, 2]", str: '["a", "b"]'}


def show(value: Any) -> str:
    """A value as the YAML reader handed it over, short."""
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _members(tp: Any) -> list[Any]:
    """The members of a union (None left out), or [tp]."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def _section(model: type[BaseModel]) -> str:
    return model.__name__.removesuffix("Config").lower() or model.__name__


def _bounds(metadata: Iterable[Any]) -> str:
    words = []
    for m in metadata:
        for cls, attr, op in ((at.Ge, "ge", ">="), (at.Gt, "gt", ">"), (at.Le, "le", "<="), (at.Lt, "lt", "<")):
            if isinstance(m, cls):
                words.append(f"{op} {getattr(m, attr):g}")
    return " and ".join(words)


def _pattern(metadata: Iterable[Any]) -> str | None:
    return next((getattr(m, "pattern", None) for m in metadata if getattr(m, "pattern", None)), None)


def describe(tp: Any, metadata: Iterable[Any] = ()) -> str:
    """What a value of type ``tp`` (with its Field constraints) looks like, in words."""
    metadata = list(metadata)
    members = _members(tp)
    if len(members) > 1:
        return " or ".join(describe(m, metadata) for m in members)
    tp = members[0]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin is list:
        (item,) = args
        non_empty = any(isinstance(m, at.MinLen) and m.min_length > 0 for m in metadata)
        if typing.get_origin(item) is list:
            what = 'argv lists like [["pip", "install", "."]]'
        elif isinstance(item, type) and issubclass(item, BaseModel):
            what = f"{_section(item)} mappings"
        else:
            what = f"{_plural(item)} like {_EXAMPLES.get(item, '[...]')}"
        return f"a {'non-empty ' if non_empty else ''}list of {what}"
    if origin is dict:
        value = args[1] if len(args) == 2 else Any
        if isinstance(value, type) and issubclass(value, BaseModel):
            return f"a mapping of names to {_section(value)} settings (see docs/config.md)"
        return f"a mapping of names to {_plural(value)}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"a mapping of {_section(tp)} settings (see docs/config.md)"
    word = _SIMPLE.get(tp, getattr(tp, "__name__", str(tp)))
    bounds = _bounds(metadata)
    pattern = _pattern(metadata)
    if pattern is not None:
        word += f" matching {pattern}"
    return f"{word} {bounds}" if bounds else word


def _plural(tp: Any) -> str:
    return {bool: "true/false values", int: "integers", float: "numbers", str: "strings", Path: "paths"}.get(
        tp, "values")


def _field(model: type[BaseModel], key: str) -> FieldInfo | None:
    fields = model.model_fields
    if key in fields:
        return fields[key]
    return next((f for f in fields.values() if f.alias == key), None)


def _member_for_tag(members: list[Any], tag: str) -> Any | None:
    """The union member pydantic's loc tag (``list[int]``, ``literal['auto']``, ``PoolConfig``) names."""
    for m in members:
        origin = typing.get_origin(m)
        name = (origin.__name__ if origin is not None and hasattr(origin, "__name__") else
                "literal" if origin is Literal else getattr(m, "__name__", ""))
        if tag.split("[", 1)[0].lower() == str(name).lower():
            return m
    return None


class _Where:
    """Where a loc points: the key path shown, the type and constraints of the value there, and how
    many loc parts were a union member's tag."""

    def __init__(self, model: type[BaseModel], loc: tuple[Any, ...]) -> None:
        self.path = ""
        self.tp: Any = model
        self.metadata: list[Any] = []
        self.accepts: str | None = None
        self.union_depth: int | None = None  # how many loc parts led to the outermost union (its field)
        self.in_member = False  # the loc went past a union member's tag (the value had that member's shape)
        tp: Any = model
        for i, part in enumerate(loc):
            if isinstance(part, str) and part.startswith("function-"):
                continue
            members = _members(tp)
            if len(members) > 1 and isinstance(part, str):
                member = _member_for_tag(members, part)
                if member is None:
                    break
                if self.union_depth is None:
                    self.union_depth = i
                self.in_member = i + 1 < len(loc)
                tp = member
                continue
            tp = members[0]
            origin, args = typing.get_origin(tp), typing.get_args(tp)
            if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
                info = _field(tp, part)
                if info is None:  # an unknown key: nothing more to learn about it
                    self.path += f".{part}" if self.path else part
                    self.tp, self.metadata, self.accepts = None, [], None
                    return
                tp = info.annotation
                self.metadata = list(info.metadata)
                extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
                self.accepts = typing.cast("str | None", extra.get("accepts"))
                self.path += f".{part}" if self.path else part
            elif origin is list and isinstance(part, int):
                tp, self.metadata, self.accepts = args[0], [], None
                self.path += f"[{part}]"
            elif origin is dict:
                tp, self.metadata, self.accepts = args[1], [], None
                self.path += f".{part}" if self.path else str(part)
            else:
                self.path += f".{part}" if self.path else str(part)
        self.tp = tp

    def expected(self) -> str:
        if self.accepts is not None:
            return self.accepts
        return describe(self.tp, self.metadata) if self.tp is not None else "a known key"


def _sentence(source: str, where: _Where, err: dict[str, Any]) -> str:
    kind = err["type"]
    got = err.get("input")
    path = where.path or "(top level)"
    if kind == "extra_forbidden":
        return f"{source}: {path}: unknown key (check the spelling; see docs/config.md for the keys)"
    if kind == "missing":
        return f"{source}: {path}: required key is missing"
    if kind in _EXPECTATION_ERRORS:
        return f"{source}: {path}: expected {where.expected()}, got {show(got)}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if not where.path and ": " in msg and msg.split(": ", 1)[0].replace(".", "").replace("-", "").isalnum():
        return f"{source}: {msg}"  # a cross-key check that names its own key path
    shown = "" if isinstance(got, dict) or repr(got) in msg else f", got {show(got)}"
    return f"{source}: {path}: {msg}{shown}"


def format_errors(source: str, exc: ValidationError, model: type[BaseModel]) -> str:
    """One plain line per problem of ``exc`` (raised validating ``model``), each starting ``source: key.path:``.

    A value checked against a union (``devices: [0, 1]`` or ``'auto'``) that failed every member is one
    line saying what the key accepts; when it had one member's shape (a list) the problems inside it
    are reported instead (``devices[1]: expected an integer, got 'x'``).
    """
    errors = exc.errors(include_url=False)
    located = [(err, _Where(model, tuple(err["loc"]))) for err in errors]
    lines: list[str] = []
    unions: dict[str, list[tuple[dict[str, Any], _Where]]] = {}
    for err, where in located:
        if where.union_depth is not None:
            unions.setdefault(where.path if not where.in_member else _union_path(model, err), []).append((err, where))
        else:
            lines.append(_sentence(source, where, dict(err)))
    for key, group in unions.items():
        deep = [(e, w) for e, w in group if w.in_member]
        if deep:
            lines += [_sentence(source, w, dict(e)) for e, w in deep]
            continue
        err, _ = group[0]
        where = _Where(model, tuple(err["loc"])[: _Where(model, tuple(err["loc"])).union_depth])
        lines.append(f"{source}: {key}: expected {where.expected()}, got {show(err.get('input'))}")
    return "\n".join(dict.fromkeys(lines))  # one line per problem, in order


def _union_path(model: type[BaseModel], err: Any) -> str:
    loc = tuple(err["loc"])
    return _Where(model, loc[: _Where(model, loc).union_depth]).path
