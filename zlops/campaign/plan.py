"""Collective campaigns: the shards (one case on P devices) and tonight's gang plan over a pool.

A campaign suite (``suites.<name>.campaign``) runs the seed's collectives harness kind of workload:
every (case, size, P, variant, stack) of a grid, or of what a generator command prints, is ONE shard
that runs on P devices at once under a gang lease (:func:`zlops.host.locks.gang_lease`).

The plan is list scheduling, longest first (Graham's LPT generalised to jobs that need several
machines at once): shards sorted by their measured device-seconds (seconds x P, the most first, then
widest: a narrow shard placed between gangs would idle the gang's other devices while it runs), each
placed on the window of P consecutive devices of the pool that frees up earliest (ties: the lowest
window). Consecutive, because the idle rule (zlops.run.devices) picks consecutive ranges and a
collective's links are best between neighbours. Each shard runs in the *lane* of its window's first
device: lane ``d`` is the device task ``pool/d`` of the nightly, so the DAG, the store (one shard
row per pool and device), re-runs and reports keep working unchanged; a lane's shards wait for the
shards planned before them on any of their devices (``after``), then take their gang lease.

Pure functions and frozen values; the store and process side is :mod:`zlops.campaign.run`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zlops.config.settings import NAME_PATTERN, CampaignConfig, SuiteConfig
from zlops.errors import ProcessError, ZlopsError
from zlops.host import proc

#: version of the plan kept in a run's meta (``meta["campaign"][pool]``)
PLAN_VERSION = 1
GENERATOR_TIMEOUT_S = 300.0


@dataclass(frozen=True, order=True)
class CampaignCase:
    """One campaign shard: a case of ``size`` bytes on ``p`` devices, one variant of one stack."""

    case: str
    p: int
    variant: str = "default"
    stack: str = "default"
    size: int | None = None

    def __post_init__(self) -> None:
        for name in ("case", "variant", "stack"):
            value = getattr(self, name)
            if not isinstance(value, str) or not re.match(NAME_PATTERN, value):
                raise ValueError(f"CampaignCase.{name}: expected a name matching {NAME_PATTERN}, got {value!r}")
        if not isinstance(self.p, int) or isinstance(self.p, bool) or self.p < 1:
            raise ValueError(f"CampaignCase.p: expected an integer >= 1, got {self.p!r}")
        if self.size is not None and (not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 1):
            raise ValueError(f"CampaignCase.size: expected an integer >= 1 or None, got {self.size!r}")

    @property
    def stem(self) -> str:
        """The problem: the case and its size (``allreduce/64MiB``)."""
        return self.case if self.size is None else f"{self.case}/{size_label(self.size)}"

    @property
    def series_case(self) -> str:
        """The case name of its measured series: ``<stem>/p<P>/<variant>/<stack>``."""
        return f"{self.stem}/p{self.p}/{self.variant}/{self.stack}"

    @property
    def shard_id(self) -> str:
        """A file-name-safe id, unique within a campaign (its artifact folder in the lane)."""
        return self.series_case.replace("/", "__")

    def placeholders(self, devices: Sequence[int]) -> dict[str, str]:
        if len(devices) != self.p:
            raise ValueError(f"{self.series_case}: expected {self.p} devices, got {list(devices)}")
        return {"devices": ",".join(str(d) for d in devices), "device": str(devices[0]), "p": str(self.p),
                "variant": self.variant, "stack": self.stack, "case": self.case,
                "size": "" if self.size is None else str(self.size)}

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case, "p": self.p, "variant": self.variant, "stack": self.stack, "size": self.size}


def size_label(size: int) -> str:
    """Bytes as the shortest exact binary label: 1048576 -> ``1MiB``, 1000 -> ``1000B``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def grid_cases(campaign: CampaignConfig) -> list[CampaignCase]:
    """Every shard of the campaign's grid, in a stable order."""
    grid = campaign.grid
    if grid is None:
        raise ZlopsError("this campaign has no grid (it uses a generator)")
    sizes: list[int | None] = list(grid.sizes) or [None]
    return [CampaignCase(c, p, v, s, z) for c in grid.cases for z in sizes for p in grid.p
            for v in grid.variants for s in grid.stacks]


