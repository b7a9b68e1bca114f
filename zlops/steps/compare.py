"""The ``compare`` task: judge every series of the run against its baseline and store the rows.

The past is read once (:meth:`Store.compare_window`: the judge's window of nights and every series'
baseline from the stored series points, never raw samples); the evidence is :mod:`zlops.judge.evidence`'s;
the judge and its thresholds are the run's :class:`zlops.judge.setup.JudgingSetup`, stored with the run.
A rescore (:mod:`zlops.steps.rescore`) calls the same :func:`compare` with ``save=False``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from zlops.host import gitops
from zlops.judge import compare as cmp
from zlops.judge import evidence
from zlops.judge import setup as judging
from zlops.model import CompareSummary, ShardStatus, Summary, Verdict, is_canary
from zlops.progress import LogProgress, Progress
from zlops.steps.context import RunContext
from zlops.store import Store
from zlops.store.points import series_points


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
    store = ctx.store
    with progress.step("compare", suite=ctx.suite_name, commit=ctx.sha[:12]):
        mirror = gitops.ensure_mirror(ctx.suite.repo, ctx.mirror_path)
        shas = gitops.ancestors(mirror, ctx.sha, max_count=ctx.config.baseline_depth)
        shards = store.shards(ctx.run_key)
        invalid = {(o.pool, o.device): o.error or "invalid" for o in shards if o.status is ShardStatus.INVALID}
        # tonight is what the OK shards measured: the rule the history's points follow too
        # (zlops.store.frames.points_from_results), so tonight and its later history are one pooling
        ok = {(o.pool, o.device) for o in shards if o.status is ShardStatus.OK}
        results = store.results(ctx.run_key)
        head = cmp.pool_results([r for r in results if (r[0], r[1]) in ok])
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
        inputs = evidence.judge_inputs(ctx, store, head, baselines, set(shas), setup=setup, frame=window.history)
        points = series_points(head)  # tonight's median, n and spread per series: its row and its history point
        rows = cmp.build_comparisons(suite=ctx.suite_name, pools=ctx.suite.pools, head=head, baselines=baselines,
                                     newest_baseline_run=newest, setup=setup, inputs=inputs,
                                     head_summaries={(p.pool, p.case, p.metric): Summary(p.median, p.n)
                                                     for p in points})
        if any(ctx.config.measures_paired(p) for p in ctx.suite.pools):  # judged from tonight's pairs
            from zlops.judge.derived import follow_sources
            from zlops.judge.paired import judge_rows

            run = store.get_run(ctx.run_key)
            rows = follow_sources(judge_rows(ctx.config, run.meta if run is not None else {}, rows,
                                             potential_pct=setup.thresholds.potential_pct,
                                             regression_pct=setup.thresholds.regression_pct))
        rows = evidence.invalid_rows(ctx.suite_name, rows, results, invalid, head, baselines)
        rows = evidence.annotate_change_points(ctx, store, rows, window, setup)
        if save:
            store.save_comparisons(ctx.run_key, rows)
            store.save_series_points(ctx.run_key, points)   # tonight, pooled: the next nights' history
            record_compare_setup(ctx, store, rows, setup)
    return cmp.summarize(ctx.run_key, ctx.suite_name, ctx.sha, rows)


def record_compare_setup(ctx: RunContext, store: Store, rows: Sequence[Any], setup: judging.JudgingSetup) -> None:
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


def summary_dict(summary: CompareSummary) -> dict[str, Any]:
    """A night's counts and overall line (the compare task's XCom); a recall canary's rows are not the night's."""
    summary = CompareSummary(summary.run_key, summary.suite, summary.sha,
                             tuple(c for c in summary.comparisons if not is_canary(c.case)))
    return {"run_key": summary.run_key, "sha": summary.sha, "judged": summary.judged,
            **{v.value: summary.count(v) for v in Verdict}, "overall": summary.overall_line()}


def compare_task(ctx: RunContext) -> dict[str, Any]:
    """The Airflow task: :func:`compare`, its summary as the XCom."""
    return summary_dict(compare(ctx))
