"""Split a suite's cases over a pool's devices: longest-processing-time first (LPT), and how it went.

Pure functions on plain values; the store-facing glue (which cases, which weights, where the plan
is kept) is :mod:`zlops.run.sharding`.

Why LPT: the seed's hash partition ignored weight and put the critical path at 120 minutes, leaving
a card idle, where greedy longest-first got 70. No partition can beat the *lower bound*
``max(heaviest case, total / devices)``: the heaviest single case (topk, 70.6 min against an
ideal share of 45.4 min) is the floor, so partitioning can only keep the other devices from
waiting. LPT (Graham 1969, "Bounds on multiprocessing timing anomalies") sorts the cases by weight,
heaviest first, and gives each to the least-loaded device; its makespan is at most
``(4/3 - 1/(3m))`` times the optimum on ``m`` devices.

Weights are *seconds for tonight*: a per-round duration measured on earlier nights times tonight's
rounds (:func:`estimate_weights`). The seed measured one pair (2 cells) per case, ran N rounds
(2N cells) and first forgot the factor N: it reported topk at 11.8 minutes instead of 70.6.
"""

from __future__ import annotations

import heapq
import statistics
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zlops.model import CaseResult, ShardOutcome

#: version of the plan dict kept in a run's meta (``meta["partition"][pool]``)
PLAN_VERSION = 1


