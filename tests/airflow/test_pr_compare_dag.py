"""The zlops_pr_compare DAG: the trigger form refuses unsafe refs, the first task refuses unknown
keys, and a real compare runs through dag.test()."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("airflow")

from fake_upstream import Upstream, config_data

from zlops.config.settings import load_config
from zlops.steps.context import open_store

pytestmark = [pytest.mark.airflow]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Upstream]]:
    up = Upstream(tmp_path / "upstream")
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(config_data(tmp_path / "home", up.path)))
    monkeypatch.setenv("ZLOPS_CONFIG", str(path))
    yield path, up


def pr_dag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag.get_dag("zlops_pr_compare")


def test_form_is_built_from_the_config(setup: tuple[Path, Upstream]) -> None:
    dag = pr_dag()
    assert dag.schedule is None
    assert dag.params.get_param("suite").schema["enum"] == ["fake"]
    assert set(dag.task_ids) == {"validate", "compare"}
    assert dag.get_task("compare").upstream_task_ids == {"validate"}


@pytest.mark.parametrize("ref", ["--upload-pack=x", "a;rm -rf /", "../x", "main..dev", "@{-1}", "", "a\x01b"])
def test_unsafe_refs_are_refused_by_the_trigger_form(setup: tuple[Path, Upstream], ref: str) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        pr_dag().test(run_conf={"suite": "fake", "ref": ref})


@pytest.mark.slow  # a real dag.test() run: the first one in a process starts the in-process execution API (~6 s)
def test_unknown_conf_keys_fail_the_first_task_and_nothing_runs(setup: tuple[Path, Upstream]) -> None:
    path, up = setup
    up.commit({"alpha": 1.0})
    run = pr_dag().test(run_conf={"suite": "fake", "ref": "main", "repo": "https://evil.example/x.git"})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["validate"] == "failed" and states["compare"] == "upstream_failed"
    assert not (load_config(path).mirrors_dir).exists()  # no git command ran


@pytest.mark.slow
def test_a_branch_is_compared_with_its_merge_base(setup: tuple[Path, Upstream]) -> None:
    path, up = setup
    c1 = up.commit({"alpha": 1.0, "beta": 2.0})
    up.branch("feature/x", c1)
    up.checkout("feature/x")
    up.commit({"alpha": 1.2, "beta": 2.0})
    up.checkout("main")
    run = pr_dag().test(run_conf={"suite": "fake", "ref": "feature/x", "devices": [0]})
    assert run.state == "success"
    config = load_config(path)
    (pr,) = [r for r in open_store(config).list_runs(kind="pr") if r.meta.get("side") == "head"]
    verdicts = {c.case: c.verdict.value for c in open_store(config).comparisons(pr.run_key)}
    assert verdicts == {"alpha": "regression", "beta": "unchanged"}
