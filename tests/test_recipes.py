"""The recipes' configurations load as written: every ```yaml block of docs/recipes/*.md that configures suites is
validated by the real config loader (a recipe that no longer loads is a recipe a newcomer copies and cannot run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from zlops.config.settings import parse_config

RECIPES = sorted((Path(__file__).resolve().parents[1] / "docs" / "recipes").glob("*.md"))
BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, str]]:
    return [(f"{p.name}#{i}", text) for p in RECIPES for i, text in enumerate(BLOCK.findall(p.read_text()))
            if "suites:" in text]


@pytest.mark.parametrize(("where", "text"), _blocks(), ids=[w for w, _ in _blocks()])
def test_every_recipe_config_loads(where: str, text: str) -> None:
    config = parse_config(yaml.safe_load(text), source=where)
    assert config.suites


def test_the_graph_timed_flaggems_suite_is_the_default_one_with_the_graph_timer() -> None:
    """The recipe's two suites share everything but the command, which asks FlagGems for --mode cudagraph."""
    [text] = [t for w, t in _blocks() if "flaggems-graph" in t]
    suites = parse_config(yaml.safe_load(text), source="flaggems.md").suites
    kernel, graph = suites["flaggems"], suites["flaggems-graph"]
    assert "--mode" not in kernel.command
    assert graph.command[graph.command.index("--mode") + 1] == "cudagraph"
    assert [a for a in graph.command if a not in ("--mode", "cudagraph")] == kernel.command
    same = kernel.model_dump(exclude={"command"})
    assert graph.model_dump(exclude={"command"}) == same
