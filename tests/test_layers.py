"""The floor plan of zlops (docs/design/layers.md): which package may import which, and no import circle.

Every import counts, also those inside functions and under ``TYPE_CHECKING`` (as in
``test_steps_package.py``): a circle hidden in a function body is still one a reader has to untangle.
``from zlops.pkg import name`` is an edge to ``zlops.pkg.name`` when that is a module, else to
``zlops.pkg``; an import of a module also runs its packages' ``__init__``, which the circle check counts
(the layer check does not: an ``__init__`` is its package's front door).

Each module sits in the layer of the longest prefix of its name in :data:`LAYERS`; it may import the
modules of its own layer and of the layers below, never of a layer above. A module that matches no
prefix fails the test: a new module is placed on purpose, in :data:`LAYERS` and in the document.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from import_graph import ROOT, cycles, import_graph

DOC = ROOT.parent / "docs" / "design" / "layers.md"

#: bottom to top: (layer, the module-name prefixes in it). docs/design/layers.md shows the same table.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("vocabulary", ("zlops", "zlops.errors", "zlops.model", "zlops.metrics", "zlops.redact", "zlops.progress",
                    "zlops.safefiles", "zlops.identity", "zlops.stats", "zlops.alerts.lifecycle",
                    "zlops.bisect.search")),
    ("host", ("zlops.host", "zlops.formats", "zlops.kernels")),
    ("backends", ("zlops.backends", "zlops.timing", "zlops.pytest_plugin")),
    ("config", ("zlops.config",)),
    ("store", ("zlops.store",)),
    ("run", ("zlops.run", "zlops.steps.context")),
    ("campaign", ("zlops.campaign",)),
    ("workspace", ("zlops.steps.prepare", "zlops.steps.cleanup", "zlops.steps.seeding")),
    ("report", ("zlops.report",)),
    ("judge", ("zlops.judge", "zlops.campaign.ab")),
    ("alerts", ("zlops.alerts", "zlops.bisect")),
    ("slack", ("zlops.slack",)),
    ("pages", ("zlops.triage", "zlops.forge")),
    ("steps", ("zlops.steps",)),
    ("entry", ("zlops.airflow", "zlops.demo")),
    ("cli", ("zlops.cli", "zlops.__main__")),
]


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int | None:
    """The index of the layer of the longest prefix of ``module`` (None: in no layer)."""
    best, where = -1, None
    for i, (_name, prefixes) in enumerate(layers):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best and (p != "zlops" or module == p):
                best, where = len(p), i
    return where


def upward_imports(graph: dict[str, set[str]], layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """Every import of a module in a higher layer than the importer's, as 'a (layer) -> b (layer)'."""
    out = []
    for a, targets in sorted(graph.items()):
        la = layer_of(a, layers)
        for b in sorted(targets):
            lb = layer_of(b, layers)
            if la is not None and lb is not None and lb > la:
                out.append(f"{a} ({layers[la][0]}) -> {b} ({layers[lb][0]})")
    return out


def test_every_module_has_a_layer() -> None:
    assert [m for m in import_graph() if layer_of(m) is None] == []


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    assert upward_imports(import_graph()) == []


def test_no_import_circle_anywhere_in_zlops() -> None:
    assert cycles(import_graph(with_inits=True)) == []


def _with(graph: dict[str, set[str]], importer: str, imported: str) -> dict[str, set[str]]:
    planted = {k: set(v) for k, v in graph.items()}
    planted[importer].add(imported)
    return planted


def test_the_checks_catch_a_planted_circle_and_a_planted_upward_import() -> None:
    circles, layers = import_graph(with_inits=True), import_graph()
    # the old circle of the A/B: the budget (the campaign side's import) importing the confirmation back
    planted = _with(circles, "zlops.judge.budget", "zlops.judge.confirm")
    assert ["zlops.campaign.ab", "zlops.judge.budget", "zlops.judge.confirm"] in cycles(planted)
    # the old circle of the backends: telemetry asking the backend registry, a circle and an upward import
    assert any({"zlops.host.telemetry", "zlops.backends"} <= set(c)
               for c in cycles(_with(circles, "zlops.host.telemetry", "zlops.backends")))
    assert upward_imports(_with(layers, "zlops.host.telemetry", "zlops.backends")) == [
        "zlops.host.telemetry (host) -> zlops.backends (backends)"]
    # an import from below that makes no circle is still caught by the layers
    assert not any("zlops.store.runs" in c for c in cycles(_with(circles, "zlops.store.runs", "zlops.judge.compare")))
    assert upward_imports(_with(layers, "zlops.store.runs", "zlops.judge.compare")) == [
        "zlops.store.runs (store) -> zlops.judge.compare (judge)"]


def test_the_graph_sees_imports_in_functions_type_checking_and_from_package_forms(tmp_path: Path) -> None:
    pkg = tmp_path / "zlops"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from zlops.b import y\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zlops.a import x\n")
    (pkg / "y.py").write_text("import zlops.a.x as x\n")
    graph = import_graph(pkg)
    assert graph["zlops.a.x"] == {"zlops.b"} and graph["zlops.b"] == {"zlops.a.x"} and graph["zlops.y"] == {"zlops.a.x"}
    assert cycles(graph) == [["zlops.a.x", "zlops.b"]]
    assert "zlops.a" in import_graph(pkg, with_inits=True)["zlops.y"]


def test_the_document_shows_the_same_layers() -> None:
    """docs/design/layers.md's table lists the layers top to bottom with the same prefixes."""
    rows = re.findall(r"^\| *\d+ *\| *`?(\w+)`? *\|(.*?)\|", DOC.read_text(encoding="utf-8"), re.M)
    shown = [(name, tuple(sorted(re.findall(r"`(zlops[\w.]*)`", cells)))) for name, cells in rows]
    assert list(reversed(shown)) == [(n, tuple(sorted(p))) for n, p in LAYERS]


def test_package_docstrings_say_what_they_own_and_may_import() -> None:
    for init in sorted(ROOT.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc.split()) > 15 and "May import" in doc, init.relative_to(ROOT.parent)


def test_at_most_a_dozen_top_level_modules_beside_the_packages() -> None:
    modules = sorted(p.stem for p in ROOT.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(modules) <= 12, modules


def test_the_public_names_keep_working() -> None:
    """The entry point, python -m zlops.cli, and a DAG file's ``from zlops.config import config_from_env``."""
    import zlops.cli
    import zlops.config as config_pkg
    from zlops.config import Config, config_from_env, load_config, settings

    assert 'zlops = "zlops.cli:main"' in (ROOT.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert callable(zlops.cli.main) and config_from_env is settings.config_from_env
    assert load_config is settings.load_config and Config is settings.Config
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        config_pkg.nothing_here  # noqa: B018
    done = subprocess.run([sys.executable, "-m", "zlops.cli", "--version"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.startswith("zlops "), done.stderr
