"""Running a campaign: tonight's gang plan, one lane per device task, and the derived series.

- :func:`plan_campaign` makes (once per run, kept in ``meta["campaign"][pool]``) the gang LPT plan of
  :mod:`zlops.campaign.plan`, weighted by the shard durations of the pool's earlier accepted nights.
- :func:`run_lane` is device task ``pool/d``: it runs the shards whose window starts at ``d``, in
  planned order; each waits for the shards planned before it on any of its devices, then takes the
  gang lease of all its P devices (:func:`zlops.host.locks.gang_lease`), checks each is idle, samples
  telemetry on all P and runs the command with ``{devices}`` etc. filled (:func:`zlops.run.runner.run_shard`).
  Each shard's results (the suite's ``format``, read by :func:`zlops.run.ingest.read_shard` like any
  shard's: a malformed file FAILs the shard with the same error) are renamed to their series
  (``<stem>/p<P>/<variant>/<stack>``) and the lane writes them as ONE zlops-json file, so the lane is
  an ordinary shard for ingest, re-runs, rescore and reports.
- :func:`store_derived` adds the derived series (zlops.campaign.scaling) to the run after every lane is in.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.campaign import scaling
from zlops.campaign.plan import CampaignCase, CampaignPlan, Placement, campaign_cases, make_plan, size_label
from zlops.errors import ParseError, ZlopsError
from zlops.model import CaseResult, ShardOutcome, ShardStatus
from zlops.progress import LogProgress, Progress
from zlops.run.ingest import ShardRead, read_shard
from zlops.run.runner import MANIFEST, ShardSpec, read_manifest, run_shard

if TYPE_CHECKING:
    from zlops.steps.context import Prepared, RunContext
    from zlops.store import Store

log = logging.getLogger(__name__)

LANE_RESULTS = "campaign_results.json"
LANE_FILE = "campaign.json"
FINAL = frozenset(s.value for s in ShardStatus)
WAIT_POLL_S = 0.5


# --- plan ------------------------------------------------------------------------------------------

def measured_seconds(store: Store, suite_name: str, pool: str, *, runs: int, exclude_run_key: str | None = None
                     ) -> dict[str, float]:
    """Seconds each campaign shard took (``params["campaign"]["duration_s"]``), the median over the
    newest ``runs`` accepted nightlies of the pool."""
    per: dict[str, list[float]] = defaultdict(list)
    used = 0
    for run in store.list_runs(suite=suite_name, kind="nightly", limit=200):
        if used >= runs:
            break
        if not run.accepted or run.run_key == exclude_run_key:
            continue
        seen = False
        for p, _device, r in store.results(run.run_key):
            shard = r.params.get("campaign") if p == pool else None
            if isinstance(shard, Mapping) and isinstance(shard.get("duration_s"), (int, float)):
                per[str(shard["shard_id"])].append(float(shard["duration_s"]))
                seen = True
        used += seen
    return {k: statistics.median(v) for k, v in per.items()}


def stored_plans(meta: Mapping[str, Any]) -> dict[str, CampaignPlan]:
    return {pool: CampaignPlan.from_dict(d) for pool, d in (meta.get("campaign") or {}).items()}


def plan_campaign(store: Store, ctx: RunContext, *, worktree: Path | None, venv: Path | None
                  ) -> dict[str, CampaignPlan]:
    """Tonight's plan of every pool: the stored one, else made now (deterministic) and stored."""
    run = store.get_run(ctx.run_key)
    if run is None:
        raise ZlopsError(f"unknown run {ctx.run_key!r}: run the fetch step first")
    plans = stored_plans(run.meta)
    campaign = ctx.suite.campaign
    if plans or campaign is None:
        return plans
    cases = campaign_cases(ctx.suite, worktree=worktree, venv=venv)
    for pool in ctx.suite.pools:
        measured = measured_seconds(store, ctx.suite_name, pool, runs=campaign.history_runs,
                                    exclude_run_key=ctx.run_key)
        plans[pool] = make_plan(pool, cases, ctx.pool_devices(pool), measured)
        log.info("campaign plan of %s: %s", ctx.run_key, plans[pool].summary())
    store.upsert_run(replace(run, meta={"campaign": {p: plan.to_dict() for p, plan in plans.items()}}))
    return plans


# --- one lane ----------------------------------------------------------------------------------------

def shard_dir(lane_dir: Path, case: CampaignCase) -> Path:
    return lane_dir / case.shard_id


