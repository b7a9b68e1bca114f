"""The receiver as the zlops plugin serves it: secrets from the Airflow connection, and a signed comment
creating a real zlops_pr_compare DAG run (Airflow's API client, as `airflow dags trigger` does) whose
conf passes the DAG's own params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("airflow")

from fake_forge import GITHUB_TOKEN, AppServer, FakeForge, deliver, github_delivery, pr_comment
from fake_upstream import Upstream, config_data

pytestmark = [pytest.mark.airflow, pytest.mark.slow]  # 10-18 s: resets the Airflow DB, syncs the dags folder
REPO = Path(__file__).resolve().parents[2]


def test_a_signed_comment_creates_a_pr_compare_run_with_the_connections_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dagrun import DagRun
    from airflow.utils import db
    from airflow.utils.session import create_session

    from zlops.airflow.forge import URL_PREFIX, connection_secrets, create_forge_app
    from zlops.config.settings import load_config

    forge = FakeForge()
    try:
        up = Upstream(tmp_path / "upstream")
        up.commit({"alpha": 1.0})
        data = config_data(tmp_path / "home", up.path)
        data["suites"]["fake"]["forge"] = {"kind": "github", "api_url": forge.github_url,  # type: ignore[index]
                                           "repo": "acme/kernels"}
        path = tmp_path / "zlops.yaml"
        path.write_text(yaml.safe_dump(data))
        monkeypatch.setenv("ZLOPS_CONFIG", str(path))
        monkeypatch.setenv("AIRFLOW_CONN_ZLOPS_FORGE", json.dumps(
            {"conn_type": "http", "password": GITHUB_TOKEN, "extra": {"webhook_secret": "from-the-connection"}}))
        secrets = connection_secrets(load_config(path).suites["fake"].forge)  # type: ignore[arg-type]
        assert secrets.token == GITHUB_TOKEN and secrets.webhook_secret == "from-the-connection"
        assert GITHUB_TOKEN not in repr(secrets)

        db.resetdb()
        manager = DagBundlesManager()
        manager.sync_bundles_to_db()
        for bundle in manager.get_all_dag_bundles():
            bundle.initialize()
            sync_bag_to_db(BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name),
                           bundle.name, bundle.version)
        forge.state.permissions["alice"] = "admin"
        forge.state.pulls[5] = {"number": 5, "head": {"ref": "feature/x", "sha": "c" * 40,
                                                      "repo": {"full_name": "acme/kernels"}},
                                "base": {"repo": {"full_name": "acme/kernels"}}}
        assert URL_PREFIX == "/zlops-forge"
        server = AppServer(create_forge_app())
        try:
            body, headers = github_delivery("issue_comment", pr_comment(5, "/zlops compare", "alice"),
                                            "from-the-connection")
            status, answer = deliver(server.url + "/github", body, headers)
        finally:
            server.close()
        assert status == 202, answer
        run_id = answer["triggered"][0]["run_id"]
        with create_session() as session:
            run = session.query(DagRun).filter(DagRun.dag_id == "zlops_pr_compare", DagRun.run_id == run_id).one()
            assert run.conf == {"suite": "fake", "ref": "feature/x", "pr": 5}
    finally:
        forge.close()
