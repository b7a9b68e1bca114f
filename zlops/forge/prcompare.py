"""PR-branch comparison: a ref against its merge-base with upstream main, on the same devices.

What engineers ran by hand (the Ascend seed's benchmark workflow), as one call:

- **mode**: ``single`` when the ref has no commits beyond upstream main (benchmark it alone);
  ``compare`` otherwise: the merge-base with main against the ref's head, each in its own worktree
  and venv (reusing the environment cache);
- **device plan**: one device -> per variant, baseline then head on that device (``pairs`` > 1
  interleaves them ABBA..., randomized per pair); two or more devices -> per variant, baseline on the
  first and head on the second in parallel, variants one after another. Never two benchmark
  processes on one device: every run holds the device's host-local lock, also against a nightly;
- **judgement**: both sides' identities are checked first (caliber); then the project's judge, with
  the series' nightly history for the noise model; with enough interleaved pairs a suspect is
  confirmed by the A/B the compare already is;
- **report** in the seed's compare format (zlops.report.prtable), saved as markdown in the run's
  artifacts and posted to Slack.

Untrusted input (the trigger's conf or CLI arguments) goes through :func:`validate_request` before
any git command runs; the repository URL only ever comes from the config.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import re
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from zlops import __version__
from zlops.config.settings import Config
from zlops.errors import ConfigError, GitError, ZlopsError
from zlops.host import gitops
from zlops.host.telemetry import summarize_dir
from zlops.identity import IDENTITY_FILE, CaliberReport, check_caliber, read_identity
from zlops.judge import setup as judging
from zlops.judge.compare import JudgeInputs, build_comparisons
from zlops.judge.derived import follow_sources
from zlops.judge.evidence import series_histories
from zlops.model import BaselinePoint, CaseResult, Comparison, RunRecord, RunStatus, ShardStatus
from zlops.progress import LogProgress, Progress
from zlops.run.ingest import read_shard
from zlops.run.runner import ShardSpec, run_shard
from zlops.steps.cleanup import cleanup
from zlops.steps.context import Prepared, RunContext, make_run_key, open_store
from zlops.steps.prepare import prepare

if TYPE_CHECKING:
    from zlops.forge.check import CheckReport
    from zlops.forge.deliver import ForgeResult, SecretSource
    from zlops.store import Store

log = logging.getLogger(__name__)

PARAM_KEYS = ("suite", "ref", "devices", "rounds", "variants", "pairs", "pool", "pr")
#: the largest pull/merge request number a trigger may name (the forge check, zlops.forge)
MAX_PR = 999_999_999
_PULL_RE = re.compile(r"^pull/[1-9][0-9]{0,8}/head$")
_SHA_RE = re.compile(gitops.COMMIT_SHA_PATTERN)
#: the trigger form's pattern (Airflow validates it first; validate_ref checks again, then git does)
REF_PATTERN = (rf"^(?:pull/[1-9][0-9]{{0,8}}/head|{gitops.COMMIT_SHA}|"
               r"(?!-)(?!.*\.\.)(?!.*@\{)(?!.*//)[A-Za-z0-9._/-]{1,200}(?<!\.lock)(?<![/.]))$")
MAX_ROUNDS = 1000
MAX_PAIRS = 20


def validate_ref(ref: object) -> str:
    """A ref safe to hand to git: a branch name, ``pull/N/head`` or a commit SHA.

    Refused before any git command runs: option-like refs (``--upload-pack=x``), shell syntax,
    ``..``, ``@{``, path escapes, empty strings and control characters.
    """
    if not isinstance(ref, str) or not ref:
        raise ConfigError("ref: expected a branch name, pull/N/head or a commit SHA, got an empty value")
    if any(ord(c) < 32 or ord(c) == 127 for c in ref):
        raise ConfigError(f"ref: control characters are not allowed in {ref!r}")
    if not re.match(REF_PATTERN, ref):
        raise ConfigError(f"ref: {ref!r} is not a branch name, pull/N/head or commit SHA (letters, digits and "
                          ". _ / -; no leading '-', no '..', '@{{', '//', trailing '/' '.' or '.lock')")
    if not (_PULL_RE.match(ref) or _SHA_RE.match(ref)):
        try:
            gitops.validate_branch(ref)
        except GitError as exc:
            raise ConfigError(f"ref: {exc}") from None
    return ref


@dataclass(frozen=True)
class PrRequest:
    """A validated PR-compare request (from the trigger form or the CLI)."""

    suite: str
    ref: str
    pool: str
    devices: tuple[int, ...] | None = None
    rounds: int | None = None
    variants: tuple[str, ...] = ("default",)
    pairs: int = 1
    #: the pull (merge) request the compare answers on, when the forge triggered it (zlops.forge)
    pr: int | None = None


def validate_request(config: Config, conf: Mapping[str, Any]) -> PrRequest:
    """Check every key of a trigger's conf (unknown keys are refused) and build the request."""
    unknown = sorted(set(conf) - set(PARAM_KEYS))
    if unknown:
        raise ConfigError(f"unknown parameter(s) {', '.join(map(repr, unknown))}; known: {', '.join(PARAM_KEYS)}")
    suite_name = conf.get("suite")
    if not isinstance(suite_name, str) or suite_name not in config.suites:
        raise ConfigError(f"suite: expected one of {', '.join(sorted(config.suites))}, got {suite_name!r}")
    suite = config.suites[suite_name]
    ref = validate_ref(conf.get("ref"))
    pool = conf.get("pool") or suite.pools[0]
    if pool not in suite.pools:
        raise ConfigError(f"pool: expected one of {', '.join(suite.pools)}, got {pool!r}")
    devices = conf.get("devices")
    if devices is not None:
        if (not isinstance(devices, list) or not devices or len(devices) > 8
                or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1024 for d in devices)
                or len(set(devices)) != len(devices)):
            raise ConfigError(f"devices: expected 1-8 distinct device indices, got {devices!r}")
        allowed = config.pools[pool].explicit_devices
        if allowed is not None and not set(devices) <= set(allowed):
            raise ConfigError(f"devices: {devices} are not all in pool {pool} (devices {allowed})")
    rounds = conf.get("rounds")
    if rounds is not None and (not isinstance(rounds, int) or isinstance(rounds, bool)
                               or not 1 <= rounds <= MAX_ROUNDS):
        raise ConfigError(f"rounds: expected an integer from 1 to {MAX_ROUNDS}, got {rounds!r}")
    pairs = conf.get("pairs", 1)
    if not isinstance(pairs, int) or isinstance(pairs, bool) or not 1 <= pairs <= MAX_PAIRS:
        raise ConfigError(f"pairs: expected an integer from 1 to {MAX_PAIRS}, got {pairs!r}")
    declared = suite.variants or ["default"]
    variants = conf.get("variants") or declared
    if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants) or not set(variants) <= set(
            declared):
        raise ConfigError(f"variants: expected a subset of {declared}, got {variants!r}")
    pr = conf.get("pr")
    if pr is not None and (not isinstance(pr, int) or isinstance(pr, bool) or not 1 <= pr <= MAX_PR):
        raise ConfigError(f"pr: expected a pull/merge request number from 1 to {MAX_PR}, got {pr!r}")
    return PrRequest(suite_name, ref, pool, tuple(devices) if devices else None, rounds, tuple(variants), pairs, pr)


