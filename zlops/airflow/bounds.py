"""The bounds of every parameter of the zlops pages, and the sentence a refused value gets.

Each query, path and form parameter is declared through :func:`text`, :func:`whole`, :func:`names`,
:func:`choice`, :func:`hex_token` or :func:`flag`: the bounds (length, range, no control characters:
PostgreSQL refuses a NUL in a string, and a file name with one raises) and the words saying what the
parameter accepts come from one call, and the words are the parameter's ``description`` (shown in
``/zlops/docs``). A value out of bounds never reaches the store: FastAPI refuses it, and :func:`refusal`
turns the refusal into one sentence per parameter, e.g. ``query parameter 'changed': expected a whole
number from 1 to 4,611,686,018,427,387,904; got '123456789012345678901234567890'.``, answered as 422 (an
HTML page for a browser, JSON otherwise). ``tests/airflow/test_page_bounds.py`` walks every route of the
app's router with values out of these bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import StringConstraints

#: the largest id a page accepts: inside a signed 64-bit column on SQLite and PostgreSQL
MAX_ID = 2**62
#: no ASCII control character (NUL, bell, newline...): none belongs in a name, key or file name
NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
_SHOWN = 60


def text(max_length: int, *, min_length: int = 0, what: str = "text") -> dict[str, Any]:
    """Bounds and words of a string parameter: ``Query(None, **text(200))``."""
    size = f"at most {max_length:,}" if min_length <= 0 else f"{min_length:,} to {max_length:,}"
    return {"max_length": max_length, "min_length": min_length, "pattern": NO_CONTROL,
            "description": f"{what} of {size} characters, without control characters"}


def whole(low: int, high: int) -> dict[str, Any]:
    """Bounds and words of an integer parameter: ``Query(30, **whole(1, 365))``."""
    return {"ge": low, "le": high, "description": f"a whole number from {low:,} to {high:,}"}


#: the names and keys the pages take
SUITE = text(200, what="a suite name")
POOL = text(100, what="a pool name")
CASE = text(500, what="a case name")
METRIC = text(100, what="a metric name")
RUN_KEY = text(250, min_length=1, what="a run key")


def hex_token(max_length: int) -> dict[str, Any]:
    """Bounds and words of a form token (lower-case hex digits, empty allowed)."""
    return {"max_length": max_length, "pattern": "^[0-9a-f]*$",
            "description": f"the page's form token: at most {max_length} lower-case hex digits"}


def choice(options: Sequence[str]) -> dict[str, Any]:
    """Bounds and words of a parameter that is one of ``options``."""
    import re

    return {"max_length": max(len(o) for o in options), "pattern": "^(?:" + "|".join(map(re.escape, options)) + ")$",
            "description": "one of " + ", ".join(options)}


def flag() -> dict[str, Any]:
    """Words of a boolean parameter (its type is its bound)."""
    return {"description": "true or false (also 1/0, yes/no, on/off)"}


def names(max_items: int, max_length: int) -> dict[str, Any]:
    """Bounds and words of a repeated name (``?pool=a&pool=b``); its items are :func:`name_type` of the
    same length."""
    return {"max_length": max_items,
            "description": f"at most {max_items:,} values, each of at most {max_length:,} characters, "
                           "without control characters"}


def name_type(max_length: int) -> Any:
    """The item type of a :func:`names` parameter."""
    return Annotated[str, StringConstraints(max_length=max_length, pattern=NO_CONTROL)]


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= _SHOWN else shown[:_SHOWN - 4] + "...'"


def wants_html(request: Any) -> bool:
    """Whether the request is a browser's (it accepts HTML), which gets a page rather than JSON."""
    return "text/html" in request.headers.get("accept", "")


def install(app: Any, render: Any) -> None:
    """Answer every refused parameter of ``app`` with :func:`refusal`'s sentences (422): a page rendered by
    ``render(request, sentence)`` for a browser, ``{"detail": sentence}`` otherwise."""
    from fastapi.dependencies.utils import get_flat_dependant
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    async def refused(request: Any, exc: Exception) -> Any:
        assert isinstance(exc, RequestValidationError)
        route = request.scope.get("route")
        dependant = getattr(route, "dependant", None)
        fields: list[Any] = []
        if dependant is not None:
            flat = get_flat_dependant(dependant)
            fields = [*flat.query_params, *flat.path_params, *flat.body_params]
        sentence = refusal(exc.errors(), fields)
        if wants_html(request):
            return render(request, sentence)
        return JSONResponse({"detail": sentence}, status_code=422)

    app.add_exception_handler(RequestValidationError, refused)


def refusal(errors: Sequence[Mapping[str, Any]], fields: Iterable[Any]) -> str:
    """One sentence per refused parameter (in the order FastAPI reported them, each parameter once):
    where it is, its name, what it accepts (its ``description``) and what came. ``fields`` are the route's
    parameters (FastAPI's ``ModelField``: ``alias`` and ``field_info.description``)."""
    accepts = {getattr(f, "alias", None) or f.name: getattr(f.field_info, "description", None) for f in fields}
    seen: set[tuple[str, str]] = set()
    out: list[str] = []
    for e in errors:
        loc = [str(p) for p in e.get("loc", ())]
        where = {"query": "query parameter", "path": "path parameter", "body": "form field"}.get(
            loc[0] if loc else "", "parameter")
        name = loc[1] if len(loc) > 1 else "?"
        if (where, name) in seen:
            continue
        seen.add((where, name))
        wants = accepts.get(name) or str(e.get("msg", "a valid value")).lower()
        if e.get("type") == "missing":
            out.append(f"{where} {name!r} is missing: expected {wants}.")
        else:
            out.append(f"{where} {name!r}: expected {wants}; got {_show(e.get('input'))}.")
    return " ".join(out) or "the request's parameters were refused."
