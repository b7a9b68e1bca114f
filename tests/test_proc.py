"""The subprocess gateway: argv only, group kill on timeout, filtered environment, useful errors."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from zlops.errors import ProcessError
from zlops.host import proc

PY = sys.executable


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie nobody reaps is already dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_dead(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def _env_of_child(env: dict[str, str] | None = None) -> dict[str, str]:
    done = proc.run([PY, "-c", "import json, os; print(json.dumps(dict(os.environ)))"], env=env)
    result: dict[str, str] = json.loads(done.stdout)
    return result


def _spawn_grandchild_script(pidfile: Path) -> str:
    grandchild = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    return (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
            "time.sleep(120)")


def _read_pid(pidfile: Path) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        text = pidfile.read_text() if pidfile.exists() else ""
        if text:
            return int(text)
        time.sleep(0.05)
    raise AssertionError("the grandchild never wrote its pid")


def test_timeout_kills_the_grandchild_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    start = time.monotonic()
    with pytest.raises(ProcessError) as ei:
        proc.run([PY, "-c", _spawn_grandchild_script(pidfile)], timeout=1.5)
    assert time.monotonic() - start < 15
    err = ei.value
    assert err.timed_out and err.returncode is None
    assert "timed out after 1.5 s" in str(err)
    assert _wait_dead(_read_pid(pidfile)), "the grandchild outlived the timeout"


def test_timeout_without_check_returns_timed_out(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    done = proc.run([PY, "-c", _spawn_grandchild_script(pidfile)], timeout=1.0, check=False,
                    log_path=tmp_path / "run.log")
    assert done.timed_out and not done.ok and done.returncode is None
    assert _wait_dead(_read_pid(pidfile))


def test_grandchild_left_behind_by_a_finished_child_is_reaped(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    grandchild = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    script = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
              f"import pathlib; p = pathlib.Path({str(pidfile)!r})\n"
              "while not p.exists() or not p.read_text(): time.sleep(0.02)")
    # with log_path the child's output goes to a file, so the leader's exit ends the wait
    done = proc.run([PY, "-c", script], log_path=tmp_path / "run.log", timeout=30)
    assert done.ok
    assert _wait_dead(_read_pid(pidfile)), "a forked worker outlived its finished leader"


@pytest.mark.parametrize("argv", ["echo hello", b"echo hello", "", Path("/bin/echo")])
def test_a_shell_string_is_refused(argv: object) -> None:
    with pytest.raises(TypeError, match="never a shell string"):
        proc.run(argv)  # type: ignore[arg-type]


def test_empty_argv_is_refused() -> None:
    with pytest.raises(ValueError, match="empty argv"):
        proc.run([])


def test_shell_metacharacters_are_passed_literally(tmp_path: Path) -> None:
    marker = tmp_path / "x"
    args = [f"a;touch {marker}", f"$(touch {marker})", f"`touch {marker}`", "b && touch x | cat > y", "*"]
    done = proc.run([PY, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *args], cwd=tmp_path)
    assert json.loads(done.stdout) == args
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_env_drops_secrets_and_visibility_but_keeps_path_and_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("AIRFLOW_CONN_X", "postgres://u:p@h/db")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("RANDOM_UNLISTED_VAR", "x")
    monkeypatch.setenv("LC_NUMERIC", "C")
    monkeypatch.setenv("HOME", "/home/zlops-test")
    env = _env_of_child()
    for name in ("SLACK_BOT_TOKEN", "AIRFLOW_CONN_X", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES",
                 "DB_PASSWORD", "RANDOM_UNLISTED_VAR"):
        assert name not in env, name
    assert env["PATH"] == os.environ["PATH"]
    assert env["HOME"] == "/home/zlops-test"
    assert env["LC_NUMERIC"] == "C"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_build_env_extra_wins_and_base_is_used() -> None:
    env = proc.build_env({"CUDA_VISIBLE_DEVICES": "1", "X": "y"},
                         base={"PATH": "/p", "UV_TOKEN": "t", "UV_CACHE_DIR": "/c"})
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["X"] == "y"
    assert env["PATH"] == "/p" and env["UV_CACHE_DIR"] == "/c"
    assert "UV_TOKEN" not in env  # the denylist beats the allowlist
    assert proc.build_env(base={})["PATH"] == os.defpath


def test_venv_goes_first_on_path_and_sets_virtual_env(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    tool = venv / "bin" / "zlops-probe-tool"
    tool.write_text("#!/bin/sh\necho from-the-venv \"$VIRTUAL_ENV\"\n")
    tool.chmod(0o755)
    env = proc.build_env(venv=venv, base={"PATH": "/usr/bin:/bin", "PYTHONHOME": "/bad"})
    assert env["PATH"].split(os.pathsep)[0] == str(venv / "bin")
    assert env["VIRTUAL_ENV"] == str(venv)
    assert "PYTHONHOME" not in env
    done = proc.run(["zlops-probe-tool"], env=env)  # found through the child's PATH
    assert done.stdout.strip() == f"from-the-venv {venv}"


def test_log_path_gets_stdout_and_stderr_appended(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "run.log"
    log.parent.mkdir()
    log.write_text("earlier attempt\n")
    script = "import sys; print('to-stdout', flush=True); print('to-stderr', file=sys.stderr, flush=True)"
    done = proc.run([PY, "-c", script], log_path=log)
    text = log.read_text()
    assert text.startswith("earlier attempt\n")
    assert "to-stdout" in text and "to-stderr" in text
    assert "to-stdout" in done.stdout and "to-stderr" in done.stdout and done.stderr == ""


def test_process_error_keeps_argv_exit_code_and_tails() -> None:
    script = "import sys; print('o' * 5000 + 'OUT-END'); print('ERR-END', file=sys.stderr); sys.exit(3)"
    argv = [PY, "-c", script]
    with pytest.raises(ProcessError) as ei:
        proc.run(argv, what="probe")
    err = ei.value
    assert err.argv == argv and err.returncode == 3 and not err.timed_out
    assert err.stdout_tail.rstrip().endswith("OUT-END") and len(err.stdout_tail) <= proc.TAIL_CHARS
    assert "ERR-END" in err.stderr_tail
    assert "probe failed" in str(err) and "exit code: 3" in str(err) and "ERR-END" in str(err)


def test_failure_without_check_returns_the_exit_code() -> None:
    done = proc.run([PY, "-c", "import sys; sys.exit(4)"], check=False)
    assert done.returncode == 4 and not done.ok and not done.timed_out


def test_missing_program_is_a_process_error() -> None:
    with pytest.raises(ProcessError, match="program not found: zlops-no-such-program") as ei:
        proc.run(["zlops-no-such-program", "--version"])
    assert ei.value.returncode is None and ei.value.argv == ["zlops-no-such-program", "--version"]


def test_input_text_reaches_stdin() -> None:
    done = proc.run([PY, "-c", "import sys; print(sys.stdin.read().upper())"], input_text="hello")
    assert done.stdout.strip() == "HELLO"
