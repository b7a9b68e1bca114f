"""zlops.judge.confirm's judging of an A/B (the runs themselves are covered by the nightly tests)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from zlops.config.settings import parse_config
from zlops.judge import confirm as confirm_mod
from zlops.model import BaselinePoint, CompareSummary, Comparison, Judgement, Summary, Verdict


def _summary(threshold: float) -> CompareSummary:
    base = BaselinePoint("nightly:s:1", "a" * 40, "ms", 1.0, 3)
    c = Comparison("s", "p", "nonzero_1M", "time", "ms", True, base, Summary(1.2, 3),
                   Judgement(Verdict.SUSPECT, 20.0, 20.0, threshold, "noisy"))
    return CompareSummary("nightly:s:2", "s", "b" * 40, (c,))


@pytest.mark.parametrize(("ab", "want"), [
    (([1.0] * 8, [1.2] * 4 + [1.21] * 4), Verdict.SEVERE),
    (([1.0, 1.01] * 4, [1.0, 1.01] * 4), Verdict.UNCHANGED),
])
def test_a_threshold_above_the_severe_line_is_judged_not_crashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 ab: tuple[list[float], list[float]],
                                                                 want: Verdict) -> None:
    """Seen on an H200: a noisy series' own threshold (5.64%) exceeded the severe line (5%) and the
    A/B statistics raised, failing the whole night."""
    config = parse_config({"home": str(tmp_path), "pools": {"p": {"backend": "cpu", "devices": [0]}},
                           "suites": {"s": {"repo": str(tmp_path / "up"), "command": ["x"], "format": "zlops-json",
                                            "pools": ["p"]}},
                           "judge": "noise", "noise": {"ab_pairs": 8}})
    budget = confirm_mod.PoolBudget(seconds=100.0, night_s=400.0, run_s=5.0, cases=None)
    monkeypatch.setattr(confirm_mod, "pool_budget", lambda ctx, pool, members, **kw: (budget, members))
    monkeypatch.setattr(confirm_mod, "confirm_pool", lambda ctx, pool, suspects, **kw: confirm_mod.PoolAB(
        {("nonzero_1M", "time"): ab}, 16, 80.0, budget, "max pairs"))
    saved, metas = [], []
    monkeypatch.setattr(confirm_mod, "open_store", lambda cfg: type("S", (), {
        "save_comparisons": lambda self, key, rows: saved.append(rows),
        "update_run_meta": lambda self, key, values: metas.append(values),
        "get_run": lambda self, key: None, "list_runs": lambda self, **kw: []})())
    ctx = confirm_mod.RunContext(config, "s", "nightly:s:2", "b" * 40)
    out = confirm_mod.confirm(ctx, _summary(threshold=5.64))
    (row,) = out.comparisons
    assert row.verdict is want and "A/B 8+8" in row.judgement.note and "16 runs" in row.judgement.note
    # the row's figures are the A/B's: base and head medians of the runs, and the change from those two
    assert row.figures is not None and row.figures.reference_label.startswith("A/B base")
    assert row.figures.runs_base == tuple(ab[0]) and row.judgement.change_pct == row.figures.change_pct
    assert saved and len(metas) == 1
    meta = metas[0]["ab"]["p"]
    assert {k: meta[k] for k in ("runs", "seconds", "night_s", "budget_s", "suspects", "ab_suspects", "cases",
                                 "stopped")} == {"runs": 16, "seconds": 80.0, "night_s": 400.0, "budget_s": 100.0,
                                                 "suspects": 1, "ab_suspects": 1, "cases": "all",
                                                 "stopped": "max pairs"}
    assert meta["outcomes"] == {"confirmed" if want is Verdict.SEVERE else "cleared": 1}
    assert "estimated 80" in row.judgement.note   # 16 runs x the 5 s estimate, beside the 80 s they took


def test_confirm_suspect_leaves_non_suspects_and_undecidable_a_b_alone() -> None:
    from zlops.judge.judges import confirm_suspect
    from zlops.stats import Policy

    policy = Policy()
    unchanged = Judgement(Verdict.UNCHANGED, 0.5, 0.5, 2.0, "")
    assert confirm_suspect(unchanged, [1.0] * 8, [2.0] * 8, lower_is_better=True, policy=policy) is unchanged
    suspect = Judgement(Verdict.SUSPECT, 9.0, 9.0, 2.0, "suspect")
    # 4 + 4 runs cannot reach alpha 0.002: the A/B cannot decide, the suspect stays
    undecided = confirm_suspect(suspect, [1.0] * 4, [1.1] * 4, lower_is_better=True, policy=policy)
    assert undecided.verdict is Verdict.SUSPECT and "A/B undecided" in undecided.note
    higher_is_better = confirm_suspect(suspect, [1.0] * 8, [0.9] * 4 + [0.91] * 4, lower_is_better=False,
                                       policy=policy)
    assert higher_is_better.verdict is Verdict.SEVERE  # a 9% throughput drop is worse, and confirmed


def _budget_ctx(tmp_path: Path, command: list[str], **noise: object) -> confirm_mod.RunContext:
    config = parse_config({"home": str(tmp_path), "pools": {"p": {"backend": "cpu", "devices": [0]}},
                           "suites": {"s": {"repo": str(tmp_path / "up"), "command": command,
                                            "format": "zlops-json", "pools": ["p"],
                                            # {cases} outside a partition: the flaggems branch allows it
                                            **({"partition": {"cases": ["c1", "c2", "c3", "a"]}}
                                               if any("{cases}" in a for a in command) else {})}},
                           "judge": "noise", "noise": {"ab_pairs": 8, **noise}})
    return confirm_mod.RunContext(config, "s", "nightly:s:2", "b" * 40)


def _fake_store(monkeypatch: pytest.MonkeyPatch, *, duration_s: float, cases: list[str],
                earlier: list[dict] | None = None) -> None:
    from datetime import datetime, timedelta, timezone

    from zlops.model import CaseResult, ShardOutcome, ShardStatus

    t0 = datetime(2026, 11, 30, tzinfo=timezone.utc)
    shard = ShardOutcome("p", 0, "cpu", ShardStatus.OK, Path("/x"), 0, t0, t0 + timedelta(seconds=duration_s))
    results = [("p", 0, CaseResult(c, "time", "ms", True, (1.0,))) for c in cases]
    runs = [type("R", (), {"run_key": f"nightly:s:0{i}", "meta": m})() for i, m in enumerate(earlier or [])]
    monkeypatch.setattr(confirm_mod, "open_store", lambda cfg: type("S", (), {
        "shards": lambda self, key: [shard], "results": lambda self, key: results,
        "list_runs": lambda self, **kw: runs})())


def _suspect(case: str, worse: float) -> Comparison:
    base = BaselinePoint("nightly:s:1", "a" * 40, "ms", 1.0, 1)
    return Comparison("s", "p", case, "time", "ms", True, base, Summary(1.0 + worse / 100, 1),
                      Judgement(Verdict.SUSPECT, worse, worse, 2.0, ""))


def test_the_budget_is_device_time_and_buys_the_most_severe_suspects_first(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # 100 cases took 400 s tonight; earlier A/B runs of 2 cases took 34 s each: the cost model is a
    # start-up of ~30 s plus ~3.7 s a case (fitted on both case counts), not 400/100 = 4 s a case
    _fake_store(monkeypatch, duration_s=400.0, cases=[f"c{i}" for i in range(100)],
                earlier=[{"ab": {"p": {"observed": [[2, 37.4], [2, 37.4]]}}}])
    ctx = _budget_ctx(tmp_path, ["bench", "--only", "{cases}"], ab_budget_floor_s=0, ab_budget_share=1.0)
    suspects = [_suspect("c1", 3.0), _suspect("c2", 50.0), _suspect("c3", 10.0)]
    budget, chosen = confirm_mod.pool_budget(ctx, "p", suspects)
    assert budget.seconds == pytest.approx(400.0) and budget.night_s == pytest.approx(400.0)
    assert budget.cost is not None and "fitted on 3 processes of 2 case counts" in budget.cost.basis
    assert budget.cost.fixed_s == pytest.approx(30.0, abs=0.1)
    assert budget.cost.per_case_s == pytest.approx(3.7, abs=0.01)
    # most severe first: c2 (10 runs x 33.7 s = 337 s), then c3 (10 x 37.4 = 374 s), c1 would need 411 s
    assert [c.case for c in chosen] == ["c2", "c3"]
    assert budget.cases == ("c2", "c3") and budget.run_s == pytest.approx(37.4, abs=0.01)


def test_the_budget_has_a_floor_and_a_ceiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on FlagGems (#22): 25% of a 24 s night is 6 s, and a one-op A/B run costs ~14 s: no A/B ever ran."""
    _fake_store(monkeypatch, duration_s=24.0, cases=[f"c{i}" for i in range(25)])
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"])      # the defaults: share 0.25, floor 300 s
    budget, chosen = confirm_mod.pool_budget(ctx, "p", [_suspect("c1", 3.0), _suspect("c2", 8.0)])
    assert budget.seconds == pytest.approx(300.0) and "floor 300" in budget.basis
    # one case count only: start-up is half the process (12 s), the rest 0.48 s a case
    assert budget.run_s == pytest.approx(12.0 + 2 * 0.48) and [c.case for c in chosen] == ["c2", "c1"]
    big = confirm_mod.budget_seconds(_budget_ctx(tmp_path, ["b"], ab_budget_max_s=1000).config.noise, 8000.0)
    assert big.seconds == pytest.approx(1000.0) and "capped at 1000" in big.basis
    share = confirm_mod.budget_seconds(ctx.config.noise, 4000.0)
    assert share.seconds == pytest.approx(1000.0) and share.basis.startswith("25% of tonight's 4000 s")
    # an explicit budget in seconds overrides both
    budget, chosen = confirm_mod.pool_budget(_budget_ctx(tmp_path, ["bench", "{cases}"], ab_budget_s=1000),
                                             "p", [_suspect("c1", 3.0)])
    assert budget.seconds == 1000 and len(chosen) == 1


