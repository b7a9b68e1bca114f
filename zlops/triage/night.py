"""What the pages show about one night of a suite, as plain values read from the store (no drawing).

:func:`matrix_view`: the op family x pool grid of a night's compare table. Each cell holds the
family's rows in that pool as the judge stored them (verdict, ``Figures``, change); the cell's headline
is its worst row by the stored ``worse_pct`` (a row picked, not a number made), and a family's
:attr:`MatrixRow.reach` says on how many of the pools that measured it the family was flagged
tonight, so "slower everywhere" (frontend, codegen) reads apart from "slower on one backend".

:func:`run_view`: a run's shards with the Airflow task each ran in, and its schedule per pool: the
LPT plan's predicted load per device (``meta["partition"]``, :class:`zlops.run.partition.Plan`) beside
each device's realized busy and idle time (:func:`zlops.run.partition.realized`, from the shards' own
start and end).

:func:`coverage_view`: the night's coverage per pool (:mod:`zlops.judge.coverage`, as the report and the
Slack summary state it, with a pool's fall against the previous night), each series not watched at the upper
threshold with its reason, those watched at the upper threshold but not the lower one, and the coverage gaps:
unmeasurable, invalid, missing, failed and incomparable series with the judge's note, and the pools that did
not run or gave nothing judgeable (:func:`zlops.report.cells.pool_status`, as the report says it).

A few queries per page whatever the size of the night: the run, its compare rows, its shards (and for the
coverage page the suite's latest nightly runs, for the previous night's stored coverage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from zlops.alerts.lifecycle import op_family
from zlops.config.settings import Config
from zlops.judge import coverage as cover
from zlops.model import Comparison, RunRecord, ShardOutcome, Thresholds, Verdict, is_canary
from zlops.run.partition import Plan, Realized, realized
from zlops.store import Store

#: The coverage gaps of a night, in the order the page lists them.
GAP_VERDICTS = (Verdict.UNMEASURABLE, Verdict.INVALID, Verdict.MISSING, Verdict.FAILED, Verdict.INCOMPARABLE)


def _worse_key(c: Comparison) -> tuple[int, float, str, str]:
    worse = c.judgement.worse_pct
    return (0 if worse is not None else 1, -(worse or 0.0), c.case, c.metric)


@dataclass(frozen=True)
class MatrixCell:
    """One op family in one pool tonight: its compare rows, the worst stored change first."""

    family: str
    pool: str
    rows: tuple[Comparison, ...]

    @property
    def worst(self) -> Comparison | None:
        """The row with the largest stored ``worse_pct`` (None when no row has a change)."""
        return self.rows[0] if self.rows and self.rows[0].judgement.worse_pct is not None else None

    def count(self, *verdicts: Verdict) -> int:
        return sum(1 for c in self.rows if c.verdict in verdicts)

    @property
    def flagged(self) -> int:
        """Rows the judge flagged worse (potential, regression, severe)."""
        return sum(1 for c in self.rows if c.verdict.flagged)

    @property
    def gaps(self) -> int:
        return sum(1 for c in self.rows if c.verdict.is_gap)

    @property
    def css(self) -> str:
        """The verdict class of the cell's headline: flagged beats suspect beats improved."""
        for group in ((Verdict.SEVERE,), (Verdict.REGRESSION,), (Verdict.POTENTIAL,), (Verdict.SUSPECT,),
                      (Verdict.IMPROVED,)):
            if self.count(*group):
                return group[0].value
        return ""


@dataclass(frozen=True)
class MatrixRow:
    family: str
    cells: Mapping[str, MatrixCell]   # pool -> cell (pools that measured nothing of the family are absent)

    @property
    def flagged_pools(self) -> tuple[str, ...]:
        return tuple(p for p, c in self.cells.items() if c.flagged)

    @property
    def reach(self) -> str:
        """Where the family was flagged tonight, in words: ``every pool (3 of 3)``, ``one pool: npu``..."""
        hit, measured = self.flagged_pools, len(self.cells)
        if not hit:
            return ""
        if len(hit) == measured and measured > 1:
            return f"every pool ({len(hit)} of {measured}): a change above the backends (frontend, codegen)?"
        if len(hit) == 1 and measured > 1:
            return f"one pool of {measured}: {hit[0]}"
        return f"{len(hit)} of {measured} pools: {', '.join(hit)}"


