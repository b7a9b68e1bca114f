"""Run 6 of the CPU gloo campaign under the production defaults on the H200 device host's 16 idle cores (issue 22).

tests/data/campaign_gloo_h200host/run6/ (PROVENANCE.md one folder up: commands, versions; docs/evidence/gloo_defaults.md
"Run 6"): the same driver as run 5 (``run_nights.py --backend cpu --defaults --contention-gate``), zlops deaf8f2
(one A/B against every base, the level-gap rule, both built after run 5), nights 1, 2, 3 of unchanged code, night 5 of
the commit that adds a scratch all-reduce to nccl/tree at P > 1 (2x that shard), night 6 a changelog on top; night 6
ran on a fresh machine, resumed from night 5's home (``RESTORE=``).

Checked from the record, as it happened: nothing loud and no confirmed alert on any series over any night; every
A/B within 30% of its estimate and within its budget; and what it missed: the slowdown was never confirmed. On
night 5 the slowed shard's suspects (+99.5% execute_s, +103.4% wall_s against night 1's commit, their last accepted
night) were left out of the A/B ("none of its suspects fit the budget") behind the newest base's two noisy shards,
and on night 6 night 5 entered the slowed series' noise model and it read ``unmeasurable``. Today's
``choose_bases`` picks the slowed shard from night 5's suspects and
shard costs (``night5.comparisons.json``, the lanes' seconds), because the newest base's suspects were one-time
set-up series, which the A/B now takes after every timing: shown here, not run live.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from zlops.model import Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign_gloo_h200host" / "run6"
NIGHTS: list[dict[str, Any]] = json.loads((DATA / "nights.json").read_text())
LOUD = {"improved", "potential", "regression", "severe"}
SHARD = "allreduce/1MiB/p2/tree/nccl"
SLOWDOWN = "tree: an extra scratch all_reduce on the multi-rank path"
BUDGET = 600.0   # the floor, 300 s on each of the pool's 2 devices


def night(n: int) -> dict[str, Any]:
    return next(x for x in NIGHTS if x["night"] == n)


def row(n: int, case: str, metric: str) -> dict[str, Any]:
    return next(r for r in night(n)["rows"] if (r["case"], r["metric"]) == (case, metric))


def test_the_defaults_whole_on_an_idle_16_core_host_with_the_code_that_ran() -> None:
    config = json.loads((DATA / "zlops.json").read_text())
    assert not {"judge", "thresholds", "noise", "contention"} & set(config)
    assert all("contention_gate" not in pool for pool in config["pools"].values())   # the gate on
    assert (DATA / "env.txt").read_text().splitlines()[0].strip() == "16"
    assert (DATA / "zlops_commit.txt").read_text().startswith("deaf8f2")
    assert [x["night"] for x in NIGHTS] == [1, 2, 3, 5, 6]
    assert [x["subject"] == SLOWDOWN for x in NIGHTS] == [False, False, False, True, False]
    # an idle host: other processes at most 0.8% of a CPU in any gang shard
    assert max(v for x in NIGHTS for v in x["foreign_cpu_pct"]["night"] + x["foreign_cpu_pct"]["ab"]) < 1.0


def test_nothing_loud_and_no_confirmed_alert_over_every_night() -> None:
    assert not [(x["night"], r["case"], r["metric"]) for x in NIGHTS for r in x["rows"] if r["verdict"] in LOUD]
    assert not [a for x in NIGHTS for a in x["alerts"] if a["state"] == "confirmed"]


def test_no_new_alert_left_open_on_a_series_judged_unchanged_or_unmeasurable() -> None:
    for x in NIGHTS:
        verdicts = {(r["case"], r["metric"]): r["verdict"] for r in x["rows"]}
        for a in x["alerts"]:
            if a["state"] == "new":
                assert verdicts.get((a["case"], a["metric"])) not in ("unchanged", "unmeasurable"), (x["night"], a)


def test_every_ab_within_30pct_of_its_estimate_and_within_its_budget() -> None:
    checked = []
    for x in NIGHTS[1:]:
        ab = x["ab"]["h200"]
        assert ab["seconds"] <= BUDGET and ab["budget_s"] == BUDGET, x["night"]
        parts = [*(ab.get("groups") or [ab]), *([ab["head"]] if "head" in ab else [])]
        for g in parts:
            if g["runs"]:
                assert abs(g["seconds"] / g["est_s"] - 1.0) <= 0.30, (x["night"], g)
                checked.append(round(g["seconds"] / g["est_s"] - 1.0, 3))
    # night 2: one base; nights 3 and 5: one A/B against two bases (the head once a round); night 6: one base
    assert len(checked) == 7 and min(checked) < -0.25   # night 6: 103.08 of 139.78 est (-26.3%)


def test_the_slowdown_was_not_confirmed_night5_left_its_shard_out_of_the_ab() -> None:
    r5 = row(5, SHARD, "execute_s")
    assert r5["verdict"] == "suspect" and round(r5["change_pct"], 2) == 99.53
    assert "not in tonight's A/B (budget)" in r5["note"]
    groups = {g["base"]: g for g in night(5)["ab"]["h200"]["groups"]}
    assert groups["58d18f5dc819"]["runs"] == 0 and groups["58d18f5dc819"]["stopped"] == \
        "none of its suspects fit the budget"
    assert SHARD not in night(5)["ab"]["h200"]["shards"]
    # night 6 (fresh machine): night 5's +99.5% entered the noise model (median of 4 nights, noise 31.52%)
    r6 = row(6, SHARD, "execute_s")
    assert r6["verdict"] == "unmeasurable" and r6["reference_label"] == "median of 4 nights"
    assert "noise 31.52%" in r6["note"]


def test_one_process_a_night_one_outlier_night_is_the_whole_noise_model() -> None:
    """Why the history could not carry the 2x: a night is one process per shard, and on this host a shard's
    process lands now and then 13-42% above its usual level (p1/tree/nccl execute_s: 11.17 ms on night 1, then
    7.84-7.91 ms on nights 2-6; p1/ring/nccl 10.45 ms on night 2 among 7.77-7.94). Such a night, never resolved
    (its A/B re-ran the commit at the usual level, inconclusive), stays in the window: the noise model of a
    series that varied 0.9% over nights 2-6 read 11.91%, and the slowed series' read 31.52% with night 5 in it."""
    p1 = [row(n, "allreduce/1MiB/p1/tree/nccl", "execute_s")["tonight"] for n in (1, 2, 3, 5, 6)]
    assert min(p1[1:]) / max(p1[1:]) > 0.99 and p1[0] / max(p1[1:]) > 1.4
    assert "noise 11.91%" in row(6, "allreduce/1MiB/p1/tree/nccl", "execute_s")["note"]
    ring = [row(n, "allreduce/1MiB/p1/ring/nccl", "execute_s")["tonight"] for n in (1, 2, 3, 5, 6)]
    assert ring[1] / max(ring[:1] + ring[2:]) > 1.3


