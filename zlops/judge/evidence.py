"""The evidence a night's verdicts stand on, built one way for every caller of the judge.

What the judge needs beyond tonight's and the baseline's figures: the caliber check per (pool,
baseline run), the failed pools, and for the noise judge each series' history of accepted nights
(never across a caliber wall, restarted at the last level change), the per-run values of its earlier
A/Bs and the pool's telemetry. :func:`judge_inputs` builds them from the night's window of runs
(:meth:`Store.compare_window`) with a constant number of queries, whatever the number of series;
:func:`series_histories` is the part a PR compare uses for the nightly history of its series.
After judging, :func:`invalid_rows` turns what only invalid shards measured into INVALID rows and
:func:`annotate_change_points` names the first bad night of each flagged series.
"""

from __future__ import annotations

import fnmatch
import itertools
import logging
import statistics
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zlops.errors import ZlopsError
from zlops.host import gitops
from zlops.judge import compare as cmp
from zlops.judge import setup as judging
from zlops.model import CaseResult, ShardStatus, Verdict
from zlops.store import Store

if TYPE_CHECKING:
    from zlops.steps.context import RunContext

log = logging.getLogger(__name__)


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


def pool_extras(store: Store, run_key: str) -> dict[str, list[dict[str, Any]]]:
    """Per pool, the identity/telemetry extras of the run's ok shards."""
    ok = {(o.pool, o.device) for o in store.shards(run_key) if o.status is ShardStatus.OK}
    out: dict[str, list[dict[str, Any]]] = {}
    for (pool, device), extra in sorted(store.shard_extras(run_key).items()):
        if (pool, device) in ok:
            out.setdefault(pool, []).append(extra)
    return out


