"""The ``confirm_<pool>`` tasks: a same-device A/B of the pool's suspects (:func:`zlops.judge.confirm.confirm`).

One task per pool, one after another (each rewrites the run's comparison rows); each runs in the Airflow
pool of its pool's first device, so the A/B never shares a device with a benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zlops.model import CompareSummary, Verdict, is_canary
from zlops.steps.context import RunContext


@dataclass(frozen=True)
class Confirmed:
    """What a confirm task hands on (its XCom): the pool and its verdict counts after the A/B."""

    pool: str
    counts: dict[Verdict, int]

    def to_xcom(self) -> dict[str, Any]:
        return {"pool": self.pool, **{v.value: n for v, n in self.counts.items()}}


def confirm_pool(ctx: RunContext, pool: str) -> Confirmed:
    """Confirm or clear the suspects of ``pool`` in the run's stored comparison rows."""
    from zlops.judge.confirm import confirm

    rows = tuple(ctx.store.comparisons(ctx.run_key))
    out = confirm(ctx, CompareSummary(ctx.run_key, ctx.suite_name, ctx.sha, rows), pools=[pool])
    mine = [c for c in out.comparisons if not is_canary(c.case)]   # a recall canary's rows are not the night's
    return Confirmed(pool, {v: sum(c.verdict is v for c in mine) for v in {c.verdict for c in mine}})