def _stored(n: int) -> list[Any]:
    from zlops.store.comparisons import comparison_from_row

    data = json.loads((DATA / f"night{n}.comparisons.json").read_text())
    return [comparison_from_row(data["suite"], r) for r in data["rows"]]


def test_night5s_ab_now_takes_the_slowed_shard_before_one_time_set_up_suspects(tmp_path: Path) -> None:
    """choose_bases on night 5's suspects as the night had them before its A/B (the stored rows, with the newest
    base's second suspect, p2/tree/ring setup_s, put back as the suspect it was) and the night's shard
    device-seconds (its lanes' campaign.json). The newest base's two suspects were one-time set-up series (one
    sample a process); live they filled the 600 device-seconds and the slowed shard's execute_s and wall_s
    (+99.5%, +103.4%, against night 1's commit) were left out. Now every base's timing suspects go first
    (zlops.metrics.SETUP_TIMINGS), the newest base first: the slowed shard is in, within the floor.

    Not the alternative: the most severe suspect's base first would take it too, but it was tried (2026-12-04)
    and broke 8 tests of 4 real replays (FlagGems abs 2x, hold-out 2 S and K, hold-out 3, hold-out 5 lease 6),
    where a carried-over noisy suspect took the budget from tonight's real change."""
    from dataclasses import replace

    from zlops.campaign.ab import HEADROOM, CampaignCosting
    from zlops.campaign.plan import CampaignCase
    from zlops.config.settings import parse_config
    from zlops.judge.confirm import choose_bases, round_cost
    from zlops.model import Judgement
    from zlops.steps.context import RunContext

    raw: dict[str, float] = {}
    planned: list[CampaignCase] = []
    for lane in sorted(DATA.glob("night5-lane*.campaign.json")):
        for s in json.loads(lane.read_text())["shards"]:
            planned.append(CampaignCase(s["case"], s["p"], s["variant"], s["stack"], s["size"]))
            raw[planned[-1].shard_id] = float(s["duration_s"]) * len(s["devices"])   # device-seconds
    costing = CampaignCosting(night_s=sum(raw.values()), planned=tuple(planned), raw=raw, factor=1.0, learnt="",
                              nights=1, devices=(0, 1))
    config = json.loads((DATA / "zlops.json").read_text())
    ctx = RunContext(parse_config(json.loads(json.dumps(config).replace(config["home"], str(tmp_path))),
                                  source="run6"), "collectives", "nightly:collectives:n5", night(5)["sha"])
    newest, older = "7cb478c441e1", "58d18f5dc819"
    groups: dict[str, list[Any]] = defaultdict(list)
    for c in _stored(5):
        if c.follows or c.base is None:
            continue
        if (c.case, c.metric) == ("allreduce/1MiB/p2/tree/ring", "setup_s"):   # its A/B made it unmeasurable
            assert c.verdict is Verdict.UNMEASURABLE and c.base.sha.startswith(newest)
            j = c.judgement
            c = replace(c, judgement=Judgement(Verdict.SUSPECT, j.change_pct, j.worse_pct, j.threshold_pct, "night 5"))
        if c.verdict.awaiting_confirmation:
            groups[c.base.sha[:12]].append(c)
    live = {g["base"]: g for g in night(5)["ab"]["h200"]["groups"]}
    assert len(groups[newest]) == live[newest]["suspects"] == 2 and len(groups[older]) == live[older]["suspects"]
    assert {c.metric for c in groups[newest]} == {"setup_s"}
    chosen = choose_bases(ctx, costing, [(b, groups[b]) for b in (newest, older)], budget_s=BUDGET)
    picked = {(c.case, c.metric) for v in chosen.values() for c in v}
    assert {(SHARD, "execute_s"), (SHARD, "wall_s")} <= picked
    assert 5 * round_cost(ctx, costing, chosen) * HEADROOM <= BUDGET


