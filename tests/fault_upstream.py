"""A fake upstream for fault tests: a slow benchmark that detects double booking by itself.

Every benchmark process takes a non-blocking ``flock`` on ``$FAULT_PROBE/<device>.probe`` for its
whole life. The kernel releases it when the process dies, so finding it taken means another
benchmark is on the same device *right now*: the process appends that to ``overlaps.log``. This
detector is independent of zlops' own leases, so it catches zlops' bugs. ``events.log`` gets
``start``/``end`` lines (pid, device, time); ``$FAULT_SLEEP_S`` is how long a benchmark runs;
``$FAULT_GPU`` makes it run matmuls on its GPU for that long instead (torch);
``$FAULT_MODE`` (or ``$FAULT_MODE_<device>``) makes it misbehave: ``fifo`` (results and identity
are FIFOs), ``symlink`` (results link to a file outside the shard folder), ``big`` (a results file
of ``$FAULT_BIG_BYTES``), ``crash``, ``detach`` (leaves a daemonized worker, double fork + setsid,
holding every fd it inherited for ``$FAULT_DETACH_S``, default 60 s; its pid in ``detached.pid``),
``fill`` (fills the disk under its working directory, the worktree, then exits 1).

Used by tests/faults/ and by benchmarks/fault_scenarios/ (same helper, same detector).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from fake_upstream import Upstream, config_data

REPO = Path(__file__).resolve().parents[1]

BENCH = r'''
import argparse, fcntl, json, os, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--out"); ap.add_argument("--device"); ap.add_argument("--rounds", type=int)
ap.add_argument("--variant", default="default")
a = ap.parse_args()
probe_dir = os.environ["FAULT_PROBE"]
def event(kind):
    with open(os.path.join(probe_dir, "events.log"), "a") as fh:
        fh.write(f"{kind} {os.getpid()} {a.device} {time.time():.3f}\n")
probe = open(os.path.join(probe_dir, f"{a.device}.probe"), "a")
try:
    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    with open(os.path.join(probe_dir, "overlaps.log"), "a") as fh:
        fh.write(f"overlap {os.getpid()} {a.device} {time.time():.3f}\n")
event("start")
mode = os.environ.get(f"FAULT_MODE_{a.device}") or os.environ.get("FAULT_MODE", "")
busy_s = float(os.environ.get("FAULT_SLEEP_S", "0"))
if os.environ.get("FAULT_GPU"):  # keep the (pinned) GPU busy instead of sleeping
    import torch
    x = torch.randn(4096, 4096, device="cuda")
    end = time.time() + busy_s
    while time.time() < end:
        y = x @ x
        torch.cuda.synchronize()
else:
    time.sleep(busy_s)
if mode == "crash":
    event("end"); sys.exit(3)
if mode == "detach":  # a daemonized worker (double fork, setsid) outlives the benchmark with its fds
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for n in (0, 1, 2):
                os.dup2(null, n)
            with open(os.path.join(probe_dir, "detached.pid"), "w") as fh:
                fh.write(str(os.getpid()))
            time.sleep(float(os.environ.get("FAULT_DETACH_S", "60")))
            os._exit(0)
        os._exit(0)
    os.wait()
    while not os.path.exists(os.path.join(probe_dir, "detached.pid")):
        time.sleep(0.01)
if mode == "fill":  # fill the disk under the working directory (the worktree) until it is full, then fail
    try:
        with open("filler.bin", "wb") as fh:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
    except OSError as exc:
        print(f"fill: {exc}", file=sys.stderr)
    event("end"); sys.exit(1)
if mode == "fifo":
    os.mkfifo(a.out)
    os.mkfifo(os.path.join(os.path.dirname(a.out), "run_identity.json"))
    event("end"); sys.exit(0)
if mode == "symlink":
    outside = os.path.join(probe_dir, "outside.json")
    json.dump({"schema_version": 1, "cases": [{"name": "leak", "metric": "time", "unit": "ms", "samples": [1]}]},
              open(outside, "w"))
    os.symlink(outside, a.out)
    event("end"); sys.exit(0)
t = json.load(open("timings.json"))
cases = [{"name": k, "metric": "time", "unit": "ms", "samples": [v] * a.rounds} for k, v in sorted(t.items())]
doc = {"schema_version": 1, "cases": cases}
if mode == "big":
    doc["context"] = {"padding": "x" * int(os.environ.get("FAULT_BIG_BYTES", "100000"))}
json.dump(doc, open(a.out, "w"))
event("end")
'''

TIMINGS = {"alpha": 1.0, "beta": 2.0, "gamma": 3.0}


def make_upstream(path: Path, timings: Mapping[str, float] = TIMINGS) -> tuple[Upstream, str]:
    """The fault upstream at ``path`` and its one commit."""
    up = Upstream(path)
    (up.path / "bench.py").write_text(BENCH)
    return up, up.commit(timings, "fault bench")


def fault_config(home: Path, upstream: Path, probe: Path, *, devices: Sequence[int] = (0,), sleep_s: float = 0,
                 device_wait_s: float = 60, env: Mapping[str, str] | None = None, database: str | None = None,
                 **extra: Any) -> dict[str, Any]:
    """A config dict for the fault upstream: the probe folder and the sleep reach the benchmark
    through the suite's env. The device leases' folder is the default (host-wide) unless given."""
    probe.mkdir(parents=True, exist_ok=True)
    data = config_data(home, upstream, devices=tuple(devices), database=database)
    suite = data["suites"]["fake"]  # type: ignore[index]
    suite["env"] = {"FAULT_PROBE": str(probe), "FAULT_SLEEP_S": str(sleep_s), **(env or {})}
    data["device_wait_s"] = device_wait_s
    data.update(extra)
    return data


def write_config(path: Path, data: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(data)))
    return path


def start_nightly(config: Path, run_id: str, *, log: Path, extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """``zlops nightly`` as a real subprocess (its own process, as on a host), output to ``log``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
           "PYTHONFAULTHANDLER": "1"}   # a hung zlops sent SIGABRT writes every thread's stack into the log
    with log.open("ab") as fh:
        return subprocess.Popen([sys.executable, "-m", "zlops.cli", "--plain", "nightly", "--config", str(config),
                                 "--suite", "fake", "--run-id", run_id, *extra], stdout=fh, stderr=subprocess.STDOUT,
                                env=env, cwd=str(REPO), preexec_fn=_sigint_default)