def test_a_suite_that_cannot_select_cases_runs_whole_and_says_so(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_store(monkeypatch, duration_s=60.0, cases=["a", "b"])
    budget, chosen = confirm_mod.pool_budget(_budget_ctx(tmp_path, ["bench"]), "p", [_suspect("a", 9.0)])
    assert budget.cases is None and budget.run_s == pytest.approx(60.0) and len(chosen) == 1
    assert not confirm_mod.selects_cases(_budget_ctx(tmp_path, ["bench"]).suite)
    assert confirm_mod.selects_cases(_budget_ctx(tmp_path, ["bench", "-k", "{cases}"]).suite)


def _ab_through_run_pairs(monkeypatch: pytest.MonkeyPatch, values: dict[str, list[float]], ran: list[int]) -> None:
    """confirm_pool replaced by the real run_pairs over scripted runs: run i of side A/B returns values[side][i]."""
    from zlops.judge.interleave import run_pairs

    def fake_pool(ctx, pool, suspects, *, progress, budget, decide_fn, **kw):  # type: ignore[no-untyped-def]
        seen = {"A": 0, "B": 0}

        def run_one(side: str, i: int) -> tuple[dict[tuple[str, str], float], float]:
            v = values[side][seen[side]]
            seen[side] += 1
            ran.append(1)
            return {("nonzero_1M", "time"): v}, 5.0

        pairs = run_pairs(run_one=run_one, seed=1, min_pairs=5, max_pairs=8, budget_s=1000.0, est_run_s=5.0,
                          decided=lambda s: not decide_fn(s))
        return confirm_mod.PoolAB(pairs.samples, pairs.runs, pairs.seconds, budget, pairs.stopped, pairs=pairs)

    monkeypatch.setattr(confirm_mod, "confirm_pool", fake_pool)


@pytest.mark.parametrize(("values", "runs", "want", "stopped"), [
    # +-4% process noise on both sides after 5 pairs: no outcome of the 3 pairs left could confirm or clear
    # it; the A/B stops (futility), the suspect stays one with its figures
    ({"A": [1.0, 1.05, 0.97, 1.03, 0.99, 1.0, 1.0, 1.0], "B": [1.04, 0.98, 1.06, 1.01, 1.0, 1.0, 1.0, 1.0]},
     10, Verdict.SUSPECT, "futile after 5 pairs"),
    # a real +3% shift with +-1% process noise: undecided at 5 and 6 pairs but decidable; measured on to 7
    # pairs, where it is confirmed (the tied runs' exact rank-test p: 0.00058)
    ({"A": [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.002, 0.998], "B": [1.03, 1.04, 1.02, 1.035, 1.025, 1.03, 1.032,
                                                                    1.028]},
     14, Verdict.REGRESSION, "decided"),
])
def test_the_ab_stops_when_no_remaining_pair_could_decide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          values: dict[str, list[float]], runs: int, want: Verdict,
                                                          stopped: str) -> None:
    config = parse_config({"home": str(tmp_path), "pools": {"p": {"backend": "cpu", "devices": [0]}},
                           "suites": {"s": {"repo": str(tmp_path / "up"), "command": ["x"], "format": "zlops-json",
                                            "pools": ["p"]}},
                           "judge": "noise", "noise": {"ab_pairs": 8}})
    budget = confirm_mod.PoolBudget(seconds=1000.0, night_s=400.0, run_s=5.0, cases=None)
    monkeypatch.setattr(confirm_mod, "pool_budget", lambda ctx, pool, members, **kw: (budget, members))
    ran: list[int] = []
    _ab_through_run_pairs(monkeypatch, values, ran)
    metas: list[dict] = []  # type: ignore[type-arg]
    monkeypatch.setattr(confirm_mod, "open_store", lambda cfg: type("S", (), {
        "save_comparisons": lambda self, key, rows: None,
        "update_run_meta": lambda self, key, v: metas.append(v),
        "get_run": lambda self, key: None, "list_runs": lambda self, **kw: []})())
    base = BaselinePoint("nightly:s:1", "a" * 40, "ms", 1.0, 3)
    c = Comparison("s", "p", "nonzero_1M", "time", "ms", True, base, Summary(1.03, 3),
                   Judgement(Verdict.SUSPECT, 3.0, 3.0, 2.0, "night"))
    out = confirm_mod.confirm(confirm_mod.RunContext(config, "s", "nightly:s:2", "b" * 40),
                              CompareSummary("nightly:s:2", "s", "b" * 40, (c,)))
    (row,) = out.comparisons
    assert len(ran) == runs and row.verdict is want, row.judgement.note
    assert metas[0]["ab"]["p"]["stopped"].startswith(stopped)


