"""``zlops forge serve`` as a person starts it: the real command in a subprocess, on a host without Airflow.

The venv has Airflow installed, so "without Airflow" is made honest: the subprocess gets a ``sitecustomize`` on
its PYTHONPATH that makes every ``import airflow...`` fail as it fails where Airflow is not installed
(ModuleNotFoundError). :class:`ServeProcess` starts the command, waits for it to answer, and keeps its log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from fake_forge import free_port

BLOCK = '''
import sys

BLOCKED = {blocked!r}


class _NotInstalled:
    """These packages are not installed here (a test's stand-in for a host without them)."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
'''


def blocking_path(folder: Path, blocked: tuple[str, ...] = ("airflow",)) -> Path:
    """A folder whose ``sitecustomize`` makes ``blocked`` packages fail to import, for PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(BLOCK.format(blocked=tuple(blocked)))
    return folder


class ServeProcess:
    """``python -m zlops forge serve --config CONFIG --port P [args]`` with ``env`` added, ``blocked`` packages
    (Airflow) not importable."""

    def __init__(self, config: Path, tmp: Path, env: dict[str, str], *args: str, timeout: float = 60,
                 blocked: tuple[str, ...] = ("airflow",)) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / f"serve-{self.port}.log"
        blocker = blocking_path(tmp / ("no-" + "-".join(blocked)), blocked)
        environ = {**os.environ, **env, "PYTHONPATH": str(blocker)}
        self._log = open(self.log_path, "w")  # closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zlops", "forge", "serve", "--config", str(config), "--port", str(self.port),
             *args], stdout=self._log, stderr=subprocess.STDOUT, env=environ, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                log = self.log()
                self._log.close()
                raise RuntimeError(f"zlops forge serve exited {self.proc.returncode}:\n{log}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    log = self.log()
                    self.close()
                    raise RuntimeError(f"zlops forge serve did not answer within {timeout} s:\n{log}") from None
                time.sleep(0.1)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def wait_for(self, text: str, timeout: float = 60, *, times: int = 1) -> str:
        """The log once ``text`` appears in it (``times`` times)."""
        deadline = time.monotonic() + timeout
        while (log := self.log()).count(text) < times:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{text!r} not in the log of zlops forge serve:\n{log}")
            time.sleep(0.1)
        return log

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
