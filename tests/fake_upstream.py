"""A deterministic fake upstream for pipeline tests.

Its bench.py does not time anything: it writes zlops JSON whose samples come from ``timings.json``
in the repository, so each commit's "performance" is exactly what the test wrote, and verdicts are
deterministic. ``behaviour.json`` makes a device crash, hang, write a malformed file or fail its last case (exit 1 after writing
the others: ``partial``) on demand.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

BENCH = r'''
import argparse, json, os, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--out"); ap.add_argument("--device"); ap.add_argument("--rounds", type=int)
ap.add_argument("--variant", default="default")
a = ap.parse_args()
import fakeops  # proves the worktree's own package is installed in the venv
beh = json.load(open("behaviour.json")) if os.path.exists("behaviour.json") else {}
mode = beh.get(str(a.device))
print("fake bench on device", a.device, "visible", os.environ.get("CUDA_VISIBLE_DEVICES"), "mode", mode, flush=True)
if mode == "crash":
    print("simulated crash", file=sys.stderr); sys.exit(3)
if mode == "hang":
    time.sleep(600)
if mode == "malformed":
    open(a.out, "w").write('{"schema_version": 1,\n "cases": [\n  {"name": "x", "metric": "time", "unit": "ms", "samples": ["fast"]}\n ]}\n')
    sys.exit(0)
t = json.load(open("timings.json"))
if a.variant != "default":  # a second runtime: the same cases, 3x the time
    t = {k: v * 3 for k, v in t.items()}
factor = float(os.environ.get("FAKE_DEVICE_FACTOR", "1"))  # another device: every case at its own level
t = {k: v * factor for k, v in t.items()}
once = os.environ.get("FAKE_SLOW_ONCE")  # a one-off slow run that does not reproduce (machine noise)
if once and os.path.exists(once):
    os.unlink(once)
    t = {k: v * 1.10 for k, v in t.items()}
cases = [{"name": k, "metric": "time", "unit": "ms", "samples": [v * (1 + 0.001 * (i % 3 - 1)) for i in range(a.rounds)]}
         for k, v in sorted(t.items())]
if mode == "partial":  # the last case failed (as pytest exits 1 on a failed test): the others are written
    cases = cases[:-1]
json.dump({"schema_version": 1, "harness": {"name": "fake", "version": fakeops.VERSION}, "cases": cases}, open(a.out, "w"))
if mode == "partial":
    print("1 failed, %d passed" % len(cases), flush=True); sys.exit(1)
'''

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "fakeops"
version = "0.0.1"

[tool.setuptools]
py-modules = ["fakeops"]
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout.strip()


class Upstream:
    """A real git repository whose commits set exact timings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "--initial-branch=main", str(path)], check=True, env=GIT_ENV)
        (path / "bench.py").write_text(BENCH)
        (path / "pyproject.toml").write_text(PYPROJECT)
        (path / "fakeops.py").write_text('VERSION = "1"\n')

    def commit(self, timings: Mapping[str, float], message: str = "change",
               behaviour: Mapping[str, str] | None = None) -> str:
        (self.path / "timings.json").write_text(json.dumps(dict(timings)))
        beh = self.path / "behaviour.json"
        if behaviour:
            beh.write_text(json.dumps(dict(behaviour)))
        elif beh.exists():
            beh.unlink()
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")

    def branch(self, name: str, at: str) -> None:
        git(self.path, "branch", name, at)

    def checkout(self, name: str) -> None:
        git(self.path, "checkout", "-q", name)


def config_data(home: Path, upstream: Path, *, devices: tuple[int, ...] = (0,), backend: str = "cpu",
                database: str | None = None, timeout_s: float = 120,
                contention_gate: bool = False, partial_exit_codes: list[int] | None = None) -> dict[str, object]:
    """The fake upstream's config. The host contention gate is off unless ``contention_gate``: the
    fake benchmark writes scripted numbers, and how busy the CI machine is (other jobs share it) is
    not what these tests judge; the gate's own tests turn it on (tests/test_contention.py)."""
    data: dict[str, object] = {
        "home": str(home),
        "pools": {"local": {"backend": backend, "devices": list(devices)}},
        "suites": {"fake": {
            "repo": str(upstream), "branch": "main",
            "install": [["pip", "install", "-e", "."]],
            "command": ["python", "bench.py", "--out", "{results}", "--device", "{device}", "--rounds", "{rounds}"],
            "format": "zlops-json", "pools": ["local"], "rounds": 5, "timeout_s": timeout_s,
        }},
        "thresholds": {"potential_pct": 2, "regression_pct": 5},
        "judge": "simple",  # the deterministic 2%/5% classes; tests of the noise judge switch it on
        "device_wait_s": 5,
        "contention": {"gate": contention_gate},
    }
    if database:
        data["database"] = database
    if partial_exit_codes:
        data["suites"]["fake"]["partial_exit_codes"] = partial_exit_codes  # type: ignore[index]
    return data