def _recording_store(monkeypatch: pytest.MonkeyPatch, ctx: confirm_mod.RunContext, metas: list, *,  # type: ignore[type-arg]
                     saved: list | None = None, started: dict | None = None) -> None:  # type: ignore[type-arg]
    """_fake_store's reads, plus the writes confirm makes recorded (run meta into ``metas``, rows into ``saved``)
    and the base runs' start times (``started``: run key -> datetime; none: unknown)."""
    store = confirm_mod.open_store(ctx.config)
    monkeypatch.setattr(confirm_mod, "open_store", lambda cfg: type("S", (), {
        "shards": store.shards, "results": store.results, "list_runs": store.list_runs,
        "save_comparisons": lambda self, key, rows: None if saved is None else saved.append(rows),
        "update_run_meta": lambda self, key, v: metas.append(v),
        "get_run": lambda self, key: None if started is None else
        type("R", (), {"started_at": started.get(key), "meta": {}})()})())


class FakeDevice:
    """The run layer of confirm_bases scripted: ``prepare``/``cleanup`` do nothing, ``run_side`` returns per
    case the side's value (``values[(side, case)]``, side "B" or the base sha; 1.0 when absent) and advances a
    fake clock by ``start_s`` plus ``case_s`` a case it ran (each case measures ``metrics``); every run is listed in ``runs`` as (side, cases, folder)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, values: dict[tuple[str, str], float], *,
                 start_s: float = 12.0, case_s: float = 4.0, metrics: tuple[str, ...] = ("time",)) -> None:
        self.values, self.start_s, self.case_s, self.now = values, start_s, case_s, 0.0
        self.metrics = metrics
        self.runs: list[tuple[str, tuple[str, ...], str]] = []
        monkeypatch.setattr(confirm_mod, "prepare", lambda ctx: type("P", (), {"worktree": ctx.worktree,
                                                                                "venv": ctx.worktree / ".venv"})())
        monkeypatch.setattr(confirm_mod, "cleanup", lambda ctx: None)
        monkeypatch.setattr(confirm_mod, "run_side", self.run_side)
        monkeypatch.setattr(confirm_mod.time, "monotonic", lambda: self.now)

    def run_side(self, ctx, side_ctx, prepared, pool, device, out, cases):  # type: ignore[no-untyped-def]
        side = "B" if side_ctx.sha == ctx.sha else side_ctx.sha
        self.runs.append((side, tuple(cases or ()), out.name))
        self.now += self.start_s + self.case_s * len(cases or ())
        # a little process noise, so the rank test sees no ties
        jitter = 1.0 + 0.001 * (len(self.runs) % 5)
        return {(c, m): self.values.get((side, c), 1.0) * jitter for c in cases or () for m in self.metrics}


def test_suspects_against_two_bases_share_one_head_run_a_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen live on the H200 (hold-out 2, night K): tonight's suspects had two baseline commits (a series
    confirmed last night has it as base, one still awaiting confirmation the night before); each base's A/B ran
    a head of its own, and two A/Bs each took the whole 300 s budget. Now one A/B runs tonight's commit once a
    round, measuring both bases' suspects, and each base once, on the pool's one budget."""
    from zlops.report.ab_cost import ab_cost_line

    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2", "c3"])
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"])   # the defaults: floor 300 s
    older, last = "1" * 40, "f" * 40
    mild = replace(_suspect("c1", 3.0), base=BaselinePoint("nightly:s:0", older, "ms", 1.0, 1))
    loud = replace(_suspect("c2", 18.0), base=BaselinePoint("nightly:s:1", last, "ms", 1.0, 1))
    dev = FakeDevice(monkeypatch, {("B", "c1"): 1.03, ("B", "c2"): 1.18})
    metas: list[dict] = []  # type: ignore[type-arg]
    saved: list = []  # type: ignore[type-arg]
    _recording_store(monkeypatch, ctx, metas, saved=saved)
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", "b" * 40, (mild, loud)))
    head = [r for r in dev.runs if r[0] == "B"]
    assert head and all(r[1] == ("c1", "c2") for r in head)                # one head run measures both
    assert {r[1] for r in dev.runs if r[0] == older} == {("c1",)} and {r[1] for r in dev.runs if r[0] == last} == {("c2",)}
    rounds = len(head)
    assert len(dev.runs) == 3 * rounds and rounds >= 5                      # 3 runs a round, not 4
    assert len({r[2] for r in dev.runs}) == len(dev.runs)                    # a folder each
    meta = metas[0]["ab"]["p"]
    assert meta["shared_head"] and meta["runs"] == 3 * rounds and meta["head"]["runs"] == rounds
    assert meta["budget_s"] == pytest.approx(300.0) and meta["seconds"] <= 300.0
    assert meta["seconds"] == pytest.approx(sum(g["seconds"] for g in meta["groups"]) + meta["head"]["seconds"])
    assert [g["base"] for g in meta["groups"]] == [last[:12], older[:12]]   # the louder suspect's base first
    assert meta["outcomes"] == {"confirmed": 2}
    (rows,) = saved
    assert {r.case: r.verdict for r in rows} == {"c1": Verdict.REGRESSION, "c2": Verdict.SEVERE}
    assert all("the head once a round" in r.judgement.note for r in rows)
    line = ab_cost_line("p", meta)
    assert f"one A/B against 2 bases, the head run once a round ({rounds} runs" in line
    assert f"base {older[:7]} {rounds} runs" in line and f"base {last[:7]} {rounds} runs" in line