@pytest.mark.parametrize("n", [5, 6])
def test_the_stored_rows_are_the_nights_verdicts(n: int) -> None:
    stored = {(c.case, c.metric): c.verdict.value for c in _stored(n)}
    assert stored == {(r["case"], r["metric"]): r["verdict"] for r in night(n)["rows"]}


# ---- run6b: night 5 again, from night 3's home, on a fresh machine, with zlops f6c64db (the set-up order) ----
RERUN = DATA.parent / "run6b"
NIGHTS_B: list[dict[str, Any]] = json.loads((RERUN / "nights.json").read_text())
#: the series the slowdown moves: the slowed shard's timings and bandwidth, its efficiency and ratio (set-up may
#: move too: it holds one slowed all-reduce)
SLOWED = {(SHARD, "execute_s"), (SHARD, "wall_s"), (SHARD, "bw_execute"), (SHARD, "setup_s"),
          ("allreduce/1MiB/tree/nccl", "efficiency_p2"), ("allreduce/1MiB/p2/tree", "ratio_nccl_over_ring")}


def test_the_rerun_is_night5_after_run6s_nights_1_to_3_with_the_new_order() -> None:
    assert (RERUN / "zlops_commit.txt").read_text().startswith("f6c64db")
    assert [x["night"] for x in NIGHTS_B] == [1, 2, 3, 5]
    assert NIGHTS_B[:3] == NIGHTS[:3]                 # the same store: night 3's home tarball, restored
    assert NIGHTS_B[3]["sha"] == night(5)["sha"] and NIGHTS_B[3]["subject"] == SLOWDOWN
    assert "up 0 min" in (RERUN / "env.txt").read_text()   # a fresh machine


