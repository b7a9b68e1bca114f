"""The nightly's steps as one package: one module per Airflow task, and no import cycle through them.

Every import counts here, also those inside functions and under ``TYPE_CHECKING``: a cycle hidden in
a function body is still a cycle a reader has to untangle (the old ``pipeline`` <-> ``sharding`` one was).
"""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest
from import_graph import ROOT, cycles, import_graph

STEP_MODULES = ("context", "fetch", "prepare", "run_device", "ingest", "compare", "confirm", "report", "promote",
                "cleanup")


def test_no_import_cycle_through_the_steps() -> None:
    near = {"zlops.run.sharding", "zlops.campaign.run", "zlops.judge.evidence", "zlops.judge.promotion",
            "zlops.steps.nightly", "zlops.judge.compare", "zlops.judge.setup", "zlops.run.ingest"}
    bad = [c for c in cycles(import_graph()) if any(m.startswith("zlops.steps") or m in near for m in c)]
    assert bad == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_context_imports_no_step() -> None:
    graph = import_graph()
    assert not {m for m in graph["zlops.steps.context"] if m.startswith("zlops.steps.")}
    assert not {m for m in graph["zlops.steps"] if m.startswith("zlops.")}  # the package's __init__ is light


def test_pipeline_module_is_gone_and_compare_logic_lives_outside_the_steps() -> None:
    assert not (ROOT / "pipeline.py").exists()
    compare_step = (ROOT / "steps" / "compare.py").read_text(encoding="utf-8")
    for name in ("def judge_inputs", "def series_histories", "def caliber_walls", "def annotate_change_points"):
        assert name not in compare_step


@pytest.mark.parametrize("module", STEP_MODULES)
def test_every_step_module_imports_and_says_what_it_is(module: str) -> None:
    mod = importlib.import_module(f"zlops.steps.{module}")
    assert mod.__doc__ and len(mod.__doc__.split()) > 5


def _task_bodies() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / "airflow" / "tasks.py").read_text(encoding="utf-8"))
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)
            and any("task" in ast.unparse(d) for d in n.decorator_list)}


@pytest.mark.parametrize("task", ["fetch", "prepare", "run_device", "ingest", "compare", "confirm", "report",
                                  "promote", "cleanup"])
def test_each_nightly_task_is_one_call_into_its_step(task: str) -> None:
    """The task body imports from its step module (and Airflow glue) only, and returns one call's value."""
    body = _task_bodies()[task]
    modules = {n.module for n in ast.walk(body) if isinstance(n, ast.ImportFrom)}
    zlops_modules = {m for m in modules if m and m.startswith("zlops") and not m.startswith("zlops.airflow")}
    assert zlops_modules and all(m.startswith("zlops.steps.") for m in zlops_modules), zlops_modules
    statements = [s for s in body.body if not isinstance(s, (ast.ImportFrom, ast.Import, ast.Expr))
                  or (isinstance(s, ast.Expr) and not isinstance(s.value, ast.Constant))]
    assert len(statements) <= 3, ast.unparse(body)  # context lookups + the one call


def test_step_results_are_typed() -> None:
    from zlops.steps import compare, confirm, fetch, prepare, promote, run_device

    for fn, returns in ((fetch.fetch_for_trigger, "Fetched"), (prepare.env, "EnvReady"),
                        (run_device.device_task, "DeviceDone"), (confirm.confirm_pool, "Confirmed"),
                        (promote.promote_task, "Promoted"), (compare.compare, "CompareSummary")):
        assert inspect.signature(fn).return_annotation == returns
