"""Kernel inventories in the store: written per shard at ingest, read per (run, pool) for attribution.

Session-level functions; the caller owns the transaction (:class:`~zlops.store.Store` wraps them).
A shard's inventory is replaced whole on every write (upsert of its row, its kernel rows deleted and
inserted again), so a retried ingest never duplicates a kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from zlops.kernels.inventory import AutotunePick, Inventory, KernelRecord
from zlops.store.engine import dialect_insert
from zlops.store.models import AlertEvent, AlertRow, ComparisonRow, KernelInventoryRow, KernelRow, Run, Shard
from zlops.store.runs import require_run

_LIMITS = {"name": 250, "cache_key": 128, "code_hash": 64, "binary": 16, "backend": 32, "arch": 32,
           "compiler_version": 64}


def _clip(value: Any, key: str) -> Any:
    return value[:_LIMITS[key]] if isinstance(value, str) and key in _LIMITS else value


def save_inventory(session: Session, run_key: str, pool: str, device: int, inv: Inventory) -> None:
    """Store ``inv`` as the inventory of shard (run, pool, device), replacing what was there."""
    run = require_run(session, run_key)
    shard_id = session.scalars(select(Shard.id).where(Shard.run_id == run.id, Shard.pool == pool,
                                                      Shard.device == device)).one()
    values = {"provider": inv.provider, "state": inv.state, "reason": inv.reason, "kernels_n": len(inv.kernels),
              "dropped": inv.dropped, "dropped_names": list(inv.dropped_names),
              "autotune": [a.to_dict() for a in inv.autotune], "parse_s": inv.parse_s}
    stmt = dialect_insert(session, KernelInventoryRow).values(shard_id=shard_id, **values)
    inv_id = session.execute(stmt.on_conflict_do_update(
        index_elements=["shard_id"], set_={k: stmt.excluded[k] for k in values}).returning(
        KernelInventoryRow.id)).scalar_one()
    session.execute(delete(KernelRow).where(KernelRow.inventory_id == inv_id))
    rows = {}
    for k in inv.kernels:
        d = k.to_dict()
        rows[k.cache_key] = {"inventory_id": inv_id, **{key: _clip(d[key], key) for key in (
            "name", "cache_key", "code_hash", "binary", "num_warps", "num_stages", "num_ctas", "backend", "arch",
            "shared", "constants", "compiler_version", "compiled")}}
    if rows:
        session.execute(dialect_insert(session, KernelRow), list(rows.values()))


def _inventory(row: KernelInventoryRow, kernels: list[KernelRow]) -> Inventory:
    return Inventory(
        provider=row.provider, state=row.state, reason=row.reason, dropped=row.dropped,
        dropped_names=tuple(row.dropped_names or ()), parse_s=row.parse_s,
        autotune=tuple(AutotunePick.from_dict(a) for a in row.autotune or ()),
        kernels=tuple(KernelRecord(name=k.name, cache_key=k.cache_key, code_hash=k.code_hash, binary=k.binary,
                                   num_warps=k.num_warps, num_stages=k.num_stages, num_ctas=k.num_ctas,
                                   backend=k.backend, arch=k.arch, shared=k.shared, constants=dict(k.constants or {}),
                                   compiler_version=k.compiler_version, compiled=k.compiled) for k in kernels))


@dataclass(frozen=True)
class PoolInventory:
    """A run's inventories on one pool (one per shard that has one), with the first shard's identity and
    telemetry summary (what :func:`zlops.kernels.attribution.identity_changes` compares)."""

    run_key: str
    sha: str
    inventories: tuple[Inventory, ...]
    identity: Mapping[str, Any] | None
    telemetry: Mapping[str, Any] | None


def pool_inventory(session: Session, run_key: str, pool: str) -> PoolInventory | None:
    """The inventories of ``run_key``'s shards on ``pool`` (devices in order); None for an unknown run."""
    run = session.scalars(select(Run).where(Run.run_key == run_key)).one_or_none()
    if run is None:
        return None
    shards = session.scalars(select(Shard).where(Shard.run_id == run.id, Shard.pool == pool)
                             .order_by(Shard.device)).all()
    by_shard = {r.shard_id: r for r in session.scalars(
        select(KernelInventoryRow).where(KernelInventoryRow.shard_id.in_([s.id for s in shards]))).all()}
    kernels: dict[int, list[KernelRow]] = {}
    if by_shard:
        for k in session.scalars(select(KernelRow).where(KernelRow.inventory_id.in_(
                [r.id for r in by_shard.values()])).order_by(KernelRow.name, KernelRow.cache_key)).all():
            kernels.setdefault(k.inventory_id, []).append(k)
    invs = tuple(_inventory(by_shard[s.id], kernels.get(by_shard[s.id].id, [])) for s in shards if s.id in by_shard)
    first = next((s for s in shards if s.status == "ok"), shards[0] if shards else None)
    return PoolInventory(run_key, run.sha, invs, first.identity if first else None, first.telemetry if first else None)


