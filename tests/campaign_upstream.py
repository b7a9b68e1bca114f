"""A fake collectives upstream for campaign tests: no torch, exact timings, the seed's results.json.

Its bench.py takes the campaign placeholders, sleeps a little (so gang holds overlap in time when
they could), appends ``start end devices pid`` to ``$CAMPAIGN_HOLD_LOG`` (the tests check that no
two holds of one device overlap) and writes a collectives ``results.json`` whose ``execute_s`` is
``timings.json[case/p<P>/<variant>/<stack>]``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

from fake_upstream import GIT_ENV, git

BENCH = r'''
import argparse, json, os, sys, time
ap = argparse.ArgumentParser()
for k in ("--case", "--size", "--p", "--devices", "--variant", "--stack", "--out"):
    ap.add_argument(k)
a = ap.parse_args()
devices = [int(d) for d in a.devices.split(",")]
assert len(devices) == int(a.p), (devices, a.p)
log = os.environ.get("CAMPAIGN_HOLD_LOG")
t0 = time.time()
time.sleep(float(os.environ.get("CAMPAIGN_SLEEP_S", "0.05")))
t1 = time.time()
if log:
    with open(log, "a") as fh:
        fh.write(f"{t0} {t1} {a.devices} {os.getpid()} {os.environ.get('CAMPAIGN_TAG', '')}\n")
t = json.load(open("timings.json"))
key = f"{a.case}/p{a.p}/{a.variant}/{a.stack}"
if key not in t:
    print("no timing for", key, file=sys.stderr); sys.exit(2)
ex = t[key]
size = int(a.size or 4096)
run = {"case_id": f"{a.case}_{a.variant}_p{a.p}", "stack": a.stack, "correctness": "pass",
       "execute_s_mean": ex, "execute_s_stdev": 0.0, "execute_s_median": ex, "setup_s": 0.5,
       "bw_execute_mb_s": size / ex / 1e6, "wall_s_mean": ex * 1.1, "n_warmup": 1, "n_timed": 5,
       "phase_means": {}, "artifact_bundle": None}
case = {"variant": a.variant, "p": int(a.p), "count": size // 4, "dtype": "fp32", "n_bytes": size}
json.dump({"campaign": "t", "timestamp": "2026-11-30T00:00:00+00:00", "case": case, "runs": [run]}, open(a.out, "w"))
'''


class CampaignUpstream:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "--initial-branch=main", str(path)], check=True, env=GIT_ENV)
        (path / "bench.py").write_text(BENCH)

    def commit(self, timings: Mapping[str, float], message: str = "change") -> str:
        (self.path / "timings.json").write_text(json.dumps(dict(timings)))
        (self.path / "CHANGES").open("a").write(message + "\n")
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")


def timings(cases: list[str], ps: list[int], variants: list[str], stacks: list[str], *,
            t1: float = 1e-3, eff: float = 0.8) -> dict[str, float]:
    """execute_s per series: t(P) = t1 / (P * eff) above P=1, so every efficiency is ``eff``."""
    out = {}
    for c in cases:
        for p in ps:
            for v in variants:
                for s in stacks:
                    base = t1 * (1.5 if s == "ring" else 1.0)
                    out[f"{c}/p{p}/{v}/{s}"] = base if p == 1 else base / (p * eff)
    return out


def campaign_config(home: Path, upstream: Path, *, devices: list[int], locks_dir: Path,
                    grid: dict[str, object] | None = None, env: dict[str, str] | None = None,
                    suite: str = "coll", sizes: bool = True) -> dict[str, object]:
    grid = grid or {"cases": ["allreduce"], "p": [1, 2], "variants": ["ring", "tree"], "stacks": ["nccl", "ring"]}
    if sizes:
        grid = {**grid, "sizes": [4096]}
    return {
        "home": str(home), "locks_dir": str(locks_dir),
        # scripted timings, not a host's load, are what these tests judge (the gate's own tests: test_contention)
        "contention": {"gate": False},
        "pools": {"cpu2": {"backend": "cpu", "devices": devices}},
        "suites": {suite: {
            "repo": str(upstream), "branch": "main", "install": [],
            "command": ["python", "bench.py", "--case", "{case}", "--size", "{size}", "--p", "{p}", "--devices",
                        "{devices}", "--variant", "{variant}", "--stack", "{stack}", "--out", "{results}"],
            "format": "collectives", "pools": ["cpu2"], "timeout_s": 60, "env": env or {},
            "campaign": {"grid": grid, "ratios": [["nccl", "ring"]]},
        }},
        "thresholds": {"potential_pct": 2, "regression_pct": 5},
        "judge": "simple", "device_wait_s": 30,
    }
