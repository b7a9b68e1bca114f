"""``zlops bisect ALERT_ID`` and the zlops_bisect DAG: bisect a stored alert on its pool's device.

1. The alert (an untrusted id, validated) names the suite, pool, series and its first range
   ``first_base_sha..first_head_sha`` (the good and the bad night). The range is the branch's
   first-parent line between them (:func:`zlops.host.gitops.first_parent_range`); for a slow creep it
   starts at the night before the series' first bad night (the change-point rule the nightly
   notes, :func:`zlops.stats.first_bad_night` over its stored history).
2. Open alerts of the same suite, pool and range join: one search measures all their cases.
3. The search (:func:`zlops.bisect.search.bisect_range`) runs on the pool's first device through
   :class:`DeviceMeasurer`: each commit's worktree and env from the env cache (:func:`zlops.prepare`),
   each benchmark process of only the regressed cases (``{cases}``) under the device lease
   (:func:`zlops.judge.confirm.run_side`). Steps are stored as they are decided, so a rerun resumes.
4. Budget: ``bisect.builds_per_night`` and ``bisect.device_s_per_night`` per pool, counted from the
   stored steps of the last ``budget_window_h``; spent, the bisection pauses. It never delays a
   nightly: before each benchmark process it yields (pauses) when a nightly of a suite on the pool
   is running, and each process waits for the device lease like any other.
5. Finished, the culprit (sha, subject, author) is recorded on the bisection its alerts link to,
   and one reply goes into each alert thread through the outbox: the bisections that found the same
   culprit are named in one message (kind ``culprit-<sha>``, idempotent per thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from zlops.alerts.lifecycle import Alert, AlertState
from zlops.bisect import messages as bisect_messages
from zlops.bisect.search import (
    Allowance,
    Bisection,
    BisectPolicy,
    BuildFailed,
    Measurer,
    Paused,
    Result,
    State,
    StepRecord,
    Target,
    bisect_range,
)
from zlops.config.settings import Config
from zlops.errors import DatabaseUnavailable, DeviceBusy, HostBusy, ZlopsError
from zlops.host import gitops
from zlops.kernels.inventory import Inventory, InventoryError, read_inventory
from zlops.model import RunStatus
from zlops.steps.cleanup import cleanup as cleanup_step
from zlops.steps.context import Prepared, RunContext, make_run_key, open_store
from zlops.steps.prepare import prepare
from zlops.store import Store

log = logging.getLogger(__name__)

#: alert states a bisection is started for (a confirmed regression; a person may have acked it)
BISECTABLE = frozenset({AlertState.CONFIRMED, AlertState.ACKED, AlertState.EXPECTED})
MAX_ALERT_ID = 2**31 - 1
#: runs of one bisection step the contention gate may spoil before the bisection pauses (to resume later)
BUSY_RETRIES = 3


class NothingToBisect(ZlopsError):
    """The alert's range holds one commit (it is the culprit) or the alert is not a confirmed regression."""


