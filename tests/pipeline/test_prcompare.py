"""PR-branch comparison: refs validated before git, single vs compare mode, the seed's device plan,
the seed's report format, caliber first, through the library and the CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from fake_upstream import Upstream, config_data, git

from zlops.cli import main
from zlops.config.settings import Config, parse_config
from zlops.errors import ConfigError
from zlops.forge.prcompare import report, run_compare, validate_ref
from zlops.host import proc
from zlops.model import Verdict
from zlops.steps.context import RunContext, open_store

BASE = {"alpha": 1.0, "beta": 2.0}
BAD_REFS = ["--upload-pack=x", "a;rm -rf /", "../x", "main..dev", "@{-1}", "", "feat\x01ure", "x.lock", "a//b",
            "-rf", "ok/branch ", "\n"]


@pytest.mark.parametrize("ref", BAD_REFS)
def test_unsafe_refs_are_refused_before_any_git_command(ref: str, make_config: Callable[..., Config],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = proc.run

    def spy(argv, **kw):
        calls.append(argv)
        return real(argv, **kw)

    monkeypatch.setattr(proc, "run", spy)
    with pytest.raises(ConfigError, match="ref"):
        run_compare(make_config(), {"suite": "fake", "ref": ref})
    assert [c for c in calls if c and c[0] == "git" and "check-ref-format" not in c] == []


@pytest.mark.parametrize("ref", ["feature/JIRA-1_fix.v2", "release/3.3", "pull/42/head", "deadbeef1234", "main"])
def test_good_refs_pass(ref: str) -> None:
    assert validate_ref(ref) == ref


def test_unknown_conf_keys_are_refused(make_config: Callable[..., Config]) -> None:
    with pytest.raises(ConfigError, match=r"unknown parameter.*.repo."):
        run_compare(make_config(), {"suite": "fake", "ref": "main", "repo": "https://evil.example/x.git"})


@pytest.mark.slow
def test_single_mode_when_the_ref_has_no_commits_beyond_main(upstream: Upstream,
                                                             make_config: Callable[..., Config]) -> None:
    upstream.commit(BASE)
    config = make_config()
    outcome = run_compare(config, {"suite": "fake", "ref": "main"}, label="single")
    assert outcome.plan.mode == "single" and outcome.plan.base_sha is None and outcome.comparisons == {}
    text = report(config, outcome).text
    assert text.startswith("Benchmark at: ") and "alpha" in text and "time (ms)" in text


@pytest.mark.slow
def test_compare_on_one_device_in_the_seed_format(upstream: Upstream, make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit(BASE, "main")
    upstream.branch("feature/faster-beta", c1)
    upstream.checkout("feature/faster-beta")
    head = upstream.commit({"alpha": 1.3, "beta": 1.0}, "alpha slower, beta faster")
    upstream.checkout("main")
    upstream.commit({"alpha": 5.0, "beta": 5.0}, "main moved on (not part of the PR)")
    config = make_config()
    outcome = run_compare(config, {"suite": "fake", "ref": "feature/faster-beta"}, label="one")
    plan = outcome.plan
    assert plan.mode == "compare" and plan.base_sha == c1 and plan.head_sha == head and plan.devices == (0,)
    rows = {c.case: c for c in outcome.comparisons["default"]}
    assert rows["alpha"].verdict is Verdict.REGRESSION and rows["beta"].verdict is Verdict.IMPROVED
    out = report(config, outcome)
    lines = out.text.splitlines()
    assert lines[0] == f"Merge-base: {c1[:7]} -> HEAD: {head[:7]} (feature/faster-beta)"
    assert "Device: baseline=0, current=0" in lines
    assert any(ln.startswith("alpha") and "+30.00%" in ln and "!! REGRESSION" in ln for ln in lines)
    assert "Overall: 1 of 2 examples improved, 1 regressed (based on time)" in lines
    assert "different devices" not in out.text
    assert out.markdown.exists() and out.slack.status == "written"
    store = open_store(config)
    kinds = {r.run_key: r for r in store.list_runs(kind="pr")}
    assert set(kinds) == {plan.head_key, plan.base_key} and all(r.kind == "pr" for r in kinds.values())
    assert not any((config.worktrees_dir / "fake").iterdir())


@pytest.mark.slow
def test_two_devices_run_base_and_head_in_parallel_and_say_so(upstream: Upstream,
                                                              make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit(BASE)
    git(upstream.path, "update-ref", "refs/pull/7/head", upstream.commit({"alpha": 1.0, "beta": 2.5}, "pr 7"))
    git(upstream.path, "reset", "-q", "--hard", c1)
    config = make_config(devices=(0, 1))
    outcome = run_compare(config, {"suite": "fake", "ref": "pull/7/head"}, label="two")
    assert outcome.plan.devices == (0, 1) and not outcome.plan.same_device
    run_dir = RunContext(config, "fake", outcome.plan.head_key, outcome.plan.head_sha).run_dir
    base_dir = RunContext(config, "fake", outcome.plan.base_key or "", outcome.plan.base_sha or "").run_dir
    assert [p.name for p in (run_dir / "default").iterdir()] == ["head-00-dev1"]
    assert [p.name for p in (base_dir / "default").iterdir()] == ["base-00-dev0"]
    text = report(config, outcome).text
    assert "Device: baseline=0, current=1" in text
    assert "Note: Baseline and current ran on different devices (0 vs 1)." in text


@pytest.mark.slow
def test_variants_run_one_after_another_and_group_the_report(upstream: Upstream, tmp_path: Path) -> None:
    from fake_upstream import config_data

    c1 = upstream.commit(BASE)
    upstream.branch("feat", c1)
    upstream.checkout("feat")
    upstream.commit({"alpha": 1.0, "beta": 2.2})
    upstream.checkout("main")
    data = config_data(tmp_path / "home", upstream.path)
    data["suites"]["fake"]["variants"] = ["tmr", "hbg"]  # type: ignore[index]
    data["suites"]["fake"]["command"] += ["--variant", "{variant}"]  # type: ignore[index]
    config = parse_config(data)
    outcome = run_compare(config, {"suite": "fake", "ref": "feat", "variants": ["tmr", "hbg"]}, label="var")
    assert list(outcome.comparisons) == ["tmr", "hbg"]
    hbg = {c.case: c for c in outcome.comparisons["hbg"]}
    assert hbg["alpha"].base_value == pytest.approx(3.0, rel=0.01)  # the hbg variant really ran
    text = report(config, outcome).text
    assert text.index("### tmr") < text.index("### hbg")
    assert "Overall: 0 of 4 examples improved, 2 regressed" in text


@pytest.mark.slow
def test_a_pin_change_is_a_caliber_break_and_the_cli_exits_4(upstream: Upstream, tmp_path: Path) -> None:
    from fake_upstream import config_data

    (upstream.path / "pto_isa.pin").write_text("cd4a3d3f7a1a27fcfe536f617e9bca3008929664\n")
    c1 = upstream.commit(BASE)
    upstream.branch("bump-pin", c1)
    upstream.checkout("bump-pin")
    (upstream.path / "pto_isa.pin").write_text("09a5bd266000000000000000000000000000000\n")
    upstream.commit({"alpha": 1.5, "beta": 2.0}, "bump the pin")
    upstream.checkout("main")
    data = config_data(tmp_path / "home", upstream.path)
    data["suites"]["fake"]["pins"] = ["pto_isa.pin"]  # type: ignore[index]
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["--plain", "compare", "--config", str(path), "--suite", "fake", "--ref", "bump-pin"]) == 4
    assert main(["--plain", "compare", "--config", str(path), "--suite", "fake", "--ref", "bump-pin",
                 "--allow-caliber-mismatch"]) == 0


def test_cli_refuses_a_bad_ref_with_exit_2(make_config: Callable[..., Config], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(make_config().model_dump(mode="json")))
    with pytest.raises(SystemExit) as exc:  # argparse itself refuses an option-like value
        main(["--plain", "compare", "--config", str(path), "--suite", "fake", "--ref", "--upload-pack=x"])
    assert exc.value.code == 2
    capsys.readouterr()
    for ref in ("--upload-pack=x", "a;rm -rf /", "main..dev", "@{-1}"):
        assert main(["--plain", "compare", "--config", str(path), "--suite", "fake", f"--ref={ref}"]) == 2
        assert "ref: " in capsys.readouterr().err


@pytest.mark.slow
def test_a_device_held_by_another_benchmark_is_waited_for(upstream: Upstream, make_config: Callable[..., Config],
                                                          tmp_path: Path) -> None:
    """A nightly (another process) holds device 0: the PR compare's runs wait for its lock."""
    import json
    import subprocess
    import sys
    import time

    c1 = upstream.commit(BASE)
    upstream.branch("feat", c1)
    upstream.checkout("feat")
    upstream.commit({"alpha": 1.0, "beta": 2.1})
    upstream.checkout("main")
    config = parse_config({**make_config().model_dump(mode="json"), "device_wait_s": 60})
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from zlops.host.locks import device_lock\n"
        f"with device_lock(Path({str(config.locks_dir)!r}), 'cpu', 0, wait_s=5, owner='nightly:fake:other'):\n"
        "    print('held', flush=True); time.sleep(9)\n")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    t0 = time.monotonic()
    outcome = run_compare(config, {"suite": "fake", "ref": "feat"}, label="wait")
    holder.wait(timeout=30)
    assert time.monotonic() - t0 >= 9.0
    run_dir = RunContext(config, "fake", outcome.plan.base_key or "", outcome.plan.base_sha or "").run_dir
    head_dir = RunContext(config, "fake", outcome.plan.head_key, outcome.plan.head_sha).run_dir
    waits = [json.loads(m.read_text())["lock_wait_s"] for d in (run_dir, head_dir)
             for m in (d / "default").glob("*/manifest.json")]
    assert len(waits) == 2 and max(waits) >= 1.5  # whichever side ran first waited for the nightly


