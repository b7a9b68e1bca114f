"""The ``fetch`` task: mirror the suite's repository, fetch its branch, resolve the commit, record the run."""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from zlops import __version__
from zlops.config.settings import Config
from zlops.errors import RunAlreadyAccepted, ZlopsError
from zlops.host import gitops
from zlops.model import RunRecord, RunStatus
from zlops.progress import LogProgress, Progress
from zlops.steps.context import RunContext, open_store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fetched:
    """What the fetch task hands on (its XCom): the run, its commit and whether it is a forced promotion."""

    run_key: str
    sha: str
    promote: bool

    def to_xcom(self) -> dict[str, Any]:
        return {"run_key": self.run_key, "sha": self.sha, "promote": self.promote}


def fetch_for_trigger(config: Config, suite_name: str, *, run_key: str, params: Mapping[str, Any] | None,
                      links: Mapping[str, Any] | None = None) -> Fetched:
    """The fetch of a DAG run: its trigger params (``sha``: pin a commit; ``promote``: a boolean, lets the
    promote step accept an older or caliber-break run) are checked here, and ``links`` (the Airflow DAG
    and run, :func:`zlops.airflow.links.airflow_meta`) go into the run's meta, so the zlops pages link back.

    Clearing a completed, accepted DAG run fails here (its results stand); ``zlops nightly --run-id
    <run id> --replace`` re-measures it on purpose."""
    params = params or {}
    sha = params.get("sha") or None
    if sha is not None and not isinstance(sha, str):
        raise ZlopsError(f"the sha param must be a commit id (text), got {sha!r}")
    promote = params.get("promote", False)
    if promote is None:
        promote = False
    if not isinstance(promote, bool):
        raise ZlopsError(f"the promote param must be true or false, got {promote!r}")
    ctx = fetch(config, suite_name, run_key=run_key, sha=sha, promote=promote)
    if links:
        ctx.store.update_run_meta(ctx.run_key, dict(links))
    return Fetched(ctx.run_key, ctx.sha, promote)


def fetch(config: Config, suite_name: str, *, run_key: str, sha: str | None = None,
          progress: Progress | None = None, promote: bool = False, replace: bool = False,
          owner: dict[str, Any] | None = None) -> RunContext:
    """Mirror + fetch the suite's branch, resolve the commit to measure, record the run.

    A retry of the same run keeps the commit it chose the first time, even if upstream moved, and
    its shards already measured are ingested from their artifacts, not measured again
    (:func:`zlops.steps.run_device.measured_shard`). A run that completed and was accepted as a baseline is refused
    (:class:`RunAlreadyAccepted`) unless ``replace``: then it is demoted until promoted again and
    every shard is measured anew (its report and Slack summary are posted again, marked as a re-run).
    ``promote`` (recorded in the run's meta) makes the promote step accept the run although it is
    not newer on the branch line or breaks the caliber (:mod:`zlops.judge.promotion`): backfills.
    ``owner`` ({host, pid, start}: the one process that runs the whole night, zlops.run.recovery) goes
    into the run's meta, so a later start can tell a run whose owner died from one still running.
    """
    if not isinstance(promote, bool):
        raise ZlopsError(f"promote must be true or false, got {promote!r}")
    progress = progress or LogProgress()
    suite = config.suite(suite_name)
    store = open_store(config)
    with progress.step("fetch", suite=suite_name, branch=suite.branch):
        mirror = gitops.ensure_mirror(suite.repo, config.mirrors_dir / f"{suite_name}.git")
        head = gitops.fetch_branch(mirror, suite.branch, timeout=config.git_timeout_s)
        existing = store.get_run(run_key)
        from zlops.run.recovery import refuse_if_owned

        refuse_if_owned(existing)  # another live process runs it: never two of one run at once
        if sha is None and existing is not None:
            chosen = existing.sha
        elif sha is None:
            chosen = head
        else:
            gitops.check_commit_sha(sha, what="sha")
            if len(sha) in (40, 64):
                gitops.fetch_commit(mirror, sha.lower(), timeout=config.git_timeout_s)
            chosen = gitops.resolve(mirror, sha)
        if existing is not None and existing.sha != chosen:
            raise ZlopsError(f"run {run_key} already measured commit {existing.sha[:12]}; "
                             f"use a new run id to measure {chosen[:12]}")
        replaced: dict[str, Any] = {}
        if existing is not None and existing.status is RunStatus.DONE and existing.accepted:
            if not replace:
                when = f" on {existing.finished_at:%Y-%m-%d %H:%M} UTC" if existing.finished_at else ""
                raise RunAlreadyAccepted(
                    f"run {run_key} completed{when} and its results are an accepted baseline; re-running it "
                    "would replace them. Use a new run id, or pass --replace to re-measure and replace them")
            store.set_accepted(run_key, False)  # not a baseline while it is re-measured
            replaced = {"replaced_at": datetime.now(timezone.utc).isoformat(),
                        "replace_count": int(existing.meta.get("replace_count", 0)) + 1}
            log.warning("run %s: replacing its accepted results (re-run %d)", run_key, replaced["replace_count"])
        if existing is not None and "auto_devices" in existing.meta:
            auto = tuple((p, tuple(d)) for p, d in existing.meta["auto_devices"])
        else:
            auto = resolve_auto_devices(config, suite_name)
        store.upsert_run(RunRecord(
            run_key=run_key, kind="nightly", suite=suite_name, sha=chosen, branch=suite.branch,
            status=RunStatus.RUNNING, started_at=datetime.now(timezone.utc),
            meta={"zlops_version": __version__, "host": socket.gethostname(), "branch_head": head,
                  "subject": gitops.commit_subject(mirror, chosen), "python": sys.version.split()[0],
                  "auto_devices": [[p, list(d)] for p, d in auto], "promote": promote, **replaced,
                  **({"owner": owner} if owner is not None else {})}))
    return RunContext(config, suite_name, run_key, chosen, auto)


def resolve_auto_devices(config: Config, suite_name: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Pick the devices of every ``devices: auto`` pool of a suite (longest idle run, at most 4)."""
    from zlops.backends import get_backend
    from zlops.run.devices import resolve_devices

    out = []
    for name in config.suite(suite_name).pools:
        pool = config.pools[name]
        if pool.explicit_devices is None:
            out.append((name, tuple(resolve_devices(get_backend(pool.backend), None))))
    return tuple(out)
