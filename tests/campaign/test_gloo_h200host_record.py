"""The CPU gloo campaign under the production defaults on a host with cores to spare (issue 22's campaign item).

tests/data/campaign_gloo_h200host/run5/ (PROVENANCE.md there; docs/evidence/gloo_defaults.md "Run 5"): the same
driver as runs 1-4 (``run_nights.py --backend cpu --defaults --contention-gate``: no judge, threshold, noise or
contention section, the gate on), on the H200 device host's 16 idle cores instead of the shared 2-core VM:
nights 1-3 of unchanged code (first, docs, changelog 1; the second changelog night was skipped for device
time), then nights 5 and 6 of the commit that adds a scratch all-reduce to nccl/tree at P > 1 (2x that shard).

Checked from the record: no verdict and no confirmed alert on any series the slowdown cannot move, over every
night; the slowed shard confirmed on the slowdown's first night by an A/B that ran, its figures re-derived from
the A/B's runs; every A/B's estimate within 30% of its cost and every night's A/Bs within their budget; and what
the record shows zlops still misses (kept as it happened): the slowed execute_s left out of night 5's A/B by
the order of its bases, and read ``unmeasurable`` on night 6 by the rule that ``test_ab_level_gap`` now fixes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zlops.judge.judges import confirm_suspect
from zlops.model import Judgement, Verdict
from zlops.stats import Policy, confirm_ab

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign_gloo_h200host" / "run5"
NIGHTS: list[dict[str, Any]] = json.loads((DATA / "nights.json").read_text())
LOUD = {"improved", "potential", "regression", "severe"}
SHARD = "allreduce/1MiB/p2/tree/nccl"
SLOWED = {(SHARD, "execute_s"), (SHARD, "wall_s"), (SHARD, "bw_execute"), (SHARD, "setup_s"),
          ("allreduce/1MiB/tree/nccl", "efficiency_p2"), ("allreduce/1MiB/p2/tree", "ratio_nccl_over_ring")}
SLOWDOWN = "tree: an extra scratch all_reduce on the multi-rank path"
BUDGET = 600.0   # the floor, 300 s on each of the pool's 2 devices


def night(n: int) -> dict[str, Any]:
    return next(x for x in NIGHTS if x["night"] == n)


def row(n: int, case: str, metric: str) -> dict[str, Any]:
    return next(r for r in night(n)["rows"] if (r["case"], r["metric"]) == (case, metric))


def test_the_defaults_whole_on_an_idle_16_core_host() -> None:
    config = json.loads((DATA / "zlops.json").read_text())
    assert not {"judge", "thresholds", "noise", "contention"} & set(config)
    assert all("contention_gate" not in pool for pool in config["pools"].values())   # the gate on
    assert (DATA / "env.txt").read_text().splitlines()[0].strip() == "16"
    assert [x["night"] for x in NIGHTS] == [1, 2, 3, 5, 6]
    assert [x["subject"] == SLOWDOWN for x in NIGHTS] == [False, False, False, True, False]


def test_nothing_loud_and_no_confirmed_alert_on_a_series_the_slowdown_cannot_move() -> None:
    for x in NIGHTS:
        loud = [(r["case"], r["metric"]) for r in x["rows"] if r["verdict"] in LOUD]
        assert set(loud) <= (SLOWED if x["night"] >= 5 else set()), (x["night"], loud)
        confirmed = {(a["case"], a["metric"]) for a in x["alerts"] if a["state"] == "confirmed"}
        assert confirmed <= (SLOWED if x["night"] >= 5 else set()), (x["night"], confirmed)
    assert sum(r["verdict"] in LOUD for x in NIGHTS[:3] for r in x["rows"]) == 0


def test_the_slowed_shard_is_confirmed_on_its_first_night_by_an_ab_that_ran() -> None:
    r = row(5, SHARD, "wall_s")
    assert r["verdict"] == "severe" and r["reference_label"].startswith("A/B base fae6b7a, 5 runs")
    again = confirm_ab(r["ab_base"], r["ab_head"], lower_is_better=True, threshold_pct=r["threshold_pct"],
                       severe_pct=5.0)
    assert again.state.value == "severe" and round(again.change_pct, 2) == 84.53
    assert again.ci_pct[0] > 30 and max(r["ab_base"]) < min(r["ab_head"])   # every head run above every base run
    assert {(a["case"], a["metric"]) for a in night(5)["alerts"] if a["state"] == "confirmed"} == {(SHARD, "wall_s")}


def test_every_ab_within_30pct_of_its_estimate_and_within_its_budget() -> None:
    checked = 0
    for x in NIGHTS[1:]:
        ab = x["ab"]["h200"]
        assert ab["seconds"] <= BUDGET and ab["budget_s"] == BUDGET, x["night"]
        for g in ab.get("groups") or [ab]:
            assert abs(g["seconds"] / g["est_s"] - 1.0) <= 0.30, (x["night"], g["base"], g["seconds"], g["est_s"])
            checked += 1
    assert checked == 9


def test_what_the_record_still_misses() -> None:
    # night 5: the slowed execute_s (+156%, against night 1's commit, its last accepted night) waited for the
    # oldest base's A/B, which had 161 of 600 device-seconds left after the newer bases' A/Bs: too few for the
    # P=2 shard, so it was not in the A/B and stays a suspect
    r5 = row(5, SHARD, "execute_s")
    assert r5["verdict"] == "suspect" and "not in tonight's A/B (budget)" in r5["note"]
    oldest = next(g for g in night(5)["ab"]["h200"]["groups"] if g["base"].startswith("2e68663"))
    assert oldest["budget_s"] < 170 and SHARD not in oldest["shards"]
    # night 6: its A/B ran (+102%, base on two levels 18% apart) and read "unmeasurable", which stopped it at
    # 5 pairs; the rule now keeps a change whose CI lies beyond the base's gap a suspect for more pairs
    r6 = row(6, SHARD, "execute_s")
    assert r6["verdict"] == "unmeasurable" and "18% apart" in r6["note"]
    j = Judgement(Verdict.SUSPECT, r6["change_pct"], r6["change_pct"], r6["threshold_pct"], "night 6")
    now = confirm_suspect(j, r6["ab_base"], r6["ab_head"], lower_is_better=True, policy=Policy())
    assert now.verdict is Verdict.SUSPECT and "still a suspect" in now.note


def test_no_new_alert_left_open_on_a_series_judged_unchanged_or_unmeasurable() -> None:
    opened = 0
    for x in NIGHTS:
        verdicts = {(r["case"], r["metric"]): r["verdict"] for r in x["rows"]}
        for a in x["alerts"]:
            if a["state"] == "new":
                opened += 1
                assert verdicts.get((a["case"], a["metric"])) not in ("unchanged", "unmeasurable"), (x["night"], a)
    assert opened == 27   # 15 + 7 + 4 + 1 open after nights 2, 3, 5, 6


def test_the_companion_rule_held_out_a_firmer_wall_s_still_alerts_on_its_own() -> None:
    """zlops.metrics.COMPANION_TIMINGS was written on run 6b (execute_s and wall_s both confirmed: one alert). Run
    5's slowdown night is the other branch, not looked at when it was written: execute_s only a suspect (its `new`
    alert open since an earlier night), wall_s severe +84.53%. Re-planned from the record's rows with today's
    lifecycle, wall_s still opens its own confirmed alert (folding it into an unconfirmed one would hide it) and
    execute_s' new alert stays as it was."""
    from datetime import datetime, timezone

    from zlops.alerts.lifecycle import Alert, AlertState, plan_night
    from zlops.model import BaselinePoint, Comparison, Summary

    case, t0 = "allreduce/1MiB/p2/tree/nccl", datetime(2026, 12, 3, tzinfo=timezone.utc)
    rows = {m: row(5, case, m) for m in ("execute_s", "wall_s")}
    assert (rows["execute_s"]["verdict"], rows["wall_s"]["verdict"]) == ("suspect", "severe")
    comparisons = []
    for metric, r in rows.items():
        worse = r["change_pct"] if r["lower_is_better"] else -r["change_pct"]
        comparisons.append(Comparison("collectives", "h200", case, metric, "s", r["lower_is_better"],
                                      BaselinePoint("n1", "1" * 40, "s", r["base"], 1), Summary(r["tonight"], 1),
                                      Judgement(Verdict(r["verdict"]), r["change_pct"], worse, r["threshold_pct"])))
    held = Alert(id=3, suite="collectives", pool="h200", case=case, metric="execute_s", unit="s",
                 lower_is_better=True, state=AlertState.NEW, opened_run="n2", last_run="n3",
                 base_value=rows["execute_s"]["base"],
                 band_pct=2.0, first_base_sha="1" * 40, first_head_sha="2" * 40, last_head_sha="2" * 40,
                 last_change_pct=None, worst_worse_pct=None, thread_notification_id=None, thread_ts=None,
                 channel_id=None, note="", opened_at=t0, updated_at=t0)
    steps = plan_night(comparisons, {held.key: held}, band_pct=2.0)
    got = {s.comparison.metric: (s.alert_id, s.to_state) for s in steps}
    assert got == {"wall_s": (None, AlertState.CONFIRMED), "execute_s": (3, AlertState.NEW)}, steps
    assert {(a["metric"], a["state"]) for a in night(5)["alerts"] if a["case"] == case} >= \
        {("wall_s", "confirmed"), ("execute_s", "new")}   # as live