def test_the_rerun_confirms_exactly_the_slowed_variants_series_on_the_slowdowns_first_night() -> None:
    """Issue 22's campaign item: the slowed variant's series, its efficiency and its ratio confirmed, nothing else:
    execute_s +61.06% by an A/B that ran (6+6, every head run above every base run, CI [+34.50%, +105.51%],
    p = 0.00216, the level-shift rule), wall_s +74.11% alike, bw_execute, efficiency_p2 and the nccl/ring ratio
    following them; re-derived here from the A/B's runs."""
    from zlops.stats import confirm_ab

    x = NIGHTS_B[3]
    loud = {(r["case"], r["metric"]): r for r in x["rows"] if r["verdict"] in LOUD}
    assert set(loud) == SLOWED - {(SHARD, "setup_s")}
    assert {r["verdict"] for r in loud.values()} == {"severe"}
    for metric, pct in (("execute_s", 61.06), ("wall_s", 74.11)):
        r = loud[(SHARD, metric)]
        assert r["reference_label"].startswith("A/B base 58d18f5, 6 runs")
        assert max(r["ab_base"]) < min(r["ab_head"])
        again = confirm_ab(r["ab_base"], r["ab_head"], lower_is_better=True, threshold_pct=r["threshold_pct"],
                           severe_pct=5.0)
        assert again.state.value == "severe" and round(again.change_pct, 2) == pct and again.ci_pct[0] > 30
    assert loud[(SHARD, "bw_execute")]["follows"] and loud[("allreduce/1MiB/tree/nccl", "efficiency_p2")]["follows"]
    # live (f6c64db): two measured timings of the case (execute_s, wall_s) opened two alerts; nothing else confirmed
    assert {(a["case"], a["metric"]) for a in x["alerts"] if a["state"] == "confirmed"} == \
        {(SHARD, "execute_s"), (SHARD, "wall_s")}
    # today's lifecycle on the night's stored rows (with the alerts open before it: new ones only): one alert for
    # the case, execute_s', whose event names wall_s (wall_s is the round's wall time around execute_s)
    from zlops.alerts.lifecycle import AlertState, plan_night
    from zlops.store.comparisons import comparison_from_row

    data = json.loads((RERUN / "night5.comparisons.json").read_text())
    steps = plan_night([comparison_from_row(data["suite"], r) for r in data["rows"]], {}, band_pct=2.0)
    confirmed = [s for s in steps if s.to_state is AlertState.CONFIRMED]
    assert [(s.comparison.case, s.comparison.metric) for s in confirmed] == [(SHARD, "execute_s")], steps
    assert "with wall_s +74.11% (severe), the same work's other clock" in confirmed[0].note
    for a in x["alerts"]:
        if a["state"] == "new":
            verdict = next(r["verdict"] for r in x["rows"] if (r["case"], r["metric"]) == (a["case"], a["metric"]))
            assert verdict not in ("unchanged", "unmeasurable"), a


def test_the_reruns_ab_chose_the_slowed_shard_and_kept_its_estimate_and_budget() -> None:
    ab = NIGHTS_B[3]["ab"]["h200"]
    assert SHARD in ab["shards"] and ab["seconds"] <= BUDGET and ab["budget_s"] == BUDGET
    assert abs(ab["seconds"] / ab["est_s"] - 1) <= 0.30          # 460.93 of 490.47 estimated (-6.0%)
    groups = {g["base"]: g for g in ab["groups"]}
    # the newest base's two set-up suspects waited; the older base's timings (the slowed shard) ran
    assert groups["7cb478c441e1"]["runs"] == 0 and groups["58d18f5dc819"]["outcomes"]["confirmed"] == 2
