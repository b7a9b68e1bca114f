"""The zlops UI pages: runs list, a run's report with its plots, and no path escape."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("fastapi")

from fake_upstream import Upstream, config_data
from fastapi.testclient import TestClient

from zlops.airflow.ui import create_app
from zlops.config.settings import load_config
from zlops.steps.nightly import run_nightly

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_runs_page_report_and_plots(tmp_path: Path) -> None:
    up = Upstream(tmp_path / "upstream")
    c1 = up.commit({"alpha": 1.0})
    c2 = up.commit({"alpha": 2.0})
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(config_data(tmp_path / "home", up.path)))
    config = load_config(path)
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    # the pages alone; Airflow's authentication in front of them: tests/faults/test_services_ui.py
    client = TestClient(create_app(config, authenticate=lambda: None))
    index = client.get("/")
    assert index.status_code == 200
    assert c2[:12] in index.text and "1 regression" in index.text
    page = client.get("/run", params={"key": n2.run_key})
    assert page.status_code == 200 and "!! REGRESSION" in page.text
    (plot,) = n2.report.plots
    img = client.get("/plot", params={"key": n2.run_key, "name": plot.name})
    assert img.status_code == 200 and img.content[:4] == b"\x89PNG"
    assert client.get("/plot", params={"key": n2.run_key, "name": "../report.txt"}).status_code == 404
    assert client.get("/run", params={"key": "nope"}).status_code == 404


def test_plugin_registers_with_airflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZLOPS_CONFIG", str(tmp_path / "unused.yaml"))
    import importlib.util

    spec = importlib.util.spec_from_file_location("zlops_plugin", Path(__file__).parents[2] / "plugins" /
                                                  "zlops_plugin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plugin = module.ZlopsPlugin
    assert [a["url_prefix"] for a in plugin.fastapi_apps] == ["/zlops", "/zlops-forge"]
    assert plugin.external_views[0]["href"] == "zlops/"
    assert [v["destination"] for v in plugin.external_views] == ["nav", "nav", "nav", "nav", "dag_run"]
    assert [v["href"] for v in plugin.external_views[:4]] == ["zlops/", "zlops/alerts", "zlops/matrix", "zlops/trust"]
    assert [link.name for link in plugin.global_operator_extra_links] == ["zlops report"]
