"""The run always ends in a final state: a full disk under one shard fails that shard only, and a
step that raises marks the run failed before the error reaches the user (without a traceback)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from fake_upstream import Upstream, config_data

from zlops.cli import app as cli
from zlops.config.settings import parse_config
from zlops.model import RunStatus, ShardStatus
from zlops.steps import nightly
from zlops.steps.context import RunContext, open_store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _full_tmpfs(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the disk-full night mounts a small tmpfs, which needs root (mount -t tmpfs)")
    path.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        with (path / "filler").open("wb") as fh:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
    except OSError:
        pass


def test_a_full_disk_under_one_shard_fails_that_shard_and_the_night_goes_on(tmp_path: Path) -> None:
    up = Upstream(tmp_path / "up")
    sha = up.commit({"alpha": 1.0, "beta": 2.0})
    config = parse_config(config_data(tmp_path / "home", up.path, devices=(0, 1)), source="t.yaml")
    ctx = RunContext(config, "fake", "nightly:fake:full", sha)
    shard1 = ctx.shard_dir("local", 1)
    _full_tmpfs(shard1)
    try:
        result = nightly.run_nightly(config, "fake", sha=sha, run_label="full")
    finally:
        subprocess.run(["umount", "-l", str(shard1)], check=False)
    by_device = {s.device: s for s in result.shards}
    assert by_device[0].status is ShardStatus.OK
    assert by_device[1].status is ShardStatus.FAILED
    assert by_device[1].error is not None and by_device[1].error.startswith(f"no space left under {shard1}")
    run = open_store(config).get_run(result.run_key)
    # done (judged with what was measured), but half the pool failed: never a baseline (zlops.judge.promotion)
    assert run is not None and run.status is RunStatus.DONE and not run.accepted
    assert "1 of 2 shards of pool local ended OK" in run.meta["promotion"]["reason"]
    assert {c.case for c in result.summary.comparisons} == {"alpha", "beta"}


def test_a_step_that_raises_marks_the_run_failed_and_the_cli_prints_no_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    up = Upstream(tmp_path / "up")
    up.commit({"alpha": 1.0})
    data = config_data(tmp_path / "home", up.path)
    cfg = tmp_path / "zlops.yaml"
    cfg.write_text(yaml.safe_dump(data))

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "home" / "artifacts" / "report.txt"))

    monkeypatch.setattr(nightly, "report", no_space)
    assert cli.main(["--plain", "nightly", "--config", str(cfg), "--run-id", "r1"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "zlops: No space left on device: " in err and "report.txt" in err and "Traceback" not in err
    run = open_store(parse_config(data, source="t.yaml")).get_run("nightly:fake:r1")
    assert run is not None and run.status is RunStatus.FAILED and run.finished_at is not None
    assert "No space left" in run.meta["failed"]["reason"]
    assert not any((tmp_path / "home" / "worktrees" / "fake").iterdir())  # cleaned up all the same


def test_an_os_error_without_a_path_names_the_operation_and_step_and_vv_shows_the_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bare "zlops: Invalid argument" (seen with a faked clock) said nothing of where: the line names
    the operation that raised and the step it ran in, and -vv prints the traceback."""
    up = Upstream(tmp_path / "up")
    up.commit({"alpha": 1.0})
    data = config_data(tmp_path / "home", up.path)
    cfg = tmp_path / "zlops.yaml"
    cfg.write_text(yaml.safe_dump(data))

    def clock_call() -> None:  # what a faked clock made clock_nanosleep answer
        raise OSError(errno.EINVAL, "Invalid argument")

    def clock_gone(*args: object, **kwargs: object) -> object:
        with kwargs["progress"].step("compare", suite="fake"):  # type: ignore[union-attr]
            clock_call()
        raise AssertionError("unreachable")

    monkeypatch.setattr(nightly, "compare", clock_gone)
    assert cli.main(["--plain", "nightly", "--config", str(cfg), "--run-id", "r1"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("zlops: "))
    assert line.startswith("zlops: Invalid argument (EINVAL) in clock_call() at test_night_final_state.py:"), line
    assert "called from _night() at zlops/steps/nightly.py:" in line
    assert "(step compare [suite=fake])" in line and "-vv shows the traceback" in line and "Traceback" not in err
    run = open_store(parse_config(data, source="t.yaml")).get_run("nightly:fake:r1")
    assert run is not None and run.status is RunStatus.FAILED and "Invalid argument" in run.meta["failed"]["reason"]

    assert cli.main(["--plain", "-vv", "nightly", "--config", str(cfg), "--run-id", "r2"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "OSError: [Errno 22] Invalid argument" in err