def test_a_carried_suspect_whose_case_the_head_already_runs_costs_only_its_base_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gloo campaign on the H200 host (run 5, night 5): the slowed shard's execute_s, carried over against
    an older base, was left 161 of 600 device-s after the newer bases' A/Bs and not measured, though the head
    runs of its shard had run in another base's A/B. With the head shared, the carried suspect of the same
    case adds only its base's runs: both fit a budget in which two A/Bs of their own would not."""
    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2", "c3"])
    # one run of one case: 12 s start-up + 4 s (the cost model's prior on a 24 s shard of 3 cases); 5 rounds of
    # a head and two bases: 240 s; two A/Bs of their own: 2 x 160 = 320 s
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"], ab_budget_floor_s=260)
    carried = replace(_suspect("c2", 150.0), metric="wall", base=BaselinePoint("nightly:s:0", "1" * 40, "ms", 1.0, 1))
    tonight = replace(_suspect("c2", 60.0), base=BaselinePoint("nightly:s:1", "f" * 40, "ms", 1.0, 1))
    FakeDevice(monkeypatch, {("B", "c2"): 2.0}, metrics=("time", "wall"))
    metas: list[dict] = []  # type: ignore[type-arg]
    saved: list = []  # type: ignore[type-arg]
    _recording_store(monkeypatch, ctx, metas, saved=saved)
    budget, _ = confirm_mod.pool_budget(ctx, "p", [tonight])
    assert 2 * 2 * 5 * budget.run_s > 260 >= 3 * 5 * budget.run_s       # separately no, shared yes
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", "b" * 40, (carried, tonight)))
    (rows,) = saved
    assert {(r.metric, r.verdict) for r in rows} == {("time", Verdict.SEVERE), ("wall", Verdict.SEVERE)}
    meta = metas[0]["ab"]["p"]
    assert meta["ab_suspects"] == 2 and meta["seconds"] <= 260 and meta["runs"] == 15


