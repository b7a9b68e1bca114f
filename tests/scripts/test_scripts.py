"""The set-up scripts a newcomer runs first (issue 15): they say where zlops went and how to put it on
PATH, and scripts/airflow-stop.sh stops a standalone's whole process tree, orphan-prone parts included."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _fake_checkout(tmp_path: Path) -> Path:
    """A copy of scripts/ with a .venv whose python, uv and zlops only record that they ran."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "scripts", root / "scripts")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "uv", "zlops"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{root}/ran.log"\n')
        (bin_dir / name).chmod(0o755)
    return root


@pytest.mark.parametrize("script", ["demo.sh", "test.sh", "bootstrap.sh"])
def test_scripts_end_by_saying_where_zlops_is_and_how_to_activate_it(tmp_path: Path, script: str) -> None:
    root = _fake_checkout(tmp_path)
    done = subprocess.run(["bash", str(root / "scripts" / script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    bin_dir = (root / ".venv" / "bin").resolve()
    assert f"zlops is installed in {bin_dir} (not on your PATH yet)" in lines[-2]
    assert lines[-1].strip().startswith(f". {bin_dir}/activate")
    assert done.stdout.count("zlops is installed in") == 1  # once, at the very end
    ran = (root / "ran.log").read_text()
    assert ("zlops demo" in ran) == (script == "demo.sh") and ("python -m pytest" in ran) == (script == "test.sh")


def test_the_hint_is_printed_even_when_the_demo_fails(tmp_path: Path) -> None:
    root = _fake_checkout(tmp_path)
    (root / ".venv" / "bin" / "zlops").write_text("#!/bin/sh\nexit 3\n")
    done = subprocess.run(["bash", str(root / "scripts" / "demo.sh")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "zlops is installed in" in done.stdout


def test_readme_says_how_to_get_zlops_on_path() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## The two commands"):readme.index("### What the demo shows")]
    assert ". .venv/bin/activate" in quick


TREE = r"""
import os, signal, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
# a task runner in a process group of its own, with a child (as Airflow's supervisor makes them)
subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time; os.setpgid(0, 0); "
                  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"])
# a component that ignores SIGTERM
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "time.sleep(600)"])
print("ready", flush=True)
time.sleep(600)
"""


def _descendants(pid: int) -> set[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    found = {int(p) for p in out}
    for child in list(found):
        found |= _descendants(child)
    return found


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="pgrep (procps) is not installed")
@pytest.mark.slow  # a real process tree, one child that ignores SIGTERM until the script's 2 s grace (~4 s)
def test_airflow_stop_ends_the_whole_tree(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the grandchild is started
        tree = {parent.pid} | _descendants(parent.pid)
        assert len(tree) == 7
        (tmp_path / "standalone.pid").write_text(f"{parent.pid}\n")
        done = subprocess.run(["bash", str(REPO / "scripts" / "airflow-stop.sh")], capture_output=True, text=True,
                              timeout=60, env={**os.environ, "AIRFLOW_HOME": str(tmp_path),
                                               "AIRFLOW_STOP_WAIT_S": "2"})
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"stopping airflow standalone {parent.pid} and 6 processes under it" in done.stdout
        assert "sending SIGKILL" in done.stdout  # the one that ignored SIGTERM
        parent.wait(timeout=10)
        time.sleep(0.2)
        left = [p for p in tree if Path(f"/proc/{p}").exists() and
                Path(f"/proc/{p}/stat").read_text().split(") ")[1][0] != "Z"]
        assert left == []
        assert not (tmp_path / "standalone.pid").exists()
    finally:
        for p in {parent.pid} | _descendants(parent.pid):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_airflow_stop_refuses_a_pid_that_is_not_a_number(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(REPO / "scripts" / "airflow-stop.sh"), "1;true"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 1 and "not a pid" in done.stderr


def test_bootstrap_writes_the_byte_code_once_and_then_only_checks_it(tmp_path: Path) -> None:
    """scripts/compile_bytecode.py (run by bootstrap.sh) re-imports nothing while every .pyc it wrote is fresh."""
    import importlib.util
    import py_compile

    spec = importlib.util.spec_from_file_location("compile_bytecode", REPO / "scripts" / "compile_bytecode.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    source = tmp_path / "mod.py"
    source.write_text("X = 1\n")
    listing = tmp_path / "zlops-bytecode.txt"
    assert script._fresh(listing) is None  # no last run
    listing.write_text(f"{source}\n")
    assert script._fresh(listing) is None  # no .pyc yet
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)))
    assert script._fresh(listing) == 1
    later = os.stat(importlib.util.cache_from_source(str(source))).st_mtime + 5
    os.utime(source, (later, later))  # the source changed after its .pyc was written
    assert script._fresh(listing) is None
    assert "compile_bytecode.py" in (REPO / "scripts" / "bootstrap.sh").read_text()