def series_histories(frame: Any, keys: Collection[cmp.SeriesKey], *, walls: Mapping[str, str] | None = None,
                     evidence: Mapping[tuple[str, str, str, str], tuple[Verdict, Any]] | None = None,
                     before_pending: dict[cmp.SeriesKey, cmp.BaselinePoint] | None = None,
                     pending_onset: dict[cmp.SeriesKey, str] | None = None,
                     pending_ab: set[cmp.SeriesKey] | None = None,
                     ab_noise: dict[cmp.SeriesKey, float] | None = None,
                     ) -> tuple[dict[cmp.SeriesKey, Any], dict[cmp.SeriesKey, list[float]], set[cmp.SeriesKey]]:
    """Per series of ``keys``: its accepted night medians in ``frame`` (:meth:`Store.history_frame`),
    oldest first, as the judge reads them, and the per-run values of its earlier A/Bs (``processes``).

    - A caliber wall (``walls``: pool -> the newest history run measured on another caliber) is not
      crossed: the wall's night and the nights before it are not used, so the reference and the noise
      restart on the new caliber.
    - The history restarts at the last night that changed the series' level (that night included:
      regression, severe, improved; :attr:`Verdict.changes_level`), or a confirmed step would be
      reported again every night until the window's median moved past it (Otava segments).
    - Unresolved suspects never enter the reference or the noise model (issue 22): the newest nights
      whose stored verdicts are a run of suspects in one direction (:func:`zlops.stats.decide.unresolved_suspects`:
      an A/B that could not decide leaves one unresolved for several nights) are left out, all but the
      newest (and only over at least 3 earlier nights: :func:`zlops.stats.decide.held_out_nights`),
      which the judge re-judges against the nights before the run and holds out itself
      (:func:`zlops.stats.judge_tonight`), so last night and tonight are judged against the same nights.
    - ``processes``: the per-run values of the A/Bs the series had within what is kept (each run is a
      process at its level; after a confirmed change only its head runs are at the current level; an
      unresolved suspect's A/B, which could not decide, counts for nothing); the noise model and the
      process-level detection use them (issue 11).
    - ``settled``: the series whose newest night's stored verdict is no unresolved suspect (with
      ``evidence`` given): the judge neither holds it out nor re-judges it as last night's suspect
      (an A/B cleared it, or labelled it unmeasurable).
    - ``before_pending`` (filled when given): per series whose newest nights are a run of unresolved
      suspects, the newest night before that run (run, commit, median). It is what tonight is judged
      against, so it is what an A/B of tonight must run as its base: the suspect nights' own commit would
      measure the change against itself (issue 22, live H200: night S's suspect +2.87% stayed unresolved,
      the second S night's A/B ran S against S and "cleared" it, +0.00%).
    - ``pending_onset`` (filled with ``before_pending``): the commit of the first night of that run of suspects;
      where it ran the code of the night before the run, the move came with no code change
      (:func:`judge_inputs`' ``hold``).
    - ``pending_ab`` (filled when given): the series whose run of unresolved suspects holds a night whose A/B
      ran and could not decide (its stored figures carry A/B runs): nights alone may not confirm them.
    - ``ab_noise`` (filled when given): per series with A/B runs in what is kept, the noise an interleaved A/B
      sees (:func:`zlops.stats.noise.ab_noise_pct`: the spread of each A/B side's runs about their own median), kept apart from the
      drift between nights, which the history carries. An undecided A/B counts here: its runs still show how
      far fresh processes of one commit land from each other minutes apart; so do the runs of an A/B of other
      series that measured this one beside them (``Figures.seen_base``/``seen_head``: a FlagGems A/B re-runs a
      suspect's whole op, every shape and metric of it), learned at no device cost.

    ``evidence`` is :meth:`Store.verdict_evidence` of the frame's runs (``only_evidence``): level
    changes and A/B rows, a few per night. The frame holds each series' rows consecutively: the
    groups are cut where the key changes, the medians are numpy views, and only series with a
    wall or evidence take a Python step beyond the cut.
    """
    import numpy as np

    from zlops.stats.decide import held_out_nights, unresolved_suspects
    from zlops.stats.noise import ab_noise_pct
    from zlops.store.frames import series_starts

    history: dict[cmp.SeriesKey, Any] = {k: [] for k in keys}
    processes: dict[cmp.SeriesKey, list[float]] = {k: [] for k in keys}
    settled: set[cmp.SeriesKey] = set()
    if frame is None or len(frame) == 0:
        return history, processes, settled
    pools, cases, metrics_ = (frame[c].to_numpy(dtype=object) for c in ("pool", "case", "metric"))
    run_keys = frame["run_key"].to_numpy(dtype=object)
    medians = frame["median"].to_numpy(dtype=float)
    shas, units, counts = ((frame[c].to_numpy() for c in ("sha", "unit", "n")) if before_pending is not None
                           else (None, None, None))
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
        if evidence is not None and not (found_of and run_keys[b - 1] in found_of
                                         and found_of[run_keys[b - 1]][0].awaiting_confirmation):
            settled.add(key)
        if found_of:
            for i in range(b - 1, lo - 1, -1):
                found = found_of.get(run_keys[i])
                if found is not None and found[0].changes_level:
                    lo = i
                    break
            # the trailing run of unresolved suspects (stored verdicts): all but the newest stay out of the
            # history, which the judge re-judges and holds out itself (zlops.stats.judge_tonight)
            states = [found_of[run_keys[i]][0].value if run_keys[i] in found_of else None for i in range(lo, b)]
            pending = unresolved_suspects(states)
            drop = held_out_nights(b - lo, pending)
            if before_pending is not None and shas is not None and pending and b - pending - 1 >= lo:
                ref = b - pending - 1
                before_pending[key] = cmp.BaselinePoint(str(run_keys[ref]), str(shas[ref]), str(units[ref]),
                                                        float(medians[ref]), int(counts[ref]))
                if pending_onset is not None:
                    pending_onset[key] = str(shas[ref + 1])
            runs: list[float] = []
            sides: list[tuple[float, ...]] = []
            level = float(np.median(medians[lo:b]))
            for i in range(lo, b):
                found = found_of.get(run_keys[i])
                if found is not None and found[1] is not None and found[1].seen_head:
                    # measured beside another series' A/B (the same fresh processes): its A/B noise, nothing more
                    sides += [found[1].seen_base, found[1].seen_head]
                if found is None or found[1] is None or not found[1].runs_head:
                    continue
                verdict, figures = found
                sides += [figures.runs_base, figures.runs_head]
                if pending and i >= b - pending:   # an unresolved suspect's A/B: undecided, no evidence yet
                    if pending_ab is not None:
                        pending_ab.add(key)
                    continue
                for side in (figures.runs_head,) if verdict.changes_level else (figures.runs_base, figures.runs_head):
                    runs.extend(_at_level(side, level))
            processes[key] = runs
            if ab_noise is not None and (sigma := ab_noise_pct(sides)) is not None:   # zlops.stats.noise
                ab_noise[key] = sigma
            if drop:
                history[key] = np.concatenate((medians[lo:b - drop - 1], medians[b - 1:b]))
                continue
        history[key] = medians[lo:b]
    return history, processes, settled


def _at_level(side: Sequence[float], level: float) -> list[float]:
    """One A/B side's runs (fresh processes of one commit, minutes apart) as between-process evidence at the
    series' current ``level``: each run's ratio to the side's median, times the level. What is kept is how far
    processes of one evening land from each other (two process levels inside one side stay two levels); what is
    dropped is where that evening's machine sat, the drift between nights, which the history carries already.
    Pooled raw, the runs of A/Bs made on drifting nights read as process levels (a quiet series A/B'd on nights
    at 0.96 and 1.05 became "bimodal 0.96/1.05: unmeasurable" and was never asked again). A side of fewer than
    two runs says nothing of the spread: left out."""
    values = [float(v) for v in side if v > 0]
    if len(values) < 2 or level <= 0:
        return []
    mid = statistics.median(values)
    return [v / mid * level for v in values]