@dataclass(frozen=True)
class PrPlan:
    request: PrRequest
    mode: str                   # "single" | "compare"
    head_sha: str
    base_sha: str | None
    main_sha: str
    ahead: int
    devices: tuple[int, ...]
    head_key: str
    base_key: str | None

    @property
    def same_device(self) -> bool:
        return self.mode == "single" or len(self.devices) == 1


def _fetch_ref(mirror: gitops.Mirror, ref: str) -> str:
    if _SHA_RE.match(ref):
        if len(ref) in (40, 64):
            gitops.fetch_commit(mirror, ref)
        return gitops.resolve(mirror, ref)
    local = f"refs/zlops/{ref}" if _PULL_RE.match(ref) else f"refs/zlops/pr/{ref}"
    remote = f"refs/{ref}" if _PULL_RE.match(ref) else f"refs/heads/{ref}"
    try:
        mirror.git("fetch", "--no-tags", "--quiet", "origin", f"+{remote}:{local}", timeout=gitops.FETCH_TIMEOUT_S,
                   what="git fetch")
    except GitError as exc:
        raise GitError(f"cannot fetch {ref!r} from {mirror.url}: {exc}") from exc
    return gitops.resolve(mirror, local)


def make_plan(config: Config, req: PrRequest, *, label: str | None = None) -> PrPlan:
    """Fetch main and the ref, choose the mode and the devices."""
    from zlops.backends import get_backend
    from zlops.run.devices import resolve_devices

    suite = config.suite(req.suite)
    mirror = gitops.ensure_mirror(suite.repo, config.mirrors_dir / f"{req.suite}.git")
    main_sha = gitops.fetch_branch(mirror, suite.branch)
    head = _fetch_ref(mirror, req.ref)
    ahead = int(mirror.git("rev-list", "--count", head, "--not", main_sha, "--", what="git rev-list").strip())
    base = None if ahead == 0 else gitops.merge_base(mirror, main_sha, head)
    pool = config.pools[req.pool]
    devices = req.devices or tuple(resolve_devices(get_backend(pool.backend), pool.explicit_devices))
    devices = devices[:1] if ahead == 0 else devices[:2]
    stamp = label or datetime.now(timezone.utc).strftime("cli-%Y%m%dT%H%M%S.%fZ")
    key = make_run_key("pr", req.suite, stamp)
    return PrPlan(req, "single" if ahead == 0 else "compare", head, base, main_sha, ahead, tuple(devices),
                  f"{key}:head", None if base is None else f"{key}:base")


