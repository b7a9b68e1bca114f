"""Paired nights (``pools.<name>.measure: paired``): tonight's commit and its baseline commit, interleaved.

On a noisy host (a CPU pool, a shared CI runner) the load changes between nights, so tonight measured
alone against a stored baseline mixes the code's change with the host's. A paired night measures, on
each device, the baseline commit (A: the commit of the pool's latest accepted nightly on an ancestor,
the baseline the plain night compares with) and tonight's commit (B) in interleaved fresh processes,
each pair in random order (:func:`zlops.judge.interleave.run_pairs`), and judges every series from those
pairs with the A/B's statistics (:func:`zlops.stats.confirm_ab`): load that hits both sides cancels.

- The contention gate judges the pair, not the host: a pair whose two runs saw different loads (other
  processes' CPU differing by more than ``paired.max_foreign_cpu_diff_pct``, or steal by more than the
  pool's ``max_steal_pct``) is discarded with the figures, the host is given ``paired.quiet_wait_s`` to
  quiet, and the pair is measured again while ``paired.budget_s`` lasts. A foreign process on the
  device invalidates a run as always.
- Verdicts: *confirmed* (the pairs' rank test at ``noise.alpha``) -> regression / severe / improved (the
  interleaved runs are the confirmation);
  *cleared* (the CI of the change lies inside +-``paired.equivalence_pct``) -> unchanged;
  *inconclusive* -> a suspect with its figures (never unchanged, never alerted); *invalid* -> invalid
  with the reason. With no valid pair at all the shard is INVALID with the figures (could not measure).
- Tonight's head runs are stored as tonight's samples, so history, reports and pages read as before;
  the pairs' per-run medians and what they cost are kept in the run's meta (``paired/<pool>/<device>``).
- The first night of a pool (no baseline) measures tonight alone, as a plain night.

It costs about twice the processes of a plain night (the baseline is measured again every night).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops.errors import DeviceBusy, HostBusy, ZlopsError
from zlops.judge.interleave import run_pairs
from zlops.model import CaseResult, Comparison, Judgement, ShardOutcome, ShardStatus, Verdict
from zlops.progress import LogProgress, Progress

log = logging.getLogger(__name__)

Key = tuple[str, str]
META_PREFIX = "paired/"
#: busy pairs a paired night (or a PR compare) may discard and measure again; paired.budget_s is the real bound
MAX_DISCARDS = 50
#: the outcomes of a paired judgement (zlops.stats.Confirmation.outcome)
CONFIRMED, CLEARED, INCONCLUSIVE, INVALID = "confirmed", "cleared", "inconclusive", "invalid"


# --- the pair gate --------------------------------------------------------------------------------

def pair_busy_reason(first: Mapping[str, Any], second: Mapping[str, Any], *, sides: tuple[str, str],
                     max_foreign_cpu_diff_pct: float | None, max_steal_pct: float | None) -> str | None:
    """Why a pair cannot be judged: its two runs saw different host loads (None: balanced).

    ``first``/``second``: the two runs' telemetry summaries (``foreign_cpu_mean_pct``, ``steal_max_pct``);
    ``sides``: their names for the message. Load that both runs saw cancels in their ratio; a burst
    that hit one only does not, so the figure judged is the difference, named with both values.
    """
    reasons = []
    fa, fb = first.get("foreign_cpu_mean_pct"), second.get("foreign_cpu_mean_pct")
    if max_foreign_cpu_diff_pct is not None and fa is not None and fb is not None \
            and abs(float(fa) - float(fb)) > max_foreign_cpu_diff_pct:
        reasons.append(f"host load unbalanced: other processes used {float(fa):.0f}% CPU during the {sides[0]} run "
                       f"and {float(fb):.0f}% during the {sides[1]} run (difference limit "
                       f"{max_foreign_cpu_diff_pct:g}%)")
    sa, sb = first.get("steal_max_pct"), second.get("steal_max_pct")
    if max_steal_pct is not None and sa is not None and sb is not None and abs(float(sa) - float(sb)) > max_steal_pct:
        reasons.append(f"steal unbalanced: the hypervisor stole {float(sa):.0f}% during the {sides[0]} run and "
                       f"{float(sb):.0f}% during the {sides[1]} run (difference limit {max_steal_pct:g}%)")
    return "; ".join(reasons) or None


@dataclass
class PairKeeper:
    """Judges each pair's balance as its second run ends and keeps what the valid pairs' runs measured.

    A pair is two consecutive runs of :func:`zlops.judge.interleave.run_pairs`: a run that arrives with no
    run waiting is a pair's first, the next one completes it. Not by the run's number: the runs are numbered
    by count, and a pair whose first run was discarded (busy) is run again from an odd number, after which
    numbers' parity no longer says which run is first (a paired PR compare kept no pair after one busy run and
    "measured nothing on HEAD"). :meth:`add` raises :class:`HostBusy` for the second run of an unbalanced pair,
    so the runner discards the pair; :meth:`drop` forgets a waiting first run (the pair is discarded and run
    again); ``kept`` holds, per valid pair, (side, payload) of both runs.
    """

    max_foreign_cpu_diff_pct: float | None
    max_steal_pct: float | None
    enabled: bool = True
    pending: tuple[str, Any, Mapping[str, Any]] | None = None
    kept: list[tuple[tuple[str, Any], tuple[str, Any]]] = field(default_factory=list)

    def add(self, index: int, side: str, payload: Any, telemetry: Mapping[str, Any]) -> None:
        """Run ``index`` (its number, for the caller's folders; not used to pair) measured ``payload``."""
        first, self.pending = self.pending, None
        if first is None:
            self.pending = (side, payload, telemetry)
            return
        if first[0] == side:   # two runs of one side in a row: the first one's pair was cut; start again here
            self.pending = (side, payload, telemetry)
            return
        if self.enabled:
            reason = pair_busy_reason(first[2], telemetry, sides=(first[0], side),
                                      max_foreign_cpu_diff_pct=self.max_foreign_cpu_diff_pct,
                                      max_steal_pct=self.max_steal_pct)
            if reason:
                raise HostBusy(reason)
        self.kept.append(((first[0], first[1]), (side, payload)))

    def drop(self, index: int) -> None:
        """The run ``index`` was invalid on its own: its pair is discarded, forget a waiting first run."""
        self.pending = None


def keeper_for(config: Any, pool: str) -> PairKeeper:
    limits = config.host_limits(pool)
    return PairKeeper(config.paired.max_foreign_cpu_diff_pct, limits.max_steal_pct, enabled=limits.enabled)


def relaxed_config(config: Any, pool: str) -> Any:
    """``config`` with the pool's host-load gate off (a foreign device process still invalidates: see
    :func:`run_limits`). A paired pool's first night (no baseline yet) is measured with it: its figures
    judge nothing (the next night measures this commit again beside its own), so a loaded host must not
    keep the pool from ever getting a baseline."""
    pool_cfg = config.pools[pool]
    return config.model_copy(update={"contention": config.contention.model_copy(update={"gate": False}),
                                     "pools": {**config.pools, pool: pool_cfg.model_copy(
                                         update={"contention_gate": False})}})


def run_limits(config: Any, pool: str) -> Any:
    """The per-run gate of a paired run: only what one run alone can show (a foreign process on the
    device); host load is judged per pair (:class:`PairKeeper`)."""
    from zlops.host.contention import HostLimits

    return HostLimits(enabled=config.host_limits(pool).enabled)


def quiet_fn(config: Any, pool: str) -> Any:
    """What a discarded pair waits on: the host under the pool's limits, at most ``paired.quiet_wait_s``."""
    from zlops.host.contention import wait_for_quiet

    limits = dataclasses.replace(config.host_limits(pool), contention_wait_s=config.paired.quiet_wait_s)

    def quiet() -> Any:
        return wait_for_quiet(limits, locks_dir=config.locks_dir)
    return quiet


# --- the statistics -------------------------------------------------------------------------------

def judge_pairs(base_runs: Sequence[float], head_runs: Sequence[float], *, lower_is_better: bool,
                threshold_pct: float, severe_pct: float, alpha: float,
                equivalence_pct: float | None = None) -> tuple[str, Any]:
    """(outcome, Confirmation) of one series' paired runs by :func:`zlops.stats.confirm_ab`.

    ``confirmed``: regression/severe/improved, and the rank test's p below ``alpha`` (confirm_ab's
    level-shift rule alone does not confirm a paired night: below); ``cleared``: the CI of the change
    lies inside +-``equivalence_pct`` (default the threshold: an equivalence test); ``inconclusive``:
    neither; ``invalid``: too few runs to decide.
    """
    from zlops import stats

    conf = stats.confirm_ab(base_runs, head_runs, lower_is_better=lower_is_better, threshold_pct=threshold_pct,
                            severe_pct=max(severe_pct, threshold_pct), alpha=alpha, seed=0,
                            equivalence_pct=equivalence_pct)
    outcome = conf.outcome
    if outcome == CONFIRMED and (conf.p_value is None or conf.p_value >= alpha):
        # confirmed by confirm_ab's level-shift rule alone (p < 0.05): an A/B tests only the suspects a
        # night already screened, a paired night tests every series every night; at that level 7 of 170
        # untouched demo case-nights under load had p < 0.05 and 2 were confirmed (docs/benchmarks.md),
        # none had p < alpha. So a paired night confirms on the rank test at alpha only.
        outcome = INCONCLUSIVE
    return outcome, conf


def pairs_to_decide(alpha: float) -> int:
    """The fewest pairs whose rank test can reach ``alpha`` (the smallest two-sided exact Mann-Whitney p
    of n vs n runs is 2 / C(2n, n)): 7 at the default 0.002."""
    import math

    return next(n for n in range(2, 200) if 2.0 / math.comb(2 * n, n) <= alpha)


def paired_judgement(base_runs: Sequence[float], head_runs: Sequence[float], *, lower_is_better: bool,
                     threshold_pct: float, severe_pct: float, alpha: float, equivalence_pct: float | None,
                     base_label: str) -> Judgement:
    """One series' verdict from its paired runs, with the figures it was decided on."""
    from zlops.judge.judges import ab_figures

    try:
        outcome, conf = judge_pairs(base_runs, head_runs, lower_is_better=lower_is_better, threshold_pct=threshold_pct,
                                    severe_pct=severe_pct, alpha=alpha, equivalence_pct=equivalence_pct)
    except ValueError as exc:
        return Judgement(Verdict.INVALID, None, None, threshold_pct, f"paired runs could not be judged: {exc}")
    n = f"{len(base_runs)}+{len(head_runs)} paired runs"
    if outcome == INVALID:
        return Judgement(Verdict.INVALID, None, None, threshold_pct, f"paired night: {conf.reason}")
    figures = ab_figures(base_runs, head_runs, conf, lower_is_better=lower_is_better, threshold_pct=threshold_pct,
                         base_label=base_label)
    eq = equivalence_pct if equivalence_pct is not None else threshold_pct
    if outcome == CONFIRMED:
        return Judgement(Verdict(conf.state.value), None, None, threshold_pct,
                         f"confirmed by {n}: {conf.reason}", figures=figures)
    if outcome == CLEARED:
        return Judgement(Verdict.UNCHANGED, None, None, threshold_pct,
                         f"cleared by {n} (the change's CI lies inside ±{eq:g}%): {conf.reason}", figures=figures)
    worse = conf.worse_pct or 0.0
    verdict = getattr(Verdict, "INCONCLUSIVE", None) or (Verdict.SUSPECT if worse >= 0 else Verdict.SUSPECT_IMPROVED)
    shift_only = (f" (the rank test's p is not below {alpha:g}: a level shift alone confirms no paired night)"
                  if conf.confirmed else "")
    return Judgement(verdict, None, None, threshold_pct,
                     f"inconclusive: {n} neither confirm a change beyond {threshold_pct:g}% nor clear it "
                     f"within ±{eq:g}%: {conf.reason}{shift_only}", figures=figures)


def judge_from_runs(config: Any, rows: Sequence[Comparison],
                    runs: Mapping[Key, tuple[Sequence[float], Sequence[float]]], *, potential_pct: float,
                    regression_pct: float, base_label: str) -> list[Comparison]:
    """``rows`` with every series that has paired runs (``runs``: (case, metric) -> aligned base and head
    run values) judged from them (:func:`paired_judgement`); a caliber refusal or an invalid row stays."""
    out = []
    for c in rows:
        pair = runs.get((c.case, c.metric))
        if pair is None or c.head is None or c.judgement.verdict in (Verdict.INCOMPARABLE, Verdict.INVALID):
            out.append(c)
            continue
        j = paired_judgement(pair[0], pair[1], lower_is_better=c.lower_is_better, threshold_pct=potential_pct,
                             severe_pct=regression_pct, alpha=config.noise.alpha,
                             equivalence_pct=config.paired.equivalence_pct, base_label=base_label)
        out.append(dataclasses.replace(c, judgement=j))
    return out


def judge_rows(config: Any, meta: Mapping[str, Any], rows: Sequence[Comparison], *, potential_pct: float,
               regression_pct: float) -> list[Comparison]:
    """Tonight's rows with every series of a paired pool judged from its paired runs (run meta
    ``paired/<pool>/<device>``: each device's aligned base and head run medians, pooled over devices)."""
    per_pool: dict[str, dict[Key, tuple[list[float], list[float]]]] = {}
    base_sha: dict[str, str] = {}
    for name, value in sorted(meta.items()):
        if not name.startswith(META_PREFIX) or not isinstance(value, Mapping):
            continue
        pool = str(value.get("pool", ""))
        base_sha[pool] = str(value.get("base_sha", ""))
        series = per_pool.setdefault(pool, {})
        for case, metric, base, head in value.get("samples", []):
            b, h = series.setdefault((case, metric), ([], []))
            b.extend(float(x) for x in base)
            h.extend(float(x) for x in head)
    out = list(rows)
    for pool, runs in per_pool.items():
        mine = [c for c in out if c.pool == pool]
        judged = iter(judge_from_runs(config, mine, runs, potential_pct=potential_pct, regression_pct=regression_pct,
                                      base_label=f"paired base {base_sha.get(pool, '')[:7]}"))
        out = [next(judged) if c.pool == pool else c for c in out]
    return out


# --- the paired night of one device ---------------------------------------------------------------

def baseline_sha(ctx: Any, pool: str) -> tuple[str, str] | None:
    """(run key, commit) of the pool's newest accepted nightly on an ancestor of tonight's commit: the
    baseline a plain night compares with (:mod:`zlops.judge.compare`); None on a pool's first night."""
    from zlops.host import gitops

    mirror = gitops.ensure_mirror(ctx.suite.repo, ctx.mirror_path)
    shas = gitops.ancestors(mirror, ctx.sha, max_count=ctx.config.baseline_depth)
    frame = ctx.store.baseline_frame(ctx.suite_name, ancestors=shas, window=50, exclude_run_key=ctx.run_key,
                                     pools=[pool])
    if not len(frame):
        return None
    row = frame.iloc[0]
    return str(row["run_key"]), str(row["sha"])


def run_paired_device(ctx: Any, pool: str, device: int, prepared: Any, *,
                      progress: Progress | None = None) -> ShardOutcome | None:
    """Tonight's paired night on one device: base and head in interleaved fresh processes, tonight's
    head runs stored as tonight's shard, the pairs in the run's meta. None when the pool has no
    baseline yet (the caller measures tonight alone)."""
    from zlops.host import telemetry
    from zlops.run.ingest import read_shard
    from zlops.run.runner import ShardSpec, read_manifest, run_shard
    from zlops.steps.cleanup import cleanup
    from zlops.steps.context import RunContext
    from zlops.steps.prepare import prepare

    progress = progress or LogProgress()
    base = baseline_sha(ctx, pool)
    if base is None:
        progress.note(f"shard {pool}/{device}: paired night without a baseline yet: tonight measured alone "
                      "(its figures judge nothing: the host-load gate waits for the first pair)")
        return None
    base_run, base_commit = base
    config, cfg = ctx.config, ctx.config.paired
    pool_cfg = config.pools[pool]
    relaxed = relaxed_config(config, pool)
    one_run_gate = run_limits(config, pool)
    keeper = keeper_for(config, pool)
    shard_dir: Path = ctx.shard_dir(pool, device)
    base_ctx = RunContext(config, ctx.suite_name, f"{ctx.run_key}:paired-base-{pool}-{device}", base_commit,
                          ctx.auto_devices)
    first_head: dict[str, Any] = {}
    started = datetime.now(timezone.utc)
    from zlops.steps.seeding import side_seed_plan

    seed_plan = side_seed_plan(ctx, pool, device, tonight=False)   # the earlier night's caches, both sides

    def run_one(side: str, index: int) -> tuple[dict[Key, float], float]:
        side_ctx, prep = sides[side]
        out = shard_dir / "paired" / f"{index:03d}{side}"
        spec = ShardSpec(run_key=ctx.run_key, suite_name=ctx.suite_name, suite=ctx.suite, sha=side_ctx.sha, pool=pool,
                         backend=pool_cfg.backend, device=device, worktree=prep.worktree, venv=prep.venv,
                         artifact_dir=out,
                         kernel_cache=shard_dir / "paired" / f"kernel_cache-{side_ctx.sha[:12]}" / "triton_cache",
                         kernel_seed=seed_plan)
        t0 = time.monotonic()
        outcome = run_shard(spec, locks_dir=config.locks_dir, device_wait_s=config.device_wait_s,
                            require_idle=pool_cfg.idle_required)
        took = time.monotonic() - t0
        if outcome.status is ShardStatus.SKIPPED:
            keeper.drop(index)
            raise DeviceBusy(f"paired run {out.name} skipped: {outcome.error}")
        if outcome.status is not ShardStatus.OK:
            keeper.drop(index)
            raise ZlopsError(f"paired run {out.name} ({side_ctx.sha[:7]}) {outcome.status.value}: {outcome.error}")
        summary = {**telemetry.summarize_dir(out), "backend": outcome.backend}
        read = read_shard(relaxed, ctx.suite_name, outcome, telemetry=summary)
        from zlops.host.contention import shard_invalid_reason

        alone = shard_invalid_reason(summary, one_run_gate)
        if alone:
            keeper.drop(index)
            raise HostBusy(f"{'head' if side == 'B' else 'base'} run: {alone}", seconds=took)
        if not read.usable:
            keeper.drop(index)
            raise ZlopsError(f"paired run {out.name}: {read.outcome.error}")
        if side == "B":
            if not first_head:
                first_head.update(summary=summary, identity=(read_manifest(out) or {}).get("identity"), dir=out)
            first_head["evidence"] = list(read.results)   # kept as an invalid night's evidence, as ingest does
        try:
            keeper.add(index, {"A": "base", "B": "head"}[side], (list(read.results), summary), summary)
        except HostBusy as exc:   # the pair's two runs saw different loads
            raise HostBusy(str(exc), seconds=took) from None
        return {(r.case, r.metric): r.median for r in read.results}, took

    def all_decided(samples: dict[Key, tuple[list[float], list[float]]]) -> bool:
        thr = config.thresholds
        for key, (b, h) in samples.items():
            lower = lower_of.get(key, True)
            outcome, _ = judge_pairs(b, h, lower_is_better=lower, threshold_pct=thr.potential_pct,
                                     severe_pct=thr.regression_pct, alpha=config.noise.alpha,
                                     equivalence_pct=cfg.equivalence_pct)
            if outcome not in (CONFIRMED, CLEARED):
                return False
        return bool(samples)

    lower_of: dict[Key, bool] = {}
    try:
        with progress.step("paired", suite=ctx.suite_name, commit=f"{base_commit[:7]}..{ctx.sha[:7]}",
                           device=f"{pool}/{device}"):
            sides = {"A": (base_ctx, prepare(base_ctx, progress=progress)), "B": (ctx, prepared)}
            est = estimate_run_s(ctx.store, base_run, pool)
            pairs = run_pairs(run_one=run_one, seed=zlib.crc32(f"{ctx.run_key}/{pool}/{device}".encode()),
                              min_pairs=cfg.min_pairs, max_pairs=cfg.max_pairs, budget_s=cfg.budget_s, est_run_s=est,
                              decided=_with_directions(all_decided, keeper, lower_of),
                              quiet=quiet_fn(config, pool), max_discards=MAX_DISCARDS)
    finally:
        try:
            cleanup(base_ctx)
        except (OSError, ZlopsError) as exc:
            log.error("cleanup of the paired base worktree %s failed: %s", base_ctx.worktree, exc)
    ended = datetime.now(timezone.utc)
    return _record(ctx, pool, device, base_run, base_commit, pairs, keeper, first_head, started, ended)


def _with_directions(all_decided: Any, keeper: PairKeeper, lower_of: dict[Key, bool]) -> Any:
    """``decided(samples)`` that knows each series' direction from the kept head runs."""
    def decided(samples: dict[Key, tuple[list[float], list[float]]]) -> bool:
        for pair in keeper.kept:
            for _, payload in pair:
                for r in payload[0]:
                    lower_of.setdefault((r.case, r.metric), r.lower_is_better)
        return bool(all_decided(samples))
    return decided


def estimate_run_s(store: Any, base_run: str, pool: str) -> float:
    """Seconds one run is expected to take: what the baseline night's runs took on the pool (a paired
    night's seconds per run, from its meta; a plain night's longest shard), 1 s when nothing says."""
    run = store.get_run(base_run)
    per_run = [float(v["seconds"]) / int(v["runs"]) for k, v in ((run.meta or {}) if run is not None else {}).items()
               if k.startswith(META_PREFIX) and isinstance(v, Mapping) and v.get("pool") == pool
               and int(v.get("runs") or 0) > 0]
    if per_run:
        return max(per_run)
    durations = [o.duration_s for o in store.shards(base_run) if o.pool == pool and o.duration_s]
    return float(max(durations)) if durations else 1.0


def _record(ctx: Any, pool: str, device: int, base_run: str, base_commit: str, pairs: Any, keeper: PairKeeper,
            first_head: Mapping[str, Any], started: datetime, ended: datetime) -> ShardOutcome:
    """Store tonight's shard (the kept pairs' head runs, samples pooled) and the pairs in the run's meta."""
    backend = ctx.config.pools[pool].backend
    art = ctx.shard_dir(pool, device)
    heads: list[CaseResult] = []
    for first, second in keeper.kept:
        for side, (results, _) in (first, second):
            if side == "head":
                heads.extend(results)
    merged: dict[Key, CaseResult] = {}
    for r in heads:
        have = merged.get(r.key)
        merged[r.key] = r if have is None else dataclasses.replace(have, samples=have.samples + r.samples)
    discarded = list(getattr(pairs, "discarded", []))
    meta = {"pool": pool, "device": device, "base_sha": base_commit, "base_run": base_run,
            "pairs": len(keeper.kept), "runs": pairs.runs, "seconds": round(pairs.seconds, 2),
            "est_run_s": round(pairs.est_run_s, 2), "budget_s": ctx.config.paired.budget_s,
            "stopped": pairs.stopped, "discarded": [str(d)[:300] for d in discarded[:20]],
            "samples": [[case, metric, list(b), list(h)] for (case, metric), (b, h) in sorted(pairs.samples.items())]}
    ctx.store.update_run_meta(ctx.run_key, {f"{META_PREFIX}{pool}/{device}": meta})
    if not keeper.kept:
        budget = ctx.config.paired.budget_s
        error = (f"host busy: no balanced pair of base and head runs within the paired budget ({budget:g} s): "
                 f"{len(discarded)} pair(s) discarded, the first for {discarded[0]}" if discarded else
                 f"no pair measured: {pairs.stopped} (a run was expected to take ~{pairs.est_run_s:.0f} s; "
                 "raise paired.budget_s)")
        status = ShardStatus.INVALID
    else:
        error, status = None, ShardStatus.OK
    outcome = ShardOutcome(pool=pool, device=device, backend=backend, status=status, artifact_dir=art, exit_code=0,
                           started_at=started, ended_at=ended, error=error)
    summary = {**dict(first_head.get("summary") or {}), "paired_pairs": len(keeper.kept),
               "paired_discarded": len(discarded), "paired_base_sha": base_commit}
    # an invalid night keeps a head run's results as evidence (never judged), as ingest keeps a busy shard's
    results = list(merged.values()) if keeper.kept else list(first_head.get("evidence") or ())
    ctx.store.record_shard(ctx.run_key, outcome, results, telemetry=summary, identity=first_head.get("identity"))
    if first_head.get("dir") is not None:  # tonight's kernels: the first head run's (zlops.kernels)
        from zlops.kernels.inventory import InventoryError, read_inventory

        try:
            inv = read_inventory(first_head["dir"])
        except InventoryError as exc:
            log.warning("paired %s/%s: %s", pool, device, exc)
            inv = None
        if inv is not None:
            ctx.store.record_kernels(ctx.run_key, pool, device, inv)
    return outcome
