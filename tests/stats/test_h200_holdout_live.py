"""Issue 22's acceptance on real hardware, live: the recorded nights of the real ``zlops nightly`` on an H200.

``benchmarks/h200/flaggems_holdout_nights.sh`` ran ``zlops nightly`` with the production defaults (judge noise,
the sequential A/B with its cost model and budget floor) on one H200 over the hold-out FlagGems upstream
(tests/data/flaggems_h200/holdout_2026-12-01/PROVENANCE.md): nights of unchanged code (A, then README-only
commits), then the commit S that makes ``mean/float16/(1024x1024x1024, 1)`` ~2.8% slower. What zlops stored was
read back after every night (``flaggems_holdout_nights_summary.py``) into ``live/nights.json``; figures and what
did not fit are in docs/evidence/h200_holdout/live.md.

These tests re-derive issue 22's Done-when figures from that record (they fail if the recorded run did not meet
them): 0 loud verdicts and 0 announced or confirmed alerts on unchanged series over every night; the change
confirmed on S's first or second night by an A/B that ran; each A/B's estimate within 30% of its realised cost
and its spend within its budget, the budget being what the production defaults give for that night; no
``unchanged`` verdict whose A/B CI reaches beyond the floor, inconclusive A/Bs saying so with their figures; one
alert per regressed case and no ``new`` alert left open on a series the last night did not hold as a suspect.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from flaggems_holdout import DATA, SLOWED_CASE, SLOWED_METRICS

from zlops.config.settings import NoiseConfig, ThresholdsConfig
from zlops.judge.interleave import ab_budget

LIVE = Path(os.environ.get("ZLOPS_HOLDOUT_LIVE", DATA / "live"))
LOUD = {"improved", "potential", "regression", "severe"}
CONFIRMED = {"regression", "severe"}
RECORD: dict[str, Any] = json.loads((LIVE / "nights.json").read_text())
NIGHTS: list[dict[str, Any]] = RECORD["nights"]
S_NIGHTS = [n for n in NIGHTS if n["label"] == "S"]


def _ab(night: dict[str, Any]) -> dict[str, Any]:
    return ((night.get("meta") or {}).get("ab") or {}).get("h200") or {}


def _changed(night: dict[str, Any], case: str, metric: str) -> bool:
    """The one series (two metrics of one timing) whose code changed, on the nights of S."""
    return night["label"] == "S" and case == SLOWED_CASE and metric in SLOWED_METRICS


def test_the_record_is_the_live_plan_under_the_production_defaults() -> None:
    """Every recorded night ran to the end on its commit, unchanged commits first; the config set nothing of
    the judge, and each night's meta shows the default noise policy. The one deviation, if recorded: the nights
    of unchanged code ran with ``noise: {ab_pairs: 0}`` (no A/B: the session's device time could not buy
    ~200-280 s of A/B on each of them), and nothing else differs; the nights of S ran the defaults whole."""
    shas = dict(line.split() for line in (LIVE / "shas.txt").read_text().splitlines() if line.strip())
    labels = [n["label"] for n in NIGHTS]
    assert labels[0] == "A" and "S" in labels
    assert all(label != "S" for label in labels[:labels.index("S")]) and set(labels[labels.index("S"):]) == {"S"}
    config = (LIVE / "zlops.yaml").read_text()
    assert "judge:" not in config and "noise:" not in config and "thresholds:" not in config
    unchanged = LIVE / "zlops_unchanged.yaml"
    if unchanged.exists():
        def lines(text: str) -> list[str]:
            return [line for line in text.splitlines() if line.strip()]

        assert lines(unchanged.read_text()) == [*lines(config), "noise: {ab_pairs: 0}"]
    policy = NoiseConfig().policy(ThresholdsConfig().to_thresholds())
    for n in NIGHTS:
        assert n["rc"] == 0 and n["run_key"] and n["series"] == 50, n["night"]
        assert n["sha"] == shas[n["label"]]
        judging = n["meta"]["judging"]
        assert judging["judge"] == "noise"
        assert judging["thresholds"] == {"potential_pct": policy.potential_pct, "regression_pct": policy.regression_pct}
        for key in ("k", "min_nights", "window", "alpha", "ab_pairs", "ab_budget"):
            if key == "ab_pairs" and n["label"] != "S" and unchanged.exists():
                assert judging["policy"][key] == 1 and not _ab(n), n["night"]   # max(ab_pairs, 1): no A/B ran
                continue
            assert judging["policy"][key] == getattr(policy, key), (n["night"], key)


def test_no_loud_verdict_and_no_announced_or_confirmed_alert_on_unchanged_series() -> None:
    """Done-when 1, over every night: no improved/potential/regression/severe row, no announced alert event,
    no confirmed alert on a series whose code did not change."""
    loud = [(n["night"], r["case"], r["metric"], r["verdict"]) for n in NIGHTS for r in n["loud"]
            if not _changed(n, r["case"], r["metric"])]
    announced = [(n["night"], e["case"], e["metric"], e["to_state"]) for n in NIGHTS for e in n["alert_events"]
                 if e["announced"] and not _changed(n, e["case"], e["metric"])]
    confirmed = [(a["case"], a["metric"]) for a in RECORD["alerts_at_end"] if a["state"] == "confirmed"
                 and not (a["case"] == SLOWED_CASE and a["metric"] in SLOWED_METRICS)]
    assert (loud, announced, confirmed) == ([], [], [])


def test_the_change_is_confirmed_on_its_first_or_second_night_by_an_ab_that_ran() -> None:
    """Done-when 2: the slowed shape's latency (ground truth +2.80% from 6 + 6 interleaved fresh processes) is a
    regression on S's first or second night, by a same-device A/B whose CI lies above 0."""
    hits = []
    for n in S_NIGHTS[:2]:
        row = next(r for r in n["slowed"] if r["metric"] == "latency")
        fig = row["figures"] or {}
        if row["verdict"] in CONFIRMED and fig.get("reference_label", "").startswith("A/B") and _ab(n)["runs"] > 0:
            lo, hi = fig["ci_pct"]
            assert 0 < lo <= row["change_pct"] <= hi and 1.8 < row["change_pct"] < 3.8, row
            hits.append(n["night"])
    assert hits, [(n["night"], n["slowed"]) for n in S_NIGHTS]


