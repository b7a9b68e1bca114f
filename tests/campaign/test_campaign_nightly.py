"""Campaign nightlies end to end: real git, real venvs, real processes holding gang leases, SQLite.

The fake harness (tests/campaign_upstream.py) reports exactly its commit's timings, so verdicts are
deterministic: a commit that slows one variant at P=2 must flag that variant's execute time,
bandwidth, efficiency and stack ratio, and nothing else.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from campaign_upstream import CampaignUpstream, campaign_config, timings

from zlops.config.settings import parse_config
from zlops.model import ShardStatus, Verdict
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow

GRID = dict(cases=["allreduce"], ps=[1, 2], variants=["ring", "tree"], stacks=["nccl", "ring"])


def _flagged(result) -> dict[tuple[str, str], Verdict]:  # type: ignore[no-untyped-def]
    return {(c.case, c.metric): c.verdict for c in result.summary.comparisons if c.verdict is not Verdict.UNCHANGED}


def test_slowed_variant_flags_its_time_bandwidth_efficiency_and_ratio_only(tmp_path: Path) -> None:
    up = CampaignUpstream(tmp_path / "up")
    base = timings(**GRID)
    c1 = up.commit(base, "first")
    c2 = up.commit(base, "docs")
    slow = {**base, "allreduce/p2/tree/nccl": base["allreduce/p2/tree/nccl"] * 1.5}
    c3 = up.commit(slow, "tree: a second all_reduce on the multi-rank path")
    log = tmp_path / "holds.log"
    config = parse_config(campaign_config(tmp_path / "home", up.path, devices=[0, 1], locks_dir=tmp_path / "locks",
                                          env={"CAMPAIGN_HOLD_LOG": str(log)}))
    n1 = run_nightly(config, "coll", sha=c1, run_label="n1")
    assert {c.verdict for c in n1.summary.comparisons} == {Verdict.NEW}
    series = {(c.case, c.metric) for c in n1.summary.comparisons}
    # measured: 2 P x 2 variants x 2 stacks, 5 metrics each; derived: efficiency at P=2 per (variant, stack), and
    # the nccl/ring ratio per (P, variant)
    assert len([s for s in series if "/p" in s[0] and s[1] == "execute_s"]) == 8
    assert {s for s in series if s[1].startswith("efficiency")} == {
        (f"allreduce/4KiB/{v}/{s}", "efficiency_p2") for v in ("ring", "tree") for s in ("nccl", "ring")}
    assert {s for s in series if s[1].startswith("ratio")} == {
        (f"allreduce/4KiB/p{p}/{v}", "ratio_nccl_over_ring") for p in (1, 2) for v in ("ring", "tree")}
    eff = next(c for c in n1.summary.comparisons if c.metric == "efficiency_p2")
    assert eff.head_value == pytest.approx(0.8)
    n2 = run_nightly(config, "coll", sha=c2, run_label="n2")
    assert _flagged(n2) == {}
    n3 = run_nightly(config, "coll", sha=c3, run_label="n3")
    assert _flagged(n3) == {
        ("allreduce/4KiB/p2/tree/nccl", "execute_s"): Verdict.REGRESSION,
        ("allreduce/4KiB/p2/tree/nccl", "wall_s"): Verdict.REGRESSION,
        ("allreduce/4KiB/p2/tree/nccl", "bw_execute"): Verdict.REGRESSION,
        ("allreduce/4KiB/tree/nccl", "efficiency_p2"): Verdict.REGRESSION,
        ("allreduce/4KiB/p2/tree", "ratio_nccl_over_ring"): Verdict.REGRESSION,
    }
    eff = next(c for c in n3.summary.comparisons if c.metric == "efficiency_p2" and "tree/nccl" in c.case)
    assert eff.figures is not None and eff.figures.change_pct == pytest.approx((1 / 1.5 - 1) * 100)
    md = n3.report.markdown.read_text()
    assert "## Campaign" in md and "efficiency at P=2 fell 33.3%" in md and "scaling regression" in md
    assert "gang LPT" in md
    plots = {p.name for p in (n3.report.markdown.parent / "plots").glob("run__*.png")}
    assert {"run__scaling.png", "run__efficiency.png", "run__stack_ratio.png", "run__phases.png"} <= plots
    slack = json.dumps(json.loads(n3.report.slack.path.read_text()))
    assert "nccl/ring time ratio at P=2 rose 50.0%" in slack  # scaling verdicts worded as such in Slack too
    # every P=2 shard held both devices; P=1 shards one; lanes: both devices ran something
    store = open_store(config)
    lanes = store.shards(n3.run_key)
    assert sorted(o.device for o in lanes) == [0, 1] and all(o.status is ShardStatus.OK for o in lanes)
    holds = [line.split() for line in log.read_text().splitlines()]
    assert len(holds) == 3 * 8
    for d in ("0", "1"):
        mine = sorted((float(a), float(b)) for a, b, devs, *_ in holds if d in devs.split(","))
        assert all(x[1] <= y[0] for x, y in zip(mine, mine[1:])), f"device {d} held twice at once"


def test_two_campaigns_and_a_single_device_nightly_at_once_never_overlap_a_device(tmp_path: Path) -> None:
    """Two campaign suites (gangs over devices 0-1 and 1-2) and a one-device nightly of device 1, on
    one host, at the same time, sharing the host's leases: no device is ever held twice."""
    from fake_upstream import Upstream, config_data

    log = tmp_path / "holds.log"
    locks = tmp_path / "locks"
    configs = []
    for i, devices in enumerate(([0, 1], [1, 2])):
        up = CampaignUpstream(tmp_path / f"up{i}")
        sha = up.commit(timings(**GRID))
        configs.append((campaign_config(
            tmp_path / f"home{i}", up.path, devices=devices, locks_dir=locks,
            env={"CAMPAIGN_HOLD_LOG": str(log), "CAMPAIGN_SLEEP_S": "0.15", "CAMPAIGN_TAG": f"c{i}"}), "coll", sha))
    plain = Upstream(tmp_path / "plain")
    sha = plain.commit({"a": 1.0})
    data = config_data(tmp_path / "home9", plain.path, devices=(1,))
    data["locks_dir"] = str(locks)
    suite = data["suites"]["fake"]  # type: ignore[index]
    suite["command"] = ["python", "-c", "import os,sys,time;t0=time.time();time.sleep(0.5);"
                        "open(os.environ['HOLD'],'a').write(f'{{t0}} {{time.time()}} 1 {{os.getpid()}} single\\n');"
                        "exec(open('bench.py').read())", "--out", "{results}", "--device", "{device}", "--rounds", "3"]
    suite["env"] = {"HOLD": str(log)}
    configs.append((data, "fake", sha))
    procs = []
    for i, (cfg, suite_name, commit) in enumerate(configs):  # three processes, as three schedulers would be
        path = tmp_path / f"zlops{i}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        procs.append(subprocess.Popen([str(Path(sys.executable).with_name("zlops")), "nightly", "--config", str(path),
                                       "--suite", suite_name, "--sha", commit, "--run-id", "n1"],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out[-3000:]
    holds = [line.split() for line in log.read_text().splitlines()]
    assert len(holds) == 8 + 8 + 1
    for d in ("0", "1", "2"):
        mine = sorted((float(a), float(b), tag) for a, b, devs, _pid, tag in holds if d in devs.split(","))
        for x, y in zip(mine, mine[1:]):
            assert x[1] <= y[0], f"device {d} held by {x[2]} and {y[2]} at once"


