"""What a dead zlops left behind, found and settled when the next one starts.

A ``zlops nightly`` killed with SIGKILL (or a host that lost power) leaves its run ``running``, its
benchmark maybe still running as an orphan (it holds the device lease: zlops.host.locks), and its
worktree on disk. At the next start on that host :func:`recover` marks such runs ``interrupted``,
ends their orphan benchmarks (the process group, after checking it is that very process), and
sweeps the worktrees of runs that are no longer running.

A run is judged by its ``owner`` ({host, pid, start}, recorded at fetch by the one process that
runs the whole night). Runs without an owner (Airflow DAG runs, whose steps are separate task
processes; Airflow itself fails their zombie tasks) and runs owned by another host are left alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops.config.settings import Config
from zlops.errors import RunOwned, ZlopsError
from zlops.host import gitops
from zlops.model import RunRecord, RunStatus
from zlops.run.runner import process_gone, process_start, read_manifest

log = logging.getLogger(__name__)

#: how many newest runs a start looks through for stale ones
SCAN_RUNS = 200


def owner_meta() -> dict[str, Any]:
    """This process as a run's owner: host, pid and the pid's start time (so a reused pid is not it),
    and since when (for the message that refuses a second process)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": process_start(os.getpid()),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _owner_words(owner: dict[str, Any]) -> str:
    return (f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')}, since "
            f"{owner.get('since') or 'an unknown time'}")


def live_owner(run: RunRecord) -> dict[str, Any] | None:
    """The owner of a ``running`` run when it is another process that may still be running it: alive on
    this host (:func:`owner_dead` says no), or on another host (which this one cannot check). None when
    the run is not running, has no owner (an Airflow DAG run), or its owner is this process or dead."""
    owner = run.meta.get("owner")
    if run.status is not RunStatus.RUNNING or not isinstance(owner, dict):
        return None
    if owner.get("host") == socket.gethostname() and owner.get("pid") == os.getpid():
        return None
    if owner.get("host") == socket.gethostname() and owner_dead(run):
        return None
    return owner


def refuse_if_owned(run: RunRecord | None) -> None:
    """RunOwned, in one line naming the owner, when another live process runs ``run`` (:func:`live_owner`)."""
    owner = live_owner(run) if run is not None else None
    if owner is None:
        return
    assert run is not None
    elsewhere = owner.get("host") != socket.gethostname()
    hint = (" (another host: if it died, use a new run id)" if elsewhere else
            "; wait for it to end, or stop it: a start after its owner died takes the run over")
    raise RunOwned(f"run {run.run_key} is being run by {_owner_words(owner)}{hint}")


@contextlib.contextmanager
def own_run(config: Config, run_key: str) -> Iterator[None]:
    """Hold run ``run_key`` for this process: an ``flock`` on ``<home>/locks/run-<slug>.lock`` for the
    whole night (released by the kernel when this process dies, whatever kills it). A second
    ``zlops nightly`` of the same run id on this host gets RunOwned at once, naming the owner (pid,
    host, since) from the note in the file. The fd is not inherited by any child (PEP 446), so a
    benchmark never keeps a run owned."""
    from zlops.steps.context import slug

    path = config.run_locks_dir / f"run-{slug(run_key)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                note = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            except (OSError, ValueError):
                note = {}
            raise RunOwned(f"run {run_key} is being run by {_owner_words(note)} (zlops nightly); wait for it to "
                           "end, or stop it: a start after its owner died takes the run over") from None
        data = json.dumps({**owner_meta(), "run_key": run_key}).encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except OSError:  # a full disk loses the note, never the ownership
            pass
        yield
    finally:
        os.close(fd)


def _alive(pid: int, start: int | None) -> bool:
    """Whether process ``pid`` is alive and is the one that started at ``start`` (when known)."""
    if process_gone(pid):
        return False
    if start is None:
        return True
    now = process_start(pid)
    return now is None or now == start


def owner_dead(run: RunRecord) -> bool:
    """True when ``run`` is ``running`` but its owner on this host is gone."""
    owner = run.meta.get("owner")
    if run.status is not RunStatus.RUNNING or not isinstance(owner, dict):
        return False
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return False
    return not _alive(owner["pid"], owner.get("start"))