def validate_alert_id(value: object) -> int:
    """An alert id from outside (CLI, trigger conf, asset event): a positive integer, nothing else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ZlopsError(f"alert id: expected a positive integer, got {value!r}")
    text = str(value).strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10 or not 0 < int(text) <= MAX_ALERT_ID:
        raise ZlopsError(f"alert id: expected a positive integer, got {value!r}")
    return int(text)


def policy_of(config: Config) -> BisectPolicy:
    b = config.bisect
    return BisectPolicy(floor_pct=config.thresholds_value().potential_pct, share=b.line_share,
                        min_pairs=b.min_pairs, max_pairs=b.max_pairs, extend_pairs=b.extend_pairs,
                        confidence=b.confidence, statistic=b.statistic, retest=b.retest)


def _mirror(config: Config, suite_name: str) -> gitops.Mirror:
    suite = config.suite(suite_name)
    mirror = gitops.ensure_mirror(suite.repo, config.mirrors_dir / f"{suite_name}.git")
    gitops.fetch_branch(mirror, suite.branch, timeout=config.git_timeout_s)
    return mirror


def alert_range(config: Config, store: Store, mirror: gitops.Mirror, alert: Alert) -> tuple[list[str], str]:
    """The commits to bisect for ``alert`` (``[good, ..., bad]``) and a note on where the good end came from."""
    good, bad = alert.first_base_sha, alert.first_head_sha
    note = f"the alert's range {good[:7]}..{bad[:7]}"
    start = creep_start(store, mirror, alert, max_commits=config.bisect.max_commits)
    if start is not None and start != good:
        good, note = start, f"from the change point: the night before the first bad night, {start[:7]}"
    return gitops.first_parent_range(mirror, good, bad, max_commits=config.bisect.max_commits), note


def creep_start(store: Store, mirror: gitops.Mirror, alert: Alert, *, max_commits: int) -> str | None:
    """For a slow creep, the good end: the commit of the night before the series' first bad night
    (:func:`zlops.stats.first_bad_night` over the accepted nights up to the bad one), when it is an
    older first-parent ancestor than the alert's own good night; else None."""
    line = gitops.ancestors(mirror, alert.first_head_sha, max_count=max_commits)
    points = [p for p in store.series_history(alert.suite, alert.pool, alert.case, alert.metric, limit=60)
              if p.sha in set(line)]
    bad_at = next((i for i, p in enumerate(points) if p.sha == alert.first_head_sha), None)
    points = points[: bad_at + 1] if bad_at is not None else points
    if len(points) < 5:
        return None
    from zlops.stats import first_bad_night

    idx = first_bad_night([p.median for p in points], alert.band_pct, lower_is_better=alert.lower_is_better,
                          min_size=2)
    if idx is None or idx < 1:
        return None
    start = points[idx - 1].sha
    if start == alert.first_base_sha or not gitops.is_ancestor(mirror, start, alert.first_base_sha):
        return None
    return start


def nightly_in_the_way(config: Config, store: Store, pool: str) -> str | None:
    """Why a bisection on ``pool`` should yield now: a nightly of a suite on the pool is running."""
    suites = {name for name, s in config.suites.items() if pool in s.pools}
    horizon = datetime.now(timezone.utc) - timedelta(hours=config.bisect.nightly_grace_h)
    for run in store.list_runs(kind="nightly", limit=50):
        if run.suite in suites and run.status is RunStatus.RUNNING and run.started_at >= horizon:
            return f"yielded to the nightly {run.run_key} (running on pool {pool} since {run.started_at:%H:%M} UTC)"
    return None


