"""proc.spawn: a started program in its own group, output to files, stopped as a group, same env rules."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from zlops.errors import ProcessError
from zlops.host import proc

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(path: Path, text: str, within_s: float = 10.0) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never appeared in {path}")


def test_stop_kills_the_whole_group_and_keeps_the_output(tmp_path: Path) -> None:
    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print('child', child.pid, flush=True)\n"
            "print('to stderr', file=sys.stderr, flush=True)\n"
            "time.sleep(60)\n")
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    spawned = proc.spawn([PY, "-c", code], stdout_path=out, stderr_path=err)
    text = _wait_for(out, "child ")
    grandchild = int(text.split()[1])
    assert spawned.returncode is None and _alive(spawned.pid) and _alive(grandchild)
    code_after = spawned.stop(grace_s=1.0)
    assert code_after == -15 and spawned.returncode == -15
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    assert _wait_for(err, "to stderr") == "to stderr\n"
    assert spawned.stop() == -15  # idempotent


def test_a_program_that_ends_by_itself_reports_its_code(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("stale output of an earlier run\n")
    spawned = proc.spawn([PY, "-c", "import sys; print('bye'); print('oops', file=sys.stderr); sys.exit(6)"],
                         stdout_path=out)
    deadline = time.monotonic() + 10
    while spawned.returncode is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert spawned.returncode == 6
    assert spawned.stop() == 6
    assert sorted(out.read_text().splitlines()) == ["bye", "oops"]  # truncated; stderr joins stdout by default


def test_spawn_uses_the_filtered_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    out = tmp_path / "env.json"
    spawned = proc.spawn([PY, "-c", "import json, os; print(json.dumps(dict(os.environ)))"], stdout_path=out,
                         cwd=tmp_path)
    env = json.loads(_wait_for(out, "}"))
    spawned.stop()
    assert "SLACK_BOT_TOKEN" not in env and "CUDA_VISIBLE_DEVICES" not in env and env["PYTHONUNBUFFERED"] == "1"


def test_a_program_that_cannot_start_raises_process_error(tmp_path: Path) -> None:
    with pytest.raises(ProcessError, match="program not found: zlops-no-such-tool"):
        proc.spawn(["zlops-no-such-tool", "-x"], stdout_path=tmp_path / "o")
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(ProcessError, match="cannot start"):
        proc.spawn([str(script)])
    with pytest.raises(TypeError, match="never a shell string"):
        proc.spawn("sleep 1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty argv"):
        proc.spawn([])