@pytest.mark.slow
def test_a_compare_with_its_defaults_confirms_a_2x_change_by_adding_pairs(upstream: Upstream, tmp_path: Path) -> None:
    """Found by a user: with pairs 1 (the default) a 2x slower op stayed "? suspect" and the Overall line
    said 0 regressed. The compare now adds interleaved pairs while suspects remain (noise judge)."""
    from fake_upstream import config_data

    c1 = upstream.commit(BASE, "main")
    upstream.branch("feature/slow-alpha", c1)
    upstream.checkout("feature/slow-alpha")
    upstream.commit({"alpha": 2.0, "beta": 2.0}, "alpha twice the work")
    upstream.checkout("main")
    data = config_data(tmp_path / "home", upstream.path)
    data["judge"] = "noise"
    config = parse_config(data, source="test.yaml")
    outcome = run_compare(config, {"suite": "fake", "ref": "feature/slow-alpha"}, label="adaptive")
    rows = {c.case: c for c in outcome.comparisons["default"]}
    assert rows["alpha"].verdict is Verdict.SEVERE, rows["alpha"].judgement.note
    assert rows["beta"].verdict is Verdict.UNCHANGED
    figures = rows["alpha"].figures
    assert figures is not None and figures.reference_label.startswith("A/B base")
    meta = open_store(config).get_run(outcome.plan.head_key).meta
    pairs_run = meta["pairs_run"]
    assert config.noise.ab_min_pairs <= pairs_run <= config.noise.ab_pairs
    # the PR's head run keeps the judging setup it was judged with, as a nightly run does (zlops.judge.setup)
    from zlops.judge.setup import JudgingSetup, from_config

    assert JudgingSetup.from_dict(meta["judging"]) == from_config(config)
    assert len(figures.runs_base) == len(figures.runs_head) == pairs_run
    text = report(config, outcome).text
    assert "0 regressed" not in text and "+100.00%" in text


