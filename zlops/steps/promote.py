"""The ``promote_baseline`` task: accept the run as a baseline when :func:`zlops.judge.promotion.decide` says so."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from zlops.model import RunStatus, ShardStatus
from zlops.steps.context import RunContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Promoted:
    """What the promote task hands on (its XCom): the decision and its reason."""

    accepted: bool
    reason: str | None

    def to_xcom(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "reason": self.reason}


def promote_task(ctx: RunContext) -> Promoted:
    """The Airflow task: :func:`promote`, with the reason the decision stored in the run's meta."""
    accepted = promote(ctx)
    run = ctx.store.get_run(ctx.run_key)
    return Promoted(accepted, (run.meta.get("promotion") or {}).get("reason") if run else None)


def promote(ctx: RunContext) -> bool:
    """Accept the run as a baseline when :func:`zlops.judge.promotion.decide` says so (a valid run on the
    branch line, not older than the current baseline, no caliber break, or the explicit promote flag);
    record the decision and its reason in the run's meta (``promotion``); mark the run finished."""
    from zlops.judge.promotion import decide

    store = ctx.store
    ok = any(o.status is ShardStatus.OK for o in store.shards(ctx.run_key))
    decision = decide(ctx)
    run = store.get_run(ctx.run_key)
    if run is not None:
        store.upsert_run(replace(run, meta={"promotion": decision.to_json()}))
    if not decision.accept:
        log.info("run %s not promoted: %s", ctx.run_key, decision.reason)
    store.set_accepted(ctx.run_key, decision.accept)
    store.set_run_status(ctx.run_key, RunStatus.DONE if ok else RunStatus.FAILED,
                         finished_at=datetime.now(timezone.utc))
    return decision.accept