class DeviceMeasurer:
    """Builds commits (worktree + env cache) and runs the regressed cases on one device of the pool."""

    def __init__(self, config: Config, suite_name: str, pool: str, device: int, bisection_id: int) -> None:
        self.config, self.suite_name, self.pool, self.device, self.bid = config, suite_name, pool, device, bisection_id
        self.prepared: dict[str, Prepared] = {}
        self.contexts: dict[str, RunContext] = {}
        self.kernels: dict[str, Inventory] = {}   # per commit, the first usable kernel inventory of its runs

    def _ctx(self, sha: str) -> RunContext:
        if sha not in self.contexts:
            key = make_run_key("bisect", self.suite_name, f"b{self.bid}-{sha[:12]}")
            self.contexts[sha] = RunContext(self.config, self.suite_name, key, sha)
        return self.contexts[sha]

    def build(self, sha: str) -> None:
        if sha in self.prepared:
            return
        try:
            self.prepared[sha] = prepare(self._ctx(sha))
        except DatabaseUnavailable:
            raise
        except ZlopsError as exc:
            raise BuildFailed(f"{sha[:12]}: {exc}") from exc

    def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[tuple[str, str], float], float]:
        from zlops.judge.confirm import quiet_waiter, run_side
        from zlops.run.selection import selects_cases

        ctx = self._ctx(sha)
        suite = self.config.suite(self.suite_name)
        cases = tuple(sorted({t.case for t in targets})) if selects_cases(suite) else None
        t0 = time.monotonic()
        busy: list[str] = []
        while True:   # a run the contention gate spoiled is run again once the host quiets: it never ends the job
            out = ctx.run_dir / "runs" / f"{time.time_ns()}"
            try:
                medians = run_side(ctx, ctx, self.prepared[sha], self.pool, self.device, out, cases)
                self._keep_kernels(sha, out)
                break
            except HostBusy as exc:
                busy.append(str(exc))
                if len(busy) > BUSY_RETRIES:
                    raise Paused(f"the host stayed busy for {len(busy)} runs of {sha[:12]} on {self.pool}/"
                                 f"{self.device} (last: {exc}); the next request resumes it") from exc
                log.warning("bisection run of %s invalid (%s); running it again once the host quiets", sha[:12], exc)
                wait = quiet_waiter(ctx, self.pool)
                if wait is not None:
                    wait()
            except DeviceBusy as exc:
                raise Paused(f"device {self.pool}/{self.device} stayed leased: {exc}") from exc
            except DatabaseUnavailable:
                raise
            except ZlopsError as exc:
                raise BuildFailed(str(exc)) from exc
        return medians, time.monotonic() - t0

    def _keep_kernels(self, sha: str, out: Path) -> None:
        if sha in self.kernels or self.config.suite(self.suite_name).kernels is None:
            return
        try:
            inv = read_inventory(out)
        except InventoryError as exc:
            log.warning("bisection run of %s: %s", sha[:12], exc)
            return
        if inv is not None and inv.usable:
            self.kernels[sha] = inv

    def same_kernels(self, base_sha: str, head_sha: str, targets: Sequence[Target]) -> bool | None:
        """Whether the two commits' runs compiled the same kernels for the targets' ops (None: cannot tell)."""
        from zlops.alerts.lifecycle import op_family
        from zlops.kernels.attribution import same_op_kernels

        setting = self.config.suite(self.suite_name).kernels
        if setting is None:
            return None
        self._load_kernels(base_sha)
        self._load_kernels(head_sha)
        return same_op_kernels(self.kernels.get(base_sha), self.kernels.get(head_sha),
                               sorted({op_family(t.case) for t in targets}), mapping=setting.map)

    def kernel_side(self, good_sha: str, bad_sha: str, sha: str, targets: Sequence[Target]) -> str | None:
        """``good`` / ``bad`` when ``sha``'s kernels for the targets' ops equal that end's and the two
        ends' differ (zlops.bisect.search's skip_same_kernels); None otherwise (measure it)."""
        from zlops.alerts.lifecycle import op_family
        from zlops.kernels import attribution

        setting = self.config.suite(self.suite_name).kernels
        if setting is None:
            return None
        for one in (good_sha, bad_sha, sha):
            self._load_kernels(one)
        return attribution.kernel_side(self.kernels.get(good_sha), self.kernels.get(bad_sha), self.kernels.get(sha),
                                       sorted({op_family(t.case) for t in targets}), mapping=setting.map)

    def _load_kernels(self, sha: str) -> None:
        """A commit's inventory from its earlier runs' folders (a resumed bisection measured it before)."""
        if sha in self.kernels:
            return
        for out in sorted((self._ctx(sha).run_dir / "runs").glob("*")):
            self._keep_kernels(sha, out)
            if sha in self.kernels:
                return

    def cleanup(self) -> None:
        for ctx in self.contexts.values():
            cleanup_step(ctx)


@dataclass(frozen=True)
class BisectOutcome:
    bisection: Bisection
    result: Result
    queued: tuple[int, ...]   # outbox ids of the thread replies


def _group(store: Store, alert: Alert, commits: Sequence[str]) -> list[Alert]:
    """The alert and the open alerts of its suite, pool and range not yet in another bisection."""
    same = [other for other in store.alerts(suite=alert.suite, states=BISECTABLE, limit=None)
            if other.id != alert.id and other.pool == alert.pool and other.first_base_sha == alert.first_base_sha
            and other.first_head_sha == alert.first_head_sha]
    bisected = store.bisections_of_alerts([other.id for other in same]) if same else {}  # one read, not one per alert
    return [alert, *(other for other in same if other.id not in bisected)]


def _device(config: Config, pool: str) -> int:
    explicit = config.pools[pool].explicit_devices
    if explicit:
        return explicit[0]
    from zlops.backends import get_backend
    from zlops.run.devices import resolve_devices

    return resolve_devices(get_backend(config.pools[pool].backend), None)[0]


