"""The nightly pipeline as plain functions: fetch -> prepare -> run per device -> ingest -> compare
-> report -> promote -> cleanup.

The Airflow DAG calls each step as one task and the CLI (``zlops nightly``) calls
:func:`run_nightly`, which runs the same functions in order, so a GPU host can reproduce a DAG run by
hand. Every step is idempotent for a given ``run_key``: a retried task updates rows instead of adding
them, and paths (worktree, artifacts) are derived from the run key rather than passed around.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import itertools
import json
import logging
import re
import socket
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from zlops import __version__, envs, gitops, judging, proc, telemetry
from zlops import compare as cmp
from zlops.config import Config, SuiteConfig
from zlops.errors import GitError, RunAlreadyAccepted, ZlopsError
from zlops.judge import get_judge
from zlops.locks import host_lock
from zlops.model import (
    CaseResult,
    CompareSummary,
    RunRecord,
    RunStatus,
    ShardOutcome,
    ShardStatus,
    Summary,
    Verdict,
)
from zlops.partition import Plan
from zlops.progress import LogProgress, Progress
from zlops.runner import ShardSpec, outcome_from_manifest, read_manifest, run_shard
from zlops.store import Store
from zlops.store.points import series_points

log = logging.getLogger(__name__)

READY = ".zlops-ready.json"


@lru_cache(maxsize=8)
def _open_store(url: str, retry_s: float) -> Store:
    from zlops.store.retry import RetryPolicy

    return Store.open(url, retry=RetryPolicy(total_s=retry_s))


def open_store(config: Config) -> Store:
    """The store of this config (opened, migrated to head, cached per process); transient database
    faults are retried for ``database_retry_s``."""
    return _open_store(config.database_url, config.database_retry_s)


def make_run_key(kind: str, suite: str, label: str) -> str:
    """``<kind>:<suite>:<label>``; the label is an Airflow run id, a CLI --run-id or a timestamp."""
    if not re.fullmatch(r"[A-Za-z0-9_.:+\-]{1,200}", label):
        raise ZlopsError(f"invalid run label {label!r}: use letters, digits and _ . : + -")
    return f"{kind}:{suite}:{label}"


def slug(run_key: str) -> str:
    """A file-system-safe, collision-free name for a run key."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", run_key)[:80]
    return f"{clean}-{hashlib.sha1(run_key.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class RunContext:
    """What every step after fetch needs; cheap to rebuild from (config, suite, run_key, sha)."""

    config: Config
    suite_name: str
    run_key: str
    sha: str
    #: devices chosen for pools configured ``devices: auto`` (resolved once, at fetch, kept in the run)
    auto_devices: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def suite(self) -> SuiteConfig:
        return self.config.suite(self.suite_name)

    @property
    def mirror_path(self) -> Path:
        return self.config.mirrors_dir / f"{self.suite_name}.git"

    @property
    def worktree(self) -> Path:
        return self.config.worktrees_dir / self.suite_name / f"{self.sha[:12]}-{slug(self.run_key)[-8:]}"

    @property
    def run_dir(self) -> Path:
        return self.config.artifacts_dir / self.suite_name / slug(self.run_key)

    def shard_dir(self, pool: str, device: int) -> Path:
        return self.run_dir / pool / str(device)

    def pool_devices(self, pool: str) -> list[int]:
        explicit = self.config.pools[pool].explicit_devices
        if explicit is not None:
            return explicit
        chosen = dict(self.auto_devices)
        if pool not in chosen:
            raise ZlopsError(f"pool {pool} uses devices: auto but this run chose none for it")
        return list(chosen[pool])

    def planned_shards(self) -> list[tuple[str, str, int]]:
        """(pool, backend, device) for every device of every pool the suite runs on."""
        return [(p, self.config.pools[p].backend, d) for p in self.suite.pools for d in self.pool_devices(p)]


