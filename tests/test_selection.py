"""Case selection (zlops.run.selection, the suite's ``select:``): what ``{cases}`` becomes for a nightly and for
an A/B of some suspects, with FlagGems' real op marks; and the config checks around it."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from zlops.config.settings import SelectConfig, SuiteConfig, parse_config
from zlops.errors import ConfigError
from zlops.run.runner import ShardSpec, render_command
from zlops.run.selection import cases_value, selected_cases, selection_argv, selection_tokens, selects_cases

FLAGGEMS_CMD = ["python", "-m", "pytest", "{worktree}/benchmark", "-m", "{cases}", "--level", "core",
                "--dtypes", "float16", "--record", "log"]
FLAGGEMS_SELECT = {"token": "^([^/]+)/", "join": " or ", "every": ""}


def _suite(**kw: Any) -> SuiteConfig:
    base: dict[str, Any] = {"repo": "/r", "format": "flaggems-record", "pools": ["p"], "command": FLAGGEMS_CMD,
                            "select": FLAGGEMS_SELECT}
    base.update(kw)
    return SuiteConfig.model_validate(base)


def _config(suite: dict[str, Any]) -> Any:
    return parse_config({"pools": {"p": {"backend": "cpu", "devices": [0]}},
                         "suites": {"s": {"repo": "/r", "format": "zlops-json", "pools": ["p"], **suite}}},
                        source="zlops.yaml")


def test_flaggems_cases_map_to_op_marks_in_case_order() -> None:
    suite = _suite()
    cases = ("abs/float16/(1024x1024x1024)", "abs/float16/(64x64)", "sum/float16/(64x64, 1)",
             "exp/float16/(4096x4096)")
    assert selection_tokens(suite.select, cases) == ("abs", "sum", "exp")
    assert cases_value(suite, cases) == "abs or sum or exp"
    argv = selection_argv(suite, cases)
    assert argv[argv.index("-m", 3) + 1] == "abs or sum or exp"
    assert "{worktree}/benchmark" in argv  # the runner's placeholders are left to the runner


def test_a_nightly_passes_the_every_case_form() -> None:
    assert cases_value(_suite(), None) == ""  # pytest -m "" selects every test
    every = _suite(select={**FLAGGEMS_SELECT, "every": "abs or neg or exp or relu or sum"})
    assert cases_value(every, None) == "abs or neg or exp or relu or sum"
    assert cases_value(every, ()) == "abs or neg or exp or relu or sum"


def test_a_case_without_a_token_runs_every_case_rather_than_none(caplog: pytest.LogCaptureFixture) -> None:
    suite = _suite(select={**FLAGGEMS_SELECT, "every": "ALL"})
    assert selection_tokens(suite.select, ["abs/float16/(64x64)", "no-slash"]) is None
    assert cases_value(suite, ["abs/float16/(64x64)", "no-slash"]) == "ALL"
    assert "no token" in caplog.text


def test_default_select_passes_whole_names_and_a_group_free_regex_its_match() -> None:
    assert cases_value(_suite(select={}), ["a", "b", "a"]) == "a,b"
    suite = _suite(select={"token": r"^\w+", "join": "|"})
    assert cases_value(suite, ["BM_copy/64", "BM_copy/128", "BM_sort/8"]) == "BM_copy|BM_sort"


def test_braces_in_a_case_name_are_not_placeholders(tmp_path: Path) -> None:
    suite = _suite(command=["bench", "--only", "{cases}", "--out", "{results}", "{{literal}}"],
                   select={"token": "^(.*)$"})
    spec = ShardSpec(run_key="r", suite_name="s", suite=suite, sha="0" * 40, pool="p", backend="cpu", device=0,
                     worktree=tmp_path, venv=Path(sys.prefix), artifact_dir=tmp_path / "a",
                     cases=("op/{device}/x",))
    argv = render_command(spec)
    assert argv[2] == "op/{device}/x" and argv[4] == str(spec.results_file) and argv[5] == "{literal}"


def test_render_command_uses_the_selection(tmp_path: Path) -> None:
    suite = _suite()
    spec = ShardSpec(run_key="r", suite_name="s", suite=suite, sha="0" * 40, pool="p", backend="cpu", device=0,
                     worktree=tmp_path, venv=Path(sys.prefix), artifact_dir=tmp_path / "a",
                     cases=("neg/float16/(64x64)", "abs/float16/(64x64)"))
    argv = render_command(spec)
    assert argv[3] == f"{tmp_path}/benchmark" and argv[argv.index("-m", 3) + 1] == "neg or abs"
    nightly = ShardSpec(**{**spec.__dict__, "cases": None})
    assert render_command(nightly)[argv.index("-m", 3) + 1] == ""


def test_partitioned_suites_keep_the_comma_joined_names() -> None:
    suite = SuiteConfig.model_validate({"repo": "/r", "format": "zlops-json", "pools": ["p"],
                                        "command": ["b", "{cases}"], "partition": {"cases": ["x", "y"]}})
    assert selects_cases(suite) and cases_value(suite, ["x", "y"]) == "x,y" and cases_value(suite, None) == ""
    plain = SuiteConfig.model_validate({"repo": "/r", "format": "zlops-json", "pools": ["p"], "command": ["b"]})
    assert not selects_cases(plain)
    assert selects_cases(_suite())


@pytest.mark.parametrize(("suite", "message"), [
    ({"command": ["b", "{cases}"]}, "no partition section (nor a select section)"),
    ({"command": ["b"], "select": {}}, "select: the command must pass the selection with {cases}"),
    ({"command": ["b", "{cases}", "{cases_file}"], "select": {}}, "select fills {cases} only"),
    ({"command": ["b", "{cases}"], "select": {}, "partition": {"cases": ["a"]}}, "give partition or select"),
    ({"command": ["b", "{cases}"], "select": {"token": "("}}, "select.token: not a regular expression"),
    ({"command": ["b", "{cases}"], "select": {"token": "(a)(b)"}}, "at most one capturing group"),
    ({"command": ["b", "{cases}"], "select": {"join": ""}}, "join must not be empty"),
    ({"command": ["b", "{cases}"], "select": {"tokens": "x"}}, "select.tokens: unknown key"),
])
def test_select_config_errors_say_what_to_fix(suite: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        _config(suite)


def test_select_config_is_frozen_and_has_documented_defaults() -> None:
    s = SelectConfig()
    assert (s.token, s.join, s.every) == ("^(.*)$", ",", "")
    with pytest.raises(ValidationError, match="frozen"):
        s.join = "|"  # type: ignore[misc]


def test_a_selection_runs_every_case_of_its_tokens_which_is_what_an_a_b_run_costs() -> None:
    """Seen on the H200 hold-out (#22): the suspects' 5 cases of mean ran as ``-m mean``, every shape of
    mean; costed as 5 cases, the A/B's estimate was 31% under what it took."""
    suite = _suite()
    universe = [f"{op}/float16/({n})" for op in ("mean", "amax", "add") for n in (1, 2, 3)]
    assert selected_cases(suite, ["mean/float16/(2)"], universe) == [f"mean/float16/({n})" for n in (1, 2, 3)]
    two = selected_cases(suite, ["add/float16/(1)", "mean/float16/(3)"], universe)
    assert sorted(two) == sorted([c for c in universe if not c.startswith("amax")])
    assert selected_cases(suite, ["no-slash"], universe) == universe        # no token: the whole suite runs