def test_every_ab_estimate_is_within_30pct_of_its_realised_cost_and_within_its_budget() -> None:
    """Done-when 3: each A/B that ran estimated its cost before its first run (est_run_s x runs), spent what its
    runs took (the sum of their seconds), within 30% of the estimate and within a budget that is exactly what
    the production defaults give for that night (max(25% of the night, 300 s floor), at most 3600 s)."""
    defaults = NoiseConfig()
    ran = [n for n in NIGHTS if _ab(n).get("runs", 0) > 0]
    assert ran
    for n in NIGHTS:
        ab = _ab(n)
        if not ab:
            continue
        budget = ab_budget(ab["night_s"], share=defaults.ab_budget_share, floor_s=defaults.ab_budget_floor_s,
                           ceiling_s=defaults.ab_budget_max_s)
        assert ab["budget_s"] == pytest.approx(budget.seconds, abs=0.01), n["night"]
        if ab.get("runs", 0) == 0:
            continue
        est, realised = float(ab["est_s"]), float(ab["seconds"])
        assert est == pytest.approx(ab["est_run_s"] * ab["runs"], abs=0.05 * ab["runs"])
        runs = [s for _, s in ab.get("observed") or []]
        if runs:
            assert sum(runs) == pytest.approx(realised, rel=0.02, abs=0.5), n["night"]
        assert abs(est - realised) <= 0.3 * realised, (n["night"], est, realised)
        assert realised <= ab["budget_s"], (n["night"], realised, ab["budget_s"])


def test_no_unchanged_verdict_from_an_ab_whose_ci_reaches_beyond_the_floor() -> None:
    """Done-when 4: an A/B clears a suspect only with its CI inside +-the threshold; one that could not decide
    leaves a suspect that says 'inconclusive' with the A/B's CI."""
    rows = [(n["night"], r) for n in NIGHTS for r in n["ab_rows"]]
    assert rows
    for night, r in rows:
        fig = r["figures"]
        if r["verdict"] == "unchanged" and fig.get("ci_pct") is not None:
            lo, hi = fig["ci_pct"]
            floor = fig.get("threshold_pct") or r["threshold_pct"]
            assert -floor < lo and hi < floor, (night, r["case"], r["metric"], fig["ci_pct"], floor)
        if r["verdict"] in ("suspect", "suspect_improved") and not fig.get("follows"):
            assert "inconclusive" in r["note"] and fig.get("ci_pct") is not None, (night, r["case"], r["note"])


def test_one_alert_per_regressed_case_and_no_new_alert_left_on_a_settled_series() -> None:
    """Done-when 5: the slowed case has one alert (its speedup follows the latency), and every alert still
    ``new`` after the last night is on a series that night held as a suspect."""
    confirmed_cases = [a["case"] for a in RECORD["alerts_at_end"] if a["state"] == "confirmed"]
    assert len(confirmed_cases) == len(set(confirmed_cases))
    assert sum(a["case"] == SLOWED_CASE and a["state"] == "confirmed" for a in RECORD["alerts_at_end"]) <= 1
    last = NIGHTS[-1]
    suspects = {(r["case"], r["metric"]) for r in last["suspects"]}
    left = [(a["case"], a["metric"]) for a in RECORD["alerts_at_end"] if a["state"] == "new"
            and (a["case"], a["metric"]) not in suspects]
    assert left == []