def resolve_auto_devices(config: Config, suite_name: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Pick the devices of every ``devices: auto`` pool of a suite (longest idle run, at most 4)."""
    from zlops.backends import get_backend
    from zlops.devices import resolve_devices

    out = []
    for name in config.suite(suite_name).pools:
        pool = config.pools[name]
        if pool.explicit_devices is None:
            out.append((name, tuple(resolve_devices(get_backend(pool.backend), None))))
    return tuple(out)


# --- fetch --------------------------------------------------------------------------------------

def fetch(config: Config, suite_name: str, *, run_key: str, sha: str | None = None,
          progress: Progress | None = None, promote: bool = False, replace: bool = False,
          owner: dict[str, Any] | None = None) -> RunContext:
    """Mirror + fetch the suite's branch, resolve the commit to measure, record the run.

    A retry of the same run keeps the commit it chose the first time, even if upstream moved, and
    its shards already measured are ingested from their artifacts, not measured again
    (:func:`measured_shard`). A run that completed and was accepted as a baseline is refused
    (:class:`RunAlreadyAccepted`) unless ``replace``: then it is demoted until promoted again and
    every shard is measured anew (its report and Slack summary are posted again, marked as a re-run).
    ``promote`` (recorded in the run's meta) makes the promote step accept the run although it is
    not newer on the branch line or breaks the caliber (:mod:`zlops.promotion`): backfills.
    ``owner`` ({host, pid, start}: the one process that runs the whole night, zlops.recovery) goes
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
        if sha is None and existing is not None:
            chosen = existing.sha
        elif sha is None:
            chosen = head
        else:
            if not gitops.looks_like_sha(sha):
                raise GitError(f"--sha expects a commit id (4-64 hex digits), got {sha!r}")
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


# --- prepare (worktree + environment) -------------------------------------------------------------

@dataclass(frozen=True)
class Prepared:
    worktree: Path
    venv: Path
    env_key: str
    env_reused: bool
    env_seconds: float


def prepare(ctx: RunContext, *, progress: Progress | None = None, use_cache: bool = True) -> Prepared:
    """The commit's worktree and its venv; idempotent (a second call on this host reuses both).

    Concurrent calls for one run on one host (two device tasks on a fresh host) take turns.
    """
    with host_lock(ctx.config.run_locks_dir / f"prepare-{slug(ctx.run_key)}.lock"):
        return _prepare(ctx, progress=progress, use_cache=use_cache)


def _prepare(ctx: RunContext, *, progress: Progress | None, use_cache: bool) -> Prepared:
    progress = progress or LogProgress()
    suite = ctx.suite
    mirror = gitops.ensure_mirror(suite.repo, ctx.mirror_path)
    ready = ctx.worktree / ".venv" / READY
    if ready.exists():
        data = json.loads(ready.read_text())
        return Prepared(ctx.worktree, ctx.worktree / ".venv", data["key"], True, 0.0)
    with progress.step("worktree", suite=ctx.suite_name, commit=ctx.sha[:12]):
        if not gitops.has_commit(mirror, ctx.sha):
            gitops.fetch_branch(mirror, suite.branch)
            gitops.fetch_commit(mirror, ctx.sha)
        gitops.add_worktree(mirror, ctx.sha, ctx.worktree)
    with progress.step("env", suite=ctx.suite_name, commit=ctx.sha[:12]):
        req = envs.EnvRequest(
            install=tuple(tuple(a) for a in suite.install), dependency_globs=tuple(suite.dependency_files),
            system_site_packages=suite.system_site_packages, python=suite.python or envs.base_python(),
            extra_env=tuple(sorted(suite.env.items())))
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        res = envs.ensure_env(ctx.worktree, req, ctx.config.envs_dir, log_path=ctx.run_dir / "env.log",
                              cache_size=ctx.config.env_cache_size, use_cache=use_cache)
    ready.write_text(json.dumps({"key": res.key, "reused": res.reused, "seconds": res.seconds, "tool": res.tool}))
    return Prepared(ctx.worktree, res.venv, res.key, res.reused, res.seconds)


# --- run one device + ingest it -------------------------------------------------------------------

def ingest_shard(ctx: RunContext, outcome: ShardOutcome) -> ShardOutcome:
    """Read a finished shard (:func:`zlops.ingest.read_shard`: parse, FAILED on a malformed file, INVALID
    beside contention) and store shard + results in one transaction; nothing half-parsed reaches the store.
    """
    from zlops.ingest import read_shard

    manifest = read_manifest(outcome.artifact_dir) or {}
    summary = {**telemetry.summarize_dir(outcome.artifact_dir), "backend": outcome.backend}
    read = read_shard(ctx.config, ctx.suite_name, outcome, telemetry=summary)
    # an invalid shard's results are kept as evidence; compare never judges them
    open_store(ctx.config).record_shard(ctx.run_key, read.outcome, read.results, telemetry=summary,
                                        identity=manifest.get("identity"))
    return read.outcome


def measured_shard(ctx: RunContext, pool: str, device: int) -> ShardOutcome | None:
    """The shard as an earlier attempt of this run measured it, when its artifacts say it finished OK
    (manifest of this run key and commit, status ok, results file present), else None.

    A re-run (an Airflow retry, ``zlops nightly --run-id`` after a database outage) ingests these
    instead of measuring again, so results already measured are never lost nor silently replaced;
    after ``--replace`` only shards measured since the replace count.
    """
    art = ctx.shard_dir(pool, device)
    manifest = read_manifest(art)
    if not manifest or manifest.get("run_key") != ctx.run_key or manifest.get("commit") != ctx.sha:
        return None
    if manifest.get("status") != ShardStatus.OK.value:
        return None  # a failed, skipped or unfinished shard is measured again
    try:
        outcome = outcome_from_manifest(manifest, art)
    except (KeyError, ValueError, TypeError):
        return None
    if outcome.results_file is None or not outcome.results_file.is_file():
        return None
    run = open_store(ctx.config).get_run(ctx.run_key)
    replaced_at = run.meta.get("replaced_at") if run is not None else None
    if replaced_at and (outcome.ended_at is None or outcome.ended_at < datetime.fromisoformat(replaced_at)):
        return None
    return outcome


def run_device(ctx: RunContext, pool: str, device: int, *, progress: Progress | None = None) -> ShardOutcome:
    """Run the suite on one device of one pool, then ingest it (its results are safe even if
    another device crashes later). A shard this run already measured is ingested from its artifacts."""
    progress = progress or LogProgress()
    pool_cfg = ctx.config.pools[pool]
    if device not in ctx.pool_devices(pool):
        raise ZlopsError(f"device {device} is not in pool {pool} (devices: {ctx.pool_devices(pool)})")
    done = measured_shard(ctx, pool, device)
    if done is not None:
        progress.note(f"shard {pool}/{device}: measured by an earlier attempt of this run; ingesting its artifacts")
        return ingest_shard(ctx, done)
    prepared = prepare(ctx, progress=progress)
    if ctx.suite.campaign is not None:  # this device's lane of gang shards (zlops.campaign_run)
        from zlops.campaign_run import run_lane

        plan = plan_campaign(ctx, prepared).get(pool)
        if plan is None:
            raise ZlopsError(f"campaign of {ctx.run_key} has no plan for pool {pool}")
        outcome = ingest_shard(ctx, run_lane(ctx, pool, device, prepared, plan, progress=progress))
        if outcome.status is not ShardStatus.OK:
            progress.note(f"campaign lane {pool}/{device} {outcome.status.value}: {outcome.error}")
        return outcome
    cases = None
    if ctx.suite.partition is not None:  # this device's share of the cases (zlops.sharding)
        plan = plan_partition(ctx, prepared).get(pool)
        cases = plan.cases_of(device) if plan is not None else None
        if cases is not None and not cases:
            progress.note(f"shard {pool}/{device}: the partition left no case for this device")
            outcome = ShardOutcome(pool=pool, device=device, backend=pool_cfg.backend, status=ShardStatus.OK,
                                   artifact_dir=ctx.shard_dir(pool, device), exit_code=None, started_at=None,
                                   ended_at=None)
            open_store(ctx.config).record_shard(ctx.run_key, outcome)
            return outcome
    limits = ctx.config.host_limits(pool)
    if limits.gates and limits.contention_wait_s > 0:  # let a busy host quiet down first (bounded)
        from zlops.contention import wait_for_quiet

        waited = wait_for_quiet(limits, locks_dir=ctx.config.locks_dir)
        if waited.quiet and waited.waited_s > 2:
            progress.note(f"shard {pool}/{device}: waited {waited.waited_s:.0f} s for the host to quiet down")
        if not waited.quiet:
            progress.note(f"shard {pool}/{device}: host still busy after {waited.waited_s:.0f} s ({waited.reason}); "
                          "running anyway, the run's own figures decide whether it is valid")
    spec = ShardSpec(run_key=ctx.run_key, suite_name=ctx.suite_name, suite=ctx.suite, sha=ctx.sha, pool=pool,
                     backend=pool_cfg.backend, device=device, worktree=prepared.worktree, venv=prepared.venv,
                     artifact_dir=ctx.shard_dir(pool, device), cases=cases)
    with progress.step("run", suite=ctx.suite_name, commit=ctx.sha[:12], device=f"{pool}/{device}"):
        outcome = run_shard(spec, locks_dir=ctx.config.locks_dir, device_wait_s=ctx.config.device_wait_s,
                            require_idle=pool_cfg.idle_required)
        outcome = ingest_shard(ctx, outcome)
    if outcome.status is not ShardStatus.OK:
        progress.note(f"shard {pool}/{device} {outcome.status.value}: {outcome.error}")
    return outcome


def plan_partition(ctx: RunContext, prepared: Prepared | None = None) -> dict[str, Plan]:
    """Tonight's partition plan per pool (``{}`` unless the suite has a ``partition`` section):
    the stored one, else made now and stored (zlops.sharding); one process per host at a time."""
    if ctx.suite.partition is None:
        return {}
    from zlops.sharding import plan_run

    with host_lock(ctx.config.run_locks_dir / f"plan-{slug(ctx.run_key)}.lock"):
        return plan_run(open_store(ctx.config), ctx, worktree=prepared.worktree if prepared else None,
                        venv=prepared.venv if prepared else None)


def plan_campaign(ctx: RunContext, prepared: Prepared | None = None) -> dict[str, Any]:
    """Tonight's campaign plan per pool (``{}`` unless the suite has a ``campaign`` section): the
    stored one, else made now and stored (zlops.campaign_run); one process per host at a time."""
    if ctx.suite.campaign is None:
        return {}
    from zlops.campaign_run import plan_campaign as make

    with host_lock(ctx.config.run_locks_dir / f"plan-{slug(ctx.run_key)}.lock"):
        return make(open_store(ctx.config), ctx, worktree=prepared.worktree if prepared else None,
                    venv=prepared.venv if prepared else None)


def ingest(ctx: RunContext) -> dict[str, int]:
    """Make the run complete before comparing: every planned shard has a stored record.

    A shard whose task died before storing is ingested from its manifest when its artifacts are on
    this host, otherwise recorded FAILED with the reason, so it shows in the report.
    """
    store = open_store(ctx.config)
    stored = {(o.pool, o.device) for o in store.shards(ctx.run_key)}
    for pool, backend, device in ctx.planned_shards():
        if (pool, device) in stored:
            continue
        art = ctx.shard_dir(pool, device)
        manifest = read_manifest(art)
        if manifest is not None:
            ingest_shard(ctx, outcome_from_manifest(manifest, art))
        else:
            store.record_shard(ctx.run_key, ShardOutcome(
                pool=pool, device=device, backend=backend, status=ShardStatus.FAILED, artifact_dir=art,
                exit_code=None, started_at=None, ended_at=None,
                error="the device task never reported (crashed or killed before writing its manifest)"))
    if ctx.suite.campaign is not None:  # efficiency and stack ratios need every lane's results
        from zlops.campaign_run import store_derived

        store_derived(ctx, store)
    counts: dict[str, int] = {}
    for o in store.shards(ctx.run_key):
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
    return counts


# --- compare, promote, cleanup --------------------------------------------------------------------

def compare(ctx: RunContext, *, progress: Progress | None = None,
            baseline_runs: Mapping[str, Sequence[str]] | None = None, as_of: datetime | None = None,
            save: bool = True, setup: judging.JudgingSetup | None = None) -> CompareSummary:
    """Judge every series of the run against its baseline and store the comparison rows.

    The run's meta keeps what the night compared with (``baseline_runs``: pool -> the baseline run
    keys its series used) and the flags it judged under (``compare_flags``), so a rescore judges
    against the same night. ``baseline_runs`` restricts the baselines to those runs; ``as_of`` leaves
    out every run that finished (baselines) or started (history) at or after it: a rescore sees what
    the night saw, never a later run. ``save=False`` judges without storing anything (rescore decides).
    """
    progress = progress or LogProgress()
    store = open_store(ctx.config)
    with progress.step("compare", suite=ctx.suite_name, commit=ctx.sha[:12]):
        mirror = gitops.ensure_mirror(ctx.suite.repo, ctx.mirror_path)
        shas = gitops.ancestors(mirror, ctx.sha, max_count=ctx.config.baseline_depth)
        invalid = {(o.pool, o.device): o.error or "invalid" for o in store.shards(ctx.run_key)
                   if o.status is ShardStatus.INVALID}
        results = store.results(ctx.run_key)
        head = cmp.pool_results([r for r in results if (r[0], r[1]) not in invalid])
        setup = setup or judging.from_config(ctx.config)
        # the past in one read (issue 13): the judge's window of nights (window + 1, so last night can be
        # re-judged against the window before it: zlops.stats.judge_tonight) and every series' baseline
        # (median and count) from the same series points; raw samples are never read here
        noise = setup.judge == "noise" and setup.policy is not None
        window = store.compare_window(
            ctx.suite_name, ancestors=shas, history_window=setup.policy.window + 1 if noise else 1,
            keys=head.keys(), exclude_run_key=ctx.run_key, before=as_of,
            only_runs=None if baseline_runs is None else {k for keys in baseline_runs.values() for k in keys})
        baselines, newest = window.baselines, window.newest_run
        if baseline_runs is not None:  # each pool keeps the baseline runs the night used for it
            baselines, newest = cmp.pick_baselines(sorted(
                ((k[0], k[1], k[2], b, window.finished[k]) for k, b in baselines.items()
                 if b.run_key in baseline_runs.get(k[0], ())), key=lambda c: c[4], reverse=True))
        inputs = judge_inputs(ctx, store, head, baselines, set(shas), setup=setup, frame=window.history)
        points = series_points(head)  # tonight's median, n and spread per series: its row and its history point
        rows = cmp.build_comparisons(suite=ctx.suite_name, pools=ctx.suite.pools, head=head, baselines=baselines,
                                     newest_baseline_run=newest, judge=get_judge(setup.judge),
                                     thresholds=setup.thresholds, inputs=inputs,
                                     head_summaries={(p.pool, p.case, p.metric): Summary(p.median, p.n)
                                                     for p in points})
        rows = invalid_rows(ctx.suite_name, rows, results, invalid, head, baselines)
        rows = annotate_change_points(ctx, store, rows, window, setup)
        if save:
            store.save_comparisons(ctx.run_key, rows)
            store.save_series_points(ctx.run_key, points)   # tonight, pooled: the next nights' history
            _record_compare_setup(ctx, store, rows, setup)
    return cmp.summarize(ctx.run_key, ctx.suite_name, ctx.sha, rows)


def invalid_rows(suite: str, rows: list[Any], results: Sequence[tuple[str, int, CaseResult]],
                 invalid: Mapping[tuple[str, int], str], head: Mapping[cmp.SeriesKey, CaseResult],
                 baselines: Mapping[cmp.SeriesKey, Any]) -> list[Any]:
    """A series measured tonight only by INVALID shards (a busy host, a foreign device process) is an
    INVALID row with the shard's reason, never judged: its numbers measure the contention."""
    from zlops.model import Comparison, Judgement

    why: dict[cmp.SeriesKey, tuple[CaseResult, list[str]]] = {}
    for pool, device, res in results:
        key = (pool, res.case, res.metric)
        if (pool, device) in invalid and key not in head:
            notes = why.setdefault(key, (res, []))[1]
            notes.append(f"shard {pool}/{device} invalid: {invalid[(pool, device)]}")
    if not why:
        return rows
    out = [c for c in rows if (c.pool, c.case, c.metric) not in why]
    for key, (res, notes) in sorted(why.items()):
        out.append(Comparison(suite, key[0], key[1], key[2], res.unit, res.lower_is_better, baselines.get(key), None,
                              Judgement(Verdict.INVALID, None, None, None, "; ".join(notes))))
    return out


def _record_compare_setup(ctx: RunContext, store: Store, rows: Sequence[Any], setup: judging.JudgingSetup) -> None:
    """Keep in the run's meta which baseline runs the night used, the flags and the judging setup it
    judged under (a rescore and a re-render read them from the run, not from today's config)."""
    run = store.get_run(ctx.run_key)
    if run is None:
        return
    thresholds = setup.thresholds
    used: dict[str, set[str]] = {}
    for c in rows:
        if c.base is not None:
            used.setdefault(c.pool, set()).add(c.base.run_key)
    store.upsert_run(replace(run, meta={
        "baseline_runs": {pool: sorted(keys) for pool, keys in sorted(used.items())},
        "compare_flags": {"allow_caliber_mismatch": bool(setup.allow_caliber_mismatch)},
        "thresholds": {"potential_pct": thresholds.potential_pct, "regression_pct": thresholds.regression_pct},
        judging.META_KEY: setup.to_dict()}))


CHANGE_POINT_VERDICTS = frozenset({Verdict.SUSPECT, Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE})


def annotate_change_points(ctx: RunContext, store: Store, rows: list[Any], window: Any,
                           setup: judging.JudgingSetup | None = None) -> list[Any]:
    """Name the first bad night of a flagged series (E-divisive over its history, zlops.stats).

    A step names tonight; a slow creep, where no single night moved by more than the threshold,
    names the night its level first crossed it, which is where a bisection should start. The
    history of the flagged series comes from the night's window of runs (``window``:
    :meth:`Store.compare_window`, up to its baseline window of nights), read for those series only
    in one query, whatever their number; the other series cost nothing.
    """
    from dataclasses import replace as _replace

    flagged = [c for c in rows if c.verdict in CHANGE_POINT_VERDICTS and c.head is not None]
    if not flagged:
        return rows
    from zlops.stats import change_points, first_bad_night

    frame = store.runs_frame(ctx.suite_name, window.runs, keys={(c.pool, c.case, c.metric) for c in flagged})
    nights: dict[cmp.SeriesKey, list[tuple[float, str]]] = {}  # (median, sha) oldest first; few series
    if len(frame):
        for pool, case, metric, median, sha in zip(frame["pool"], frame["case"], frame["metric"], frame["median"],
                                                   frame["sha"], strict=True):
            nights.setdefault((pool, case, metric), []).append((float(median), sha))
    order = {(c.pool, c.case, c.metric): i for i, c in enumerate(rows)}
    potential = (setup or judging.from_config(ctx.config)).thresholds.potential_pct
    out = list(rows)
    for c in flagged:
        key = (c.pool, c.case, c.metric)
        points = nights.get(key, [])[-CHANGE_POINT_NIGHTS:]
        if len(points) < 5:
            continue
        medians, shas = [m for m, _ in points], [sha for _, sha in points]
        values = [*medians, c.head.median]
        threshold = c.judgement.threshold_pct or potential
        idx = first_bad_night(values, threshold, lower_is_better=c.lower_is_better, min_size=2)
        if idx is not None and idx < len(medians):
            note = (f"change point: the series first settled beyond {threshold:g}% at {shas[idx][:7]} "
                    f"({len(medians) - idx} night(s) before tonight); start bisecting there")
        else:
            # a creep caught early: no earlier segment is beyond the threshold yet, but the level
            # started moving at the last change point (a hint for bisection, hence the looser p)
            cps = [i for i in change_points(values, min_size=2, max_pvalue=0.01) if i < len(medians)]
            if not cps:
                continue
            note = (f"change point: the level began moving at {shas[cps[-1]][:7]} "
                    f"({len(medians) - cps[-1]} night(s) before tonight): a slow creep; start bisecting there")
        joined = "; ".join(n for n in (c.judgement.note, note) if n)
        out[order[key]] = _replace(c, judgement=_replace(c.judgement, note=joined))
    return out


#: how many accepted nights before tonight a change-point search looks at (the store's baseline window)
CHANGE_POINT_NIGHTS = 60


def _pool_extras(store: Store, run_key: str) -> dict[str, list[dict[str, Any]]]:
    """Per pool, the identity/telemetry extras of the run's ok shards."""
    ok = {(o.pool, o.device) for o in store.shards(run_key) if o.status is ShardStatus.OK}
    out: dict[str, list[dict[str, Any]]] = {}
    for (pool, device), extra in sorted(store.shard_extras(run_key).items()):
        if (pool, device) in ok:
            out.setdefault(pool, []).append(extra)
    return out


def series_histories(frame: Any, keys: Collection[cmp.SeriesKey], *, walls: Mapping[str, str] | None = None,
                     evidence: Mapping[tuple[str, str, str, str], tuple[Verdict, Any]] | None = None,
                     ) -> tuple[dict[cmp.SeriesKey, Any], dict[cmp.SeriesKey, list[float]]]:
    """Per series of ``keys``: its accepted night medians in ``frame`` (:meth:`Store.history_frame`),
    oldest first, as the judge reads them, and the per-run values of its earlier A/Bs (``processes``).

    - A caliber wall (``walls``: pool -> the newest history run measured on another caliber) is not
      crossed: the wall's night and the nights before it are not used, so the reference and the noise
      restart on the new caliber.
    - The history restarts at the last night that changed the series' level (that night included:
      regression, severe, improved; :attr:`Verdict.changes_level`), or a confirmed step would be
      reported again every night until the window's median moved past it (Otava segments).
    - ``processes``: the per-run values of the A/Bs the series had within what is kept (each run is a
      process at its level; after a confirmed change only its head runs are at the current level);
      the noise model and the process-level detection use them (issue 11).

    ``evidence`` is :meth:`Store.verdict_evidence` of the frame's runs (``only_evidence``): level
    changes and A/B rows, a few per night. The frame holds each series' rows consecutively: the
    groups are cut where the key changes, the medians are numpy views, and only series with a
    wall or evidence take a Python step beyond the cut.
    """
    import numpy as np

    from zlops.store.frames import series_starts

    history: dict[cmp.SeriesKey, Any] = {k: [] for k in keys}
    processes: dict[cmp.SeriesKey, list[float]] = {k: [] for k in keys}
    if frame is None or len(frame) == 0:
        return history, processes
    pools, cases, metrics_ = (frame[c].to_numpy(dtype=object) for c in ("pool", "case", "metric"))
    run_keys = frame["run_key"].to_numpy(dtype=object)
    medians = frame["median"].to_numpy(dtype=float)
    wall_rows = np.zeros(len(frame), dtype=bool)
    for pool, wall in (walls or {}).items():
        wall_rows |= (pools == pool) & (run_keys == wall)
    any_wall = bool(wall_rows.any())
    by_series: dict[cmp.SeriesKey, dict[str, tuple[Verdict, Any]]] = {}
    for (rk, pool, case, metric), found in (evidence or {}).items():
        by_series.setdefault((pool, case, metric), {})[rk] = found
    starts = series_starts(frame).tolist()
    for a, b in itertools.pairwise(starts):
        key = (pools[a], cases[a], metrics_[a])
        if key not in history:
            continue
        lo = a
        if any_wall:
            hit = np.flatnonzero(wall_rows[a:b])
            if hit.size:
                lo = a + int(hit[-1]) + 1
        found_of = by_series.get(key)
        if found_of:
            for i in range(b - 1, lo - 1, -1):
                found = found_of.get(run_keys[i])
                if found is not None and found[0].changes_level:
                    lo = i
                    break
            runs: list[float] = []
            for i in range(lo, b):
                found = found_of.get(run_keys[i])
                if found is None or found[1] is None or not found[1].runs_head:
                    continue
                verdict, figures = found
                runs.extend(figures.runs_head if verdict.changes_level else (*figures.runs_base, *figures.runs_head))
            processes[key] = runs
        history[key] = medians[lo:b]
    return history, processes


def caliber_walls(store: Store, ctx: RunContext, run_keys: set[str],
                  tonight: Mapping[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Per pool, the newest history run measured on another caliber than tonight (a wall).

    The judge's history never crosses a caliber break: nights before (and at) the wall are not used,
    so the reference and the noise restart on the new caliber. One query for the whole window (none
    when tonight's shards carry no identity).
    """
    from zlops.identity import check_caliber

    walls: dict[str, str] = {}
    mine = {pool: extras[0].get("identity") for pool, extras in tonight.items() if extras}
    if not any(v is not None for v in mine.values()):
        return walls
    for run_key, _, pool, theirs in store.pool_identities(sorted(run_keys)):  # newest run first
        if pool in walls or mine.get(pool) is None or theirs is None:
            continue
        if check_caliber(theirs, mine[pool], allow_mismatch=False).refused:
            walls[pool] = run_key
    return walls


def judge_inputs(ctx: RunContext, store: Store, head: dict[cmp.SeriesKey, CaseResult],
                 baselines: dict[cmp.SeriesKey, Any], ancestors: set[str], *,
                 setup: judging.JudgingSetup | None = None, frame: Any = None) -> cmp.JudgeInputs:
    """Caliber checks per (pool, baseline run); for the noise judge also history and telemetry.

    ``frame``: the judge's window of nights (:meth:`Store.compare_window`'s history, window + 1 nights);
    read here when not given. Queries: a few per pool and per history run, never per series.
    """
    from zlops.identity import check_caliber

    setup = setup or judging.from_config(ctx.config)
    tonight = _pool_extras(store, ctx.run_key)
    failed_pools: dict[str, str] = {}
    for o in store.shards(ctx.run_key):
        if o.status is not ShardStatus.OK:
            line = (o.error or "").splitlines()[0] if o.error else ""
            failed_pools[o.pool] = "; ".join(filter(None, (failed_pools.get(o.pool),
                                                           f"shard {o.pool}/{o.device} {o.status.value}: {line}")))
    caliber = {}
    shas = {b.run_key: b.sha for b in baselines.values()}
    for pool, base_run in {(k[0], b.run_key) for k, b in baselines.items() if k in head}:
        base_extras = _pool_extras(store, base_run).get(pool, [])
        caliber[(pool, base_run)] = check_caliber(
            base_extras[0].get("identity") if base_extras else None,
            tonight[pool][0].get("identity") if tonight.get(pool) else None,
            allow_mismatch=setup.allow_caliber_mismatch, base_label=f"baseline {shas.get(base_run, '')[:7]}",
            head_label="tonight")
    if setup.judge != "noise" or setup.policy is None:
        return cmp.JudgeInputs(caliber=caliber, allow_caliber_mismatch=setup.allow_caliber_mismatch,
                               failed_pools=failed_pools)
    policy = setup.policy
    if frame is None:  # window + 1 nights, so last night can be re-judged against the window before it
        frame = store.history_frame(ctx.suite_name, ancestors=ancestors, window=policy.window + 1,
                                    exclude_run_key=ctx.run_key, pools=sorted({k[0] for k in head}))
    pools = sorted({k[0] for k in head})
    in_window = frame[frame["pool"].isin(pools)] if len(frame) and set(frame["pool"].unique()) - set(pools) else frame
    run_keys = sorted(in_window["run_key"].unique().tolist()) if len(in_window) else []
    walls = caliber_walls(store, ctx, set(run_keys), tonight)
    history, processes = series_histories(in_window, head, walls=walls,
                                          evidence=store.verdict_evidence(run_keys, only_evidence=True))
    telemetry = {}
    for pool, extras in tonight.items():  # the worst shard of the pool speaks for it
        summaries = [e.get("telemetry") or {} for e in extras]
        telemetry[pool] = max(summaries, key=lambda t: (t.get("below_90pct_peak_share") or 0.0,
                                                        t.get("temp_max_c") or 0.0))
    return cmp.JudgeInputs(history=history, telemetry=telemetry, policy=policy, caliber=caliber,
                           allow_caliber_mismatch=setup.allow_caliber_mismatch, failed_pools=failed_pools,
                           processes=processes)


def promote(ctx: RunContext) -> bool:
    """Accept the run as a baseline when :func:`zlops.promotion.decide` says so (a valid run on the
    branch line, not older than the current baseline, no caliber break, or the explicit promote flag);
    record the decision and its reason in the run's meta (``promotion``); mark the run finished."""
    from zlops.promotion import decide

    store = open_store(ctx.config)
    ok = any(o.status is ShardStatus.OK for o in store.shards(ctx.run_key))
    decision = decide(ctx)
    run = store.get_run(ctx.run_key)
    if run is not None:
        store.upsert_run(replace(run, meta={"promotion": decision.to_json()}))
    if not decision.accept:
        log.info("run %s not promoted: %s", ctx.run_key, decision.reason)
    store.set_accepted(ctx.run_key, decision.accept)
    store.set_run_status(ctx.run_key, RunStatus.DONE if ok else RunStatus.FAILED,
                         finished_at=datetime.now(timezone.utc))
    return decision.accept


def cleanup(ctx: RunContext) -> None:
    """Remove the run's worktree (and the venv inside it); the env template stays in the cache."""
    mirror_path = ctx.mirror_path
    if not (mirror_path / "HEAD").exists():
        return
    gitops.remove_worktree(gitops.Mirror(mirror_path, ctx.suite.repo), ctx.worktree)


def context_for(config: Config, suite_name: str, run_key: str) -> RunContext:
    """Rebuild a RunContext from the store (what every task after fetch does)."""
    run = open_store(config).get_run(run_key)
    if run is None:
        raise ZlopsError(f"unknown run {run_key!r}: run the fetch step first")
    auto = tuple((p, tuple(d)) for p, d in run.meta.get("auto_devices", []))
    return RunContext(config, suite_name, run_key, run.sha, auto)


def run_all_devices(ctx: RunContext, *, progress: Progress | None = None) -> list[ShardOutcome]:
    """Every planned shard, devices in parallel (one process per device; the device lock guards)."""
    shards = ctx.planned_shards()
    interrupted_here = False
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(shards))) as pool:
            futures = [pool.submit(run_device, ctx, p, d, progress=progress) for p, _, d in shards]
            outcomes = []
            try:
                for fut in futures:
                    try:
                        outcomes.append(fut.result())
                    except (ZlopsError, OSError) as exc:  # env/worktree failure: ingest() records the shard failed
                        log.error("device task failed: %s", exc)
            except BaseException as exc:
                # an interrupt lands in this (main) thread while the benchmarks run in the workers: end
                # their process groups now, or leaving this block would wait for every benchmark
                reason = "SIGINT" if isinstance(exc, KeyboardInterrupt) else getattr(exc, "signame",
                                                                                     type(exc).__name__)
                interrupted_here = proc.interrupt_all(reason) >= 0
                raise
            return outcomes
    finally:
        if interrupted_here:  # the workers are done (they recorded their shards): programs may run again
            proc.clear_interrupt()


def summary_dict(summary: CompareSummary) -> dict[str, Any]:
    return {"run_key": summary.run_key, "sha": summary.sha, "judged": summary.judged,
            **{v.value: summary.count(v) for v in Verdict}, "overall": summary.overall_line()}