@dataclass(frozen=True)
class Plan:
    """The cases each device of one pool runs tonight, with the weights that decided it."""

    pool: str
    strategy: str                               # "lpt" | "hash"
    assignments: Mapping[int, tuple[str, ...]]  # device -> its cases, in run order (heaviest first for LPT)
    weights: Mapping[str, float]                # case -> estimated seconds tonight
    source: str = "equal"                       # "measured", "mixed" (some cases guessed) or "equal"
    rounds: int = 1

    def __post_init__(self) -> None:
        seen = [c for cases in self.assignments.values() for c in cases]
        if len(seen) != len(set(seen)):
            raise ValueError(f"Plan.assignments: a case is assigned twice in pool {self.pool}")
        if set(seen) != set(self.weights):
            raise ValueError(f"Plan.assignments: cases {sorted(set(self.weights) ^ set(seen))} are not assigned "
                             "exactly once")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("Plan.weights: expected weights >= 0")

    @property
    def devices(self) -> tuple[int, ...]:
        return tuple(self.assignments)

    @property
    def loads(self) -> dict[int, float]:
        return {d: sum(self.weights[c] for c in cases) for d, cases in self.assignments.items()}

    @property
    def makespan(self) -> float:
        """The predicted wall time of the pool: its most loaded device."""
        return max(self.loads.values(), default=0.0)

    @property
    def total(self) -> float:
        return sum(self.weights.values())

    @property
    def heaviest(self) -> tuple[str, float] | None:
        if not self.weights:
            return None
        case = max(self.weights, key=lambda c: (self.weights[c], c))
        return case, self.weights[case]

    @property
    def lower_bound(self) -> float:
        return lower_bound(self.weights.values(), len(self.assignments))

    @property
    def ratio(self) -> float | None:
        """Predicted makespan over the lower bound (1.0 is optimal; None without weight)."""
        lb = self.lower_bound
        return self.makespan / lb if lb > 0 else None

    def cases_of(self, device: int) -> tuple[str, ...]:
        return tuple(self.assignments.get(device, ()))

    @property
    def timed(self) -> bool:
        """Whether the weights are seconds (measured or partly guessed); equal weights are counts."""
        return self.source != "equal"

    def amount(self, value: float) -> str:
        """A load or weight as text: a duration, or a number of cases for equal weights."""
        return fmt_duration(value) if self.timed else f"{value:g} cases"

    def summary(self) -> str:
        """One line for logs and task results."""
        heavy = self.heaviest
        ratio = f" ({self.ratio:.3f}x)" if self.ratio is not None else ""
        return (f"pool {self.pool}: {len(self.weights)} cases over {len(self.assignments)} devices by "
                f"{self.strategy.upper()} ({self.source} weights, {self.rounds} rounds): predicted makespan "
                f"{self.amount(self.makespan)} against the lower bound {self.amount(self.lower_bound)}{ratio}"
                + (f"; heaviest case {heavy[0]} {self.amount(heavy[1])}" if heavy and self.timed else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"plan_version": PLAN_VERSION, "pool": self.pool, "strategy": self.strategy, "source": self.source,
                "rounds": self.rounds, "devices": {str(d): list(c) for d, c in self.assignments.items()},
                "weights": dict(self.weights), "predicted_makespan_s": self.makespan,
                "lower_bound_s": self.lower_bound}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        version = data.get("plan_version")
        if version != PLAN_VERSION:
            raise ValueError(f"partition plan_version {version!r} is not one this zlops reads ({PLAN_VERSION})")
        return cls(pool=data["pool"], strategy=data["strategy"], source=data["source"], rounds=int(data["rounds"]),
                   assignments={int(d): tuple(c) for d, c in data["devices"].items()},
                   weights={k: float(v) for k, v in data["weights"].items()})


def lower_bound(weights: Sequence[float] | Any, devices: int) -> float:
    """``max(heaviest, total / devices)``: no assignment of whole cases can finish sooner."""
    values = list(weights)
    if devices < 1:
        raise ValueError(f"lower_bound: expected at least one device, got {devices}")
    return max(max(values, default=0.0), sum(values) / devices)


def lpt(weights: Mapping[str, float], devices: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """Longest-processing-time first: heaviest case to the least-loaded device, repeatedly.

    Deterministic: ties in weight go by case name, ties in load to the device listed first. Every
    device appears in the result, possibly with no case (more devices than cases).
    """
    if not devices:
        raise ValueError("lpt: expected at least one device")
    if len(set(devices)) != len(devices):
        raise ValueError(f"lpt: devices must be unique, got {list(devices)}")
    heap = [(0.0, i, d) for i, d in enumerate(devices)]
    out: dict[int, list[str]] = {d: [] for d in devices}
    for case in sorted(weights, key=lambda c: (-weights[c], c)):
        load, i, d = heapq.heappop(heap)
        out[d].append(case)
        heapq.heappush(heap, (load + weights[case], i, d))
    return {d: tuple(cases) for d, cases in out.items()}


def hash_partition(cases: Sequence[str], devices: Sequence[int], *, salt: str = "") -> dict[int, tuple[str, ...]]:
    """The baseline LPT replaces: device = crc32(salt + case) mod #devices, blind to weight.

    ``salt`` re-draws the hash (the benchmark reports the spread over many draws).
    """
    if not devices:
        raise ValueError("hash_partition: expected at least one device")
    out: dict[int, list[str]] = {d: [] for d in devices}
    for case in cases:
        out[devices[zlib.crc32((salt + case).encode()) % len(devices)]].append(case)
    return {d: tuple(c) for d, c in out.items()}


def estimate_weights(per_round_s: Mapping[str, float], cases: Sequence[str], rounds: int
                     ) -> tuple[dict[str, float], str]:
    """Seconds each case should take tonight: its measured per-round seconds times ``rounds``.

    A case without history gets the mean per-round time of the cases that have one (a new case is
    assumed average, not free); with no history at all every case weighs 1 (a unit, not seconds),
    which LPT turns into an even split by count. Returns the weights and their source:
    ``measured``, ``mixed`` or ``equal``. The model is linear in rounds, so a fixed per-case setup
    cost (compile, autotune) is scaled too; with the same rounds every night the factor is 1.
    """
    if rounds < 1:
        raise ValueError(f"estimate_weights: expected rounds >= 1, got {rounds}")
    known = {c: per_round_s[c] for c in cases if per_round_s.get(c) is not None and per_round_s[c] >= 0}
    if not known:
        return {c: 1.0 for c in cases}, "equal"
    mean = statistics.fmean(known.values())
    weights = {c: known.get(c, mean) * rounds for c in cases}
    return weights, "measured" if len(known) == len(cases) else "mixed"


#: the per-case param a harness may report: wall seconds it spent on that case in this shard (all rounds)
DURATION_PARAM = "duration_s"


def shard_case_seconds(results: Sequence[CaseResult], wall_s: float | None, rounds: int) -> dict[str, float]:
    """Per-round seconds of every case one earlier shard ran.

    A case whose result rows carry ``params["duration_s"]`` (zlops-json; the largest over its
    metrics, which share one run of the case) is measured; the others share what is left of the
    shard's wall time equally (a coarse fallback: the harness start-up is spread over them too).
    Everything is divided by the shard's rounds: one measurement of N rounds is N times a round.
    """
    if rounds < 1:
        raise ValueError(f"shard_case_seconds: expected rounds >= 1, got {rounds}")
    cases = list(dict.fromkeys(r.case for r in results))
    explicit: dict[str, float] = {}
    for r in results:
        value = r.params.get(DURATION_PARAM) if isinstance(r.params, Mapping) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            explicit[r.case] = max(explicit.get(r.case, 0.0), float(value))
    out = {c: v / rounds for c, v in explicit.items()}
    rest = [c for c in cases if c not in explicit]
    if rest and wall_s is not None and wall_s >= 0:
        share = max(0.0, wall_s - sum(explicit.values())) / len(rest)
        out.update({c: share / rounds for c in rest})
    return out


def make_plan(pool: str, cases: Sequence[str], devices: Sequence[int], per_round_s: Mapping[str, float],
              rounds: int, *, strategy: str = "lpt") -> Plan:
    """Weights from the measured per-round durations, then LPT (or the hash baseline)."""
    if len(set(cases)) != len(cases):
        raise ValueError(f"make_plan: case names repeat in pool {pool}")
    weights, source = estimate_weights(per_round_s, cases, rounds)
    if strategy == "lpt":
        assignments = lpt(weights, devices)
    elif strategy == "hash":
        assignments = hash_partition(cases, devices)
    else:
        raise ValueError(f"unknown partition strategy {strategy!r}; known: lpt, hash")
    return Plan(pool=pool, strategy=strategy, assignments=assignments, weights=weights, source=source,
                rounds=rounds)


# --- what happened: realized makespan and idle time -------------------------------------------------

@dataclass(frozen=True)
class DeviceTime:
    device: int
    busy_s: float   # the benchmark process's wall time (ended - started); 0 when it never ran
    idle_s: float   # the rest of the pool's window


@dataclass(frozen=True)
class Realized:
    """How one pool's shards actually ran: from the first start to the last end."""

    pool: str
    makespan_s: float
    started_at: datetime | None
    ended_at: datetime | None
    devices: tuple[DeviceTime, ...] = field(default_factory=tuple)

    @property
    def idle_s(self) -> float:
        return sum(d.idle_s for d in self.devices)

    @property
    def idle_share(self) -> float:
        """Idle device time over the device time the pool held (0 = every device busy to the end)."""
        held = self.makespan_s * len(self.devices)
        return self.idle_s / held if held > 0 else 0.0


def gang_busy(results: Iterable[tuple[str, int, Any]]) -> dict[tuple[str, int], float]:
    """Per (pool, device): the seconds a campaign's gang shards held it, each shard's ``duration_s`` on each
    of its ``devices`` (``params["campaign"]`` of its results, zlops.campaign.run), every shard once.

    A lane's process runs on its first device only, but a P=2 gang shard it leads holds the other device
    too: the schedule of a campaign run counts that time on every device of the gang."""
    seen: set[tuple[str, str]] = set()
    busy: dict[tuple[str, int], float] = {}
    for pool, _device, r in results:
        shard = r.params.get("campaign") if isinstance(getattr(r, "params", None), Mapping) else None
        if not isinstance(shard, Mapping):
            continue
        sid, seconds, devices = shard.get("shard_id"), shard.get("duration_s"), shard.get("devices")
        if not isinstance(sid, str) or not isinstance(seconds, (int, float)) or not isinstance(devices, list):
            continue
        if (pool, sid) in seen:
            continue
        seen.add((pool, sid))
        for d in devices:
            busy[(pool, int(d))] = busy.get((pool, int(d)), 0.0) + float(seconds)
    return busy


def realized(shards: Sequence[ShardOutcome], busy: Mapping[tuple[str, int], float] | None = None,
             ) -> dict[str, Realized]:
    """Per pool: the realized makespan (last end - first start) and each device's busy and idle time.

    Times are the benchmark processes' own (``started_at``/``ended_at`` of the shards, taken after
    the device lock was acquired), so Airflow's queueing and the environment build are not in them.
    A shard that never started (skipped, failed before running) counts as idle for the whole window.
    ``busy`` (:func:`gang_busy`, a campaign run): a pool it names counts each device busy for the gang
    shards that held it, not for its own lane process's span.
    """
    by_pool: dict[str, list[ShardOutcome]] = {}
    for s in shards:
        by_pool.setdefault(s.pool, []).append(s)
    out = {}
    for pool, items in sorted(by_pool.items()):
        timed = [s for s in items if s.started_at is not None and s.ended_at is not None]
        if not timed:
            out[pool] = Realized(pool, 0.0, None, None,
                                 tuple(DeviceTime(s.device, 0.0, 0.0) for s in sorted(items, key=lambda s: s.device)))
            continue
        start = min(s.started_at for s in timed if s.started_at is not None)
        end = max(s.ended_at for s in timed if s.ended_at is not None)
        window = max(0.0, (end - start).total_seconds())
        devices = []
        gang = gang_pools(busy, pool)
        for s in sorted(items, key=lambda s: s.device):
            if gang:
                held = (busy or {}).get((pool, s.device), 0.0)
            else:
                held = (s.ended_at - s.started_at).total_seconds() if s.started_at and s.ended_at else 0.0
            held = min(max(0.0, held), window)
            devices.append(DeviceTime(s.device, held, window - held))
        out[pool] = Realized(pool, window, start, end, tuple(devices))
    return out


def schedule_section(plans: Mapping[str, Any] | None, shards: Sequence[ShardOutcome],
                     busy: Mapping[tuple[str, int], float] | None = None) -> list[str]:
    """Markdown lines for the run report: per pool, predicted against realized makespan and idle time.

    ``plans`` is ``run.meta.get("partition")`` (pool -> :meth:`Plan.to_dict`), None for a suite whose
    devices each run the whole suite; the realized part is shown either way, for pools of more than
    one device (one device has nobody to wait for).
    """
    real = {pool: r for pool, r in realized(shards, busy).items() if pool in (plans or {}) or len(r.devices) > 1}
    if not real:
        return []
    out = ["## Schedule", ""]
    for pool, r in real.items():
        raw = (plans or {}).get(pool)
        plan = Plan.from_dict(raw) if raw else None
        if plan is not None:
            out.append(f"- Pool `{pool}`: {plan.summary().split(': ', 1)[1]}.")
            lb = plan.lower_bound
            vs = f" ({r.makespan_s / lb:.2f}x the predicted lower bound)" if lb > 0 and plan.timed else ""
            out.append(f"- Realized makespan {fmt_duration(r.makespan_s)}{vs}; "
                       f"device idle time {fmt_duration(r.idle_s)} "
                       f"({r.idle_share:.0%} of the device time the pool held).")
        elif gang_pools(busy, pool):
            out.append(f"- Pool `{pool}`: campaign lanes of gang shards (the Campaign section has the plan); "
                       f"realized makespan {fmt_duration(r.makespan_s)}, "
                       f"device idle time {fmt_duration(r.idle_s)} ({r.idle_share:.0%}).")
        else:
            out.append(f"- Pool `{pool}`: every device ran the whole suite; "
                       f"realized makespan {fmt_duration(r.makespan_s)}, "
                       f"device idle time {fmt_duration(r.idle_s)} ({r.idle_share:.0%}).")
        out += ["", "| device | cases | predicted | busy | idle |", "|---|---|---|---|---|"]
        loads = plan.loads if plan is not None else {}
        for d in r.devices:
            cases = str(len(plan.cases_of(d.device))) if plan is not None else \
                ("gang shards" if gang_pools(busy, pool) else "all")
            predicted = plan.amount(loads[d.device]) if plan is not None and d.device in loads else "-"
            out.append(f"| {d.device} | {cases} | {predicted} | {fmt_duration(d.busy_s)} | {fmt_duration(d.idle_s)} |")
        out.append("")
    predicted = ("Predicted times are estimates from earlier nights (per-round duration x rounds); "
                 if plans else "")
    held = ("busy is the benchmark process's wall time, or for a campaign pool the seconds its gang shards "
            "held the device (a P=2 shard counts on both devices)"
            if any(gang_pools(busy, pool) for pool in real) else "busy is the benchmark process's wall time")
    out += [predicted + held + "; idle is the rest of the window from the "
            "pool's first shard start to its last shard end.", ""]
    return out


def gang_pools(busy: Mapping[tuple[str, int], float] | None, pool: str) -> bool:
    """Whether ``busy`` (:func:`gang_busy`) counts ``pool``'s devices by their gang shards."""
    return busy is not None and any(p == pool for p, _ in busy)


def fmt_duration(seconds: float) -> str:
    """Seconds as the report writes a duration: s below 2 min, min below 3 h, else h."""
    if seconds >= 3 * 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"
