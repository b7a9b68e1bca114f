"""Issue 22's done-when on the fifth FlagGems hold-out's lease 5, replayed from its eleven live H200 nights through
the real ``run_nightly``, each replayed run taking the time the real process took (start-up included).

The record (tests/data/flaggems_h200/holdout5_2026-12-04/lease5/, PROVENANCE.md there, "Lease 5"): amin, any and
maximum of a trimmed FlagGems (float16, ``--level core``: 15 cases, 50 series), nights A A A A A D1 (README-only:
A's code) then five nights of W (amin's wrapper launches its kernel once more over the first 524288 rows: +3.01% on
``amin/float16/(1024x1024x1024, 1)`` in the ground truth, 2 + 2 fresh processes, apart), all on one warm H200,
zlops bf1cd41 with the production defaults, ``kernels: triton`` and ``partial_exit_codes: [1]``.
``processes.tsv`` holds the 21 benchmark processes zlops ran: 11 nightly shards and night 7's 10 A/B runs.

What the live nights decided (``json/``, ``verdicts.txt``): nights 1-6 nothing loud; night 7's A/B (D1 against W,
5 + 5 ``-m amin`` runs) confirmed the change, +3.07%; nights 8-9 (W again, the same commit) found maximum's
(4096x4096) and (64x64) latency on a ~2x process level that night 1 (A's code) also had, and night 9 called them
severe by "two consecutive nights": a false alarm, the code had not changed since night 7. The replay tests expect
zlops' corrected rule (nights alone never confirm a suspect whose baseline night ran tonight's code); the recorded
false alarm is checked as recorded by the fast tests here.

The replay (tests/flaggems_holdout.py, ``HOLDOUT5``): an upstream A, D1, W with the real ``amin.py`` of A and W;
the stand-in serves each commit's recorded processes (its nightly shards in night order, then its A/B runs by side
in recorded order) at their real duration x ``TIME_SCALE``, exits 1 as they did, and writes their real Triton cache
folders where zlops points ``TRITON_CACHE_DIR``. Nights A x5 and D1 get live nights 1-6, the W nights live nights
7-11; an A/B's A side (D1, A's code) gets the five recorded A-side runs, its W side the five W-side runs.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flaggems_holdout import HOLDOUT5, UNSCALED_RUN_S, Night, replay_nights
from flaggems_replay import processes

from zlops.alerts.lifecycle import AlertState
from zlops.config.settings import NoiseConfig, ThresholdsConfig
from zlops.formats import flaggems_record
from zlops.model import Verdict

NIGHTS = ("A", "A", "A", "A", "A", "D1", "W", "W", "W", "W", "W")
FIRST_W = NIGHTS.index("W")
TIME_SCALE = float(os.environ.get("ZLOPS_HOLDOUT_TIME_SCALE", "0.05"))
SLOWED = HOLDOUT5.slowed_case
LOUD = {Verdict.IMPROVED, Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE}
CONFIRMED = {Verdict.REGRESSION, Verdict.SEVERE}
FLOOR = ThresholdsConfig().potential_pct     # the production default: every threshold's floor
LEASE = HOLDOUT5.data
# the bimodal launch-bound series night 9 called severe live (two W nights in a row on the high level)
FALSE_ALARM = ("maximum/float16/(4096x4096, 4096x4096)", "maximum/float16/(64x64, 64x64)")


def _processes() -> list[dict[str, str]]:
    return processes(LEASE)


def _record(night: int) -> dict[str, Any]:
    (path,) = (LEASE / "json").glob(f"night{night}-*.json")
    return json.loads(path.read_text())


def _latency(row: dict[str, str], case: str) -> float:
    (r,) = [r for r in flaggems_record.parse((LEASE / row["log"]).read_text(), source=row["log"])
            if r.case == case and r.metric == "latency"]
    return r.samples[0]


def _startup(row: dict[str, str]) -> float:
    """Seconds of the process zlops timed that were not pytest's session (interpreter, imports, CUDA, collection,
    and the telemetry sampler's stop)."""
    return float(row["wall_s"]) - float(row["pytest_s"])


# --- the record, as it came from the H200 (fast) ---------------------------------------------------------------