def caliber_walls(store: Store, run_keys: set[str],
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
    tonight = pool_extras(store, ctx.run_key)
    failed_pools: dict[str, str] = {}
    for o in store.shards(ctx.run_key):
        if o.status is not ShardStatus.OK:
            line = (o.error or "").splitlines()[0] if o.error else ""
            failed_pools[o.pool] = "; ".join(filter(None, (failed_pools.get(o.pool),
                                                           f"shard {o.pool}/{o.device} {o.status.value}: {line}")))
    caliber = {}
    shas = {b.run_key: b.sha for b in baselines.values()}
    for pool, base_run in {(k[0], b.run_key) for k, b in baselines.items() if k in head}:
        base_extras = pool_extras(store, base_run).get(pool, [])
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
    walls = caliber_walls(store, set(run_keys), tonight)
    before_pending: dict[cmp.SeriesKey, cmp.BaselinePoint] = {}
    onset: dict[cmp.SeriesKey, str] = {}
    tried: set[cmp.SeriesKey] = set()
    ab_noise: dict[cmp.SeriesKey, float] = {}
    history, processes, settled = series_histories(in_window, head, walls=walls,
                                                   evidence=store.verdict_evidence(run_keys, only_evidence=True),
                                                   before_pending=before_pending, pending_onset=onset,
                                                   pending_ab=tried, ab_noise=ab_noise)
    # the first suspect night ran the code of the night before it: no commit to blame for the move (one git call
    # per distinct pair of commits, a few per night, none per series)
    pairs = {(b.sha, onset[k]) for k, b in before_pending.items() if k in onset}
    same = {pair for pair in pairs if same_code_reason(ctx, *pair) is not None}
    telemetry = {}
    for pool, extras in tonight.items():  # the worst shard of the pool speaks for it
        summaries = [e.get("telemetry") or {} for e in extras]
        telemetry[pool] = max(summaries, key=lambda t: (t.get("below_90pct_peak_share") or 0.0,
                                                        t.get("temp_max_c") or 0.0))
    return cmp.JudgeInputs(history=history, telemetry=telemetry, caliber=caliber,
                           allow_caliber_mismatch=setup.allow_caliber_mismatch, failed_pools=failed_pools,
                           processes=processes, settled=frozenset(settled), before_pending=before_pending,
                           hold=hold_reasons(before_pending, onset, same, tried), ab_noise=ab_noise)


def hold_reasons(before_pending: Mapping[cmp.SeriesKey, cmp.BaselinePoint], onset: Mapping[cmp.SeriesKey, str],
                 same: Collection[tuple[str, str]], tried: Collection[cmp.SeriesKey]) -> dict[cmp.SeriesKey, str]:
    """Per series whose unresolved suspect nights nights alone may not confirm, why (zlops.stats.decide's
    ``hold``): its first suspect night ran the code of the night before it (``same``: such (base, onset) commit
    pairs), or an A/B of it against that night ran on a suspect night and could not decide (``tried``)."""
    from zlops.stats.decide import AB_UNDECIDED_PENDING, SAME_CODE_PENDING

    out = {k: SAME_CODE_PENDING for k, b in before_pending.items() if (b.sha, onset.get(k)) in same}
    for k in tried:
        out.setdefault(k, AB_UNDECIDED_PENDING)
    return out


def same_code_reason(ctx: RunContext, base_sha: str, head_sha: str | None = None) -> str | None:
    """Why an A/B of ``head_sha`` (default tonight's commit) against ``base_sha`` could show no code change, or
    None when it could.

    The same commit, or two commits whose trees differ only in the suite's ``inert_paths`` (docs, licence, CI
    files). A git error leaves the A/B to run (the cautious side)."""
    head = head_sha or ctx.sha
    if base_sha == head:
        return (f"its baseline is this commit itself ({base_sha[:7]}): an A/B would compare the commit with "
                "itself and can show no code change")
    globs = ctx.suite.inert_paths
    if not globs or not base_sha:
        return None
    try:
        paths = gitops.changed_paths(gitops.mirror_of(ctx.suite.repo, ctx.mirror_path), base_sha, head)
    except ZlopsError as exc:
        log.warning("could not list the paths changed from %s to %s (%s): read as a code change", base_sha[:7],
                    head[:7], exc)
        return None
    if any(not any(fnmatch.fnmatchcase(p, g) for g in globs) for p in paths):
        return None
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return (f"its baseline {base_sha[:7]} differs from this commit only in inert paths ({shown or 'no file'}; "
            "the suite's inert_paths): an A/B would compare the same code with itself and can show no code change")
