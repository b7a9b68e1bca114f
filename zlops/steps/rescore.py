"""``zlops rescore RUN``: re-judge a stored run from its artifacts, without re-running anything.

Parsers and judging criteria change (the seed's IR-fingerprint criterion changed twice and moved 24
operators between verdicts); re-running a screen costs hours, re-reading the artifacts seconds.
Rescoring re-parses every shard's results file with today's adapter (a campaign lane: each of its gang
shards' own files, :func:`zlops.campaign.run.reread_lane`), replaces the run's result rows,
judges again with today's judge and thresholds against the night's own baseline (the baseline runs
its compare recorded in the run's meta; for a run compared before they were recorded, the runs that
finished before it started), with the flags the night ran with (``--allow-caliber-mismatch``), and
keeps the compare table it replaces in the store's archive, so the original verdicts stay beside the
new ones. It refuses, with a non-zero exit, when a shard that produced data has lost its artifacts: it
re-derives verdicts from what was measured or not at all. A rescore that changes no row stores
no compare table and adds no archive revision. ``zlops rescore --show RUN`` lists the archived revisions.

The run's series points (per series the pooled median, n and spread: what the next nights' history and
baselines read, :mod:`zlops.store.points`) are made of the same re-read results, and a rescore can
change them: a newer adapter reads other samples or cases, today's contention limits turn a shard
INVALID (its results become evidence, out of history) or OK again, a fixed parser turns a FAILED shard
into data, and a campaign's derived series follow its lanes. Re-recording the shards drops the points
(:func:`zlops.store.runs.record_shard`); the rescore writes them again from the stored results in the
transaction that stores its table (:func:`zlops.store.series.refresh_series_points`), so history never
keeps the figures of a parse the rescore replaced, nor loses the night.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops import __version__
from zlops.campaign.run import is_lane, lane_missing, reread_lane, store_derived, stored_plans
from zlops.config.settings import Config
from zlops.errors import ZlopsError
from zlops.model import CompareSummary, Comparison, ShardOutcome, ShardStatus
from zlops.run.ingest import ShardRead, read_shard
from zlops.run.runner import RUN_LOG, partial_note, read_manifest
from zlops.steps.compare import compare as compare_step
from zlops.steps.context import context_for, open_store
from zlops.store.comparisons import archive_comparisons, save_comparisons
from zlops.store.series import refresh_series_points

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RescoreChange:
    pool: str
    case: str
    metric: str
    before: Comparison | None
    after: Comparison | None

    @property
    def changed(self) -> bool:
        b, a = self.before, self.after
        if b is None or a is None:
            return True
        return b.verdict != a.verdict or b.judgement.change_pct != a.judgement.change_pct


@dataclass(frozen=True)
class RescoreResult:
    run_key: str
    revision: int | None                # archive revision that holds the previous table; None: nothing changed
    summary: CompareSummary
    changes: tuple[RescoreChange, ...]
    reparsed: int
    failed: tuple[str, ...]
    baseline_note: str = ""

    def lines(self) -> list[str]:
        kept = ("nothing changed: no archive revision added" if self.revision is None else
                f"previous verdicts kept as archive revision {self.revision}")
        out = [f"rescored {self.run_key}: {self.reparsed} shard(s) re-parsed; {kept}"]
        if self.baseline_note:
            out.append(f"  baseline: {self.baseline_note}")
        out += [f"  shard {f}" for f in self.failed]
        moved = [c for c in self.changes if c.changed]
        out.append(f"{len(moved)} of {len(self.changes)} series changed:")
        for c in moved:
            before = "-" if c.before is None else f"{c.before.verdict.value} {_pct(c.before)}"
            after = "-" if c.after is None else f"{c.after.verdict.value} {_pct(c.after)}"
            out.append(f"  {c.pool} / {c.case} ({c.metric}): {before} -> {after}")
        out.append(self.summary.overall_line())
        return out


def _pct(c: Comparison) -> str:
    return "" if c.judgement.change_pct is None else f"({c.judgement.change_pct:+.2f}%)"


def rescore(config: Config, run_key: str) -> RescoreResult:
    """Re-parse and re-judge ``run_key`` (see the module docstring)."""
    store = open_store(config)
    run = store.get_run(run_key)
    if run is None:
        raise ZlopsError(f"unknown run {run_key!r}; list runs with `zlops runs`")
    flags = run.meta.get("compare_flags") or {}
    if "allow_caliber_mismatch" in flags:  # judge under the flags the night ran with
        config = config.model_copy(update={"allow_caliber_mismatch": bool(flags["allow_caliber_mismatch"])})
    ctx = context_for(config, run.suite, run_key)
    shards = store.shards(run_key)
    files = {(o.pool, o.device): _results_path(o) for o in shards}
    plans = stored_plans(run.meta) if ctx.suite.campaign is not None else {}
    lanes = {(o.pool, o.device): plans[o.pool] for o in shards if o.pool in plans and is_lane(o)}
    gone = [f"{o.pool}/{o.device} ({files[(o.pool, o.device)] or 'no results file recorded'})" for o in shards
            if (o.pool, o.device) not in lanes and o.status is ShardStatus.OK
            and not (files[(o.pool, o.device)] and files[(o.pool, o.device)].exists())]
    gone += [f"{o.pool}/{o.device} campaign shard {what}" for o in shards if (o.pool, o.device) in lanes
             for what in lane_missing(o)]
    if gone or not shards:
        what = ", ".join(gone) if gone else "the run has no shard"
        raise ZlopsError(f"cannot rescore {run_key}: the artifacts it would re-derive from are gone: {what}. Rescore "
                         "re-parses what was measured; it will not re-judge stored rows as if they were re-read. "
                         "Restore the artifacts folder, or keep the stored verdicts")
    before = {(c.pool, c.case, c.metric): c for c in store.comparisons(run_key)}
    extras = store.shard_extras(run_key)
    reparsed, failed = 0, []
    partial = tuple(ctx.suite.partial_exit_codes)
    for outcome in shards:
        path = files[(outcome.pool, outcome.device)]
        plan = lanes.get((outcome.pool, outcome.device))
        if plan is None and (path is None or not path.exists()):
            continue  # nothing was written: the shard's status stands
        extra = extras.get((outcome.pool, outcome.device), {})
        if plan is not None:  # a campaign lane: its gang shards' own files, each read as the lane read it
            lane, results = reread_lane(ctx, plan, outcome)   # the contention rule per gang shard
            read = ShardRead(lane, tuple(results))
        elif outcome.status is ShardStatus.TIMEOUT or (outcome.exit_code not in (None, 0, *partial)):
            if outcome.status is ShardStatus.OK:   # read as partial once; today's suite no longer accepts the code
                outcome = replace(outcome, status=ShardStatus.FAILED, error=(
                    f"benchmark exited with code {outcome.exit_code} (not in the suite's partial_exit_codes); see "
                    f"{outcome.artifact_dir / RUN_LOG}"))
            read = ShardRead(outcome)  # a crash stays a crash, whatever the file says
        else:  # the file read as the nightly reads it, today's contention limits on what was sampled
            code = outcome.exit_code
            note = None if code in (None, 0) else partial_note(code, outcome.artifact_dir / RUN_LOG)
            read = read_shard(config, ctx.suite_name, replace(outcome, status=ShardStatus.OK, error=note),
                              results_file=path, telemetry=extra.get("telemetry") or {})
        if read.outcome.status is not ShardStatus.OK:
            failed.append(f"{outcome.pool}/{outcome.device}: {read.outcome.error}")
        store.record_shard(run_key, replace(read.outcome, results_file=path), read.results,
                           telemetry=extra.get("telemetry"), identity=extra.get("identity"))
        reparsed += 1
    if ctx.suite.campaign is not None:  # the derived series, from the re-parsed lanes
        store_derived(ctx, store)
    if ctx.suite.canary is not None:   # the night's recall canary again, as it was planted (its place in the meta)
        from zlops.steps.canary import plant

        plant(ctx, store)
    baseline_runs = run.meta.get("baseline_runs")
    if isinstance(baseline_runs, dict):
        note = "the night's own: " + (", ".join(sorted({k for keys in baseline_runs.values() for k in keys}))
                                      or "none (every series was new)")
    else:
        baseline_runs = None
        note = ("the run recorded no baseline runs (compared before zlops kept them): the newest accepted runs "
                "that finished before it started")
    summary = compare_step(ctx, baseline_runs=baseline_runs, as_of=run.started_at, save=False)
    summary = _with_stored_ab(config, run.meta, summary, before)
    after = {(c.pool, c.case, c.metric): c for c in summary.comparisons}
    changes = tuple(RescoreChange(*key, before.get(key), after.get(key)) for key in sorted(before.keys() | after))
    revision = None
    with store.session() as session:  # the run's points, and its table when it changed, in one transaction
        if any(_differs(before.get(k), after.get(k)) for k in before.keys() | after):
            when = datetime.now(timezone.utc).isoformat(timespec="seconds")
            revision = archive_comparisons(session, run_key, when=datetime.now(timezone.utc),
                                           reason=f"rescore at {when} by zlops {__version__} (judge {config.judge})")
            save_comparisons(session, run_key, summary.comparisons)
        # re-recording the shards dropped the run's series points (the next nights' history): write them
        # again from the re-read results, so history reads the rescored figures from points, as for any night
        refresh_series_points(session, run_key)
    if revision is not None and run.kind == "nightly":   # the canary's nights take the rescored verdicts
        from zlops.steps.canary import record

        record(ctx, store, store.get_run(run_key) or run, summary.comparisons)
    log.info("rescored %s: %d changed", run_key, sum(c.changed for c in changes))
    return RescoreResult(run_key, revision, summary, changes, reparsed, tuple(failed), note)


def _with_stored_ab(config: Config, meta: Mapping[str, Any], summary: CompareSummary,
                    before: Mapping[tuple[str, str, str], Comparison]) -> CompareSummary:
    """Re-apply the night's own A/B evidence: a suspect whose stored row holds the A/B's runs is decided
    by those runs again (:func:`zlops.judge.judges.confirm_suspect`), as the night decided it, never left a
    suspect because a rescore cannot re-run the A/B."""
    from zlops.judge import setup as judging
    from zlops.judge.judges import confirm_suspect

    setup, _ = judging.for_run(meta, config)
    policy = setup.policy or config.noise.policy(setup.thresholds)
    rows = []
    for c in summary.comparisons:
        old = before.get((c.pool, c.case, c.metric))
        f = old.figures if old is not None else None
        if c.verdict.awaiting_confirmation and f is not None and f.runs_base and f.runs_head:
            label = f.reference_label.split(",")[0] if f.reference_label.startswith("A/B") else "A/B base"
            c = replace(c, judgement=confirm_suspect(c.judgement, f.runs_base, f.runs_head,
                                                     lower_is_better=c.lower_is_better, policy=policy,
                                                     base_label=label))
        rows.append(c)
    from zlops.judge.derived import follow_sources

    return CompareSummary(summary.run_key, summary.suite, summary.sha, tuple(follow_sources(rows)))


def _results_path(outcome: ShardOutcome) -> Path | None:
    manifest = read_manifest(outcome.artifact_dir) or {}
    return Path(manifest["results_file"]) if manifest.get("results_file") else outcome.results_file


def _differs(a: Comparison | None, b: Comparison | None) -> bool:
    """Whether two versions of a row differ in anything the store keeps (verdict, figures, note, sides)."""
    if a is None or b is None:
        return a is not b
    return (a.verdict, a.judgement.change_pct, a.judgement.worse_pct, a.judgement.threshold_pct, a.judgement.note,
            a.unit, a.base, a.head) != (b.verdict, b.judgement.change_pct, b.judgement.worse_pct,
                                                b.judgement.threshold_pct, b.judgement.note, b.unit, b.base,
                                                b.head)


@dataclass(frozen=True)
class Revision:
    """One archived compare table of a run (``zlops rescore --show``)."""

    revision: int
    archived_at: datetime
    reason: str
    counts: tuple[tuple[str, int], ...]


def revisions(config: Config, run_key: str) -> list[Revision]:
    """The archived compare tables of ``run_key``, oldest first, with their verdict counts."""
    store = open_store(config, read_only=True)
    if store.get_run(run_key) is None:
        raise ZlopsError(f"unknown run {run_key!r}; list runs with `zlops runs`")
    return [Revision(rev, when, reason, _counts(rows))
            for rev, when, reason, rows in store.archived_comparisons(run_key)]


def _counts(rows: list[Comparison]) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    for c in rows:
        counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
    return tuple(sorted(counts.items()))


def show_lines(config: Config, run_key: str) -> list[str]:
    """The run's archived revisions, then its current table, one line each with verdict counts."""
    store = open_store(config)
    past = revisions(config, run_key)

    def fmt(counts: tuple[tuple[str, int], ...]) -> str:
        return ", ".join(f"{n} {v}" for v, n in counts) or "no rows"

    out = [f"{run_key}: {len(past)} archived revision(s)"]
    out += [f"  revision {r.revision}  {r.archived_at.isoformat(timespec='seconds')}  {r.reason}: {fmt(r.counts)}"
            for r in past]
    out.append(f"  current: {fmt(_counts(store.comparisons(run_key)))}")
    return out