def test_a_rescore_reads_each_lane_s_gang_shards_with_today_s_adapter(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A campaign run rescored: every gang shard's own results file is read again (not the lane file the
    night's adapter wrote), the derived series follow, and the run's series points are the new ones."""
    from dataclasses import replace

    from zlops.run import ingest as ingest_mod
    from zlops.steps.rescore import rescore

    up = CampaignUpstream(tmp_path / "up")
    c1 = up.commit(timings(**GRID), "first")
    config = parse_config(campaign_config(tmp_path / "home", up.path, devices=[0, 1], locks_dir=tmp_path / "locks"))
    n1 = run_nightly(config, "coll", sha=c1, run_label="n1")
    store = open_store(config)
    head = {(c.case, c.metric): c.head_value for c in n1.summary.comparisons}
    same = rescore(config, n1.run_key)
    assert same.revision is None and same.failed == () and same.reparsed == 2
    assert {(c.case, c.metric): c.head_value for c in store.comparisons(n1.run_key)} == head
    parse = ingest_mod.parse_results

    def newer(fmt: str, path: Path, **limits: object) -> list:  # type: ignore[type-arg]
        """A newer collectives adapter that reads P=2 execute times twice as long."""
        out = parse(fmt, path, **limits)  # type: ignore[arg-type]
        return [replace(r, samples=tuple(2 * v for v in r.samples))
                if fmt == "collectives" and r.metric == "execute_s" and r.params.get("p") == 2 else r for r in out]

    monkeypatch.setattr(ingest_mod, "parse_results", newer)
    result = rescore(config, n1.run_key)
    assert result.failed == () and result.revision == 1
    after = {(c.case, c.metric): c.head_value for c in result.summary.comparisons}
    for (case, metric), value in head.items():
        if metric == "execute_s" and "/p2/" in case:
            assert after[(case, metric)] == pytest.approx(2 * value)
        elif metric == "efficiency_p2":  # E(2) = t(1) / (2 t(2)): halved
            assert after[(case, metric)] == pytest.approx(value / 2) == pytest.approx(0.4)
        elif metric == "ratio_nccl_over_ring" or metric == "execute_s":
            assert after[(case, metric)] == pytest.approx(value)
    points = store.runs_frame("coll", store.compare_window(
        "coll", ancestors=[c1], history_window=1).runs)
    eff = points[points["metric"] == "efficiency_p2"]
    assert len(eff) == 4 and eff["median"].tolist() == pytest.approx([0.4] * 4)