def run_at(session: Session, suite: str, sha: str, *, before_run: str | None = None) -> str | None:
    """The run key of ``suite``'s nightly at commit ``sha`` whose inventory stands for that commit: the
    newest accepted one, else the newest (never ``before_run`` itself)."""
    query = (select(Run.run_key, Run.accepted).where(Run.suite == suite, Run.sha == sha, Run.kind == "nightly")
             .order_by(Run.started_at.desc(), Run.id.desc()))
    rows = [r for r in session.execute(query).all() if r.run_key != before_run]
    accepted = [r.run_key for r in rows if r.accepted]
    return accepted[0] if accepted else (rows[0].run_key if rows else None)


def seed_shards(session: Session, suite: str, pool: str, *, run_key: str) -> tuple[str, list[tuple[int, str]]] | None:
    """Where a shard of ``run_key`` on ``pool`` seeds its kernel cache from (zlops.kernels.seed): the newest
    accepted nightly of ``suite`` started before it (never itself) with a usable, non-empty inventory on
    that pool, as (its run key, [(device, artifact folder)] of those shards by device). None: there is none.
    One statement, whatever the history."""
    ok = (Shard.pool == pool, KernelInventoryRow.state == "ok", KernelInventoryRow.kernels_n > 0)
    now = select(Run.started_at).where(Run.run_key == run_key).scalar_subquery()
    newest = (select(Run.id).join(Shard, Shard.run_id == Run.id)
              .join(KernelInventoryRow, KernelInventoryRow.shard_id == Shard.id)
              .where(Run.suite == suite, Run.kind == "nightly", Run.accepted.is_(True), Run.run_key != run_key,
                     Run.started_at <= func.coalesce(now, Run.started_at), *ok)
              .order_by(Run.started_at.desc(), Run.id.desc()).limit(1).scalar_subquery())
    rows = session.execute(select(Run.run_key, Shard.device, Shard.artifact_dir)
                           .join(Shard, Shard.run_id == Run.id)
                           .join(KernelInventoryRow, KernelInventoryRow.shard_id == Shard.id)
                           .where(Run.id == newest, *ok).order_by(Shard.device)).all()
    if not rows:
        return None
    return rows[0].run_key, [(r.device, r.artifact_dir) for r in rows]


@dataclass(frozen=True)
class WorsenedStep:
    """An open alert's newest confirmed further regression: the night (run key, commit) whose judge confirmed
    it, the baseline commit that night compared the series against, and the change."""

    run_key: str
    head_sha: str
    base_sha: str | None
    change_pct: float | None


def worsened_steps(session: Session, alert_ids: list[int]) -> dict[int, WorsenedStep]:
    """alert id -> its newest ``worsened`` event's step (:class:`WorsenedStep`), for the alerts that have one.
    One statement for any number of alerts (a page of the inbox)."""
    if not alert_ids:
        return {}
    rows = session.execute(
        select(AlertEvent.alert_id, AlertEvent.id, Run.run_key, Run.sha, ComparisonRow.base_sha, AlertEvent.change_pct)
        .join(Run, Run.id == AlertEvent.run_id)
        .join(AlertRow, AlertRow.id == AlertEvent.alert_id)
        .outerjoin(ComparisonRow, (ComparisonRow.run_id == AlertEvent.run_id) & (ComparisonRow.pool == AlertRow.pool)
                   & (ComparisonRow.case == AlertRow.case) & (ComparisonRow.metric == AlertRow.metric))
        .where(AlertEvent.alert_id.in_(alert_ids), AlertEvent.kind == "worsened")
        .order_by(AlertEvent.id)).all()
    return {r.alert_id: WorsenedStep(r.run_key, r.sha, r.base_sha, r.change_pct) for r in rows}   # newest wins