def test_a_base_whose_suspects_no_longer_fit_is_left_out_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest base's suspects first; an older base's suspect whose runs no longer fit stays a suspect,
    and its note and the pool's groups say so."""
    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2"])
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"], ab_budget_floor_s=200)   # 5 pairs of one: 160 s
    from datetime import datetime, timezone

    mild = replace(_suspect("c1", 300.0), base=BaselinePoint("nightly:s:0", "1" * 40, "ms", 1.0, 1))
    loud = replace(_suspect("c2", 18.0), base=BaselinePoint("nightly:s:1", "f" * 40, "ms", 1.0, 1))
    started = {"nightly:s:0": datetime(2026, 11, 30, tzinfo=timezone.utc),
               "nightly:s:1": datetime(2026, 12, 1, tzinfo=timezone.utc)}
    dev = FakeDevice(monkeypatch, {("B", "c2"): 1.18})
    saved: list = []  # type: ignore[type-arg]
    metas: list[dict] = []  # type: ignore[type-arg]
    _recording_store(monkeypatch, ctx, metas, saved=saved, started=started)
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", "b" * 40, (mild, loud)))
    assert {r[0] for r in dev.runs} == {"B", "f" * 40}          # the newest base's A/B only, though c1 is louder
    groups = {g["base"]: g for g in metas[0]["ab"]["p"]["groups"]}
    assert groups["1" * 12]["runs"] == 0 and groups["1" * 12]["stopped"] == "none of its suspects fit the budget"
    (rows,) = saved
    assert "[not in tonight's A/B (budget)]" in next(r for r in rows if r.case == "c1").judgement.note
    assert next(r for r in rows if r.case == "c2").verdict is Verdict.SEVERE