def _final(manifest: Mapping[str, Any] | None, run_key: str) -> bool:
    return bool(manifest) and manifest.get("run_key") == run_key and manifest.get("status") in FINAL \
        and manifest.get("status") not in ("waiting", "running")


def wait_for_predecessors(ctx: RunContext, pool: str, plan: CampaignPlan, placement: Placement, *,
                          deadline_s: float, clock: Any = time.monotonic, sleep: Any = time.sleep) -> list[str]:
    """Wait until the shards planned before ``placement`` on its devices have ended (their manifests
    say so), at most ``deadline_s``; returns those still not ended (then the gang lease decides)."""
    by_id = {p.shard.shard_id: p for p in plan.placements}
    pending = [by_id[i] for i in placement.after if i in by_id]
    end = clock() + deadline_s
    while True:
        pending = [p for p in pending
                   if not _final(read_manifest(shard_dir(ctx.shard_dir(pool, p.lane), p.shard)), ctx.run_key)]
        if not pending or clock() >= end:
            return [p.shard.series_case for p in pending]
        sleep(WAIT_POLL_S)


def _reused(ctx: RunContext, art: Path) -> ShardOutcome | None:
    """A shard an earlier attempt of this run measured OK (its results still there)."""
    from zlops.run.runner import outcome_from_manifest

    m = read_manifest(art)
    if not m or m.get("run_key") != ctx.run_key or m.get("commit") != ctx.sha or m.get("status") != "ok":
        return None
    try:
        out = outcome_from_manifest(m, art)
    except (KeyError, ValueError, TypeError):
        return None
    return out if out.results_file is not None and out.results_file.is_file() else None


def read_campaign_shard(ctx: RunContext, case: CampaignCase, outcome: ShardOutcome, *,
                        telemetry: Mapping[str, Any] | None = None) -> ShardRead:
    """One gang shard read as every shard is read (:func:`zlops.run.ingest.read_shard`, in the suite's
    ``format``): a malformed, refused or empty file makes it FAILED with the same error a plain
    shard's would get, and with ``telemetry`` a contended shard is INVALID. Its results are renamed
    to the shard's series (:func:`as_shard_series`); a file that measures one metric for two cases
    is malformed too."""
    manifest = read_manifest(outcome.artifact_dir) or {}

    def adapt(parsed: Sequence[CaseResult]) -> list[CaseResult]:
        return as_shard_series(case, parsed, devices=manifest.get("devices"), duration_s=outcome.duration_s,
                               source=str(outcome.results_file))

    return read_shard(ctx.config, ctx.suite_name, outcome, fmt=ctx.suite.format, telemetry=telemetry, adapt=adapt)


def as_shard_series(case: CampaignCase, parsed: Sequence[CaseResult], *, devices: Any, duration_s: float | None,
                    source: str) -> list[CaseResult]:
    """The shard's results renamed to the shard's series, with the shard in ``params["campaign"]``
    (its devices and its seconds too: the next nights' weights). Raises ParseError when a metric
    appears for two cases: a campaign shard measures one case."""
    shard = {**case.to_dict(), "size_label": None if case.size is None else size_label(case.size),
             "shard_id": case.shard_id, "devices": devices, "duration_s": duration_s}
    out, seen = [], set()
    for r in parsed:
        if r.metric in seen:
            raise ParseError(f"{source}: metric {r.metric} appears for two cases ({r.case}); a "
                             "campaign shard measures one case")
        seen.add(r.metric)
        out.append(replace(r, case=case.series_case,
                           params={**r.params, "harness_case": r.case, "campaign": shard}))
    return out


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


def _lane_results(path: Path, results: Sequence[CaseResult]) -> None:
    _write_json(path, {"schema_version": 1, "harness": {"name": "zlops-campaign-lane"},
                       "cases": [{"name": r.case, "metric": r.metric, "unit": r.unit,
                                  "lower_is_better": r.lower_is_better, "samples": list(r.samples),
                                  "params": dict(r.params)} for r in results]})


def _merge_telemetry(lane_dir: Path, dirs: Sequence[Path]) -> None:
    """The lane's telemetry.csv: its shards' rows, one header (they share the sampler's columns)."""
    header, rows, errors = None, [], []
    for d in dirs:
        csv = d / "telemetry.csv"
        if csv.is_file():
            lines = csv.read_text(encoding="utf-8", errors="replace").splitlines()
            if lines:
                header = header or lines[0]
                rows += [ln for ln in lines[1:] if ln.strip()] if lines[0] == header else []
        err = d / "telemetry.err"
        if err.is_file():
            errors.append(f"{d.name}: {err.read_text(encoding='utf-8', errors='replace').strip()}")
    if header is not None:
        (lane_dir / "telemetry.csv").write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    if errors:
        (lane_dir / "telemetry.err").write_text("\n".join(errors) + "\n", encoding="utf-8")


