"""Issue 22 on real hardware, second live run (2026-12-01 19:27-19:56 UTC): the real ``zlops nightly`` with the
production defaults whole (the A/B on every night, nothing of the judge configured) on one H200 over the hold-out
FlagGems upstream: nights A, A, D1 (README only), then S, S. Record: ``live2/`` (what zlops stored, read back
after every night; docs/evidence/h200_holdout/live2.md).

Two kinds of test: what the recorded run did (0 loud verdicts on every night, the A/B's estimates and spend),
and a CPU replay of the record under the rules as they are now: every recorded A/B (its runs, both sides) is
judged again by ``confirm_ab`` as the nightly judges it. The record found two faults, fixed since: the first S
night's +2.87% (5+5, CI [+2.73%, +2.92%]) stayed inconclusive (scipy's tied-sample p 0.0117 and no narrow
level-shift rule), and the second S night's A/B ran S against S (its baseline was the unresolved suspect night)
and cleared it. The replay must now confirm the first and confirm nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from flaggems_holdout import DATA, SLOWED_CASE, SLOWED_METRICS

from zlops.config.settings import NoiseConfig, ThresholdsConfig
from zlops.judge.interleave import ab_budget
from zlops.stats import State, confirm_ab

LIVE = DATA / "live2"
RECORD: dict[str, Any] = json.loads((LIVE / "json" / "nights.json").read_text())
NIGHTS: list[dict[str, Any]] = RECORD["nights"]
LOUD = {"improved", "potential", "regression", "severe"}
SHAS = dict(line.split() for line in (LIVE / "shas.txt").read_text().splitlines() if line.strip())


def _ab(night: dict[str, Any]) -> dict[str, Any]:
    return ((night.get("meta") or {}).get("ab") or {}).get("h200") or {}


def _rejudge(row: dict[str, Any]) -> Any:
    """The recorded A/B's runs judged as zlops.judge.judges.confirm_suspect judges them now."""
    f = row["figures"]
    policy = NoiseConfig().policy(ThresholdsConfig().to_thresholds())   # the production defaults
    threshold = row["threshold_pct"] or policy.potential_pct
    return confirm_ab(f["runs_base"], f["runs_head"], lower_is_better=f["lower_is_better"], threshold_pct=threshold,
                      severe_pct=max(policy.regression_pct, threshold), alpha=policy.alpha, seed=0,
                      equivalence_pct=min(policy.potential_pct, threshold))


def test_the_record_is_the_plan_under_the_production_defaults() -> None:
    assert [n["label"] for n in NIGHTS] == ["A", "A", "D1", "S", "S"]
    assert all(n["rc"] == 0 and n["accepted"] for n in NIGHTS)
    assert [n["sha"] for n in NIGHTS] == [SHAS[n["label"]] for n in NIGHTS]
    config = (LIVE / "zlops.yaml").read_text()
    assert "judge:" not in config and "noise:" not in config and "thresholds:" not in config
    assert not (LIVE / "zlops_unchanged.yaml").exists()   # the nights of unchanged code ran the defaults too
    # an A/B ran on every night after the first, on real processes
    assert [_ab(n).get("runs", 0) for n in NIGHTS] == [0, 10, 12, 10, 14]


def test_no_loud_verdict_and_no_confirmed_alert_on_any_recorded_night() -> None:
    assert all(not n["loud"] for n in NIGHTS)
    assert all(a["state"] in ("new", "cleared") for a in RECORD["alerts_at_end"])


def test_every_ab_estimate_is_within_30pct_of_its_cost_and_its_spend_within_the_budget() -> None:
    for n in NIGHTS[1:]:
        ab = _ab(n)
        assert ab["est_s"] == pytest.approx(ab["seconds"], rel=0.30), n["label"]
        assert ab["seconds"] <= ab["budget_s"]
        budget = ab_budget(ab["night_s"], share=NoiseConfig().ab_budget_share, floor_s=NoiseConfig().ab_budget_floor_s,
                           ceiling_s=NoiseConfig().ab_budget_max_s)
        assert budget.seconds == pytest.approx(ab["budget_s"])


def test_replayed_under_todays_rules_the_ab_confirms_the_change_on_the_first_s_night_and_nothing_else() -> None:
    first_s = NIGHTS[3]
    outcomes: dict[tuple[int, str, str], str] = {}
    for n in NIGHTS:
        for row in n["ab_rows"]:
            if row["figures"] is None or len(row["figures"].get("runs_base") or []) < 2 or row.get("follows"):
                continue
            c = _rejudge(row)
            outcomes[(n["night"], row["case"], row["metric"])] = c.outcome
            changed = n["label"] == "S" and row["case"] == SLOWED_CASE and row["metric"] in SLOWED_METRICS
            if not changed:
                assert not c.confirmed, (n["night"], row["case"], row["metric"], c.reason)
    key = (first_s["night"], SLOWED_CASE, "latency")
    assert outcomes[key] == "confirmed"
    (row,) = [r for r in first_s["ab_rows"] if (r["case"], r["metric"]) == (SLOWED_CASE, "latency")]
    c = _rejudge(row)
    assert c.state is State.REGRESSION and c.ci_pct is not None and 2.7 < c.ci_pct[0] < c.ci_pct[1] < 2.95
    assert len(outcomes) >= 20   # the replay judged the A/Bs of every night, not a handful


def test_the_second_s_nights_ab_ran_s_against_s_as_recorded() -> None:
    """What the fix in zlops.judge.compare (a suspect's base is the night before its unresolved suspect nights)
    prevents; its unit test: tests/stats/test_stats_night_rules.py."""
    (row,) = [r for r in NIGHTS[4]["ab_rows"] if (r["case"], r["metric"]) == (SLOWED_CASE, "latency")]
    assert row["verdict"] == "unchanged" and row["figures"]["reference_label"].startswith(f"A/B base {SHAS['S'][:7]}")