def test_suspects_whose_baseline_is_tonights_commit_get_no_ab_and_say_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A night of the same commit as its baseline (no new upstream commit; the night after a confirmed change,
    judged against that change's night): an A/B would run the commit against itself, an A/A test that shows no
    code change. On the H200 (hold-out 3, night 2: A after A) it took 254 s of the 300 s floor. Its suspects stay
    suspects with the reason; a carried-over suspect against an earlier commit still gets its A/B."""
    from zlops.report.ab_cost import ab_cost_line

    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2"])
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"])
    same = replace(_suspect("c2", 18.0), base=BaselinePoint("nightly:s:1", ctx.sha, "ms", 1.0, 1))
    carried = replace(_suspect("c1", 3.0), base=BaselinePoint("nightly:s:0", "1" * 40, "ms", 1.0, 1))
    ran: list[str] = []

    def fake_pool(ctx, pool, suspects, *, progress, budget, decide_fn, folder=""):  # type: ignore[no-untyped-def]
        ran.append(suspects[0].base.sha)
        samples = {(c.case, c.metric): ([1.0] * 6, [1.0] * 6) for c in suspects}
        return confirm_mod.PoolAB(samples, 12, 100.0, budget, "decided")

    monkeypatch.setattr(confirm_mod, "confirm_pool", fake_pool)
    saved: list = []  # type: ignore[type-arg]
    metas: list[dict] = []  # type: ignore[type-arg]
    _recording_store(monkeypatch, ctx, metas, saved=saved)
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", ctx.sha, (same, carried)))
    assert ran == ["1" * 40]                       # only the carried suspect's A/B ran
    (rows,) = saved
    row = next(r for r in rows if r.case == "c2")
    assert row.verdict is Verdict.SUSPECT
    assert f"its baseline is this commit itself ({ctx.sha[:7]})" in row.judgement.note
    meta = metas[0]["ab"]["p"]
    skipped = next(g for g in meta["groups"] if g["base"] == ctx.sha[:12])
    assert skipped["runs"] == 0 and skipped["stopped"].startswith("skipped: its baseline is this commit itself")
    assert meta["runs"] == 12
    line = ab_cost_line("p", meta)   # the report line says why the same-commit group ran nothing
    assert f"base {ctx.sha[:7]} 0 runs" in line and "skipped: its baseline is this commit itself" in line

    # alone: no A/B at all, and the meta says why
    metas.clear()
    ran.clear()
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", ctx.sha, (same,)))
    assert ran == [] and metas[0]["ab"]["p"]["stopped"].startswith("skipped: its baseline is this commit itself")


def test_no_budget_is_kept_for_a_same_commit_group_that_runs_no_ab(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An A/B that goes first keeps room for the later A/Bs' first decision; a later group whose baseline is
    tonight's commit runs none, so nothing is kept for it: the A/B that runs has the whole floor."""
    from datetime import datetime, timezone

    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2"])
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"], ab_budget_floor_s=400)
    carried = replace(_suspect("c1", 3.0), base=BaselinePoint("nightly:s:1", "1" * 40, "ms", 1.0, 1))
    same = replace(_suspect("c2", 18.0), base=BaselinePoint("nightly:s:0", ctx.sha, "ms", 1.0, 1))
    started = {"nightly:s:1": datetime(2026, 12, 1, tzinfo=timezone.utc),    # the carried base is the newer
               "nightly:s:0": datetime(2026, 11, 30, tzinfo=timezone.utc)}
    calls: list[float] = []

    def fake_pool(ctx, pool, suspects, *, progress, budget, decide_fn, folder=""):  # type: ignore[no-untyped-def]
        calls.append(budget.seconds)
        return confirm_mod.PoolAB({}, 10, 100.0, budget, "decided")

    monkeypatch.setattr(confirm_mod, "confirm_pool", fake_pool)
    metas: list[dict] = []  # type: ignore[type-arg]
    _recording_store(monkeypatch, ctx, metas, started=started)
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", ctx.sha, (carried, same)))
    assert calls == [pytest.approx(400.0)]     # before: 400 - 160 s kept for an A/B that never runs
    groups = metas[0]["ab"]["p"]["groups"]
    assert "kept for the A/Bs against other bases" not in groups[0]["budget_basis"]
    assert groups[1]["stopped"].startswith("skipped: its baseline is this commit itself")


def _store_with_an_earlier_ab(monkeypatch: pytest.MonkeyPatch, ctx: confirm_mod.RunContext, *, earlier_sha: str,
                              runs: tuple[list[float], list[float]], base: str, metas: list, saved: list,  # type: ignore[type-arg]
                              identities: tuple[dict | None, dict | None] = (None, None)) -> None:  # type: ignore[type-arg]
    """_fake_store's night, plus the night before: ``earlier_sha`` ran, and its A/B judged c1 against ``base``
    with ``runs`` (base, head); ``identities``: that night's and tonight's recorded pool identity."""
    from zlops.model import Figures

    store = confirm_mod.open_store(ctx.config)
    before = type("R", (), {"run_key": "nightly:s:1", "sha": earlier_sha, "meta": {}})()
    figures = Figures(reference=1.0, reference_label=f"A/B base {base[:7]}, {len(runs[0])} runs", value=1.03,
                      value_label=f"A/B head, {len(runs[1])} runs", runs_base=tuple(runs[0]), runs_head=tuple(runs[1]))
    monkeypatch.setattr(confirm_mod, "open_store", lambda cfg: type("S", (), {
        "shards": store.shards, "results": store.results,
        "list_runs": lambda self, **kw: [before],
        "pool_identities": lambda self, keys: [("nightly:s:1", None, "p", identities[0]),
                                               (ctx.run_key, None, "p", identities[1])],
        "verdict_evidence": lambda self, keys, only_evidence=False: {
            ("nightly:s:1", "p", "c1", "time"): (Verdict.SUSPECT, figures)},
        "save_comparisons": lambda self, key, rows: saved.append(rows),
        "update_run_meta": lambda self, key, v: metas.append(v),
        "get_run": lambda self, key: None})())


@pytest.mark.parametrize(("earlier_sha", "identities", "pooled"), [
    ("b" * 40, (None, None), True),                                          # the same commits, no ids recorded
    ("b" * 40, ({"device_ids": ["GPU-1"]}, {"device_ids": ["GPU-1"]}), True),
    ("c" * 40, (None, None), False),                                         # upstream moved: another head
    ("b" * 40, ({"device_ids": ["GPU-1"]}, {"device_ids": ["GPU-2"]}), False),   # another device
])
def test_an_ab_of_the_same_commits_as_the_night_before_starts_from_its_pairs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier_sha: str, identities: tuple, pooled: bool) -> None:  # type: ignore[type-arg]
    """Hold-out 4 on the H200, lease 1 night 4: the README-only D1 ran again (upstream did not move) and its
    carried suspects' A/B against A started from zero pairs, the night after an A/B of the same two commits.
    With the night before's pairs (same commits, same devices) the A/B goes on from them."""
    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2"])
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"])
    assert ctx.sha == "b" * 40
    base = "a" * 40
    suspect = _suspect("c1", 3.0)   # against base "a" * 40
    dev = FakeDevice(monkeypatch, {("B", "c1"): 1.03})
    metas: list[dict] = []  # type: ignore[type-arg]
    saved: list = []  # type: ignore[type-arg]
    _store_with_an_earlier_ab(monkeypatch, ctx, earlier_sha=earlier_sha, base=base, metas=metas, saved=saved,
                              runs=([1.0, 1.001, 0.999, 1.002], [1.03, 1.031, 1.029, 1.032]), identities=identities)
    monkeypatch.setattr(confirm_mod, "run_side", dev.run_side)
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", ctx.sha, (suspect,)))
    (rows,) = saved
    row = rows[0]
    meta = metas[0]["ab"]["p"]
    if pooled:   # 4 pairs of the night before: 1 more reaches the first decision (5 pairs), here a confirmation
        assert meta.get("pooled_pairs") == 4 and meta["runs"] == 2, meta
        assert row.verdict is Verdict.REGRESSION and len(row.figures.runs_base) == 5
        assert "with 4 pairs of the night before (the same commits and devices)" in row.judgement.note
    else:
        assert "pooled_pairs" not in meta and meta["runs"] >= 10, meta
        assert "night before" not in row.judgement.note