def shard_telemetry(art: Path, backend: str) -> dict[str, Any]:
    """A gang shard's own telemetry summary (:func:`zlops.host.telemetry.summarize_dir`), as ingest reads a shard's."""
    from zlops.host.telemetry import summarize_dir

    return {**summarize_dir(art), "backend": backend}


def lane_shard(ctx: RunContext, case: CampaignCase, outcome: ShardOutcome, *,
               telemetry: Mapping[str, Any] | None = None) -> tuple[ShardOutcome, list[CaseResult]]:
    """A finished gang shard's place in its lane: its outcome (FAILED when its file does not read, with
    :func:`zlops.run.ingest.read_shard`'s error; INVALID when its own ``telemetry`` shows a busy host) and its
    renamed results (none unless it is OK).

    The contention rule is applied per gang shard, on the shard's own telemetry: one contended shard
    makes its own series missing tonight, not every series of its lane (issue 22: on a shared 2-core
    host, one busy moment invalidated a whole lane of four shards)."""
    if outcome.status is not ShardStatus.OK:
        return outcome, []
    read = read_campaign_shard(ctx, case, outcome, telemetry=telemetry)
    if read.outcome.status is ShardStatus.OK and not read.results:  # OK without a results file to read
        return replace(read.outcome, status=ShardStatus.FAILED, error="the shard wrote no results file"), []
    if read.outcome.status is not ShardStatus.OK:   # a contended shard's results are evidence, never judged
        return read.outcome, []
    return read.outcome, list(read.results)


#: how often a gang shard the contention gate made invalid is run again (after the host quiets) in a night
CONTENDED_RERUNS = 1


def _quiet(ctx: RunContext, pool: str, progress: Progress, where: str) -> None:
    """Wait for a quiet host before a gang shard starts, as a one-device shard does
    (:func:`zlops.host.contention.quiet_before_run`)."""
    from zlops.host.contention import quiet_before_run

    quiet_before_run(ctx.config.host_limits(pool), locks_dir=ctx.config.locks_dir, note=progress.note,
                     where=f"campaign {where}")


def run_lane(ctx: RunContext, pool: str, device: int, prepared: Prepared, plan: CampaignPlan, *,
             progress: Progress | None = None) -> ShardOutcome:
    """Run lane ``device`` of ``pool`` (every shard whose window starts there) and leave ONE shard
    record's artifacts: ``manifest.json``, ``campaign_results.json`` (zlops-json), ``campaign.json``
    (each shard's devices, status, seconds, error) and the merged ``telemetry.csv``.

    The lane is OK when at least one of its shards is (the others are listed in its error and their
    series show as missing); FAILED when all failed; OK and empty when the plan gave it nothing.
    """
    progress = progress or LogProgress()
    pool_cfg = ctx.config.pools[pool]
    lane_dir = ctx.shard_dir(pool, device)
    lane_dir.mkdir(parents=True, exist_ok=True)
    placements = plan.lane(device)
    results: list[CaseResult] = []
    rows: list[dict[str, Any]] = []
    outcomes: list[ShardOutcome] = []
    for pl in placements:
        art = shard_dir(lane_dir, pl.shard)
        outcome = _reused(ctx, art)
        if outcome is None:
            deadline = ctx.config.device_wait_s + ctx.suite.timeout_s * (1 + len(pl.after))
            late = wait_for_predecessors(ctx, pool, plan, pl, deadline_s=deadline)
            if late:
                progress.note(f"campaign {pool}/{device}: {pl.shard.series_case} stopped waiting for {late}; "
                              "the gang lease decides")
            spec = ShardSpec(run_key=ctx.run_key, suite_name=ctx.suite_name, suite=ctx.suite, sha=ctx.sha, pool=pool,
                             backend=pool_cfg.backend, device=pl.devices[0], worktree=prepared.worktree,
                             venv=prepared.venv, artifact_dir=art, variant=pl.shard.variant, gang=pl.devices,
                             placeholders=tuple(pl.shard.placeholders(pl.devices).items()))
            where = f"{pool}/{','.join(map(str, pl.devices))} {pl.shard.series_case}"
            for attempt in range(CONTENDED_RERUNS + 1):
                _quiet(ctx, pool, progress, where)
                with progress.step("run", suite=ctx.suite_name, commit=ctx.sha[:12], device=where):
                    outcome = run_shard(spec, locks_dir=ctx.config.locks_dir,
                                        device_wait_s=ctx.config.device_wait_s, require_idle=pool_cfg.idle_required)
                checked, _ = lane_shard(ctx, pl.shard, outcome, telemetry=shard_telemetry(art, pool_cfg.backend))
                if checked.status is not ShardStatus.INVALID or attempt == CONTENDED_RERUNS:
                    break
                # the contended attempt is kept beside the shard as evidence; the shard runs again once quiet
                kept = art.with_name(f"{art.name}.contended{attempt + 1}")
                shutil.rmtree(kept, ignore_errors=True)
                os.replace(art, kept)
                progress.note(f"campaign {where}: {checked.error}; run again once the host quiets")
        outcome, mine = lane_shard(ctx, pl.shard, outcome, telemetry=shard_telemetry(art, pool_cfg.backend))
        results += mine
        error = outcome.error
        outcomes.append(outcome)
        rows.append({**pl.shard.to_dict(), "series_case": pl.shard.series_case, "devices": list(pl.devices),
                     "planned_start_s": pl.start, "planned_s": pl.weight, "status": outcome.status.value,
                     "duration_s": outcome.duration_s, "error": error, "artifacts": pl.shard.shard_id})
    return _finish_lane(ctx, pool, device, pool_cfg.backend, lane_dir, placements, outcomes, rows, results)