def bisect_alert(config: Config, alert_id: object, *,
                 measurer_factory: Callable[[Bisection], Measurer] | None = None) -> BisectOutcome:
    """Bisect (or resume the bisection of) an alert; see the module docstring. Raises NothingToBisect,
    AlertError (unknown alert), GitError (no range) or ZlopsError; a finished one only re-queues its reply."""
    aid = validate_alert_id(alert_id)
    store = open_store(config)
    alert = store.alert(aid)
    existing = store.bisection_of_alert(aid)
    if existing is not None and existing.state.finished:
        steps = store.bisection_steps(existing.id)
        return BisectOutcome(existing, Result(existing.state, steps=tuple(steps), reason=existing.reason),
                             tuple(announce(config, store, existing)))
    if existing is None and alert.state not in BISECTABLE:
        raise NothingToBisect(f"alert #{aid} is {alert.state.value}: only confirmed regressions are bisected")
    if alert.pool not in config.pools or alert.suite not in config.suites:
        raise ZlopsError(f"alert #{aid}: suite {alert.suite!r} or pool {alert.pool!r} is no longer in the config")
    mirror = _mirror(config, alert.suite)
    if existing is not None:
        commits: list[str] = list(existing.commits)
        b = existing
    else:
        commits, note = alert_range(config, store, mirror, alert)
        if len(commits) <= 2:
            raise NothingToBisect(f"alert #{aid}: the range {commits[0][:7]}..{commits[-1][:7]} holds one commit, "
                                  f"{commits[-1][:12]}: it is the culprit")
        members = _group(store, alert, commits)
        targets = [Target(a.case, a.metric, a.unit, a.lower_is_better) for a in members]
        b = store.open_bisection(suite=alert.suite, pool=alert.pool, device=_device(config, alert.pool),
                                 commits=commits, targets=targets, alert_ids=[a.id for a in members])
        log.info("bisection #%d of alerts %s: %d commits, %s", b.id, b.alert_ids, b.n, note)
    hints = [commits.index(c.culprit_sha) for c in store.culprits(alert.suite)
             if c.id != b.id and c.culprit_sha in commits[1:]]
    since = datetime.now(timezone.utc) - timedelta(hours=config.bisect.budget_window_h)
    used_builds, used_s = store.bisect_spent(b.pool, since)
    allowance = Allowance(config.bisect.builds_per_night - used_builds, config.bisect.device_s_per_night - used_s,
                          yield_check=lambda: nightly_in_the_way(config, store, b.pool))
    measurer = measurer_factory(b) if measurer_factory else DeviceMeasurer(config, b.suite, b.pool, b.device, b.id)
    store.set_bisection_state(b.id, State.RUNNING, reason="")
    kernels = config.suite(b.suite).kernels
    policy = replace(policy_of(config), skip_same_kernels=bool(kernels is not None and kernels.skip_same_in_bisect))
    result = bisect_range(commits, b.targets, measurer, policy=policy, allowance=allowance,
                          steps=store.bisection_steps(b.id), save=lambda st: store.save_bisection_step(b.id, st),
                          hints=hints)
    culprit = None
    if result.culprit is not None:
        sha = commits[result.culprit]
        culprit = (sha, gitops.commit_subject(mirror, sha), gitops.commit_author(mirror, sha))
    store.set_bisection_state(b.id, result.state, reason=result.reason, culprit=culprit,
                              candidates=[commits[i] for i in result.candidates])
    b = store.bisection(b.id)
    queued: list[int] = []
    if result.state.finished:
        if isinstance(measurer, DeviceMeasurer):
            measurer.cleanup()
        queued = announce(config, store, b)
    return BisectOutcome(b, result, tuple(queued))


def announce(config: Config, store: Store, b: Bisection) -> list[int]:
    """Queue the bisection's reply in each thread of its alerts (and of the alerts of every bisection
    that found the same culprit): one message per thread and culprit, idempotent."""
    if not b.state.finished:
        return []
    group = [b]
    if b.state is State.FOUND and b.culprit_sha:
        group += [o for o in store.bisections_with_culprit(b.suite, b.culprit_sha) if o.id != b.id]
    with_steps: list[tuple[Bisection, Sequence[StepRecord]]] = [(x, store.bisection_steps(x.id)) for x in group]
    kind = f"culprit-{b.culprit_sha[:12]}" if b.state is State.FOUND and b.culprit_sha else f"bisect-{b.id}"
    alerts = store.alerts_by_id({i for x in group for i in x.alert_ids})  # one read for every alert of the group
    roots = sorted({a.thread_notification_id for a in alerts.values() if a.thread_notification_id is not None})
    newest = max(x.id for x in group)
    queued = []
    for root_id in roots:
        (root,) = store.outbox_items(ids=[root_id])
        payload = bisect_messages.reply(with_steps, channel=root.channel)
        # the outbox is keyed by (run, kind, channel): the root's id keeps two threads of one night apart
        queued.append(store.queue_notification(root.run_key, reply_kind(store, root, f"{kind}-t{root.id}", newest),
                                               root.channel, payload, parent_id=root.id))
    return queued