@dataclass
class SideResults:
    """Per variant and (case, metric): the pooled samples, and each run's median (A/B observations)."""

    samples: dict[str, dict[tuple[str, str], list[float]]] = field(default_factory=lambda: defaultdict(dict))
    medians: dict[str, dict[tuple[str, str], list[float]]] = field(default_factory=lambda: defaultdict(dict))
    proto: dict[str, dict[tuple[str, str], CaseResult]] = field(default_factory=lambda: defaultdict(dict))
    identity: dict[str, Any] | None = None
    devices: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def add(self, variant: str, results: Sequence[CaseResult]) -> None:
        for r in results:
            self.samples[variant].setdefault(r.key, []).extend(r.samples)
            self.medians[variant].setdefault(r.key, []).append(r.median)
            self.proto[variant].setdefault(r.key, r)

    def results(self, variant: str) -> list[CaseResult]:
        return [CaseResult(p.case, p.metric, p.unit, p.lower_is_better, tuple(self.samples[variant][k]), p.params)
                for k, p in self.proto[variant].items()]


@dataclass(frozen=True)
class PrOutcome:
    plan: PrPlan
    comparisons: dict[str, list[Comparison]]          # variant -> rows (empty in single mode)
    head_results: dict[str, list[CaseResult]]
    caliber: CaliberReport | None
    errors: tuple[str, ...]
    #: the base/head runs each series got (the A/B's n+n; the adaptive compare adds pairs): what the report's
    #: Args say, beside the pairs asked for; None where nothing was compared
    pairs_run: int | None = None


def _one_run(ctx: RunContext, prepared: Prepared, plan: PrPlan, variant: str, device: int,
             index: int, side: str, out: SideResults, suite: Any) -> None:
    config = ctx.config
    pool = plan.request.pool
    art = ctx.run_dir / variant / f"{side}-{index:02d}-dev{device}"
    spec = ShardSpec(run_key=ctx.run_key, suite_name=ctx.suite_name, suite=suite, sha=ctx.sha, pool=pool,
                     backend=config.pools[pool].backend, device=device, worktree=prepared.worktree,
                     venv=prepared.venv, artifact_dir=art, variant=variant)
    outcome = run_shard(spec, locks_dir=config.locks_dir, device_wait_s=config.device_wait_s,
                        require_idle=config.pools[pool].idle_required)
    out.devices.add(device)
    if outcome.status is not ShardStatus.OK or outcome.results_file is None:
        out.errors.append(f"{side} {variant} on device {device}: {outcome.status.value}: {outcome.error}")
        return
    # parsed as the nightly parses its shards; measured beside a busy host (or a foreign device process): not a
    # sample of either side
    read = read_shard(config, ctx.suite_name, outcome, telemetry=summarize_dir(art))
    if not read.usable:
        error = read.outcome.error or ""
        if read.outcome.status is ShardStatus.INVALID:
            error = f"invalid: {error}"
        elif error.endswith("holds no cases"):
            error = "the run measured nothing"
        out.errors.append(f"{side} {variant} on device {device}: {error}")
        return
    out.add(variant, list(read.results))
    out.identity = out.identity or read_identity(art / IDENTITY_FILE)


def _record(store: Any, key: str, plan: PrPlan, sha: str, side: str, status: RunStatus) -> None:
    req = plan.request
    store.upsert_run(RunRecord(run_key=key, kind="pr", suite=req.suite, sha=sha, branch=req.ref, status=status,
                               started_at=datetime.now(timezone.utc),
                               finished_at=None if status is RunStatus.RUNNING else datetime.now(timezone.utc),
                               meta={"side": side, "ref": req.ref, "mode": plan.mode, "zlops_version": __version__,
                                     "devices": list(plan.devices), "pairs": req.pairs,
                                     "variants": list(req.variants), "ahead": plan.ahead}))


