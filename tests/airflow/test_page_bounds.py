"""Every parameter of every zlops page is bounded, and no value of any of them makes a page fail (no 5xx).

The routes and their parameters are read from the app's own router (``app.routes``, each route's flattened
FastAPI dependant), never from a hand list, so a route or parameter added later is walked too. For each
parameter: values out of its declared bounds or of the wrong type must be refused (400/422) with a sentence
that names the parameter and what it accepts; odd values inside the bounds (paths, quotes, markup, other
scripts) must not fail the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("plotly")

from annotated_types import Ge, Le, MaxLen, MinLen
from db_templates import Templates
from fastapi.dependencies.utils import get_flat_dependant
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from triage_nights import BAD_NIGHT, SUITE, Nights, copy_nights, run_key

from zlops.airflow.ui import COOKIE, create_app

pytestmark = [pytest.mark.airflow]

#: values inside any text bound that a page must survive (a 2xx, 3xx or 4xx, never a 5xx)
ODD_TEXT = ("../../../etc/passwd", "' OR 1=1 --", "<script>alert(1)</script>", "é😀中", " ", ".png")


class User:
    def get_name(self) -> str:
        return "ana"


@pytest.fixture
def nights(tmp_path: Path, db_templates: Templates) -> Nights:
    return copy_nights(tmp_path, db_templates)


def _constraint(field: Any, kind: type) -> Any:
    found = [m for m in field.field_info.metadata if isinstance(m, kind)]
    return found[0] if found else None


def _kind(field: Any) -> str:
    annotation = str(field.field_info.annotation)
    for kind in ("list", "bool", "int", "str"):
        if kind in annotation:
            return kind
    raise AssertionError(f"a parameter of an unexpected type: {field.name}: {annotation}")


def _params(route: APIRoute) -> list[tuple[str, Any]]:
    flat = get_flat_dependant(route.dependant)
    return ([("query", f) for f in flat.query_params] + [("path", f) for f in flat.path_params]
            + [("form", f) for f in flat.body_params])


def _routes(app: Any) -> list[APIRoute]:
    return [r for r in app.routes if isinstance(r, APIRoute)]


def _valid(nights: Nights) -> dict[str, Any]:
    """A value each required parameter accepts (the walk replaces one parameter at a time)."""
    return {"suite": SUITE, "pool": "npu", "case": "softmax_8192", "metric": "time", "key": run_key(BAD_NIGHT),
            "dag_id": f"zlops_nightly_{SUITE}", "run_id": run_key(BAD_NIGHT).split(":", 2)[2], "name": "a.png",
            "alert_id": nights.alerts["npu"], "action": "ack"}


def _csrf(client: TestClient) -> str:
    (token,) = set(re.findall(r'name="csrf_token" value="([0-9a-f]+)"', client.get("/alerts").text))
    return token


def _refused_values(kind: str, field: Any) -> list[Any]:
    """Values out of ``field``'s declared bounds, or of the wrong type."""
    if kind == "int":
        low, high = _constraint(field, Ge).ge, _constraint(field, Le).le
        return [low - 1, high + 1, "1" * 30, "-" + "9" * 30, "abc", "1.5", "1e999", "nan"]
    if kind == "bool":
        return ["maybe", "2", "x" * 300]
    if kind == "list":
        most = _constraint(field, MaxLen).max_length
        return [["a"] * (most + 1), ["x" * 10_000], ["a\x00b"]]
    most = _constraint(field, MaxLen).max_length
    out: list[Any] = ["x" * (most + 1), "x" * 20_000]  # httpx refuses URLs over 64 KiB
    if field.name != "note":  # a note may hold newlines; its other control characters are refused by the action
        out.append("a\x00b")
    out.append("a\x07b")
    least = _constraint(field, MinLen)
    if least is not None and least.min_length > 0:
        out.append("")
    return out


def _odd_values(kind: str) -> list[Any]:
    if kind == "int":
        return [1, 0 + 2**31]
    if kind == "bool":
        return ["true", "0"]
    if kind == "list":
        return [list(ODD_TEXT[:3])]
    return list(ODD_TEXT)


