"""A refused trigger param of a zlops DAG reads as one sentence (issue 15), both in the words
zlops.airflow.params gives and through the api-server middleware that rewrites Airflow's 400 answer."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("airflow")

from fake_upstream import Upstream, config_data

from zlops.airflow.params import PARAMS, TriggerParamErrors, plain_refusal

pytestmark = [pytest.mark.airflow]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dags(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from airflow.dag_processing.dagbag import DagBag

    tmp = tmp_path_factory.mktemp("params")
    up = Upstream(tmp / "upstream")
    path = tmp / "zlops.yaml"
    path.write_text(yaml.safe_dump(config_data(tmp / "home", up.path)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZLOPS_CONFIG", str(path))
        bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    yield bag.dags


def refusal(dag: Any, conf: dict[str, Any]) -> str:
    """Airflow's own refusal text for ``conf`` (the DAG's params validation, as a trigger runs it)."""
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError) as ei:
        copy.deepcopy(dag.params).update(conf)
    text = str(ei.value)
    assert "Failed validating" in text  # the raw jsonschema report this module replaces
    return text


CASES = [
    ("zlops_nightly_fake", {"sha": "xyz"},
     "Commit (sha): expected a full or short commit SHA: 7 to 64 lower-case hex characters like 1a2b3c4 (empty: "
     "the branch head), got 'xyz'."),
    ("zlops_nightly_fake", {"promote": "yes"}, "Promote to baseline (promote): expected true or false, got 'yes'."),
    ("zlops_pr_compare", {"ref": "a;rm -rf /"},
     "Ref (ref): expected a branch name like feature/faster-softmax, pull/N/head, or a commit SHA (no spaces, ';', "
     "'..', '@{', '//' or leading '-'), got 'a;rm -rf /'."),
    ("zlops_pr_compare", {"pairs": 0}, "Interleaved pairs (pairs): expected an integer from 1 to 20, got 0."),
    ("zlops_pr_compare", {"rounds": 5000},
     "Rounds (rounds): expected an integer from 1 to 1000 (empty: the suite's rounds), got 5000."),
    ("zlops_pr_compare", {"suite": "nosuch"}, "Suite (suite): expected one of 'fake', got 'nosuch'."),
    ("zlops_pr_compare", {"devices": "0,1"},
     "Devices (devices): expected a list of at most 8 device indices like [0, 1], each 0 or more (empty: idle "
     "devices are picked), got '0,1'."),
    ("zlops_pr_compare", {"devices": [0, -1]},
     "Devices (devices): expected a list of at most 8 device indices like [0, 1], each 0 or more (empty: idle "
     "devices are picked) (item 1 is -1)."),
]


@pytest.mark.parametrize(("dag_id", "conf", "sentence"), CASES, ids=[f"{c[0]}-{next(iter(c[1]))}" for c in CASES])
def test_a_refused_param_reads_as_one_sentence(dags: dict[str, Any], dag_id: str, conf: dict[str, Any],
                                               sentence: str) -> None:
    assert plain_refusal(refusal(dags[dag_id], conf)) == sentence


def test_the_trigger_form_says_what_each_param_accepts(dags: dict[str, Any]) -> None:
    for dag_id in ("zlops_nightly_fake", "zlops_pr_compare"):
        for name, p in dags[dag_id].params.items():
            assert p.schema["title"] == PARAMS[name].title
            assert p.description.endswith(f"Accepts {PARAMS[name].accepted(p.schema)}.")
            assert "{" not in p.description.replace("'@{'", "")  # every {keyword} was filled from the schema
    assert dags["zlops_pr_compare"].params.get_param("pairs").description.endswith("an integer from 1 to 20.")


def test_other_text_is_left_alone() -> None:
    assert plain_refusal("DAG with dag_id: 'x' not found") is None
    assert plain_refusal("Invalid input for param sha: boom") is None


def _app(detail: str, status: int = 400) -> Any:
    from fastapi import FastAPI, HTTPException

    app = FastAPI()

    @app.post("/api/v2/dags/{dag_id}/dagRuns")
    def trigger(dag_id: str) -> dict[str, str]:
        if status != 200:  # as Airflow's trigger route answers a ParamValidationError
            raise HTTPException(status, detail)
        return {"dag_id": dag_id}

    app.add_middleware(TriggerParamErrors)
    return app


def test_the_middleware_rewrites_a_zlops_dags_refusal_only(dags: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    raw = refusal(dags["zlops_nightly_fake"], {"sha": "xyz"})
    client = TestClient(_app(raw))
    answer = client.post("/api/v2/dags/zlops_nightly_fake/dagRuns", json={"conf": {"sha": "xyz"}})
    assert answer.status_code == 400
    assert answer.json() == {"detail": plain_refusal(raw)}
    assert int(answer.headers["content-length"]) == len(answer.content)
    # another project's DAG keeps Airflow's answer; so does any other 400 of a zlops DAG
    assert client.post("/api/v2/dags/etl_daily/dagRuns", json={}).json() == {"detail": raw}
    other = TestClient(_app("DAG with dag_id: 'zlops_x' not found"))
    assert other.post("/api/v2/dags/zlops_x/dagRuns", json={}).json() == {"detail": "DAG with dag_id: 'zlops_x' "
                                                                                    "not found"}
    ok = TestClient(_app("", status=200)).post("/api/v2/dags/zlops_nightly_fake/dagRuns", json={})
    assert ok.status_code == 200 and ok.json() == {"dag_id": "zlops_nightly_fake"}


def test_the_plugin_registers_the_middleware(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    monkeypatch.setenv("ZLOPS_CONFIG", str(tmp_path / "unused.yaml"))
    spec = importlib.util.spec_from_file_location("zlops_plugin_mw", REPO / "plugins" / "zlops_plugin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (entry,) = module.ZlopsPlugin.fastapi_root_middlewares
    assert entry["middleware"] is TriggerParamErrors


@pytest.mark.slow
def test_the_api_server_answers_a_refused_trigger_with_the_sentence(dags: dict[str, Any], tmp_path: Path) -> None:
    """Real: Airflow's api-server app with the zlops plugin from plugins/, a login, the DAG serialized into
    Airflow's database, and a trigger through the REST API the UI's trigger form uses."""
    import json
    import os
    import secrets

    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils import db
    from fastapi.testclient import TestClient

    db.resetdb()
    DagBundlesManager().sync_bundles_to_db()
    data = config_data(tmp_path / "home", Upstream(tmp_path / "upstream").path)
    (tmp_path / "zlops.yaml").write_text(yaml.safe_dump(data))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZLOPS_CONFIG", str(tmp_path / "zlops.yaml"))
        mp.setenv("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(64))
        bag = DagBag(dag_folder=str(REPO / "dags"), bundle_path=REPO / "dags", bundle_name="dags-folder")
        sync_bag_to_db(bag, "dags-folder", None)
        home = Path(os.environ["AIRFLOW_HOME"])
        (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": "pw-for-test"}))
        from airflow.api_fastapi.app import create_app

        with TestClient(create_app()) as client:
            token = client.post("/auth/token", json={"username": "admin", "password": "pw-for-test"})
            assert token.status_code == 201, token.text
            auth = {"Authorization": f"Bearer {token.json()['access_token']}"}
            answer = client.post("/api/v2/dags/zlops_nightly_fake/dagRuns", headers=auth,
                                 json={"logical_date": None, "conf": {"sha": "xyz"}})
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == CASES[0][2]