def _sides(config: Config, plan: PrPlan) -> tuple[RunContext, RunContext | None]:
    req = plan.request
    head_ctx = RunContext(config, req.suite, plan.head_key, plan.head_sha)
    base_ctx = None if plan.base_sha is None else RunContext(config, req.suite, plan.base_key or "",
                                                                        plan.base_sha)
    return head_ctx, base_ctx


def _run_interleaved(config: Config, plan: PrPlan, suite: Any, prepared: Mapping[str, Prepared],
                     base: SideResults, head: SideResults, variant: str, *, pairs: int, start: int) -> None:
    """``pairs`` interleaved pairs of base and head on the plan's one device (zlops.judge.interleave.run_pairs).

    A run the contention gate makes invalid discards its pair (the reason is kept with its figure); the
    host is given time to quiet and the pair is measured again while ``paired.budget_s`` lasts, so a busy
    moment never ends the compare. On a paired pool (``measure: paired``) the gate judges the pair's
    balance, not the host's load (zlops.judge.paired)."""
    import time

    from zlops.errors import HostBusy
    from zlops.judge.interleave import run_pairs
    from zlops.judge.paired import MAX_DISCARDS, PairKeeper, keeper_for, quiet_fn, relaxed_config, run_limits

    req = plan.request
    pool, device = req.pool, plan.devices[0]
    head_ctx, base_ctx = _sides(config, plan)
    assert base_ctx is not None
    paired = config.measures_paired(pool)
    keeper = keeper_for(config, pool) if paired else PairKeeper(None, None, enabled=False)
    read_config = relaxed_config(config, pool) if paired else config
    alone_limits = run_limits(config, pool) if paired else None

    def run_one(side: str, index: int) -> tuple[dict[tuple[str, str], float], float]:
        from zlops.host.contention import shard_invalid_reason

        name, ctx = ("base", base_ctx) if side == "A" else ("head", head_ctx)
        out = base if side == "A" else head
        art = ctx.run_dir / variant / f"{name}-{start:02d}-{index:03d}-dev{device}"
        spec = ShardSpec(run_key=ctx.run_key, suite_name=ctx.suite_name, suite=suite, sha=ctx.sha, pool=pool,
                         backend=config.pools[pool].backend, device=device, worktree=prepared[name].worktree,
                         venv=prepared[name].venv, artifact_dir=art, variant=variant)
        t0 = time.monotonic()
        outcome = run_shard(spec, locks_dir=config.locks_dir, device_wait_s=config.device_wait_s,
                            require_idle=config.pools[pool].idle_required)
        took = time.monotonic() - t0
        out.devices.add(device)
        if outcome.status is not ShardStatus.OK or outcome.results_file is None:
            keeper.drop(index)
            out.errors.append(f"{name} {variant} on device {device}: {outcome.status.value}: {outcome.error}")
            return {}, took
        summary = summarize_dir(art)
        read = read_shard(read_config, ctx.suite_name, outcome, telemetry=summary)
        busy = read.outcome.error if read.outcome.status is ShardStatus.INVALID else \
            shard_invalid_reason(summary, alone_limits) if alone_limits is not None else None
        if busy:
            keeper.drop(index)
            raise HostBusy(f"{name} run: {busy}", seconds=took)
        if not read.usable:
            keeper.drop(index)
            error = read.outcome.error or ""
            out.errors.append(f"{name} {variant} on device {device}: "
                              + ("the run measured nothing" if error.endswith("holds no cases") else error))
            return {}, took
        try:
            keeper.add(index, name, (list(read.results), read_identity(art / IDENTITY_FILE)), summary)
        except HostBusy as exc:   # the pair's two runs saw different loads
            raise HostBusy(str(exc), seconds=took) from None
        return {(r.case, r.metric): r.median for r in read.results}, took

    done = run_pairs(run_one=run_one, seed=zlib.crc32(f"{plan.head_key}/{variant}/{start}".encode()),
                     min_pairs=pairs, max_pairs=pairs, budget_s=config.paired.budget_s, est_run_s=1.0,
                     decided=lambda samples: True, quiet=quiet_fn(config, pool), max_discards=MAX_DISCARDS)
    for pair in keeper.kept:
        for name, (results, identity) in pair:
            out = base if name == "base" else head
            out.add(variant, results)
            out.identity = out.identity or identity
    discarded = list(getattr(done, "discarded", []))
    if discarded:
        log.warning("PR compare %s: %d pair(s) discarded and measured again: %s", variant, len(discarded),
                    "; ".join(map(str, discarded[:3])))
    if not keeper.kept:
        head.errors.append(f"no pair of {variant} measured within paired.budget_s ({config.paired.budget_s:g} s): "
                           + ("; ".join(map(str, discarded[:3])) or str(done.stopped)))