def test_each_base_of_a_shared_ab_says_when_its_suspects_were_futile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """+-4% process noise on every side after 5 rounds: no outcome of the 3 pairs left could decide either base's
    suspect; both bases stop and say so in their group, and the suspects stay suspects."""
    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2"])
    ctx = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"], ab_budget_floor_s=1000)
    older, last = "1" * 40, "f" * 40
    mild = replace(_suspect("c1", 3.0), base=BaselinePoint("nightly:s:0", older, "ms", 1.0, 1))
    loud = replace(_suspect("c2", 3.0), base=BaselinePoint("nightly:s:1", last, "ms", 1.0, 1))
    dev = FakeDevice(monkeypatch, {})
    noise = {"B": [1.04, 0.98, 1.06, 1.01, 1.0, 1.0, 1.0, 1.0], older: [1.0, 1.05, 0.97, 1.03, 0.99, 1, 1, 1],
             last: [1.0, 1.05, 0.97, 1.03, 0.99, 1, 1, 1]}
    seen: dict[str, int] = {}

    def run_side(ctx, side_ctx, prepared, pool, device, out, cases):  # type: ignore[no-untyped-def]
        side = "B" if side_ctx.sha == ctx.sha else side_ctx.sha
        i = seen[side] = seen.get(side, -1) + 1
        dev.now += 16.0
        return {(c, "time"): noise[side][i] for c in cases}

    monkeypatch.setattr(confirm_mod, "run_side", run_side)
    metas: list[dict] = []  # type: ignore[type-arg]
    saved: list = []  # type: ignore[type-arg]
    _recording_store(monkeypatch, ctx, metas, saved=saved)
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", "b" * 40, (mild, loud)))
    meta = metas[0]["ab"]["p"]
    assert meta["runs"] == 15, meta
    for g in meta["groups"]:
        assert g["stopped"].startswith("futile after 5 pairs"), g
    (rows,) = saved
    assert {r.verdict for r in rows} == {Verdict.SUSPECT}


