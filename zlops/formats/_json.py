"""Shared edge handling for JSON results formats: load, locate, and explain what is wrong.

A results file is untrusted input written by someone else's harness. Every failure becomes a
:class:`~zlops.errors.ParseError` that names the file, the line where one can be found, and the
key path (``cases[2].samples[1]: expected a finite number, got "fast"``), so whoever reads the
nightly report can fix the harness without opening a debugger.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from zlops.errors import ParseError

Path = Sequence[str | int]

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_VALUE_START = frozenset('{["-0123456789tfnNI')

#: pydantic error type -> what the file should have had there (wording shared by all formats).
_EXPECTED = {
    "float_type": "expected a finite number",
    "float_parsing": "expected a finite number",
    "finite_number": "expected a finite number",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "list_type": "expected a list",
    "missing": "missing required key",
    "extra_forbidden": "unknown key",
}


def load_json(text: str, *, source: str) -> Any:
    """Parse JSON text; a syntax error becomes a ParseError carrying the line it was found on."""
    if not text.strip():
        raise ParseError("empty results file (the harness wrote nothing)", path=source, line=None)
    try:
        return json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                         path=source, line=exc.lineno) from None
    except RecursionError:
        raise ParseError("invalid JSON: nested too deeply", path=source) from None


def path_text(path: Path) -> str:
    """``("cases", 2, "samples", 1)`` -> ``cases[2].samples[1]``; the empty path is the top level."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(top level)"


def show(value: Any) -> str:
    """A short JSON-ish rendering of a bad value for an error message."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def line_of(text: str, path: Path) -> int | None:
    """The 1-based line where the value at ``path`` starts, or of its nearest existing parent.

    Walks the raw text with the standard library's own scanners, so the answer agrees with what
    ``json.loads`` read (for a duplicated key, the last occurrence, which is the one kept).
    """
    for depth in range(len(path), -1, -1):
        pos = _value_pos(text, path[:depth])
        if pos is not None:
            return text.count("\n", 0, pos) + 1
    return None


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _value_pos(text: str, path: Path) -> int | None:
    try:
        pos = _skip(text, len(text) - len(text.removeprefix("\ufeff")))
        for step in path:
            pos = _member_pos(text, pos, step) if isinstance(step, str) else _item_pos(text, pos, step)
            if pos is None:
                return None
        return pos
    except (ValueError, IndexError, RecursionError):
        return None


def _item_pos(text: str, pos: int, index: int) -> int | None:
    if text[pos] != "[":
        return None
    pos = _skip(text, pos + 1)
    if text[pos] == "]":
        return None
    for _ in range(index):
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text[pos] != ",":
            return None
        pos = _skip(text, pos + 1)
    return pos if text[pos] in _VALUE_START else None


def _member_pos(text: str, pos: int, key: str) -> int | None:
    if text[pos] != "{":
        return None
    pos = _skip(text, pos + 1)
    found = None
    while text[pos] != "}":
        if text[pos] != '"':
            return None
        name, pos = json.decoder.scanstring(text, pos + 1)
        pos = _skip(text, pos)
        if text[pos] != ":":
            return None
        pos = _skip(text, pos + 1)
        if name == key:
            found = pos
        try:
            _, pos = _DECODER.raw_decode(text, pos)
        except ValueError:  # broken text after this point: the best answer so far
            return found
        pos = _skip(text, pos)
        if text[pos] == ",":
            pos = _skip(text, pos + 1)
    return found


def error_at(message: str, path: Path, *, text: str, source: str) -> ParseError:
    """A ParseError for the value at ``path``: ``<source>:<line>: <path>: <message>``."""
    return ParseError(f"{path_text(path)}: {message}", path=source, line=line_of(text, path))


def from_validation(exc: ValidationError, *, prefix: Path = (), text: str, source: str,
                    allowed: Sequence[str] = ()) -> ParseError:
    """Turn pydantic's report into one ParseError about the first problem (others are counted).

    ``prefix`` is the path of the validated value inside the document (e.g. ``("cases", 3)``);
    ``allowed`` lists the keys the validated object may have, for "unknown key" messages.
    Unknown keys are reported first: a misspelt key also shows up as a missing one, and the
    misspelling is the real problem.
    """
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    path = [*prefix, *(step for step in first["loc"] if isinstance(step, (str, int)))]
    kind = first["type"]
    if kind == "extra_forbidden":
        message = f"unknown key {path[-1]!r}" if path else "unknown key"
        if allowed:
            message += f" (allowed: {', '.join(allowed)})"
    elif kind == "missing":
        message = "missing required key"
    elif kind == "value_error":
        message = str(first.get("ctx", {}).get("error", first["msg"]))
    else:
        expected = _EXPECTED.get(kind, first["msg"][:1].lower() + first["msg"][1:])
        message = f"{expected}, got {show(first['input'])}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return error_at(message, path, text=text, source=source)


def find_nonfinite(value: Any, path: Path = ()) -> tuple[list[str | int], float] | None:
    """The path and value of the first NaN/Infinity inside a JSON value, or None.

    Python's json reads the non-standard ``NaN``/``Infinity`` tokens; they cannot be stored as
    JSON later (PostgreSQL jsonb rejects them), so the formats decide at the edge what to do.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return list(path), value
    if isinstance(value, dict):
        for k, v in value.items():
            hit = find_nonfinite(v, [*path, str(k)])
            if hit is not None:
                return hit
    elif isinstance(value, list):
        for i, v in enumerate(value):
            hit = find_nonfinite(v, [*path, i])
            if hit is not None:
                return hit
    return None


def replace_nonfinite(value: Any) -> Any:
    """A copy of a JSON value with NaN/Infinity replaced by their JSON token as a string."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: replace_nonfinite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_nonfinite(v) for v in value]
    return value