class _GeneratedCase(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    case: str = Field(pattern=NAME_PATTERN)
    p: int = Field(ge=1)
    variant: str = Field(default="default", pattern=NAME_PATTERN)
    stack: str = Field(default="default", pattern=NAME_PATTERN)
    size: int | None = Field(default=None, ge=1)

    @field_validator("p", "size", mode="before")
    @classmethod
    def _no_bool(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("expected an integer, got a boolean")
        return v


def parse_generated(text: str, *, source: str) -> list[CampaignCase]:
    """The shards a generator printed: a JSON list of ``{case, p, variant?, stack?, size?}``;
    errors name the item index and key. Duplicates are an error (two shards, one series)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ZlopsError(f"{source}: not JSON ({exc}); print a JSON list of {{case, p, variant, stack, size}}") \
            from None
    if not isinstance(raw, list) or not raw:
        raise ZlopsError(f"{source}: expected a non-empty JSON list of cases, got {type(raw).__name__}"
                         + (" (empty)" if raw == [] else ""))
    out: list[CampaignCase] = []
    for i, item in enumerate(raw):
        try:
            c = _GeneratedCase.model_validate(item)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ZlopsError(f"{source}: [{i}]{'.' + where if where else ''}: {err['msg']}") from None
        out.append(CampaignCase(c.case, c.p, c.variant, c.stack, c.size))
    seen: set[str] = set()
    for c in out:
        if c.series_case in seen:
            raise ZlopsError(f"{source}: case {c.series_case} is listed twice")
        seen.add(c.series_case)
    return out


def campaign_cases(suite: SuiteConfig, *, worktree: Path | None, venv: Path | None) -> list[CampaignCase]:
    """The campaign's shards: its grid, or what its generator prints (run through zlops.host.proc in the
    worktree with the suite's venv and environment, never a shell)."""
    campaign = suite.campaign
    if campaign is None:
        raise ZlopsError("this suite has no campaign section")
    if campaign.grid is not None:
        return grid_cases(campaign)
    assert campaign.generator is not None
    if worktree is None:
        raise ZlopsError("the campaign generator needs the commit's worktree (run prepare first)")
    try:
        done = proc.run(campaign.generator, cwd=worktree, env=proc.build_env(suite.env, venv=venv),
                        timeout=GENERATOR_TIMEOUT_S, what="campaign generator")
    except ProcessError as exc:
        raise ZlopsError(f"campaign.generator failed: {exc}") from exc
    cases = parse_generated(done.stdout, source=f"campaign.generator {campaign.generator}")
    ratios = {s for pair in campaign.ratios for s in pair}
    missing = ratios - {c.stack for c in cases}
    if missing:
        raise ZlopsError(f"campaign.ratios name stacks {sorted(missing)} the generator printed no case of")
    return cases


# --- the gang plan ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """Where and when one shard runs: its devices (its lane is the first), the planned start and
    seconds, and the shards planned before it on any of its devices (it waits for them)."""

    shard: CampaignCase
    devices: tuple[int, ...]
    start: float
    weight: float
    after: tuple[str, ...] = ()

    @property
    def lane(self) -> int:
        return self.devices[0]

    @property
    def end(self) -> float:
        return self.start + self.weight


@dataclass(frozen=True)
class CampaignPlan:
    """Tonight's campaign on one pool: every shard placed, or unplaceable (P above the pool's size)."""

    pool: str
    devices: tuple[int, ...]
    placements: tuple[Placement, ...]
    unplaced: tuple[CampaignCase, ...] = ()
    source: str = "equal"

    def __post_init__(self) -> None:
        ids = [p.shard.shard_id for p in self.placements] + [c.shard_id for c in self.unplaced]
        if len(ids) != len(set(ids)):
            raise ValueError(f"CampaignPlan: a shard is placed twice in pool {self.pool}")
        for p in self.placements:
            if len(p.devices) != p.shard.p or not set(p.devices) <= set(self.devices):
                raise ValueError(f"CampaignPlan: {p.shard.series_case} placed on {list(p.devices)}, not "
                                 f"{p.shard.p} devices of {list(self.devices)}")

    def lane(self, device: int) -> tuple[Placement, ...]:
        """The shards device task ``device`` runs, in planned order."""
        return tuple(sorted((p for p in self.placements if p.lane == device),
                            key=lambda p: (p.start, p.shard.shard_id)))

    @property
    def makespan(self) -> float:
        return max((p.end for p in self.placements), default=0.0)

    @property
    def lower_bound(self) -> float:
        """``max(heaviest shard, device-seconds / devices)``: no placement finishes sooner."""
        work = sum(p.weight * p.shard.p for p in self.placements)
        return max(max((p.weight for p in self.placements), default=0.0), work / max(1, len(self.devices)))

    def summary(self) -> str:
        unit = "s" if self.source != "equal" else " units"
        extra = f"; {len(self.unplaced)} shards need more devices than the pool has" if self.unplaced else ""
        return (f"pool {self.pool}: {len(self.placements)} campaign shards over {len(self.devices)} devices by gang "
                f"LPT ({self.source} weights): predicted makespan {self.makespan:.1f}{unit} against the lower bound "
                f"{self.lower_bound:.1f}{unit}{extra}")

    def to_dict(self) -> dict[str, Any]:
        return {"plan_version": PLAN_VERSION, "pool": self.pool, "devices": list(self.devices),
                "source": self.source,
                "placements": [{**p.shard.to_dict(), "devices": list(p.devices), "start": p.start,
                                "weight": p.weight, "after": list(p.after)} for p in self.placements],
                "unplaced": [c.to_dict() for c in self.unplaced]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignPlan:
        if data.get("plan_version") != PLAN_VERSION:
            raise ValueError(f"campaign plan_version {data.get('plan_version')!r} is not one this zlops reads "
                             f"({PLAN_VERSION})")

        def case(d: Mapping[str, Any]) -> CampaignCase:
            return CampaignCase(d["case"], int(d["p"]), d["variant"], d["stack"], d.get("size"))

        return cls(pool=data["pool"], devices=tuple(int(d) for d in data["devices"]), source=data["source"],
                   placements=tuple(Placement(case(p), tuple(int(d) for d in p["devices"]), float(p["start"]),
                                              float(p["weight"]), tuple(p.get("after", ())))
                                    for p in data["placements"]),
                   unplaced=tuple(case(u) for u in data.get("unplaced", ())))


def estimate(cases: Sequence[CampaignCase], measured_s: Mapping[str, float]) -> tuple[dict[str, float], str]:
    """Seconds per shard: measured on earlier nights (by ``shard_id``); a new shard gets the mean of
    the measured shards of its P (else of all); with nothing measured every shard weighs 1.
    Returns the weights and their source (``measured``, ``mixed`` or ``equal``)."""
    known = {c.shard_id: measured_s[c.shard_id] for c in cases
             if measured_s.get(c.shard_id) is not None and measured_s[c.shard_id] >= 0}
    if not known:
        return {c.shard_id: 1.0 for c in cases}, "equal"
    by_p: dict[int, list[float]] = {}
    for c in cases:
        if c.shard_id in known:
            by_p.setdefault(c.p, []).append(known[c.shard_id])
    overall = sum(known.values()) / len(known)
    weights = {c.shard_id: known.get(c.shard_id, sum(by_p[c.p]) / len(by_p[c.p]) if c.p in by_p else overall)
               for c in cases}
    return weights, "measured" if len(known) == len(cases) else "mixed"


def gang_lpt(cases: Sequence[CampaignCase], devices: Sequence[int], weights: Mapping[str, float]
             ) -> tuple[list[Placement], list[CampaignCase]]:
    """Place every shard on P consecutive devices of ``devices`` (in their listed order), the most
    device-seconds (``weights`` x P) first (then widest, then by id), each on the window that frees up
    earliest (ties: lowest).

    Deterministic. Returns the placements (in placing order) and the shards wider than the pool.
    """
    if not devices:
        raise ValueError("gang_lpt: expected at least one device")
    if len(set(devices)) != len(devices):
        raise ValueError(f"gang_lpt: devices must be unique, got {list(devices)}")
    free = {d: 0.0 for d in devices}
    last: dict[int, str] = {}
    placed: list[Placement] = []
    unplaced: list[CampaignCase] = []
    for c in sorted(cases, key=lambda c: (-weights[c.shard_id] * c.p, -c.p, c.shard_id)):
        if c.p > len(devices):
            unplaced.append(c)
            continue
        windows = [tuple(devices[i:i + c.p]) for i in range(len(devices) - c.p + 1)]
        window = min(windows, key=lambda w: (max(free[d] for d in w), devices.index(w[0])))
        start = max(free[d] for d in window)
        after = tuple(sorted({last[d] for d in window if d in last}))
        placed.append(Placement(c, window, start, weights[c.shard_id], after))
        for d in window:
            free[d] = start + weights[c.shard_id]
            last[d] = c.shard_id
    return placed, unplaced


def make_plan(pool: str, cases: Sequence[CampaignCase], devices: Sequence[int],
              measured_s: Mapping[str, float]) -> CampaignPlan:
    """Weights from earlier nights, then :func:`gang_lpt`."""
    weights, source = estimate(cases, measured_s)
    placed, unplaced = gang_lpt(cases, devices, weights)
    return CampaignPlan(pool, tuple(devices), tuple(placed), tuple(unplaced), source)