def _finish_lane(ctx: RunContext, pool: str, device: int, backend: str, lane_dir: Path,
                 placements: Sequence[Placement], outcomes: Sequence[ShardOutcome], rows: list[dict[str, Any]],
                 results: list[CaseResult]) -> ShardOutcome:
    ok = [o for o in outcomes if o.status is ShardStatus.OK]
    starts = [o.started_at for o in outcomes if o.started_at is not None]
    ends = [o.ended_at for o in outcomes if o.ended_at is not None]
    results_file = lane_dir / LANE_RESULTS
    _write_json(lane_dir / LANE_FILE, {"campaign_lane_version": 1, "pool": pool, "lane": device, "shards": rows})
    if results:
        _lane_results(results_file, results)
    else:
        results_file.unlink(missing_ok=True)
    _merge_telemetry(lane_dir, [shard_dir(lane_dir, p.shard) for p in placements])
    status, error = lane_status(rows, results)
    identity = next(((read_manifest(o.artifact_dir) or {}).get("identity") for o in ok), None)
    manifest = {"manifest_version": 1, "run_key": ctx.run_key, "suite": ctx.suite_name, "commit": ctx.sha,
                "pool": pool, "device": device, "backend": backend, "campaign_lane": True,
                "status": status.value, "error": error, "exit_code": 0 if status is ShardStatus.OK else None,
                "started_at": min(starts).isoformat() if starts else None,
                "ended_at": (max(ends) if ends else datetime.now(timezone.utc)).isoformat(),
                "results_file": str(results_file) if results else None, "format": "zlops-json",
                "identity": identity, "shards": len(rows)}
    _write_json(lane_dir / MANIFEST, manifest)
    return ShardOutcome(pool=pool, device=device, backend=backend, status=status, artifact_dir=lane_dir,
                        exit_code=manifest["exit_code"], started_at=min(starts) if starts else None,
                        ended_at=max(ends) if ends else None, error=error,
                        results_file=results_file if results else None)


def lane_status(rows: Sequence[Mapping[str, Any]], results: Sequence[CaseResult]) -> tuple[ShardStatus, str | None]:
    """A lane's status and error from its shards' rows (``series_case``, ``status``, ``error``): OK when
    one measured (the others named in the error), FAILED when none did, OK and empty with no shard."""
    bad = [r for r in rows if r["status"] != ShardStatus.OK.value]
    if not rows:
        return ShardStatus.OK, None
    if len(bad) < len(rows) and results:
        return ShardStatus.OK, None if not bad else (
            f"{len(bad)} of {len(rows)} campaign shards did not measure: "
            + "; ".join(f"{r['series_case']} {r['status']}: {r['error']}" for r in bad))
    return ShardStatus.FAILED, "every campaign shard of the lane failed: " + "; ".join(
        f"{r['series_case']} {r['status']}: {r['error']}" for r in bad)