def _request(client: TestClient, route: APIRoute, params: dict[str, Any], where: dict[str, str],
             html: bool) -> Any:
    query = {k: v for k, v in params.items() if where[k] == "query"}
    form = {k: v for k, v in params.items() if where[k] == "form"}
    path = route.path
    for k, v in params.items():
        if where[k] == "path":
            path = path.replace("{" + k + "}", quote(str(v), safe=""))
    url = path + ("?" + urlencode(query, doseq=True) if query else "")
    headers = {"Accept": "text/html,application/xhtml+xml" if html else "application/json"}
    method = sorted(route.methods)[0]
    if method == "POST":
        return client.post(url, data=form, headers=headers, follow_redirects=False)
    return client.request(method, url, headers=headers, follow_redirects=False)


@pytest.fixture
def client(nights: Nights) -> Iterator[TestClient]:
    app = create_app(nights.config, authenticate=lambda: User(), authorize=lambda u, s: True)
    with TestClient(app, raise_server_exceptions=False) as c:
        c.cookies.set(COOKIE, "session-of-ana")
        yield c


def test_every_parameter_of_every_route_declares_its_bounds_and_its_words(client: TestClient) -> None:
    routes = _routes(client.app)
    assert len(routes) >= 12, [r.path for r in routes]  # the walk below reads the same router
    unbounded = []
    for route in routes:
        for where, field in _params(route):
            kind = _kind(field)
            needs = {"int": (Ge, Le), "str": (MaxLen,), "list": (MaxLen,), "bool": ()}[kind]
            missing = [c.__name__ for c in needs if _constraint(field, c) is None]
            if missing or not field.field_info.description:
                unbounded.append(f"{route.path} {where} {field.name}: no {missing or 'description'}")
    assert unbounded == []


def test_every_route_refuses_out_of_bounds_values_with_a_sentence_and_never_fails(
        client: TestClient, nights: Nights) -> None:
    valid = _valid(nights)
    walked: dict[str, int] = {}
    failures: list[str] = []
    for route in _routes(client.app):
        params = _params(route)
        where = {f.alias: ("form" if w == "form" else w) for w, f in params}
        base = {f.alias: valid[f.alias] for _, f in params if f.field_info.is_required()}
        if "csrf_token" in where:
            base["csrf_token"] = _csrf(client)  # past the CSRF check, so the values reach the action
        answer = _request(client, route, base, where, html=True)
        walked[route.path] = walked.get(route.path, 0) + 1
        if answer.status_code >= 500:
            failures.append(f"{route.path} {base}: {answer.status_code}")
        for _, field in params:
            kind = _kind(field)
            for i, bad in enumerate(_refused_values(kind, field)):
                answer = _request(client, route, {**base, field.alias: bad}, where, html=i % 2 == 0)
                walked[route.path] += 1
                shown = repr(bad)[:40]
                if answer.status_code not in (400, 404, 422) or (
                        answer.status_code != 404 and field.alias not in answer.text):
                    failures.append(f"{route.path} {field.alias}={shown}: {answer.status_code} "
                                    f"{answer.text[:160]!r}")
                elif answer.status_code == 422 and not re.search(r"expected|missing|at most|allowed", answer.text):
                    failures.append(f"{route.path} {field.alias}={shown}: 422 without saying what it accepts")
            for odd in _odd_values(kind):
                answer = _request(client, route, {**base, field.alias: odd}, where, html=True)
                walked[route.path] += 1
                if answer.status_code >= 500:
                    failures.append(f"{route.path} {field.alias}={odd!r}: {answer.status_code}")
    assert failures == [], "\n".join(failures)
    assert set(walked) == {r.path for r in _routes(client.app)}


def test_a_thirty_digit_alert_number_is_refused_naming_the_parameter(client: TestClient) -> None:
    big = "123456789012345678901234567890"
    answer = client.get(f"/alerts?changed={big}")
    assert answer.status_code == 422
    assert answer.json() == {"detail": "query parameter 'changed': expected a whole number from 1 to "
                                       f"4,611,686,018,427,387,904; got '{big}'."}
    page = client.get(f"/alerts?changed={big}", headers={"Accept": "text/html"})
    assert page.status_code == 422 and "query parameter &#39;changed&#39;: expected a whole number" in page.text
    missing = client.get("/series", params={"suite": SUITE, "pool": "npu", "case": "softmax_8192"})
    assert missing.json()["detail"] == ("query parameter 'metric' is missing: expected a metric name of at most "
                                        "100 characters, without control characters.")