def _sigint_default() -> None:
    """zlops as a terminal starts it: SIGINT not ignored. A test run launched in the background by a
    non-interactive shell (`cmd &`) inherits SIGINT ignored, and so would every zlops it starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def events(probe: Path) -> list[tuple[str, int, str, float]]:
    path = probe / "events.log"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        kind, pid, device, t = line.split()
        out.append((kind, int(pid), device, float(t)))
    return out


def overlaps(probe: Path) -> list[str]:
    """Every moment a benchmark found another one on its device (double booking)."""
    path = probe / "overlaps.log"
    return path.read_text().splitlines() if path.exists() else []


def wait_started(probe: Path, count: int = 1, timeout_s: float = 120, proc: subprocess.Popen[bytes] | None = None,
                 log: Path | None = None) -> list[int]:
    """Wait until ``count`` benchmarks have started; their pids."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = [pid for kind, pid, _, _ in events(probe) if kind == "start"]
        if len(pids) >= count:
            return pids
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
            raise AssertionError(f"zlops exited {proc.returncode} before its benchmark started:\n{tail}")
        time.sleep(0.05)
    raise AssertionError(f"no benchmark started within {timeout_s} s")


def alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie holds no files)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_gone(pid: int, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def kill_quietly(pid: int) -> None:
    """End a leftover process group at the end of a test (never a broad kill)."""
    for fn in (os.killpg, os.kill):
        try:
            fn(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_status(config_path: Path, run_key: str) -> str | None:
    from zlops.config.settings import load_config
    from zlops.steps.context import open_store

    run = open_store(load_config(config_path)).get_run(run_key)
    return None if run is None else run.status.value


def manifest_of(home: Path, run_key: str, pool: str = "local", device: int = 0) -> dict[str, Any]:
    from zlops.steps.context import slug

    path = home / "artifacts" / "fake" / slug(run_key) / pool / str(device) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}