@dataclass(frozen=True)
class MatrixView:
    suite: str
    run: RunRecord | None
    pools: tuple[tuple[str, str | None], ...]   # (pool, backend), sorted by pool
    rows: tuple[MatrixRow, ...]                 # families flagged on most pools first, then by name


def matrix_view(store: Store, suite: str, *, run_key: str | None = None) -> MatrixView:
    """The op family x pool grid of ``run_key`` (default: the suite's newest compared nightly)."""
    from zlops.store import pages

    key = run_key or store.read(pages.latest_compared_run, suite)
    run = store.get_run(key) if key else None
    if run is None or run.suite != suite:
        return MatrixView(suite, None, (), ())
    comparisons = [c for c in store.comparisons(run.run_key) if not is_canary(c.case)]   # zlops' own canary
    backends = store.read(pages.pool_backends, [run.run_key])
    by_family: dict[str, dict[str, list[Comparison]]] = {}
    for c in comparisons:
        by_family.setdefault(op_family(c.case), {}).setdefault(c.pool, []).append(c)
    rows = [MatrixRow(family, {pool: MatrixCell(family, pool, tuple(sorted(items, key=_worse_key)))
                               for pool, items in sorted(cells.items())})
            for family, cells in by_family.items()]
    rows.sort(key=lambda r: (-len(r.flagged_pools), r.family))
    pools = sorted({c.pool for c in comparisons})
    return MatrixView(suite, run, tuple((p, backends.get(p)) for p in pools), tuple(rows))


@dataclass(frozen=True)
class DeviceRow:
    """One shard of a run: where it ran, how it ended, its share of the plan and its realized time."""

    shard: ShardOutcome
    task_id: str | None       # the Airflow task that ran it (None for a run made outside Airflow)
    cases: int | None         # cases the plan gave it (None: every device ran the whole suite)
    predicted_s: float | None  # the plan's predicted load of the device (seconds; None without a timed plan)
    busy_s: float             # the benchmark process's wall time
    idle_s: float             # the rest of the pool's window


@dataclass(frozen=True)
class PoolSchedule:
    pool: str
    plan: Plan | None
    real: Realized
    devices: tuple[DeviceRow, ...]

    @property
    def predicted_makespan_s(self) -> float | None:
        return self.plan.makespan if self.plan is not None and self.plan.timed else None

    @property
    def realized_over_predicted(self) -> float | None:
        predicted = self.predicted_makespan_s
        return self.real.makespan_s / predicted if predicted else None


@dataclass(frozen=True)
class RunView:
    run: RunRecord
    airflow: tuple[str, str] | None    # (dag id, DAG run id)
    pools: tuple[PoolSchedule, ...]


def run_view(store: Store, run: RunRecord, *, airflow: tuple[str, str] | None,
             task_id: Callable[[str, int], str] | None = None) -> RunView:
    """The shards and the schedule of ``run``; ``task_id(pool, device)`` names a shard's Airflow task
    (given when the run was made by a DAG run, ``airflow``)."""
    shards = store.shards(run.run_key)
    raw_plans = run.meta.get("partition") if isinstance(run.meta.get("partition"), Mapping) else {}
    plans: dict[str, Plan] = {}
    for pool, raw in (raw_plans or {}).items():
        try:
            plans[pool] = Plan.from_dict(raw)
        except (KeyError, TypeError, ValueError):
            continue  # a plan this zlops cannot read: shown as no plan, never a wrong prediction
    busy = None
    if run.meta.get("campaign"):  # a gang shard holds every device of its gang (zlops.run.partition.gang_busy)
        from zlops.run.partition import gang_busy

        busy = gang_busy(store.results(run.run_key))
    real = realized(shards, busy)
    out = []
    for pool, r in real.items():
        plan = plans.get(pool)
        loads = plan.loads if plan is not None and plan.timed else {}
        times = {d.device: d for d in r.devices}
        rows = tuple(DeviceRow(s, task_id(s.pool, s.device) if task_id is not None and airflow else None,
                               len(plan.cases_of(s.device)) if plan is not None else None,
                               loads.get(s.device), times[s.device].busy_s, times[s.device].idle_s)
                     for s in shards if s.pool == pool)
        out.append(PoolSchedule(pool, plan, r, rows))
    return RunView(run, airflow, tuple(out))


