"""What one pool's A/B may spend tonight: :class:`PoolBudget` and the rules that set it.

Shared by the confirmation (:mod:`zlops.judge.confirm`) and its campaign side (:mod:`zlops.campaign.ab`),
which both size a pool's A/B with these and neither imports the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from zlops.campaign.plan import CampaignCase, CampaignPlan
from zlops.config.settings import NoiseConfig
from zlops.judge.interleave import Budget, CostModel, ab_budget


@dataclass(frozen=True)
class PoolBudget:
    """What one pool's A/B may spend tonight and what it is expected to cost per run."""

    seconds: float                 # device seconds the A/B may take
    night_s: float                 # tonight's benchmark time on the pool (the budget's basis)
    run_s: float                   # estimated seconds of one A/B run of the chosen cases (before any ran)
    cases: tuple[str, ...] | None  # the cases an A/B run executes (None: the whole suite)
    #: a campaign suite's A/B: the shards one run executes, each on its gang (zlops.campaign.ab);
    #: then ``seconds``, ``night_s`` and ``run_s`` are device-seconds
    shards: tuple[CampaignCase, ...] = ()
    #: where every A/B run puts those shards (zlops.campaign.ab.ab_plan): the same devices for base and head
    plan: CampaignPlan | None = None
    #: which rule set ``seconds`` (zlops.judge.interleave.ab_budget) and what ``run_s`` was estimated from
    basis: str = ""
    cost: CostModel | None = None
    #: how many cases one run of ``cases`` executes (a FlagGems ``-m`` selection runs every shape of its ops)
    runs_cases: int | None = None
    #: what ``run_s`` was estimated from, in words (a campaign A/B: tonight's device-seconds and the factor learnt)
    est_basis: str = ""
    #: a campaign A/B: the estimate of one run before the learnt realised/estimated factor
    raw_run_s: float | None = None


def budget_seconds(cfg: NoiseConfig, night_s: float, *, devices: int = 1) -> Budget:
    """The pool's A/B budget tonight (:func:`zlops.judge.interleave.ab_budget` with the config's knobs).

    ``devices``: a campaign A/B counts device-seconds over the pool's ``devices`` at once, so the floor and
    the ceiling (seconds of one device) are that many device-seconds: 300 s of a 2-device pool are 600
    device-seconds (one gloo P=2 shard on a shared 2-core host costs 30-40 device-seconds a run: a 300
    device-second floor stopped its A/B at 3 pairs, where nothing decides). ``noise.ab_budget_s`` stays as
    written."""
    n = max(int(devices), 1)
    return ab_budget(night_s, share=cfg.ab_budget_share, floor_s=cfg.ab_budget_floor_s * n,
                     ceiling_s=cfg.ab_budget_max_s * n, fixed_s=cfg.ab_budget_s)


def less_spent(budget: Budget, spent_s: float) -> Budget:
    """``budget`` less what the pool's A/B spent tonight (said in its basis)."""
    if spent_s <= 0:
        return budget
    return Budget(max(budget.seconds - spent_s, 0.0),
                  f"{budget.basis}, less {spent_s:.0f} s spent tonight by the pool's A/B against another base")


#: earlier nights whose A/B runs teach the cost model (one bulk read of their run rows)
COST_HISTORY_RUNS = 30
