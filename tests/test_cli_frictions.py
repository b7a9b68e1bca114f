"""Frictions a newcomer met on the CLI (issue 23), each pinned: the config found without --config,
usage errors exit 2 with the one SHA rule, a dead database reported in seconds by read-only commands,
and invalid nights shown as invalid."""

from __future__ import annotations

import re
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from zlops.cli import main
from zlops.config.path import find_config
from zlops.errors import ConfigError
from zlops.host import gitops
from zlops.model import RunRecord, RunStatus, ShardOutcome, ShardStatus


def _config_data(tmp_path: Path, **extra: object) -> dict[str, object]:
    return {"home": str(tmp_path / "home"), "pools": {"cpu-local": {"backend": "cpu", "devices": [0]}},
            "suites": {"demo-ops": {"repo": str(tmp_path / "up"), "command": ["python", "bench.py", "{results}"],
                                    "format": "zlops-json", "pools": ["cpu-local"]}}, **extra}


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current folder and home, no $ZLOPS_CONFIG."""
    cwd, home = tmp_path / "cwd", tmp_path / "home-dir"
    cwd.mkdir()
    home.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ZLOPS_CONFIG", raising=False)
    return cwd


# -- the config found without --config ----------------------------------------------------------------

@pytest.mark.parametrize("where", ["zlops.yaml", "zlops-demo/zlops.yaml", "HOME/.zlops/zlops.yaml"])
def test_the_readme_lines_work_without_config(where: str, nowhere: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path.home() / where.removeprefix("HOME/") if where.startswith("HOME/") else nowhere / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(_config_data(nowhere)))
    assert main(["--plain", "alert", "list"]) == 0  # README: `zlops alert list`, then `zlops alert ack ID ...`
    out, err = capsys.readouterr()
    assert "no open alerts" in out
    assert f"zlops: config {path} (found without --config or $ZLOPS_CONFIG)" in err


def test_the_search_order(tmp_path: Path) -> None:
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    for p in (cwd / "zlops.yaml", cwd / "zlops-demo" / "zlops.yaml", home / ".zlops" / "zlops.yaml"):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{}")
    env = {"ZLOPS_CONFIG": "/etc/z.yaml"}
    assert find_config("given.yaml", environ=env, cwd=cwd, home=home).path == Path("given.yaml")
    assert find_config(None, environ=env, cwd=cwd, home=home).path == Path("/etc/z.yaml")
    assert find_config(None, environ={}, cwd=cwd, home=home).path == cwd / "zlops.yaml"
    (cwd / "zlops.yaml").unlink()
    assert find_config(None, environ={}, cwd=cwd, home=home).path == cwd / "zlops-demo" / "zlops.yaml"
    (cwd / "zlops-demo" / "zlops.yaml").unlink()
    found = find_config(None, environ={"ZLOPS_CONFIG": ""}, cwd=cwd, home=home)
    assert found.path == home / ".zlops" / "zlops.yaml" and found.searched


def test_no_config_anywhere_says_where_it_looked(nowhere: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--plain", "alert", "ack", "3", "--note", "bisecting"]) == 2
    err = capsys.readouterr().err
    assert "no config found: pass --config PATH or set ZLOPS_CONFIG" in err
    assert "./zlops.yaml, ./zlops-demo/zlops.yaml, ~/.zlops/zlops.yaml" in err and str(nowhere) in err


# -- usage errors exit 2, and the SHA rule is the trigger form's ---------------------------------------

@pytest.mark.parametrize("argv", [
    ["nightly", "--sha", "xyz"],
    ["nightly", "--suite", "demo-ops", "--sha", "abc12"],      # 5 hex digits: accepted before, the form says 7-64
    ["nightly", "--suite", "demo-ops", "--sha", "ABCDEF1"],    # upper case: the form refuses it
    ["nightly", "--suite", "demo-ops", "--run-id", "a b"],
    ["runs", "--limit", "0"],
    ["alert", "list", "--limit", "-1"],
    ["demo", "--workers", "-1"],
    ["telemetry", "--backend", "cpu", "--duration-s", "-1"],         # 0 is fine: sample once
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert f"usage: zlops {argv[0]}" in capsys.readouterr().err


def test_an_unknown_backend_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "--backend", "nosuch"]) == 2
    assert "unknown backend 'nosuch'" in capsys.readouterr().err


def test_the_cli_and_the_trigger_form_share_one_sha_rule(capsys: pytest.CaptureFixture[str]) -> None:
    from zlops.airflow.params import PARAMS, SHA_PATTERN
    from zlops.forge.prcompare import validate_ref

    assert SHA_PATTERN == gitops.COMMIT_SHA_PATTERN
    assert gitops.COMMIT_SHA_ACCEPTS in PARAMS["sha"].accepts
    for sha in ["abc1234", "a" * 40, "b" * 64, "abc123", "ABC1234", "g" * 7, "a" * 65, " abc1234", "abc 1234"]:
        form = re.match(SHA_PATTERN, sha) is not None
        try:
            gitops.check_commit_sha(sha)
            cli = True
        except ConfigError:
            cli = False
        assert cli == form == gitops.looks_like_sha(sha), sha
        if form:
            assert validate_ref(sha) == sha
    assert not gitops.looks_like_sha("abc1234\n")  # a regex's `$` takes a trailing newline; the rule does not
    with pytest.raises(SystemExit):
        main(["nightly", "--sha", "abc123"])
    assert gitops.COMMIT_SHA_ACCEPTS in capsys.readouterr().err


# -- a dead database is reported in seconds by read-only commands ---------------------------------------

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("argv", [["runs"], ["alert", "list"]])
def test_a_dead_database_is_reported_in_seconds(argv: list[str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql+psycopg://zlops:s3cret@127.0.0.1:{_closed_port()}/zlops"
    cfg = tmp_path / "zlops.yaml"
    cfg.write_text(yaml.safe_dump(_config_data(tmp_path, database=url)))  # database_retry_s: its default 60
    started = time.monotonic()
    assert main(["--plain", *argv, "--config", str(cfg)]) == 1
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert f"zlops: database unreachable: {url.replace('s3cret', '***')}: connection refused" in err
    assert "s3cret" not in err
    assert took < 20, f"{took:.1f} s: read-only commands must not retry for database_retry_s (66 s before)"


# -- invalid nights show as invalid ---------------------------------------------------------------------

def test_a_night_the_contention_gate_made_invalid_shows_as_invalid(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from zlops.config.settings import load_config
    from zlops.steps.context import open_store

    cfg = tmp_path / "zlops.yaml"
    cfg.write_text(yaml.safe_dump(_config_data(tmp_path)))
    store = open_store(load_config(cfg))
    nights = [("n1", RunStatus.DONE, [ShardStatus.OK]), ("n2", RunStatus.FAILED, [ShardStatus.INVALID] * 2),
              ("n3", RunStatus.FAILED, [ShardStatus.INVALID, ShardStatus.FAILED]), ("n4", RunStatus.FAILED, [])]
    for i, (label, status, shards) in enumerate(nights):
        key = f"nightly:demo-ops:{label}"
        store.upsert_run(RunRecord(key, "nightly", "demo-ops", str(i) * 40, "main", status=status,
                                   started_at=datetime(2026, 11, 1, i, tzinfo=UTC)))
        for device, shard in enumerate(shards):
            store.record_shard(key, ShardOutcome(pool="cpu-local", device=device, backend="cpu", status=shard,
                                                 artifact_dir=tmp_path, exit_code=None, started_at=None,
                                                 ended_at=None))
    assert main(["--plain", "runs", "--config", str(cfg)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(r[-1].rsplit(":", 1)[1], r[1]) for r in rows] == [("n4", "failed"), ("n3", "failed"), ("n2", "invalid"),
                                                               ("n1", "done")]