def _fake_load(monkeypatch: pytest.MonkeyPatch, loads: list[float], then: float) -> list[float]:
    """Every PR-compare run's telemetry says other processes used the next of ``loads`` (% of one CPU),
    then ``then``: the gate judges scripted figures, not how busy the CI host is. No quiet wait."""
    import zlops.forge.prcompare
    import zlops.judge.paired

    real = zlops.forge.prcompare.summarize_dir
    seen: list[float] = []

    def summarize(path: Path) -> dict[str, object]:
        load = loads[len(seen)] if len(seen) < len(loads) else then
        seen.append(load)
        return {**real(path), "foreign_cpu_mean_pct": load, "foreign_top": [["hog", 1, load]],
                "steal_max_pct": 0.0}

    monkeypatch.setattr(zlops.forge.prcompare, "summarize_dir", summarize)
    monkeypatch.setattr(zlops.judge.paired, "quiet_fn", lambda config, pool: lambda: None)
    return seen


@pytest.mark.slow  # real benchmark processes in git worktrees, as the other compares here (~4 s)
def test_a_busy_moment_never_ends_the_compare(upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """Issue 23: the demo branch's compare ended "measured nothing on HEAD" when the gate made its runs
    invalid. A busy run discards its pair, the host is waited on, and the pair is measured again."""
    c1 = upstream.commit(BASE)
    upstream.branch("feat", c1)
    upstream.checkout("feat")
    upstream.commit({"alpha": 1.5, "beta": 2.0})
    upstream.checkout("main")
    config = parse_config(config_data(tmp_path / "home", upstream.path, contention_gate=True))
    seen = _fake_load(monkeypatch, [180.0, 170.0], then=3.0)   # the first two runs beside a burst
    with caplog.at_level("WARNING", logger="zlops.forge.prcompare"):
        outcome = run_compare(config, {"suite": "fake", "ref": "feat"}, label="busy")
    rows = {c.case: c for c in outcome.comparisons["default"]}
    assert rows["alpha"].verdict is Verdict.REGRESSION and rows["beta"].verdict is Verdict.UNCHANGED
    assert len(seen) == 4   # two discarded pairs' busy runs, then one pair of base and head
    said = caplog.text
    assert "2 pair(s) discarded and measured again" in said and "other processes used 180% CPU" in said


@pytest.mark.slow  # 16 real benchmark processes in git worktrees (~5 s)
def test_on_a_paired_pool_the_gate_judges_the_pair_not_the_hosts_load(upstream: Upstream, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    c1 = upstream.commit(BASE)
    upstream.branch("feat", c1)
    upstream.checkout("feat")
    upstream.commit({"alpha": 1.5, "beta": 2.0})
    upstream.checkout("main")
    data = config_data(tmp_path / "home", upstream.path, contention_gate=True)
    data["pools"]["local"]["measure"] = "paired"  # type: ignore[index]
    config = parse_config(data)
    # a loaded host both runs of every pair saw alike (170%, 160%): valid; then a burst on one side only
    seen = _fake_load(monkeypatch, [170.0, 160.0, 20.0, 190.0], then=150.0)
    outcome = run_compare(config, {"suite": "fake", "ref": "feat", "pairs": 2}, label="paired")
    # a paired pool's compare is judged from its pairs: enough for the rank test to reach alpha (7)
    assert outcome.plan.request.pairs == 7
    rows = {c.case: c for c in outcome.comparisons["default"]}
    assert rows["alpha"].verdict is Verdict.SEVERE and rows["alpha"].judgement.note.startswith("confirmed by 7+7")
    assert rows["beta"].verdict is Verdict.UNCHANGED and rows["beta"].judgement.note.startswith("cleared by 7+7")
    assert len(seen) == 16   # pair 1 kept, pair 2 (20% vs 190%) discarded and measured again, 6 more kept