def _run_pairs(config: Config, plan: PrPlan, suite: Any, prepared: Mapping[str, Prepared],
               base: SideResults, head: SideResults, variant: str, *, pairs: int, start: int,
               progress: Progress) -> None:
    """``pairs`` more runs of each side of one variant, numbered from ``start`` (the device plan)."""
    req = plan.request
    head_ctx, base_ctx = _sides(config, plan)
    sides = {"head": (head_ctx, head), "base": (base_ctx, base)}
    with progress.step("pr-bench", suite=req.suite, commit=plan.head_sha[:12], device=",".join(
            map(str, plan.devices)), variant=variant):
        if plan.mode == "compare" and plan.same_device:  # busy runs are measured again (run_pairs)
            _run_interleaved(config, plan, suite, prepared, base, head, variant, pairs=pairs, start=start)
            return
        if plan.mode == "single":
            jobs = [[("head", plan.devices[0], start + i) for i in range(pairs)]]
        else:
            from zlops.stats import interleaved_order

            order = [{"A": "base", "B": "head"}[c] for c in interleaved_order(
                pairs, seed=zlib.crc32(f"{plan.head_key}/{variant}/{start}".encode()))]
            if plan.same_device:
                jobs = [[(s, plan.devices[0], start + i // 2) for i, s in enumerate(order)]]
            else:  # base on the first device, head on the second, in parallel
                jobs = [[("base", plan.devices[0], start + i) for i in range(pairs)],
                        [("head", plan.devices[1], start + i) for i in range(pairs)]]

        def run_queue(queue: list[tuple[str, int, int]]) -> None:
            for side, device, index in queue:  # one device's queue: one process at a time
                ctx, out = sides[side]
                assert ctx is not None
                _one_run(ctx, prepared[side], plan, variant, device, index, side, out, suite)

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            list(pool.map(run_queue, jobs))


def execute(config: Config, plan: PrPlan, *, progress: Progress | None = None,
            more: Any = None) -> tuple[SideResults, SideResults]:
    """Build both worktree envs and run the device plan; returns (base, head) results.

    ``more(base, head, pairs_run) -> int``, when given, is asked after the requested pairs (and after
    each addition) how many pairs to add: the adaptive compare (:func:`run_compare`) adds pairs while
    suspects remain, so a PR compare with its defaults can still confirm a change.
    """
    progress = progress or LogProgress()
    req = plan.request
    suite = config.suite(req.suite)
    if req.rounds is not None:
        suite = suite.model_copy(update={"rounds": req.rounds})
    store = open_store(config)
    head_ctx, base_ctx = _sides(config, plan)
    _record(store, plan.head_key, plan, plan.head_sha, "head", RunStatus.RUNNING)
    if base_ctx is not None:
        _record(store, base_ctx.run_key, plan, base_ctx.sha, "base", RunStatus.RUNNING)
    base, head = SideResults(), SideResults()
    try:
        prepared = {"head": prepare(head_ctx, progress=progress)}
        if base_ctx is not None:
            prepared["base"] = prepare(base_ctx, progress=progress)
        for variant in req.variants:  # variants one after another, on every device
            _run_pairs(config, plan, suite, prepared, base, head, variant, pairs=req.pairs, start=0,
                       progress=progress)
        done = req.pairs
        while more is not None and (extra := int(more(base, head, done))) > 0:
            for variant in req.variants:
                _run_pairs(config, plan, suite, prepared, base, head, variant, pairs=extra, start=done,
                           progress=progress)
            done += extra
        store.update_run_meta(plan.head_key, {"pairs_run": done})
    finally:
        cleanup(head_ctx)
        if base_ctx is not None:
            cleanup(base_ctx)
    for ctx, res in ((head_ctx, head), (base_ctx, base)):
        if ctx is not None:
            store.set_run_status(ctx.run_key, RunStatus.DONE if not res.errors else RunStatus.FAILED,
                                 finished_at=datetime.now(timezone.utc))
    return base, head


def judge(config: Config, plan: PrPlan, base: SideResults, head: SideResults, *,
          allow_caliber_mismatch: bool = False, save: bool = True) -> PrOutcome:
    """Caliber first, then the project's judge per variant (with A/B confirmation when pairs allow)."""
    req = plan.request
    errors = tuple(base.errors + head.errors)
    head_results = {v: head.results(v) for v in req.variants}
    if plan.mode == "single":
        return PrOutcome(plan, {}, head_results, None, errors)
    caliber = check_caliber(base.identity, head.identity, allow_mismatch=allow_caliber_mismatch,
                            base_label=f"merge-base {plan.base_sha[:7] if plan.base_sha else ''}", head_label="HEAD")
    store = open_store(config)
    # one judging setup, built once from the config (zlops.judge.setup) and stored with the PR's head run,
    # as the nightly does: a re-render or rescore reads what was applied, not a later config
    setup = dataclasses.replace(judging.from_config(config), allow_caliber_mismatch=allow_caliber_mismatch)
    noise = setup.judge == "noise" and setup.policy is not None
    out: dict[str, list[Comparison]] = {}
    nightly: dict[Any, Any] = {}
    if noise and plan.base_sha:
        # the series' nightly history on the merge-base's ancestor line, one columnar read (issue 13),
        # cut at level changes and caliber-free by the same evidence builder as the nightly's
        suite_cfg = config.suite(req.suite)
        mirror = gitops.ensure_mirror(suite_cfg.repo, config.mirrors_dir / f"{req.suite}.git")
        ancestors = gitops.ancestors(mirror, plan.base_sha, max_count=config.baseline_depth)
        frame = store.history_frame(req.suite, ancestors=ancestors, window=setup.policy.window + 1, pools=[req.pool])
        keys = {(req.pool, r.case, r.metric) for v in req.variants for r in head_results[v]}
        run_keys = sorted(frame["run_key"].unique().tolist()) if len(frame) else []
        nightly = series_histories(frame, keys, evidence=store.verdict_evidence(run_keys, only_evidence=True))[0]
    for variant in req.variants:
        pool = req.pool if variant == "default" else f"{req.pool}.{variant}"
        heads = {(pool, r.case, r.metric): r for r in head_results[variant]}
        bases = {(pool, r.case, r.metric): BaselinePoint.of_samples(plan.base_key or "", plan.base_sha or "", r.unit,
                                                                    r.samples)
                 for r in base.results(variant)}
        history: dict[Any, list[float]] = {}
        if noise:
            for key in heads:
                history[key] = list(nightly.get((req.pool, key[1], key[2]), []))
        inputs = JudgeInputs(history=history, caliber={(pool, plan.base_key or ""): caliber},
                             allow_caliber_mismatch=allow_caliber_mismatch)
        rows = build_comparisons(suite=req.suite, pools=[pool], head=heads, baselines=bases, newest_baseline_run={},
                                 setup=setup, inputs=inputs)
        if config.measures_paired(req.pool) and plan.same_device:  # a paired pool: judged from the pairs
            from zlops.judge.paired import judge_from_runs

            medians_b, medians_h = base.medians[variant], head.medians[variant]
            rows = follow_sources(judge_from_runs(
                config, rows, {k: (medians_b[k], medians_h[k]) for k in medians_b if k in medians_h},
                potential_pct=setup.thresholds.potential_pct, regression_pct=setup.thresholds.regression_pct,
                base_label=f"merge-base {(plan.base_sha or '')[:7]}"))
        elif noise and plan.same_device:
            rows = follow_sources(_confirm_with_pairs(rows, base.medians[variant], head.medians[variant],
                                                      setup.policy))
        out[variant] = rows
    all_rows = [c for rows in out.values() for c in rows]
    runs = [min(len(base.medians[v].get(k, [])), len(m)) for v in req.variants for k, m in head.medians[v].items()]
    if save:
        store.save_comparisons(plan.head_key, all_rows)
        store.update_run_meta(plan.head_key, {judging.META_KEY: setup.to_dict()})
    return PrOutcome(plan, out, head_results, caliber, errors, max(runs) if runs else None)


def _confirm_with_pairs(rows: list[Comparison], base_medians: Mapping[tuple[str, str], list[float]],
                        head_medians: Mapping[tuple[str, str], list[float]], policy: Any) -> list[Comparison]:
    """The interleaved same-device runs are an A/B: use them to confirm suspects when they can decide."""
    from dataclasses import replace

    from zlops.judge.judges import confirm_suspect

    return [replace(c, judgement=confirm_suspect(c.judgement, base_medians.get((c.case, c.metric), []),
                                                 head_medians.get((c.case, c.metric), []),
                                                 lower_is_better=c.lower_is_better, policy=policy))
            for c in rows]


def run_compare(config: Config, conf: Mapping[str, Any], *, label: str | None = None,
                allow_caliber_mismatch: bool = False, progress: Progress | None = None) -> PrOutcome:
    """Validate, plan, run and judge a PR compare (what the DAG's tasks and ``zlops compare`` do)."""
    req = validate_request(config, conf)
    if config.measures_paired(req.pool):
        # a paired pool's verdicts come from the pairs (zlops.judge.paired): enough of them to confirm at noise.alpha
        from zlops.judge.paired import pairs_to_decide

        want = max(config.paired.min_pairs, pairs_to_decide(config.noise.alpha))
        if req.pairs < want:
            req = dataclasses.replace(req, pairs=want)
    plan = make_plan(config, req, label=label)
    more = None
    if plan.mode == "compare" and plan.same_device and config.judge == "noise" and config.noise.ab_pairs:
        most = max(req.pairs, config.noise.ab_pairs)

        def more(base: SideResults, head: SideResults, done: int) -> int:
            """Add pairs while suspects remain (2 at a time, up to noise.ab_pairs): adaptive A/B."""
            if done >= most:
                return 0
            outcome = judge(config, plan, base, head, allow_caliber_mismatch=allow_caliber_mismatch, save=False)
            if not any(c.verdict.awaiting_confirmation for rows in outcome.comparisons.values() for c in rows):
                return 0
            return min(max(2, config.noise.ab_min_pairs - done), most - done)
    base, head = execute(config, plan, progress=progress, more=more)
    if not any(head.samples.values()):
        raise ZlopsError("the PR compare measured nothing on HEAD: " + "; ".join(head.errors or ["no results"]))
    return judge(config, plan, base, head, allow_caliber_mismatch=allow_caliber_mismatch)


@dataclass(frozen=True)
class PrReport:
    text: str
    markdown: Any
    slack: Any
    #: the check on the forge (zlops.forge.deliver.ForgeResult); None when the suite has no forge section
    forge: Any = None


def render(config: Config, outcome: PrOutcome, *, shown: Any = None) -> str:
    """The report text of a PR compare (zlops.report.prtable); ``shown`` keeps only some cases in its
    tables (the forge check: the changed ones), every figure as the full report prints it."""
    from zlops.report.prtable import compare_report, single_report

    plan, req = outcome.plan, outcome.plan.request
    suite = config.suite(req.suite)
    rounds = req.rounds or suite.rounds
    ran = outcome.pairs_run
    pairs = f"pairs {req.pairs}" if ran is None or ran == req.pairs else f"pairs {ran} run ({req.pairs} asked)"
    args = (f"suite {req.suite}, pool {req.pool}, devices {','.join(map(str, plan.devices))}, rounds {rounds}, "
            f"{pairs}, judge {config.judge}")
    if plan.mode == "single":
        return single_report(outcome.head_results, head_sha=plan.head_sha, ref=req.ref, args=args,
                             headline=suite.headline_metric, errors=outcome.errors)
    devices = (plan.devices[0], plan.devices[0] if plan.same_device else plan.devices[1])
    caliber = outcome.caliber.lines() if outcome.caliber is not None else []
    return compare_report(outcome.comparisons, base_sha=plan.base_sha or "", head_sha=plan.head_sha, ref=req.ref,
                          args=args, devices=devices, headline=suite.headline_metric, caliber_lines=caliber,
                          errors=outcome.errors, shown=shown)


def check_of(config: Config, outcome: PrOutcome, *, report_path: str | None = None) -> CheckReport:
    """The check of a finished PR compare (its suite must have a ``forge`` section)."""
    from zlops.forge.check import build_check, changed

    plan, req = outcome.plan, outcome.plan.request
    forge = config.suite(req.suite).forge
    if forge is None:
        raise ValueError(f"suite {req.suite} has no forge section")
    rows = [c for rows in outcome.comparisons.values() for c in rows]
    table = render(config, outcome, shown=changed)
    return build_check(suite=req.suite, name=forge.check_name, fail_on=forge.fail_on, head_sha=plan.head_sha,
                       ref=req.ref, rows=rows, table=table, errors=outcome.errors, compared=plan.mode == "compare",
                       run_key=plan.head_key, links_url=forge.links_url, report_path=report_path, pr=req.pr)


def post_outcome(config: Config, store: Store, outcome: PrOutcome, *, secrets: SecretSource | None = None,
                 report_path: str | None = None, forge_run: str | None = None) -> ForgeResult | None:
    """Queue the compare's check in the outbox and flush (:func:`zlops.forge.lifecycle.flush`); None
    when the suite has no forge section. ``secrets``: :func:`zlops.forge.deliver.env_secrets` unless given.
    The checks the receiver opened for this commit (and for ``forge_run``, the compare's run id, on a commit
    the branch has left) are closed (:func:`zlops.forge.lifecycle.concluded`).
    Never raises for the forge: a failed post stays in the outbox."""
    from zlops.forge.deliver import ForgeResult, channel_of, env_secrets
    from zlops.forge.lifecycle import concluded
    from zlops.forge.lifecycle import flush as flush_checks
    from zlops.store.outbox import FORGE_KIND

    forge = config.suite(outcome.plan.request.suite).forge
    if forge is None:
        return None
    check = check_of(config, outcome, report_path=report_path)
    note = store.queue_notification(outcome.plan.head_key, FORGE_KIND, channel_of(forge), check.to_payload())
    concluded(store, channel=channel_of(forge), suite=check.suite, head_sha=check.head_sha,
              conclusion=str(check.conclusion), run_id=forge_run)
    flush_checks(store, config, secrets or env_secrets)
    (item,) = store.outbox_items(ids=[note])
    if item.status == "sent":
        return ForgeResult("sent", check, note, posted=item.result)
    if item.attempts == 0:
        return ForgeResult("written", check, note, error=item.last_error or "no token: waiting in the outbox")
    return ForgeResult("failed", check, note, error=item.last_error)


def report(config: Config, outcome: PrOutcome, *, slack_client: Any = None, forge_secrets: Any = None,
           forge_run: str | None = None) -> PrReport:
    """Save the report (text and markdown) in the run's artifacts and send it to Slack through the outbox
    (zlops.slack.outbox: retried like every message; kept for the next flush when Slack is down; nothing is
    queued without a ``slack`` section, which no flush could ever send); with a ``forge`` section, post the
    check on the PR's head commit through the same outbox (zlops.forge; ``forge_secrets`` gives the token: the
    Airflow connection in a DAG, the environment by default; ``forge_run``: the compare's run id, whose
    "running" checks it closes)."""
    from zlops.slack.notify import NotifyResult, write_payload
    from zlops.slack.outbox import send_message

    plan = outcome.plan
    text = render(config, outcome)
    run_dir = RunContext(config, plan.request.suite, plan.head_key, plan.head_sha).run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "report.txt").write_text(text, encoding="utf-8")
    title = f"PR compare: {plan.request.suite} {plan.request.ref} ({plan.mode})"
    md = run_dir / "report.md"
    md.write_text(f"# {title}\n\n```\n{text}```\n", encoding="utf-8")
    overall = next((ln for ln in text.splitlines() if ln.startswith("Overall:")), text.splitlines()[0])
    body = text if len(text) < 2800 else text[:2700] + "\n... (truncated here; the full report is in the artifacts)"
    channel = config.slack.channel if config.slack else "#perf-nightly"
    payload = {"channel": channel, "text": f"{title}: {overall}",
               "blocks": [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
                          {"type": "section", "text": {"type": "mrkdwn", "text": f"```{body}```"}},
                          {"type": "context", "elements": [{"type": "mrkdwn", "text": f"Full report: {md}"}]}]}
    store = open_store(config)
    if config.slack is None:
        unsent = "no slack section in the config: the message is not queued"
        result = NotifyResult("written", write_payload(run_dir, payload, status="written", error=unsent), error=unsent)
    else:
        result = send_message(store, slack_client, run_key=plan.head_key, kind="pr-compare",
                              channel=channel, payload=payload, fallback_dir=run_dir)
    forge = None
    if suite_forge := config.suite(plan.request.suite).forge:
        forge = post_outcome(config, store, outcome, secrets=forge_secrets, report_path=str(md), forge_run=forge_run)
        log.info("PR compare check %s (%s) on %s: %s", suite_forge.check_name, forge.check.conclusion if forge else "",
                 plan.head_sha[:12], forge.status if forge else "")
    return PrReport(text, md, result, forge)