def _mirror_with(path: Path, changes: list[dict[str, str]]) -> list[str]:
    """A git repository at ``path`` (the suite's mirror) with one commit per dict of file -> text; the SHAs."""
    import subprocess

    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@x",
           "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    shas = []
    for files in changes:
        for name, text in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_text(text)
        subprocess.run(["git", "-C", str(path), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "c"], check=True, env=env)
        shas.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True, env=env,
                                   capture_output=True, text=True).stdout.strip())
    return shas


@pytest.mark.parametrize(("head_change", "skipped"), [
    ({"README.md": "docs\n", "docs/guide.rst": "more\n"}, True),    # a README commit (hold-out 5's D1)
    ({"README.md": "docs\n", "src/op.py": "x = 2\n"}, False),       # code too: the A/B runs
])
def test_suspects_against_a_commit_that_differs_only_in_inert_paths_get_no_ab(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head_change: dict, skipped: bool) -> None:
    """Hold-out 5 on the H200: D1 (a README line) against A took 14 A/B runs, 298 s of the 300 s floor, for an A/A
    test. Two commits whose trees differ only in the suite's inert_paths run the same code: no A/B, the
    suspects stay suspects and say why; any other changed path, or no inert_paths (the default), and it runs."""
    _fake_store(monkeypatch, duration_s=24.0, cases=["c1", "c2"])
    ctx0 = _budget_ctx(tmp_path, ["bench", "-k", "{cases}"])
    base_sha, head_sha = _mirror_with(ctx0.mirror_path, [{"src/op.py": "x = 1\n", "README.md": "r\n"}, head_change])
    inert = ctx0.config.suites["s"].model_copy(update={"inert_paths": ["*.md", "*.rst", "docs/*"]})
    ctx = confirm_mod.RunContext(ctx0.config.model_copy(update={"suites": {"s": inert}}), "s", "nightly:s:2", head_sha)
    suspect = replace(_suspect("c1", 18.0), base=BaselinePoint("nightly:s:1", base_sha, "ms", 1.0, 1))
    ran: list[str] = []

    def fake_pool(ctx, pool, suspects, *, progress, budget, decide_fn, folder=""):  # type: ignore[no-untyped-def]
        ran.append(suspects[0].base.sha)
        return confirm_mod.PoolAB({(c.case, c.metric): ([1.0] * 6, [1.0] * 6) for c in suspects}, 12, 100.0, budget,
                                  "decided")

    monkeypatch.setattr(confirm_mod, "confirm_pool", fake_pool)
    saved: list = []  # type: ignore[type-arg]
    metas: list[dict] = []  # type: ignore[type-arg]
    _recording_store(monkeypatch, ctx, metas, saved=saved)
    confirm_mod.confirm(ctx, CompareSummary("nightly:s:2", "s", head_sha, (suspect,)))
    if not skipped:
        assert ran == [base_sha]
        return
    assert ran == []
    (rows,) = saved
    (row,) = rows
    assert row.verdict is Verdict.SUSPECT
    assert (f"its baseline {base_sha[:7]} differs from this commit only in inert paths (README.md, docs/guide.rst"
            in row.judgement.note)
    assert metas[0]["ab"]["p"]["stopped"].startswith(f"skipped: its baseline {base_sha[:7]} differs")
    # off by default: every differing commit gets its A/B
    off = confirm_mod.RunContext(ctx0.config, "s", "nightly:s:2", head_sha)
    confirm_mod.confirm(off, CompareSummary("nightly:s:2", "s", head_sha, (suspect,)))
    assert ran == [base_sha]