def reply_kind(store: Store, root: Any, prefix: str, newest: int) -> str:
    """The outbox kind of a culprit reply in ``root``'s thread: ``<prefix>-b<newest bisection named>``.

    A reply not sent yet takes the new payload (its kind is reused); once one was sent, a later
    bisection that found the same culprit (``newest`` above every id named so far) gets a new reply
    in the thread, naming every bisection; the same group again finds its own reply (idempotent)."""
    mine = [i for i in store.outbox_items(statuses=("pending", "failed", "sent", "abandoned"), run_key=root.run_key)
            if i.parent_id == root.id and i.kind.startswith(f"{prefix}-b")]
    unsent = [i for i in mine if i.status in ("pending", "failed")]
    if unsent:
        return unsent[-1].kind
    return f"{prefix}-b{newest}"


def alerts_to_bisect(config: Config, run_key: str) -> list[int]:
    """The alerts the nightly's report step at ``run_key`` asks to bisect: newly confirmed there, over a
    range of more than one commit, plus open alerts whose bisection is paused (to resume it)."""
    store = open_store(config)
    # the alerts as they are now come with their events; which of them are bisected already is one read
    fresh = {alert.id: alert for alert, e in store.run_alert_events(run_key)
             if e["to_state"] == AlertState.CONFIRMED.value and e["kind"] in ("opened", "state")}
    bisected = store.bisections_of_alerts(list(fresh)) if fresh else {}
    run = store.get_run(run_key)
    out: list[int] = []
    mirror = None
    lengths: dict[tuple[str, str], int | ZlopsError] = {}  # commits per range: the alerts of a night share few
    for aid in sorted(fresh):
        alert = fresh[aid]
        if aid in bisected:
            continue
        mirror = mirror or gitops.ensure_mirror(config.suite(alert.suite).repo,
                                                config.mirrors_dir / f"{alert.suite}.git")
        span = (alert.first_base_sha, alert.first_head_sha)
        if span not in lengths:
            try:
                lengths[span] = len(gitops.first_parent_range(mirror, *span,
                                                              max_commits=config.bisect.max_commits)) - 1
            except ZlopsError as exc:
                lengths[span] = exc
        n = lengths[span]
        if isinstance(n, ZlopsError):
            log.info("alert #%d is not bisected: %s", aid, n)
            continue
        if n > 1:
            out.append(aid)
    if run is not None:
        waiting = store.alerts(suite=run.suite, states=BISECTABLE, limit=None)
        paused = store.bisections_of_alerts([a.id for a in waiting]) if waiting else {}
        for alert in waiting:
            b = paused.get(alert.id)
            if b is not None and not b.state.finished and alert.id == b.alert_ids[0]:
                out.append(alert.id)
    return sorted(set(out))


def ids_from_events(events: Any) -> list[int]:
    """Alert ids from the asset events that triggered a zlops_bisect run (their ``extra``), validated."""
    out: list[int] = []
    for group in (events or {}).values():
        for event in group:
            for value in (getattr(event, "extra", None) or {}).get("alert_ids", []) or []:
                out.append(validate_alert_id(value))
    return out


def run_requests(config: Config, alert_ids: Sequence[object]) -> dict[str, Any]:
    """Bisect each requested alert in turn (the zlops_bisect DAG's task): a failure of one is logged and
    counted, never stops the others; the summary is JSON-able."""
    done: dict[str, Any] = {}
    for raw in alert_ids:
        aid = validate_alert_id(raw)
        try:
            out = bisect_alert(config, aid)
        except NothingToBisect as exc:
            done[str(aid)] = {"state": "skipped", "reason": str(exc)}
            continue
        except DatabaseUnavailable:
            raise
        except ZlopsError as exc:
            log.warning("bisection of alert #%d failed: %s", aid, exc)
            done[str(aid)] = {"state": "error", "reason": str(exc)[:300]}
            continue
        b = out.bisection
        done[str(aid)] = {"bisection": b.id, "state": b.state.value, "culprit": b.culprit_sha,
                          "builds": out.result.builds, "seconds": round(out.result.seconds, 1)}
    return done
