"""Config loading: every error names the file, the key path and what is expected."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from zlops.config.settings import Config, config_from_env, load_config, parse_config
from zlops.errors import ConfigError
from zlops.model import Thresholds

EXAMPLE = """\
pools:
  cpu-local: {backend: cpu, devices: [0]}
  h200: {backend: cuda, devices: [0, 1, 2, 3]}
suites:
  demo-ops:
    repo: https://example.com/demo-ops.git
    branch: main
    install: [["pip", "install", "-e", "."]]
    command: ["python", "bench.py", "--out", "{results}", "--device", "{device}", "--rounds", "{rounds}"]
    format: pytest-benchmark
    pools: [cpu-local, h200]
    rounds: 5
    timeout_s: 1800
    schedule: "0 2 * * *"
    system_site_packages: false
thresholds: {potential_pct: 2, regression_pct: 5}
slack: {channel: "#perf-nightly"}
"""


def _data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE)
    return data


def _write(tmp_path: Path, data: dict[str, Any] | str) -> Path:
    path = tmp_path / "zlops.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _error(tmp_path: Path, data: dict[str, Any] | str) -> tuple[str, Path]:
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    return str(ei.value), path


def test_the_example_config_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    cfg = load_config(_write(tmp_path, EXAMPLE))
    assert cfg.pools["cpu-local"].backend == "cpu" and cfg.pools["cpu-local"].devices == [0]
    assert cfg.pools["h200"].backend == "cuda" and cfg.pools["h200"].devices == [0, 1, 2, 3]
    suite = cfg.suite("demo-ops")
    assert suite.install == [["pip", "install", "-e", "."]]
    assert suite.command[-1] == "{rounds}" and suite.format == "pytest-benchmark"
    assert (suite.rounds, suite.timeout_s, suite.schedule, suite.system_site_packages) == (5, 1800, "0 2 * * *", False)
    assert suite.pools == ["cpu-local", "h200"] and suite.results_name == "results.json"
    assert cfg.thresholds_value() == Thresholds(2.0, 5.0)
    assert cfg.slack is not None and cfg.slack.channel == "#perf-nightly" and cfg.slack.token_env == "SLACK_BOT_TOKEN"


def test_defaults_live_under_the_expanded_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    cfg = load_config(_write(tmp_path, EXAMPLE))
    home = tmp_path / "userhome" / ".zlops"
    assert cfg.home == home
    assert cfg.database_url == f"sqlite:///{home / 'zlops.db'}"
    assert (cfg.mirrors_dir, cfg.worktrees_dir, cfg.envs_dir, cfg.artifacts_dir, cfg.run_locks_dir) == (
        home / "mirrors", home / "worktrees", home / "envs", home / "artifacts", home / "locks")
    # device leases are host-wide, never under home (two homes on one host share their devices)
    assert cfg.locks_dir == Path(os.environ["ZLOPS_LOCKS_DIR"]) and not cfg.locks_dir.is_relative_to(home)
    assert (cfg.env_cache_size, cfg.device_wait_s, cfg.judge) == (8, 600, "noise")


def test_home_and_database_expand_tilde_and_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    monkeypatch.setenv("ZL_TEST_ROOT", str(tmp_path / "root"))
    data = _data()
    data["home"] = "~/perf"
    data["database"] = "sqlite:///~/perf/other.db"
    cfg = parse_config(data)
    assert cfg.home == tmp_path / "userhome" / "perf"
    assert cfg.database_url == f"sqlite:///{tmp_path / 'userhome' / 'perf' / 'other.db'}"
    data["home"] = "$ZL_TEST_ROOT/zl"
    data["database"] = "postgresql+psycopg://zlops@db/${ZL_TEST_ROOT}"
    cfg = parse_config(data)
    assert cfg.home == tmp_path / "root" / "zl"
    assert cfg.database_url == f"postgresql+psycopg://zlops@db/{tmp_path / 'root'}"


def test_wrong_type_names_file_and_key_path(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["rounds"] = "five"
    msg, path = _error(tmp_path, data)
    assert msg.startswith(f"{path}: suites.demo-ops.rounds: ")
    assert "integer" in msg and "'five'" in msg


def test_out_of_range_value(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["rounds"] = 0
    msg, path = _error(tmp_path, data)
    assert msg == f"{path}: suites.demo-ops.rounds: expected an integer >= 1 and <= 100000, got 0"


def test_unknown_key_is_named(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["comand"] = data["suites"]["demo-ops"].pop("command")
    msg, path = _error(tmp_path, data)
    assert f"{path}: suites.demo-ops.comand: unknown key" in msg
    assert f"{path}: suites.demo-ops.command: required key is missing" in msg


def test_suite_referencing_an_undefined_pool(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["pools"] = ["cpu-local", "h100"]
    msg, path = _error(tmp_path, data)
    assert str(path) in msg and "suites.demo-ops.pools" in msg
    assert "'h100' is not defined" in msg and "cpu-local, h200" in msg


def test_unknown_placeholder_lists_the_known_ones(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["command"] = ["python", "bench.py", "--out", "{result}"]
    msg, path = _error(tmp_path, data)
    assert f"{path}: suites.demo-ops.command: unknown placeholder {{result}}" in msg
    assert "{results}" in msg and "{device}" in msg


def test_placeholder_with_format_spec_is_refused(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["command"] = ["python", "bench.py", "{device!r}"]
    msg, _ = _error(tmp_path, data)
    assert "suites.demo-ops.command" in msg and "no format spec" in msg


def test_unknown_backend_lists_the_valid_ones(tmp_path: Path) -> None:
    data = _data()
    data["pools"]["h200"]["backend"] = "tpu"
    msg, path = _error(tmp_path, data)
    assert f"{path}: pools.h200.backend: unknown backend 'tpu'" in msg
    for name in ("cuda", "musa", "ascend", "rocm", "cpu", "nvidia"):
        assert name in msg


def test_backend_alias_is_canonicalised() -> None:
    data = _data()
    data["pools"]["h200"]["backend"] = "NVIDIA"
    assert parse_config(data).pools["h200"].backend == "cuda"


def test_unknown_format_lists_the_known_ones(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["format"] = "nvbench-json"
    msg, path = _error(tmp_path, data)
    assert f"{path}: suites.demo-ops.format: unknown results format 'nvbench-json'" in msg
    assert "pytest-benchmark" in msg and "zlops-json" in msg


def test_regression_below_potential_is_refused(tmp_path: Path) -> None:
    data = _data()
    data["thresholds"] = {"potential_pct": 5, "regression_pct": 2}
    msg, path = _error(tmp_path, data)
    assert f"{path}: thresholds: " in msg and "regression_pct (2.0) must be >= potential_pct (5.0)" in msg


@pytest.mark.parametrize("schedule", ["0 2 * *", "0 2 * * * *", "every night", "0 2 * * ;rm"])
def test_bad_cron_is_refused(tmp_path: Path, schedule: str) -> None:
    data = _data()
    data["suites"]["demo-ops"]["schedule"] = schedule
    msg, path = _error(tmp_path, data)
    assert f"{path}: suites.demo-ops.schedule: " in msg and "5-field cron" in msg


@pytest.mark.parametrize("schedule", ["@daily", None, "*/30 1-5 * * MON-FRI"])
def test_good_schedules(schedule: str | None) -> None:
    data = _data()
    data["suites"]["demo-ops"]["schedule"] = schedule
    assert parse_config(data).suites["demo-ops"].schedule == schedule


def test_invalid_yaml_gives_the_line(tmp_path: Path) -> None:
    text = "pools:\n  cpu: {backend: cpu, devices: [0]}\nsuites: [unclosed\n  more: x\n"
    msg, path = _error(tmp_path, text)
    assert msg.startswith(f"{path}:3: not valid YAML: the '[' opened here is never closed (")
    assert msg.endswith("at line 4)\n  3 | suites: [unclosed\n    |         ^")


@pytest.mark.parametrize(("text", "line", "shown"), [
    ("pools: {cpu: {backend: cpu}}\nsuites: [a, b\n", 2, "suites: [a, b"),   # PyYAML: line 3 of a 2-line file
    ("home: /x\nslack: {channel: '#perf\n", 2, "slack: {channel: '#perf"),
    ("a: 1\nb:\n  c: 2\n d: 3\n", 4, " d: 3"),                                # no opener: where it was noticed
    ("a: {x: 1 y: 2}\nb: 1\n", 1, "a: {x: 1 y: 2}"),
])
def test_a_yaml_error_is_reported_at_the_line_to_fix_with_its_text(tmp_path: Path, text: str, line: int,
                                                                   shown: str) -> None:
    msg, path = _error(tmp_path, text)
    first, quoted = msg.splitlines()[:2]
    assert first.startswith(f"{path}:{line}: not valid YAML: ")
    assert quoted == f"  {line} | {shown}"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    msg, path = _error(tmp_path, "- a\n- b\n")
    assert msg == f"{path}: expected a mapping at the top level, got a list"


def test_empty_install_argv_is_refused(tmp_path: Path) -> None:
    data = _data()
    data["suites"]["demo-ops"]["install"] = [["pip", "install", "."], []]
    msg, path = _error(tmp_path, data)
    assert f"{path}: suites.demo-ops.install: install[1] must be a non-empty argv list" in msg


@pytest.mark.parametrize(("where", "bad"), [("pools", "bad name"), ("suites", "-leading")])
def test_bad_names(where: str, bad: str) -> None:
    data = _data()
    data[where][bad] = copy.deepcopy(next(iter(data[where].values())))
    with pytest.raises(ConfigError, match=rf"<config>: {where}: name '{bad}' must match"):
        parse_config(data)


def test_duplicate_or_negative_devices(tmp_path: Path) -> None:
    data = _data()
    data["pools"]["h200"]["devices"] = [0, 0]
    assert "pools.h200.devices: " in _error(tmp_path, data)[0]
    data["pools"]["h200"]["devices"] = [-1]
    assert "device indices must be >= 0" in _error(tmp_path, data)[0]


def test_unknown_suite_lookup_lists_configured_ones() -> None:
    cfg = parse_config(_data())
    with pytest.raises(ConfigError, match="unknown suite 'x'; configured suites: demo-ops"):
        cfg.suite("x")


def test_config_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZLOPS_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="ZLOPS_CONFIG is not set"):
        config_from_env()
    monkeypatch.setenv("ZLOPS_CONFIG", str(_write(tmp_path, EXAMPLE)))
    assert isinstance(config_from_env(), Config)


def test_config_is_frozen() -> None:
    cfg = parse_config(_data())
    with pytest.raises(Exception, match="frozen"):
        cfg.suites["demo-ops"].rounds = 7


def _set(path: str, value: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return mutate


#: (change to the example config, the whole line the error must be)
PLAIN_ERRORS = [
    (_set("pools.h200.devices", None),
     "pools.h200.devices: expected a list of device numbers like [0, 1] or 'auto', got nothing (an empty value)"),
    (_set("pools.h200.devices", "all"),
     "pools.h200.devices: expected a list of device numbers like [0, 1] or 'auto', got 'all'"),
    (_set("pools.h200.devices", [0, "x"]), "pools.h200.devices[1]: expected an integer, got 'x'"),
    (_set("pools.h200.devices", [-1]), "pools.h200.devices: device indices must be >= 0, got [-1]"),
    (_set("suites.demo-ops.rounds", None),
     "suites.demo-ops.rounds: expected an integer >= 1 and <= 100000, got nothing (an empty value)"),
    (_set("suites.demo-ops.command", "python bench.py"),
     'suites.demo-ops.command: expected an argv list like ["python", "bench.py", "--out", "{results}"], '
     "got 'python bench.py'"),
    (_set("suites.demo-ops.install", ["pip install ."]),
     "suites.demo-ops.install[0]: expected a list of strings like [\"a\", \"b\"], got 'pip install .'"),
    (_set("suites.demo-ops.system_site_packages", "maybe"),
     "suites.demo-ops.system_site_packages: expected true or false, got 'maybe'"),
    (_set("judge", "fancy"), "judge: expected 'simple' or 'noise', got 'fancy'"),
    (_set("slack", "x"), "slack: expected a mapping of slack settings (see docs/config.md), got 'x'"),
    (_set("pools", None),
     "pools: expected a mapping of names to pool settings (see docs/config.md), got nothing (an empty value)"),
    (_set("thresholds", {"potential_pct": -1}), "thresholds.potential_pct: expected a number > 0 and <= 100, got -1"),
    (_set("suites.demo-ops.env", {"CUDA_HOME": 1}), "suites.demo-ops.env.CUDA_HOME: expected a string, got 1"),
    (_set("suites.demo-ops.branch", "bad branch"),
     "suites.demo-ops.branch: expected a branch name like main or release/1.2 (letters, digits, '.', '_', '/', '-'), "
     "got 'bad branch'"),
    (_set("noise", {"alpha": 2}), "noise.alpha: expected a number > 0 and < 1, got 2"),
]


@pytest.mark.parametrize(("mutate", "line"), PLAIN_ERRORS, ids=[line.split(":")[0] + str(i)
                                                                for i, (_, line) in enumerate(PLAIN_ERRORS)])
def test_type_errors_read_as_plain_sentences(tmp_path: Path, mutate: Any, line: str) -> None:
    data = _data()
    mutate(data)
    msg, path = _error(tmp_path, data)
    assert msg == f"{path}: {line}"


def test_no_pydantic_internals_leak_from_any_wrong_value(tmp_path: Path) -> None:
    leaks = ("list[int]", "literal[", "NoneType", "Input should", "valid dictionary", "function-after", "str_type")
    for mutate, _ in PLAIN_ERRORS:
        data = _data()
        mutate(data)
        msg = _error(tmp_path, data)[0]
        assert not any(leak in msg for leak in leaks), msg


def test_an_empty_file_says_so(tmp_path: Path) -> None:
    msg, path = _error(tmp_path, "")
    assert msg == f"{path}: the file is empty: expected a mapping with at least pools and suites (see docs/config.md)"


def test_config_check_prints_the_sentences_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zlops.cli import main

    data = _data()
    data["pools"]["h200"]["devices"] = None
    data["judge"] = "fancy"
    path = _write(tmp_path, data)
    assert main(["--plain", "config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: pools.h200.devices: expected a list of device numbers like [0, 1] or 'auto'" in err
    assert f"{path}: judge: expected 'simple' or 'noise', got 'fancy'" in err
