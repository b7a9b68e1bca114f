"""The zlops pages in the Airflow UI need the UI's login, and their links survive Airflow run ids (issue 14).

Real: Airflow's own api-server app (``airflow.api_fastapi.app.create_app``) with the zlops plugin
mounted from plugins/, the SimpleAuthManager, a login through ``POST /auth/token``, the FastAPI
TestClient; a run stored under an Airflow-style run key with ``+`` and ``:``.
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("airflow")

from fake_upstream import config_data

from zlops.config.settings import load_config
from zlops.model import RunRecord, RunStatus
from zlops.steps.context import RunContext, open_store

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

RUN_KEY = "nightly:demo:scheduled__2026-11-30T02:00:00+00:00"
PASSWORD = "zlops-test-password"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture(scope="module")
def airflow_client() -> Iterator[Any]:
    from airflow.utils import db

    db.resetdb()  # the auth manager checks tokens against the revoked_token table
    home = Path(os.environ["AIRFLOW_HOME"])
    secret = os.environ.get("AIRFLOW__API_AUTH__JWT_SECRET")
    os.environ["AIRFLOW__API_AUTH__JWT_SECRET"] = secrets.token_hex(64)  # a production-length key
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": PASSWORD}))
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    try:
        with TestClient(create_app()) as client:
            yield client
    finally:
        if secret is None:
            os.environ.pop("AIRFLOW__API_AUTH__JWT_SECRET", None)
        else:
            os.environ["AIRFLOW__API_AUTH__JWT_SECRET"] = secret


@pytest.fixture
def stored_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = config_data(tmp_path / "home", tmp_path / "upstream")
    data["suites"]["demo"] = data["suites"].pop("fake")  # type: ignore[attr-defined]
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("ZLOPS_CONFIG", str(path))
    config = load_config(path)
    open_store(config).upsert_run(RunRecord(run_key=RUN_KEY, kind="nightly", suite="demo", sha="c" * 40,
                                                     branch="main", status=RunStatus.DONE))
    run_dir = RunContext(config, "demo", RUN_KEY, "c" * 40).run_dir
    (run_dir / "plots").mkdir(parents=True)
    (run_dir / "report.txt").write_text("alpha  +12.00%  !! REGRESSION\n")
    (run_dir / "plots" / "local__alpha+fused__time.png").write_bytes(PNG)
    return path


def _login(client: Any) -> str:
    answer = client.post("/auth/token", json={"username": "admin", "password": PASSWORD})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["access_token"])


def test_the_pages_docs_and_schema_answer_401_without_login(airflow_client: Any, stored_run: Path) -> None:
    airflow_client.cookies.clear()
    for path in ("/zlops/", "/zlops/docs", "/zlops/openapi.json", "/zlops/run?key=x", "/zlops/plot?key=x&name=y"):
        answer = airflow_client.get(path)
        assert answer.status_code == 401, (path, answer.status_code)
        assert "zlops" not in answer.text and RUN_KEY not in answer.text
    assert airflow_client.get("/api/v2/dags").status_code == 401  # the same answer as Airflow's own API
    forged = airflow_client.get("/zlops/", headers={"Authorization": "Bearer not-a-jwt"})
    assert forged.status_code in (401, 403)


def test_logged_in_the_links_of_an_airflow_run_id_work(airflow_client: Any, stored_run: Path) -> None:
    token = _login(airflow_client)
    auth = {"Authorization": f"Bearer {token}"}
    index = airflow_client.get("/zlops/", headers=auth)
    assert index.status_code == 200 and "zlops runs" in index.text
    (href,) = re.findall(r'href="(run\?[^"]+)"', index.text)
    href = html.unescape(href)
    assert href == "run?key=nightly%3Ademo%3Ascheduled__2026-11-30T02%3A00%3A00%2B00%3A00"
    page = airflow_client.get("/zlops/" + href, headers=auth)
    assert page.status_code == 200 and "!! REGRESSION" in page.text and RUN_KEY in page.text
    (src,) = re.findall(r'src="([^"]+)"', page.text)
    src = html.unescape(src)
    assert "%2B00%3A00" in src and "alpha%2Bfused" in src
    plot = airflow_client.get("/zlops/" + src, headers=auth)
    assert plot.status_code == 200 and plot.content == PNG
    # the unencoded link the pages used to make: '+' arrives as a space, so the run is not found
    assert airflow_client.get(f"/zlops/run?key={RUN_KEY}", headers=auth).status_code == 404


def test_the_ui_cookie_logs_in_too_and_the_docs_point_under_the_prefix(airflow_client: Any, stored_run: Path) -> None:
    airflow_client.cookies.set("_token", _login(airflow_client))  # what the UI's login leaves in the browser
    try:
        schema = airflow_client.get("/zlops/openapi.json")
        assert schema.status_code == 200 and {"/", "/run", "/plot"} <= set(schema.json()["paths"])
        docs = airflow_client.get("/zlops/docs")
        assert docs.status_code == 200 and "/zlops/openapi.json" in docs.text
        assert airflow_client.get("/zlops/").status_code == 200
    finally:
        airflow_client.cookies.clear()