def end_group(pid: int, start: int | None, *, grace_s: float = 5.0) -> bool:
    """End the process group led by ``pid`` if ``pid`` is still that process; True when it was alive."""
    if not _alive(pid, start):
        return False
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            log.warning("cannot end orphan benchmark group %d: not ours", pid)
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid, start):
                break
            time.sleep(0.05)
        else:
            continue
        break
    try:  # what the leader left in its group
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return True


def _shard_dirs(config: Config, run: RunRecord) -> list[Path]:
    from zlops.steps.context import slug

    run_dir = config.artifacts_dir / run.suite / slug(run.run_key)
    return sorted(p.parent for p in run_dir.glob("*/*/manifest.json"))


@dataclass
class Recovered:
    """What :func:`recover` settled."""

    interrupted: list[str] = field(default_factory=list)
    orphans_ended: list[int] = field(default_factory=list)
    worktrees_removed: list[Path] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"run {k} was left running by a dead zlops: marked interrupted" for k in self.interrupted]
        out += [f"ended orphan benchmark process group {pid}" for pid in self.orphans_ended]
        out += [f"removed stale worktree {p}" for p in self.worktrees_removed]
        return out


def recover(config: Config, *, suite: str | None = None) -> Recovered:
    """Settle what dead zlops processes on this host left: runs, orphan benchmarks, worktrees."""
    from zlops.steps.context import open_store

    store = open_store(config)
    out = Recovered()
    runs = store.list_runs(suite=suite, limit=SCAN_RUNS)
    for run in runs:
        if not owner_dead(run):
            continue
        for shard_dir in _shard_dirs(config, run):
            manifest = read_manifest(shard_dir) or {}
            if manifest.get("status") != "running":
                continue
            for kind in ("benchmark", "sampler"):  # the telemetry sampler would stream forever
                pid = manifest.get(f"{kind}_pid")
                if isinstance(pid, int) and end_group(pid, manifest.get(f"{kind}_start")):
                    out.orphans_ended.append(pid)
                    log.warning("ended orphan %s %d of dead run %s (%s)", kind, pid, run.run_key, shard_dir)
        owner = run.meta.get("owner") or {}
        now = datetime.now(timezone.utc)
        store.upsert_run(dataclasses.replace(
            run, status=RunStatus.INTERRUPTED, finished_at=now,
            meta={"interrupted": {"reason": f"its zlops (pid {owner.get('pid')} on {owner.get('host')}) died "
                                            "while the run was running", "at": now.isoformat(timespec="seconds")}}))
        out.interrupted.append(run.run_key)
        log.warning("run %s was left running by a dead zlops (pid %s): marked interrupted",
                    run.run_key, owner.get("pid"))
    out.worktrees_removed = sweep_worktrees(config, [r for r in runs if r.run_key not in out.interrupted]
                                            + [dataclasses.replace(r, status=RunStatus.INTERRUPTED)
                                               for r in runs if r.run_key in out.interrupted])
    return out


def sweep_worktrees(config: Config, runs: list[RunRecord]) -> list[Path]:
    """Remove the worktrees of ``runs`` that are no longer running (and of their A/B base sides).

    A worktree is ``worktrees/<suite>/<sha12>-<8 hex of the run key's hash>``; folders that match
    no listed run are left alone (another process may own them).
    """
    from zlops.steps.context import slug

    by_suffix: dict[tuple[str, str], RunStatus] = {}
    for run in runs:
        for key in (run.run_key, f"{run.run_key}:ab-base", f"{run.run_key}:ab"):
            by_suffix[(run.suite, slug(key)[-8:])] = run.status
    removed = []
    for suite_dir in sorted(p for p in config.worktrees_dir.glob("*") if p.is_dir()):
        for wt in sorted(p for p in suite_dir.iterdir() if p.is_dir()):
            status = by_suffix.get((suite_dir.name, wt.name.rsplit("-", 1)[-1]))
            if status is None or status is RunStatus.RUNNING:
                continue
            try:
                mirror = config.mirrors_dir / f"{suite_dir.name}.git"
                gitops.remove_worktree(gitops.Mirror(mirror, ""), wt)
            except (OSError, ZlopsError) as exc:  # a sweep never stops the night
                log.warning("cannot remove stale worktree %s: %s", wt, exc)
                continue
            removed.append(wt)
    return removed