def test_the_record_holds_every_process_of_the_lease_with_the_code_it_ran() -> None:
    procs = _processes()
    shards = [p for p in procs if p["kind"] == "night"]
    ab = [p for p in procs if p["kind"] == "ab"]
    assert [p["night"] for p in shards] == [str(k) for k in range(1, 12)]
    assert [p["commit"] for p in shards] == list(NIGHTS)
    assert [p["label"] for p in shards] == ["A"] * 6 + ["W"] * 5   # D1 is README-only: A's code
    assert len(ab) == 10 and {p["night"] for p in ab} == {"7"} and {p["selection"] for p in ab} == {"amin"}
    assert {(p["side"], p["commit"], p["label"]) for p in ab} == {("A", "D1", "A"), ("B", "W", "W")}
    assert sum(p["side"] == "A" for p in ab) == 5
    assert {p["lease"] for p in procs} == {"5"} and {p["status"] for p in procs} == {"ok"}
    assert {p["rc"] for p in procs} == {"1"}   # test_amin's other two dtypes raise; partial_exit_codes keeps it
    for p in procs:
        results = flaggems_record.parse((LEASE / p["log"]).read_text(), source=p["log"])
        ops = {r.case.split("/")[0] for r in results}
        assert (len(results), ops) == ((50, set(HOLDOUT5.ops)) if p["kind"] == "night" else (15, {"amin"})), p["log"]
        had = json.loads((LEASE / p["kernels"]).read_text())["kernels"]
        line = re.match(r"triton: (\d+) kernels \((\d+) compiled", p["kernels_line"])
        assert line is not None and len(had) == int(line.group(1)), p["log"]
        assert sum(k["compiled"] for k in had) == int(line.group(2)), p["log"]
    w = (LEASE / "upstream" / "amin_W.py").read_text().splitlines()
    a = (LEASE / "upstream" / "amin_A.py").read_text().splitlines()
    added = [line[1:] for line in (LEASE / "upstream" / "W.diff").read_text().splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    assert [line for line in w if line not in a] == added and len(w) == len(a) + len(added) == len(a) + 7
    assert any("inp.numel() >= 2**30 and M >= 524288" in line for line in added)


def test_the_live_night7_ab_confirmed_the_change_at_the_size_the_processes_say() -> None:
    """Night 7's A/B as stored: 10 runs, 175.14 s realised against 147.02 s estimated (-16%), within the 300 s
    floor; its figures are the amin (1024x1024x1024, 1) latencies of the recorded A/B processes, +3.07% (the ground
    truth: +3.01%)."""
    night = _record(7)
    ab = night["meta"]["ab"]["h200"]
    assert (ab["runs"], ab["pairs"], ab["seconds"], ab["est_s"], ab["budget_s"]) == (10, 5, 175.14, 147.02, 300.0)
    shas = dict(line.split() for line in (LEASE / "shas.txt").read_text().splitlines())
    assert ab["outcomes"] == {"confirmed": 1, "inconclusive": 1} and ab["base"] == shas["D1"][:12]   # the night before
    assert abs(ab["est_s"] / ab["seconds"] - 1) < 0.30
    runs = [p for p in _processes() if p["kind"] == "ab"]
    walls = sum(float(p["wall_s"]) for p in runs)
    assert walls <= ab["seconds"] <= walls + 1.0   # zlops' own time around each run is small
    assert sum(float(d) for _, d in ab["observed"]) == pytest.approx(ab["seconds"], abs=0.01)
    (row,) = [r for r in night["ab_rows"] if r["case"] == SLOWED and r["metric"] == "latency"]
    assert row["verdict"] == "regression" and row["note"].startswith("confirmed by A/B: A/B 5+5: +3.07% worse")
    fig = row["figures"]
    base = sorted(_latency(p, SLOWED) for p in runs if p["side"] == "A")
    head = sorted(_latency(p, SLOWED) for p in runs if p["side"] == "B")
    assert sorted(fig["runs_base"]) == pytest.approx(base) and sorted(fig["runs_head"]) == pytest.approx(head)
    assert max(base) < min(head)
    change = 100 * (statistics.median(head) / statistics.median(base) - 1)
    assert change == pytest.approx(3.07, abs=0.005) and fig["ci_pct"][0] > FLOOR
    assert [(e["case"], e["metric"], e["to_state"], e["announced"]) for e in night["alert_events"]
            if e["to_state"] == "confirmed"] == [(SLOWED, "latency", "confirmed", True)]


def test_the_live_night9_called_a_bimodal_series_severe_with_no_code_change() -> None:
    """The false alarm as recorded (the bug the replay below expects fixed): nights 7-9 ran one commit; night 8's A/B
    was skipped (its baseline is that commit) and night 9 confirmed maximum's (4096x4096) and (64x64) latency severe
    by "two consecutive nights" on a level A's code had on night 1 too."""
    procs = {int(p["night"]): p for p in _processes() if p["kind"] == "night"}
    shas = [line.split("\t")[2] for line in (LEASE / "nights.tsv").read_text().splitlines()]
    assert len(set(shas[6:])) == 1 and shas[5] != shas[6]
    assert _record(8)["meta"]["ab"]["h200"]["stopped"].startswith("skipped: its baseline is this commit itself")
    night9 = _record(9)
    assert night9["verdict_counts"].get("severe") == 6 and "regression" not in night9["verdict_counts"]
    loud = {(x["case"], x["metric"]): x for x in night9["loud"]}
    assert set(loud) == {(c, m) for c in FALSE_ALARM for m in ("latency", "speedup", "tflops")}
    for case in FALSE_ALARM:
        assert loud[(case, "latency")]["verdict"] == "severe"
        assert "two consecutive nights beyond the threshold" in loud[(case, "latency")]["note"]
        low = statistics.median(_latency(procs[k], case) for k in range(2, 8))   # nights 2-7: the low level
        assert _latency(procs[7], case) < 1.2 * low
        assert min(_latency(procs[8], case), _latency(procs[9], case)) > 1.8 * low
        assert _latency(procs[1], case) > 1.8 * low          # A's code on the high level: not W's change
    alerts = json.loads((LEASE / "json" / "alerts_at_end.json").read_text())
    end = {(a["case"], a["metric"]): a["state"] for a in alerts}
    assert {end[(c, "latency")] for c in FALSE_ALARM} == {"confirmed"}
    assert sorted(k for k, s in end.items() if s == "confirmed") == sorted(
        [(c, "latency") for c in FALSE_ALARM] + [(SLOWED, "latency")])


def test_the_live_nights_of_unchanged_code_said_nothing_loud() -> None:
    for k in range(1, 7):
        night = _record(k)
        assert night["series"] == 50 and night["rc"] == 0 and not night["loud"], k
        assert not {"improved", "potential", "regression", "severe"} & set(night["verdict_counts"]), k
        assert all(e["to_state"] in ("new", "cleared") and not e["announced"] for e in night["alert_events"]), k
        ab = (night["meta"].get("ab") or {}).get("h200") or {}
        assert ab.get("runs", 0) == 0, k
        assert (k in (2, 3, 4, 5)) == str(ab.get("stopped", "")).startswith(   # night 1: new; night 6: no suspect
            "skipped: its baseline is this commit itself"), (k, ab)


def test_the_replays_per_op_times_are_the_records() -> None:
    """HOLDOUT5.op_s (what a filtered whole-subset process is charged less) re-derived from processes.tsv: amin the
    median session of the ten -m amin runs, any + maximum the median whole-subset session (nights 2-11) less it."""
    procs = _processes()
    amin = statistics.median(float(p["pytest_s"]) for p in procs if p["selection"] == "amin")
    whole = statistics.median(float(p["pytest_s"]) for p in procs if p["kind"] == "night" and p["night"] != "1")
    assert HOLDOUT5.op_s["amin"] == pytest.approx(amin, abs=0.005)
    assert HOLDOUT5.op_s["any"] + HOLDOUT5.op_s["maximum"] == pytest.approx(whole - amin, abs=0.01)


def test_the_recorded_cost_the_ab_estimate_missed_is_start_up() -> None:
    """Why night 7's A/B cost 19% more than estimated: the cost model had one timed process (night 7's 15-case
    shard, 22.05 s) and assumed 11.0 s of start-up and 0.735 s a case; a -m amin run's 5 cases took 6.30 s of
    pytest session (1.26 s a case: amin's [1024, 1024, 1024] is the slowest case of the subset) and 8.9-13.2 s
    around it."""
    ab = _record(7)["meta"]["ab"]["h200"]
    model = ab["cost_model"]
    assert model["observations"] == 1 and model["fixed_s"] == pytest.approx(11.03, abs=0.01)
    assert ab["est_run_s"] == pytest.approx(model["fixed_s"] + ab["cases_run"] * model["per_case_s"], abs=0.01)
    runs = [p for p in _processes() if p["kind"] == "ab"]
    per_case = statistics.median(float(p["pytest_s"]) for p in runs) / ab["cases_run"]
    assert per_case > 1.5 * model["per_case_s"]
    starts = sorted(_startup(p) for p in runs)
    assert 8.5 < starts[0] and starts[-1] < 13.5
    assert ab["realised_run_s"] == pytest.approx(statistics.mean(float(p["wall_s"]) for p in runs), abs=0.1)


# --- the replay through the real zlops nightly (slow) ------------------------------------------------------------

@dataclass
class Replayed:
    nights: list[Night]
    alerts: list[Any]
    table: str


def _table(nights: list[Night], alerts: list[Any]) -> str:
    out = []
    for n in nights:
        counts: dict[str, int] = {}
        for v in n.verdicts.values():
            counts[v.value] = counts.get(v.value, 0) + 1
        loud = [f"{c} {m} {v.value} {(n.comparisons[(c, m)].judgement.change_pct or 0):+.2f}%"
                for (c, m), v in sorted(n.verdicts.items()) if v in LOUD]
        real = sum(float(s["seconds"]) for s in n.served if s["where"] == "ab")
        ab = {k: v for k, v in n.ab.items() if k not in ("observed", "run_seconds", "order", "cost_model")}
        compiled = sum(1 for x in n.kernels if x.compiled)
        served = [s["log"].rsplit("/", 1)[-1] for s in n.served]
        out.append(f"night {n.index} {n.label}: {dict(sorted(counts.items()))}; loud {loud or '-'}; "
                   f"{len(n.kernels)} kernels ({compiled} compiled); A/B {ab}; served real A/B s {real:.1f}")
        out.append(f"    served {served}")
        out += [f"    alert event #{i} {c} {m}: {kind} -> {to}{' (announced)' if loud else ''}"
                for i, c, m, kind, to, loud in n.events]
        for case, metric in [(SLOWED, "latency"), *((c, "latency") for c in FALSE_ALARM)]:
            row = n.comparisons.get((case, metric))
            if row is not None:
                out.append(f"    {case} {metric}: {row.verdict.value}: {row.judgement.note[:260]}")
    for a in alerts:
        out.append(f"alert #{a.id} {a.case} {a.metric} {a.state.value} (opened {a.opened_run})")
    return "\n".join(out)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    tmp = tmp_path_factory.mktemp("holdout5")
    _config, store, _up, nights = replay_nights(tmp, HOLDOUT5, NIGHTS, time_scale=TIME_SCALE)
    alerts = list(store.alerts(suite="flaggems", states=None, limit=None))
    table = _table(nights, alerts)
    print("\n" + table)
    out = os.environ.get("ZLOPS_HOLDOUT_TABLE")
    if out:
        Path(out).write_text(table + "\n" + json.dumps([n.ab for n in nights], default=str) + "\n")
    return Replayed(nights, alerts, table)


def _changed(n: Night, case: str, metric: str) -> bool:
    return n.label == "W" and case == SLOWED and metric in HOLDOUT5.slowed_metrics


@pytest.mark.slow
def test_each_night_is_served_its_commits_recorded_processes(replayed: Replayed) -> None:
    """The harness: night k gets live night k's shard (A's code for A and D1, W's after), compiling what the live
    one compiled through zlops' seeding cache manager (21 on the machine's first night, 4 new amin_kernel variants on
    W's first, none otherwise); every A/B run a recorded process of its side's code (the stand-in's choice: the
    recorded ``-m amin`` A/B processes for that selection, filtered whole processes for any other); all 50 series
    every night. Live, only night 7 ran an A/B; today's judge also puts night 6's moves the nights cannot judge to
    an A/B (A/B candidates: unmeasurable or inside a threshold above the floor), so night 6 runs one too."""
    procs = {p["log"]: p for p in _processes()}
    recorded_ab = [p for p in _processes() if p["kind"] == "ab"]
    for n in replayed.nights:
        nightly = [s for s in n.served if s["where"] == "night"]
        assert len(nightly) == 1 and procs[nightly[0]["log"]]["night"] == str(n.index), n.served
        rec = procs[nightly[0]["log"]]
        assert rec["kind"] == "night" and nightly[0]["label"] == rec["label"] == ("W" if n.label == "W" else "A")
        line = re.match(r"triton: (\d+) kernels \((\d+) compiled", rec["kernels_line"])
        assert line is not None, rec["kernels_line"]
        total, compiled = int(line.group(1)), int(line.group(2))
        assert nightly[0]["kernels"] == f"{compiled}/{total}" and len(n.kernels) == total, (n.index, nightly)
        assert len(n.comparisons) == 50
        ab = [s for s in n.served if s["where"] == "ab"]
        assert len(ab) == n.ab.get("runs", 0), (n.index, n.ab)
        for s in ab:   # a recorded process of the side's own code, at its real time where it ran that selection
            assert procs[s["log"]]["label"] == s["label"] and s["label"] in ("A", "W"), (n.index, s)
            if procs[s["log"]]["selection"] == s["selection"]:
                assert float(s["seconds"]) == float(procs[s["log"]]["wall_s"]), s
        targeted = [s["log"] for s in ab if s["selection"] == "amin"]
        assert all(procs[x]["kind"] == "ab" for x in targeted) and len(set(targeted)) == len(targeted), targeted
    assert recorded_ab and [n.index for n in replayed.nights if n.ab.get("runs", 0)] == [6, 7], replayed.table


@pytest.mark.slow
def test_the_replay_decides_the_nights_before_the_rule_matters_as_the_live_nights_did(replayed: Replayed) -> None:
    """Nights 1-5 (no A/B, live or replayed) replayed: the verdict counts the live nights stored; the processes,
    not the CI host, decide. From night 6 on, today's judge asks A/Bs the live one did not (night 6's A/B
    candidates, all inconclusive: the nights' verdicts stand), so its counts and night 7's A/B differ from the
    record by design; night 7's A/B still confirms exactly the change and decides nothing else loud."""
    for n in replayed.nights[:FIRST_W - 1]:
        counts: dict[str, int] = {}
        for v in n.verdicts.values():
            counts[v.value] = counts.get(v.value, 0) + 1
        assert counts == _record(n.index)["verdict_counts"], (n.index, replayed.table)
    six = replayed.nights[FIRST_W - 1]
    assert six.index == 6 and six.ab.get("runs", 0) > 0 and set(six.ab["outcomes"]) <= {"inconclusive", "cleared"}, replayed.table
    assert not [v for v in six.verdicts.values() if v in LOUD], replayed.table
    ab = replayed.nights[FIRST_W].ab
    assert ab["outcomes"].get("confirmed") == 1, replayed.table


@pytest.mark.slow
def test_no_loud_verdict_and_no_confirmed_alert_on_unchanged_series(replayed: Replayed) -> None:
    """Done-when (a): over all eleven nights, 0 improved/potential/regression/severe verdicts and 0 confirmed (or
    announced) alerts on every series but amin (1024x1024x1024, 1)'s latency and its derived speedup on W's nights.
    Live, night 9 called maximum's bimodal (4096x4096) and (64x64) latency severe (and their speedup, tflops)."""
    loud = [(n.index, c, m, v.value) for n in replayed.nights for (c, m), v in n.verdicts.items()
            if v in LOUD and not _changed(n, c, m)]
    announced = [(n.index, c, m, to) for n in replayed.nights for c, m, to in n.announced if not _changed(n, c, m)]
    confirmed = [(a.case, a.metric) for a in replayed.alerts if a.state is AlertState.CONFIRMED
                 and not (a.case == SLOWED and a.metric in HOLDOUT5.slowed_metrics)]
    assert not (loud or announced or confirmed), f"{loud}\n{announced}\n{confirmed}\n{replayed.table}"


@pytest.mark.slow
def test_nights_of_the_same_code_leave_the_bimodal_maximum_series_suspects(replayed: Replayed) -> None:
    """Nights 8-9 ran night 7's commit: maximum's two series on their high process level stay suspects on both
    nights (no A/B: its baseline is this commit; no second night can confirm a change the code did not make)."""
    for n in replayed.nights[7:9]:
        assert n.ab.get("runs", 0) == 0 and str(n.ab.get("stopped", "")).startswith(
            "skipped: its baseline is this commit itself"), (n.index, n.ab)
        for case in FALSE_ALARM:
            assert n.verdicts[(case, "latency")] is Verdict.SUSPECT, (n.index, case, replayed.table)


@pytest.mark.slow
def test_the_change_is_confirmed_on_its_first_or_second_night_by_an_ab_that_ran(replayed: Replayed) -> None:
    """Done-when (b): amin (1024x1024x1024, 1) latency, +3.01% in the ground truth, is a regression on W's first or
    second night, decided by an A/B that ran (its figures and note name the A/B); the replayed A/B reads what the
    live one read from the same processes."""
    hits = []
    for n in replayed.nights[FIRST_W:FIRST_W + 2]:
        row = n.comparisons[(SLOWED, "latency")]
        by_ab = row.figures is not None and row.figures.reference_label.startswith("A/B")
        if row.verdict in CONFIRMED and by_ab and "confirmed by A/B" in row.judgement.note and n.ab.get("runs", 0):
            hits.append(n)
    assert hits, replayed.table
    fig = hits[0].comparisons[(SLOWED, "latency")].figures
    live = next(r for r in _record(hits[0].index)["ab_rows"] if r["case"] == SLOWED and r["metric"] == "latency")
    # recorded processes of both commits (which ones depends on the A/Bs asked before it: night 6's took some of
    # A's): the change they show is the ground truth's and the live A/B's, within half a point
    assert len(fig.runs_base) >= 5 and len(fig.runs_head) >= 5
    assert fig.change_pct == pytest.approx(live["change_pct"], abs=0.5) and fig.ci_pct[0] > FLOOR


@pytest.mark.slow
def test_every_ab_estimate_is_within_30pct_of_its_cost_and_the_night_within_its_budget(replayed: Replayed) -> None:
    """Done-when (c): each A/B that ran (and each group of it, one per base commit): estimated before its first run
    within 30% of what its runs took (zlops' timing of the replayed processes, each at its real H200 time x
    TIME_SCALE), and its total within the night's budget, the 300 s floor scaled."""
    ran = [n for n in replayed.nights if n.ab.get("runs", 0) > 0]
    assert ran, replayed.table
    for n in ran:
        realised = float(n.ab["seconds"])
        assert abs(float(n.ab["est_s"]) - realised) <= 0.30 * realised + UNSCALED_RUN_S, (n.index, replayed.table)
        assert realised <= float(n.ab["budget_s"]) + UNSCALED_RUN_S
        assert float(n.ab["budget_s"]) == pytest.approx(NoiseConfig().ab_budget_floor_s * TIME_SCALE)
        real = sum(float(s["seconds"]) for s in n.served if s["where"] == "ab") * TIME_SCALE
        assert real <= realised <= real * 1.5 + 1.0, (n.index, real, realised)
        for g in n.ab.get("groups") or [n.ab]:
            if g.get("runs"):
                took = float(g["seconds"])
                assert abs(float(g["est_s"]) - took) <= 0.30 * took + UNSCALED_RUN_S, (n.index, g)


@pytest.mark.slow
def test_no_unchanged_verdict_from_an_ab_whose_ci_reaches_beyond_the_floor(replayed: Replayed) -> None:
    """Done-when (d): an A/B clears a suspect (``unchanged``) only with its CI inside +-the threshold (at least the
    floor, ``potential_pct``); there were A/B-judged rows to check."""
    rows = [(n.index, c, m, row) for n in replayed.nights for (c, m), row in n.comparisons.items()
            if row.figures is not None and row.figures.reference_label.startswith("A/B")]
    assert rows, replayed.table
    for night, c, m, row in rows:
        if row.verdict is Verdict.UNCHANGED and row.figures.ci_pct is not None:
            lo, hi = row.figures.ci_pct
            floor = max(row.figures.threshold_pct or FLOOR, FLOOR)
            assert -floor < lo and hi < floor, (night, c, m, row.figures.ci_pct, floor)


@pytest.mark.slow
def test_one_alert_for_the_regressed_case_and_no_new_alert_left_on_a_cleared_series(replayed: Replayed) -> None:
    """Done-when (e): one alert for the regressed case (its latency; the speedup follows it), confirmed; and no
    alert left ``new`` on a series the last night judged unchanged or unmeasurable."""
    mine = [a for a in replayed.alerts if a.case == SLOWED]
    assert [(a.metric, a.state) for a in mine] == [("latency", AlertState.CONFIRMED)], replayed.table
    last = replayed.nights[-1]
    quiet = {key for key, v in last.verdicts.items() if v in (Verdict.UNCHANGED, Verdict.UNMEASURABLE)}
    left = [(a.id, a.case, a.metric) for a in replayed.alerts
            if a.state is AlertState.NEW and (a.case, a.metric) in quiet]
    assert not left, f"{left}\n{replayed.table}"
