"""The recall canary's two moments in a night (:mod:`zlops.judge.canary`): planting it after ingest, and
recording what the judge made of it at the report.

:func:`plant` (called by the ingest step, and by a rescore) writes tonight's canary series beside its source on
every OK shard that measured it, reading and replacing those two cases only, whatever the size of the night;
it keeps tonight's place on the schedule in the run's meta (``canary``: what the A/B reads, and what a retried
step reuses) and stores tonight's canary nights without a verdict. :func:`record` (the report step) stores
them again with their final verdicts, after any A/B, and returns the report's lines. Both are idempotent: a
retried task writes the same rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from zlops.judge import canary
from zlops.judge.paired import META_PREFIX as PAIRED_META
from zlops.model import CaseResult, Comparison, ShardStatus, canary_case
from zlops.steps.context import RunContext
from zlops.store import Store
from zlops.store import canaries as reads


def _key(r: CaseResult) -> tuple[str, str, tuple[float, ...]]:
    return (r.case, r.metric, r.samples)


def plant(ctx: RunContext, store: Store) -> canary.CanaryNight | None:
    """Plant tonight's canary (none when the suite has no enabled ``canary`` section); tonight's night."""
    cfg = ctx.suite.canary
    if cfg is None or not cfg.enabled:
        return None
    run = store.get_run(ctx.run_key)
    tonight = canary.CanaryNight.from_meta((run.meta or {}).get(canary.META_KEY)) if run is not None else None
    if tonight is None:   # the first time: the schedule's clock; a retry keeps what the first call planted
        tonight = canary.schedule(store.read(reads.canary_clock, ctx.run_key), every_nights=cfg.every_nights,
                                  hold_nights=cfg.hold_nights, slowdown_pct=cfg.slowdown_pct)
    pools = set(cfg.pools or ctx.suite.pools)
    ok = {(o.pool, o.device) for o in store.shards(ctx.run_key) if o.status is ShardStatus.OK}
    name = canary_case(cfg.case)
    by_shard: dict[tuple[str, int], list[CaseResult]] = defaultdict(list)
    for pool, device, r in store.read(reads.case_results, ctx.run_key, (cfg.case, name)):
        by_shard[(pool, device)].append(r)
    planted: list[tuple[str, CaseResult]] = []
    for (pool, device), results in sorted(by_shard.items()):
        if pool not in pools or (pool, device) not in ok:
            continue
        mine = canary.plant(results, cfg.case, cfg.metric, tonight)
        had = [r for r in results if r.case == name]
        planted += [(pool, r) for r in mine]
        if sorted(map(_key, mine)) != sorted(map(_key, had)):   # else planted already (a retried step)
            store.unit_of_work(reads.replace_case_results, ctx.run_key, pool, device, name, mine)
    # a paired pool is judged from tonight's interleaved pairs (zlops.judge.paired): the canary gets its source's
    # pairs, the head side scaled, as in an A/B
    paired: dict[str, Any] = {}
    for key, value in sorted(((run.meta or {}) if run is not None else {}).items()):
        if key.startswith(PAIRED_META) and isinstance(value, dict) and value.get("pool") in pools:
            directions = {r.metric: r.lower_is_better for (p, _), rs in by_shard.items() if p == value["pool"]
                          for r in rs if r.case == cfg.case}
            samples = canary.plant_pairs(value.get("samples") or [], cfg.case, cfg.metric, tonight, directions)
            if samples != value.get("samples"):
                paired[key] = {**value, "samples": samples}
    store.update_run_meta(ctx.run_key, {canary.META_KEY: tonight.to_meta(), **paired})
    store.unit_of_work(reads.save_canary_nights, ctx.run_key, canary.planted_nights(tonight, planted),
                       keep_judged=True)
    return tonight


def record(ctx: RunContext, store: Store, run: Any, rows: Sequence[Comparison], *, save: bool = True) -> list[str]:
    """Store tonight's canary nights with their final verdicts (``save``) and return the report's lines: one per
    canary series, its episode so far read back in one query. No lines when nothing was planted tonight."""
    tonight = canary.CanaryNight.from_meta((run.meta or {}).get(canary.META_KEY))
    if tonight is None:
        return []
    nights = canary.judged_nights(tonight, rows)
    if save:
        store.unit_of_work(reads.save_canary_nights, ctx.run_key, nights)
    if not nights:
        cfg = ctx.suite.canary
        what = (f"{cfg.case!r}" + (f" (metric {cfg.metric})" if cfg.metric else "")) if cfg is not None else \
            "its source case"
        return [f"canary: nothing planted tonight (night {tonight.night}): {what} was not measured on its pools"]
    cfg = ctx.suite.canary
    every = cfg.every_nights if cfg is not None else 1
    history = store.read(reads.suite_canary_nights, ctx.suite_name, from_night=max(0, tonight.night - every),
                         until=run.started_at)
    history = [n for n in history if n["run_key"] != ctx.run_key] + \
        [{**n, "suite": ctx.suite_name, "at": run.started_at, "run_key": ctx.run_key} for n in nights]
    found = canary.episodes(history)
    lines = []
    for n in nights:
        mine = [e for e in found if (e.pool, e.case, e.metric) == (n["pool"], n["case"], n["metric"])]
        if n["active"]:
            episode = next((e for e in mine if e.start == n["episode"]), None)
        else:   # the first quiet night after an episode says how it ended
            episode = next((e for e in reversed(mine) if e.start < n["night"]), None)
            previous = [h for h in history if (h["pool"], h["case"], h["metric"]) == (n["pool"], n["case"], n["metric"])
                        and h["night"] == n["night"] - 1]
            if not (previous and previous[0]["active"]):
                episode = None
        lines.append(canary.night_line(n, episode))
    return lines