def reread_lane(ctx: RunContext, plan: CampaignPlan, lane: ShardOutcome) -> tuple[ShardOutcome, list[CaseResult]]:
    """Lane ``lane`` read again from its gang shards' own results files, each as :func:`run_lane` read
    it (:func:`lane_shard`, i.e. :func:`zlops.run.ingest.read_shard` with today's adapter), for a rescore.

    The lane's ``campaign_results.json`` holds what the night's adapter made of those files; a rescore
    that read only it would never apply a fixed adapter to a campaign. A gang shard whose benchmark
    crashed or timed out (its manifest says so) stays as it was; one the night found malformed is
    read again. Writes nothing. Returns the lane's outcome (status and error as :func:`run_lane`
    settles them, the contention rule applied per gang shard on its own telemetry) and its results.
    """
    from zlops.run.runner import outcome_from_manifest

    rows: list[dict[str, Any]] = []
    results: list[CaseResult] = []
    for pl in plan.lane(lane.device):
        art = shard_dir(lane.artifact_dir, pl.shard)
        manifest = read_manifest(art)
        try:
            outcome = outcome_from_manifest(manifest, art) if manifest else None
        except (KeyError, ValueError, TypeError):
            outcome = None
        if outcome is None:
            rows.append({"series_case": pl.shard.series_case, "status": ShardStatus.FAILED.value,
                         "error": f"no readable {MANIFEST} in {art}"})
            continue
        outcome, mine = lane_shard(ctx, pl.shard, outcome, telemetry=shard_telemetry(art, lane.backend))
        results += mine
        rows.append({"series_case": pl.shard.series_case, "status": outcome.status.value, "error": outcome.error})
    status, error = lane_status(rows, results)
    return replace(lane, status=status, error=error), results


def is_lane(outcome: ShardOutcome) -> bool:
    """Whether a stored shard is a campaign lane (its folder holds the lane's ``campaign.json``)."""
    return (outcome.artifact_dir / LANE_FILE).is_file()


def lane_missing(lane: ShardOutcome) -> list[str]:
    """What :func:`reread_lane` would need and is gone: the results files of the lane's shards that
    measured OK (its ``campaign.json`` rows), or that file itself."""
    try:
        rows = json.loads((lane.artifact_dir / LANE_FILE).read_text(encoding="utf-8"))["shards"]
    except (OSError, ValueError, KeyError, TypeError):
        return [str(lane.artifact_dir / LANE_FILE)]
    gone = []
    for row in rows:
        if not isinstance(row, Mapping) or row.get("status") != ShardStatus.OK.value:
            continue
        art = lane.artifact_dir / str(row.get("artifacts"))
        manifest = read_manifest(art) or {}
        results = manifest.get("results_file")
        if not results or not Path(results).is_file():
            gone.append(f"{row.get('series_case')} ({results or f'no manifest in {art}'})")
    return gone


# --- derived series -----------------------------------------------------------------------------------

def store_derived(ctx: RunContext, store: Store) -> int:
    """Add tonight's derived series (zlops.campaign.scaling: efficiency, stack ratios) of every pool to the
    run, on the pool's first OK lane (replacing what an earlier call put there). Returns how many."""
    campaign = ctx.suite.campaign
    if campaign is None:
        return 0
    ok = {(o.pool, o.device): o for o in store.shards(ctx.run_key) if o.status is ShardStatus.OK}
    by_lane: dict[tuple[str, int], list[CaseResult]] = defaultdict(list)
    for pool, device, r in store.results(ctx.run_key):
        if (pool, device) in ok:
            by_lane[(pool, device)].append(r)
    extras = store.shard_extras(ctx.run_key)
    count = 0
    for pool in ctx.suite.pools:
        lanes = sorted(d for p, d in by_lane if p == pool)
        if not lanes:
            continue
        measured = [r for d in lanes for r in by_lane[(pool, d)] if not scaling.is_derived(r)]
        derived = scaling.derive(measured, campaign.ratios, metric=campaign.scaling_metric)
        holder = lanes[0]
        own = [r for r in by_lane[(pool, holder)] if not scaling.is_derived(r)]
        extra = extras.get((pool, holder), {})
        store.record_shard(ctx.run_key, ok[(pool, holder)], [*own, *derived], telemetry=extra.get("telemetry"),
                           identity=extra.get("identity"))
        count += len(derived)
    return count