@dataclass(frozen=True)
class CoverageView:
    suite: str
    run: RunRecord | None
    gaps: Mapping[Verdict, tuple[Comparison, ...]]   # GAP_VERDICTS -> rows, by pool and case
    series: int                                      # rows in the night's compare table
    pools_ran: tuple[str, ...]
    pools_invalid: tuple[str, ...]
    pools_missing: tuple[str, ...]
    thresholds: Thresholds = field(default_factory=Thresholds)
    #: per pool, the night's coverage (zlops.judge.coverage.pool_coverage of the stored rows)
    coverage: tuple[cover.Coverage, ...] = ()
    #: the report's coverage lines: one per pool, and a pool's fall against the previous night
    lines: tuple[str, ...] = ()
    #: the counted series not watched at the upper threshold, each with its reason, by reason then pool and case
    unwatched: tuple[tuple[Comparison, str], ...] = ()
    #: the counted series watched at the upper threshold but not at the lower one, each with its reason there
    upper_only: tuple[tuple[Comparison, str], ...] = ()

    @property
    def gap_count(self) -> int:
        return sum(len(v) for v in self.gaps.values())

    @property
    def left_out(self) -> tuple[int, int]:
        """(derived rows, new rows) of the night: not counted (derived rows follow their counted sources)."""
        return sum(c.derived for c in self.coverage), sum(c.new for c in self.coverage)


def _by_reason(rows: Sequence[tuple[Comparison, str]]) -> tuple[tuple[Comparison, str], ...]:
    order = {r: i for i, r in enumerate(cover.REASONS)}
    return tuple(sorted(rows, key=lambda t: (order.get(t[1], len(order)), t[0].pool, t[0].case, t[0].metric)))


def run_judging(run: RunRecord, config: Config | None) -> tuple[Thresholds, str]:
    """The thresholds and the judge ``run`` was judged with: those stored with it, else ``config``'s (else the
    defaults: 2% / 5%, the noise judge)."""
    from zlops.judge import setup as judging

    if config is not None:
        setup = judging.for_run(run.meta, config)[0]
        return setup.thresholds, setup.judge
    try:
        setup = judging.JudgingSetup.from_dict(run.meta[judging.META_KEY])
        return setup.thresholds, setup.judge
    except (KeyError, TypeError, ValueError):
        return Thresholds(), "noise"


def coverage_view(store: Store, suite: str, *, run_key: str | None = None,
                  expected_pools: Sequence[str] | None = None, config: Config | None = None) -> CoverageView:
    """The coverage of ``run_key`` (default: the suite's newest compared nightly) at the thresholds it was
    judged with (stored with the run, else ``config``'s), and its gaps."""
    from zlops.report.cells import pool_status
    from zlops.store import pages

    key = run_key or store.read(pages.latest_compared_run, suite)
    run = store.get_run(key) if key else None
    if run is None or run.suite != suite:
        return CoverageView(suite, None, {v: () for v in GAP_VERDICTS}, 0, (), (), ())
    comparisons = [c for c in store.comparisons(run.run_key) if not is_canary(c.case)]   # zlops' own canary
    ran, invalid, missing = pool_status(store.shards(run.run_key), comparisons, expected_pools)
    gaps = {v: tuple(sorted((c for c in comparisons if c.verdict is v), key=lambda c: (c.pool, c.case, c.metric)))
            for v in GAP_VERDICTS}
    thresholds, judge = run_judging(run, config)
    night = cover.pool_coverage(comparisons, thresholds, judge=judge)
    earlier = [r for r in store.list_runs(suite=suite, kind="nightly", limit=15)
               if r.run_key != run.run_key and (run.started_at is None or r.started_at is None
                                                or r.started_at < run.started_at)]
    before = cover.previous((r.meta for r in earlier), suite)
    counted = [c for c in comparisons if cover.counted(c)]
    watched = (cover.NIGHTS, cover.AB)
    unwatched: list[tuple[Comparison, str]] = []
    upper_only: list[tuple[Comparison, str]] = []
    for c in counted:
        why = cover.row_watch(c, thresholds.regression_pct, judge=judge)
        if why not in watched:
            unwatched.append((c, why))
        elif (low := cover.row_watch(c, thresholds.potential_pct, judge=judge)) not in watched:
            upper_only.append((c, low))
    return CoverageView(suite, run, gaps, len(comparisons), tuple(ran), tuple(invalid), tuple(missing),
                        thresholds, tuple(night), tuple(cover.pool_lines(night, before)), _by_reason(unwatched),
                        _by_reason(upper_only))
