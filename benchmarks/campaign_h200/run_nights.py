"""The campaign proof on a 2-GPU host: a real collectives upstream, three nightlies, one slowdown.

Builds a git repository holding ``suites/collectives/bench.py`` (torch.distributed over NCCL) with
three commits: ``first``, ``docs`` (nothing that runs changes) and ``tree: re-reduce on the
multi-rank path`` (the nccl stack under the tree variant does a second all_reduce when P > 1).
Then runs ``zlops nightly`` (the library call) once per commit on a ``devices: auto`` cuda pool
(the idle rule picks the devices), prints each night's verdicts and A/B cost and leaves everything
(the store, reports, figures, lanes, shard bundles, telemetry) under ``--home``; ``--out`` gets a tarball.

The judge is the production one by default (``judge: noise``): a change is a suspect, confirmed or
cleared by the campaign A/B (zlops.campaign.ab: the suspects' shards re-run interleaved base/head,
each run packed over the two devices like a night, every shard on the same gang for both sides),
with 4 pairs at alpha 0.05 and ``--ab-budget-s`` device-seconds per night. 900 covers the whole grid
with some room: a shard of 64 MiB took 7-9 s on 2 H200s (a P=2 one costs twice that in device-seconds),
so one run of all 8 shards is ~97 device-seconds and 4 pairs ~780 (a budget below that would stop
the A/B at 3 pairs, which cannot reach alpha: every suspect would stay one); packed, a run takes about
half its device-seconds in wall time, so a night (~60 s) and its A/B (~400 s) fit one 600 s device call.
``--resume`` keeps ``--home`` and the upstream, so each night can be its own device call:

    python3 -m pip install --no-index --no-deps --target /tmp/zdeps WHEELS/*.whl   # zlops' deps, offline
    PYTHONPATH=$PWD:/tmp/zdeps python3 benchmarks/campaign_h200/run_nights.py --home /tmp/zh/home --out $OUT \
        --sizes 67108864 --nights 1
    ... --nights 2 --resume; ... --nights 3 --resume      # the docs night, then the slowdown
    python benchmarks/campaign_h200/run_nights.py --backend cpu --sizes 1048576 ...   # gloo on 2 CPU "devices"
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GIT = {"GIT_AUTHOR_NAME": "zlops", "GIT_AUTHOR_EMAIL": "zlops@example.com", "GIT_COMMITTER_NAME": "zlops",
       "GIT_COMMITTER_EMAIL": "zlops@example.com", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SLOW_FROM = '''        if a.stack == "nccl":
            dist.all_reduce(out)
'''
SLOW_TO = '''        if a.stack == "nccl":
            dist.all_reduce(out)
            if a.variant == "tree" and a.p > 1:  # a "safety" reduction of a scratch copy on the multi-rank path
                dist.all_reduce(src.clone())
'''
#: the slowdowns a run can plant (``--slow``): (the text replaced, its replacement, the commit's subject)
SLOWDOWNS = {
    "tree-scratch": (SLOW_FROM, SLOW_TO, "tree: an extra scratch all_reduce on the multi-rank path"),
    # the campaign hold-out of 2026-12-06: the hand-written ring stack, ring variant, P > 1, re-reduces an eighth of
    # the buffer as a scratch copy (a different stack, variant and size than the recorded campaigns')
    "ring-eighth": ('''        else:
            _ring_allreduce(dist, out, rank, a.p)
''', '''        else:
            _ring_allreduce(dist, out, rank, a.p)
            if a.variant == "ring" and a.p > 1:  # a "checksum" pass: an eighth of the buffer reduced once more
                _ring_allreduce(dist, src[: src.numel() // 8].clone(), rank, a.p)
''', "ring: re-reduce an eighth of the buffer as a checksum on the multi-rank path"),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT).stdout.strip()


def make_upstream(path: Path, *, unchanged: int = 2, slowed: int = 1, slow: str = "tree-scratch") -> list[str]:
    """The upstream's commits, oldest first: ``first``, ``docs``, ``unchanged - 2`` more commits that change
    nothing that runs (a CHANGELOG line each), the slowdown, then ``slowed - 1`` docs commits on top of it."""
    if unchanged < 2 or slowed < 1:
        raise SystemExit(f"--unchanged must be >= 2 and --slowed >= 1 (got {unchanged}, {slowed})")
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(path)], check=True, env=GIT)
    bench = (ROOT / "suites" / "collectives" / "bench.py").read_text()
    (path / "bench.py").write_text(bench)
    (path / "README.md").write_text("collective benchmark\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first: nccl and ring all-reduce, P ranks")
    (path / "README.md").write_text("collective benchmark\n\nRun: python bench.py --help\n")
    git(path, "commit", "-qam", "docs: how to run")

    def changelog(line: str, message: str) -> None:
        log = path / "CHANGELOG.md"
        log.write_text((log.read_text() if log.is_file() else "") + line + "\n")
        git(path, "add", "CHANGELOG.md")
        git(path, "commit", "-qm", message)

    for i in range(unchanged - 2):
        changelog(f"- note {i + 1}", f"changelog: note {i + 1} (nothing that runs changes)")
    slow_from, slow_to, subject = SLOWDOWNS[slow]
    assert slow_from in bench
    (path / "bench.py").write_text(bench.replace(slow_from, slow_to))
    git(path, "commit", "-qam", subject)
    for i in range(slowed - 1):
        changelog(f"- after the slowdown {i + 1}", f"changelog: after the slowdown {i + 1}")
    return git(path, "rev-list", "--reverse", "HEAD").split()


def config(home: Path, upstream: Path, sizes: list[int], backend: str = "cuda", *, judge: str = "noise",
           ab_budget_s: float = 900.0, defaults: bool = False, gate: bool = False) -> dict[str, object]:
    """The campaign's zlops config. ``defaults``: the production defaults, as docs/campaigns.md tells a user
    to write the suite: no ``thresholds``, ``noise`` or ``contention`` section and no pool key beyond
    backend and devices (so the contention gate is on, the A/B has its default pairs, alpha and budget
    floor); ``judge`` and ``ab_budget_s`` are then ignored. On the cpu backend the contention gate stays off
    unless ``gate``: on a shared 2-core host the agents' own shells use ~30% of a CPU while idle, above the
    gate's 25%, so every shard would wait 60 s and then be invalid (measured: docs/evidence/gloo_defaults.md);
    the foreign CPU of every shard is still measured and recorded."""
    gloo = ["--backend", "gloo", "--warmup", "1", "--timed", "5", "--iters", "3"] if backend == "cpu" else \
        ["--warmup", "3", "--timed", "10", "--iters", "20"]
    data: dict[str, object] = {
        "home": str(home), "locks_dir": str(home / "locks"),
        # cpu: the CI variant runs on a shared development host, where other users' load would make every
        # shard invalid; contention is then measured and reported but gates nothing
        "pools": {"h200": {"backend": backend, "devices": "auto"} if backend != "cpu" else
                  {"backend": backend, "devices": [0, 1], "contention_gate": False}},
        "suites": {"collectives": {
            "repo": str(upstream), "branch": "main", "install": [], "system_site_packages": True,
            # the interpreter that has torch, by absolute path: the suite's venv (on PATH) is made from a
            # base Python that may not see the packages of the environment torch lives in
            "command": [sys.executable, "bench.py", "--case", "{case}", "--size", "{size}", "--p", "{p}",
                        "--devices", "{devices}", "--variant", "{variant}", "--stack", "{stack}", *gloo,
                        "--out", "{results}"],
            "format": "collectives", "pools": ["h200"], "timeout_s": 120, "env": dict(SAFE_ENV),
            "campaign": {"grid": {"cases": ["allreduce"], "sizes": sizes, "p": [1, 2],
                                  "variants": ["ring", "tree"], "stacks": ["nccl", "ring"]},
                         "ratios": [["nccl", "ring"]]},
        }},
        "thresholds": {"potential_pct": 3, "regression_pct": 8},
        "judge": judge, "device_wait_s": 120,
        # 4 interleaved pairs reach alpha 0.05 (exact Mann-Whitney 2/C(8,4) = 0.029); the budget in
        # device-seconds (a P=2 shard costs twice its seconds), spent on the most severe suspects first
        "noise": {"ab_pairs": 4, "ab_min_pairs": 4, "alpha": 0.05, "ab_budget_s": ab_budget_s},
    }
    if defaults:
        data["pools"] = {"h200": {"backend": backend, "devices": "auto"} if backend != "cpu" else
                         {"backend": backend, "devices": [0, 1], **({} if gate else {"contention_gate": False})}}
        for key in ("thresholds", "judge", "noise"):
            data.pop(key)
    return data


def _row(c) -> dict[str, object]:  # type: ignore[no-untyped-def]  # a zlops.model.Comparison
    """One verdict row of nights.json: what the report shows (``base``/``head``: the verdict's own figures,
    the A/B's medians when an A/B decided it), the night's baseline and tonight's value, the line the
    judge applied, its reason and the A/B's per-run values (what a replay re-decides the verdict from)."""
    f = c.figures
    return {"case": c.case, "metric": c.metric, "verdict": c.verdict.value, "base": c.base_value,
            "head": c.head_value, "change_pct": f.change_pct if f else None,
            "baseline": c.base.median if c.base is not None else None,
            "tonight": c.head.median if c.head is not None else None, "lower_is_better": c.lower_is_better,
            "threshold_pct": c.judgement.threshold_pct, "note": c.judgement.note,
            "reference_label": f.reference_label if f else None,
            "ab_base": list(f.runs_base) if f else [], "ab_head": list(f.runs_head) if f else [],
            "follows": list(c.follows)}


def foreign_cpu(home: Path, night: int) -> dict[str, list[float]]:
    """Other processes' CPU (% of one CPU, mean over each run: the shard's ``contention.json``) of night
    ``night``: ``night`` per gang shard run of the night, ``ab`` per gang shard run of its A/B."""
    out: dict[str, list[float]] = {"night": [], "ab": []}
    for run_dir in home.glob(f"artifacts/*/nightly_*_n{night}-*"):
        for f in sorted(run_dir.rglob("contention.json")):
            try:
                value = json.loads(f.read_text()).get("foreign_cpu_mean_pct")
            except (OSError, ValueError):
                continue
            if isinstance(value, (int, float)):
                out["ab" if "/ab/" in str(f.relative_to(run_dir)) or str(f.relative_to(run_dir)).startswith("ab/")
                    else "night"].append(round(float(value), 1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", default=str(4 << 20) + "," + str(64 << 20))
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"), help="cpu: the gloo backend on 2 CPU "
                    "'devices' (the CI variant)")
    ap.add_argument("--nights", default="", help="which commits to run a night of, in order (1 first, "
                    "2 docs, ..., the slowdown after --unchanged); e.g. 1,3 on a short device budget (default: all)")
    ap.add_argument("--unchanged", type=int, default=2, help="nights of unchanged code before the slowdown "
                    "(first, docs, then changelog-only commits)")
    ap.add_argument("--slowed", type=int, default=1, help="nights of the slowed code (the slowdown, then "
                    "changelog-only commits on top of it)")
    ap.add_argument("--defaults", action="store_true", help="the production defaults: no judge, threshold, "
                    "noise or contention settings in the config (--judge and --ab-budget-s are ignored)")
    ap.add_argument("--judge", default="noise", choices=("noise", "simple"),
                    help="noise (default): suspects confirmed or cleared by the campaign A/B; simple: the plain rule")
    ap.add_argument("--ab-budget-s", type=float, default=900.0, help="A/B device-seconds per night (noise judge)")
    ap.add_argument("--contention-gate", action="store_true", help="cpu with --defaults: keep the contention "
                    "gate on (default: measured and recorded, never gating; see config())")
    ap.add_argument("--slow", default="tree-scratch", choices=sorted(SLOWDOWNS),
                    help="the slowdown the upstream plants (tree-scratch: the recorded campaigns'; ring-eighth: the "
                         "hand-written ring stack re-reduces an eighth of the buffer at P > 1)")
    ap.add_argument("--resume", action="store_true", help="keep --home and the upstream of an earlier call "
                    "(run one night per device call)")
    a = ap.parse_args()
    os.environ.update(SAFE_ENV)
    from zlops.config.settings import parse_config
    from zlops.steps.nightly import run_nightly

    upstream = a.home.parent / "collectives-upstream"
    if a.resume and (a.home / "zlops.json").is_file():
        shas = git(upstream, "rev-list", "--reverse", "HEAD").split()
        cfg_data = json.loads((a.home / "zlops.json").read_text())
    else:
        shutil.rmtree(a.home, ignore_errors=True)
        shas = make_upstream(upstream, unchanged=a.unchanged, slowed=a.slowed, slow=a.slow)
        cfg_data = config(a.home, upstream, [int(s) for s in a.sizes.split(",")], a.backend, judge=a.judge,
                          ab_budget_s=a.ab_budget_s, defaults=a.defaults, gate=a.contention_gate)
        a.home.mkdir(parents=True)
        (a.home / "zlops.json").write_text(json.dumps(cfg_data, indent=2))
    cfg = parse_config(cfg_data, source="h200x2")
    from zlops.steps.context import open_store

    nights_file = a.home / "nights.json"
    summary = json.loads(nights_file.read_text()) if a.resume and nights_file.is_file() else []
    wanted = [int(x) for x in a.nights.split(",")] if a.nights else list(range(1, len(shas) + 1))
    for i, sha in ((i, shas[i - 1]) for i in wanted):
        t0, load0 = time.time(), os.getloadavg()
        res = run_nightly(cfg, "collectives", sha=sha, run_label=f"n{i}")
        rows = [_row(c) for c in res.summary.comparisons]
        run = open_store(cfg).get_run(res.run_key)
        ab = (run.meta.get("ab") or {}) if run is not None else {}
        alerts = [{"case": al.case, "metric": al.metric, "state": al.state.value, "worst_worse_pct": al.worst_worse_pct}
                  for al in open_store(cfg).alerts(suite="collectives", limit=None)]
        summary.append({"night": i, "sha": sha, "subject": git(upstream, "log", "-1", "--format=%s", sha),
                        "seconds": round(time.time() - t0, 1), "rows": rows, "ab": ab,
                        "load_before": [round(x, 2) for x in load0],
                        "load_after": [round(x, 2) for x in os.getloadavg()], "alerts": alerts,
                        "foreign_cpu_pct": foreign_cpu(a.home, i)})
        print(f"night {i} {sha[:10]} in {time.time() - t0:.0f} s: {res.summary.overall_line()}", flush=True)
        for pool, cost in ab.items():   # device-seconds, and the A/B's wall seconds
            print(f"    A/B {pool}: {json.dumps(cost)}", flush=True)
        for r in rows:
            if r["verdict"] not in ("unchanged", "new"):
                change = "" if r["change_pct"] is None else f"{r['change_pct']:+.2f}%"
                print("   ", r["verdict"], r["case"], r["metric"], change, flush=True)
        nights_file.write_text(json.dumps(summary, indent=2))
        a.out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(a.out / f"campaign_h200x2_n{i}.tar.gz", "w:gz") as tar:
            tar.add(a.home, arcname="home", filter=lambda ti: None if "/worktrees" in ti.name or "/envs" in ti.name
                    or "/mirrors" in ti.name else ti)
            tar.add(upstream, arcname=upstream.name)   # so a later call on a fresh machine can resume (RESTORE=)
    return 0


if __name__ == "__main__":
    sys.exit(main())
