"""End-to-end nightly of a big trivial suite: ``zlops nightly`` over N nights, wall time per night and per step.

    python benchmarks/e2e_nightly.py --cases 10000 --nights 5
    python benchmarks/e2e_nightly.py --cases 10000 --nights 6 --regress 20 --regress-from 4

A new user's first try at scale (issue 13): a real git upstream made in a temporary folder, whose
``bench.py`` writes zlops-json with ``--cases`` cases of ``--samples`` samples each (0.5% noise,
FlagGems-like names ``<op>/<dtype>/(<shape>)``, 200 operators) in about a second; a config with one
CPU pool of one device, SQLite, the noise judge (``noise.ab_pairs: 0``: a quiet night has nothing to
confirm, and an A/B here would re-run the whole trivial suite). Each night the upstream gets a new
commit (a one-line change), then the real CLI runs in a fresh process, as cron would run it:
``zlops -v nightly --config ... --suite big``. Its log's ``done <step> in <s>`` lines give the
per-step times; the rest of the wall time is the process start (imports), promotion and what no step
covers. ``--regress K --regress-from N``: from night N on, K cases are 10% slower (what the judge
then says is printed per night).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BENCH = r'''
import argparse, json, random
ap = argparse.ArgumentParser()
ap.add_argument("--out"); ap.add_argument("--cases", type=int); ap.add_argument("--samples", type=int)
a = ap.parse_args()
slow = json.load(open("slow.json"))  # case index -> factor (a regression the benchmark injects)
dtypes = ("float16", "bfloat16", "float32")
rng = random.Random()
cases = []
for i in range(a.cases):
    op, rest = divmod(i, a.cases // 200 or 1)
    name = f"op{op % 200:03d}/{dtypes[rest % 3]}/({1024 * (1 + rest // 3)}x{64 + op % 13})"
    level = (1.0 + (i * 7919) % 1000 / 100.0) * slow.get(str(i), 1.0)
    cases.append({"name": name, "metric": "time", "unit": "ms",
                  "samples": [level * (1.0 + rng.gauss(0.0, 0.005)) for _ in range(a.samples)]})
json.dump({"schema_version": 1, "harness": {"name": "e2e-trivial", "version": "1"}, "cases": cases}, open(a.out, "w"))
'''

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.com", "PATH": "/usr/bin:/bin"}
STEP = re.compile(r"done (\w+) \[.*?\] in ([0-9.]+) s")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV)


def make_upstream(path: Path) -> None:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(path)], check=True, env=GIT_ENV)
    (path / "bench.py").write_text(BENCH)
    (path / "slow.json").write_text("{}")
    (path / "night.txt").write_text("0\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "a trivial benchmark")


def write_config(home: Path, upstream: Path, cases: int, samples: int) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "zlops.yaml"
    config.write_text(json.dumps({
        "home": str(home), "database": f"sqlite:///{home}/zlops.db",
        "pools": {"local": {"backend": "cpu", "devices": [0]}},
        "suites": {"big": {
            "repo": str(upstream), "branch": "main", "install": [],
            "command": ["python", "bench.py", "--out", "{results}", "--cases", str(cases),
                        "--samples", str(samples)],
            "format": "zlops-json", "pools": ["local"], "rounds": samples, "timeout_s": 600}},
        "judge": "noise", "noise": {"ab_pairs": 0},
    }, indent=1))  # JSON is YAML
    return config


def night(config: Path, upstream: Path, n: int, slow: dict[str, float]) -> dict[str, object]:
    (upstream / "night.txt").write_text(f"{n}\n")
    (upstream / "slow.json").write_text(json.dumps(slow))
    git(upstream, "commit", "-q", "-am", f"night {n}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cli = Path(sys.executable).with_name("zlops")  # the console script beside this interpreter
    t0 = time.perf_counter()
    done = subprocess.run([str(cli) if cli.exists() else "zlops", "-v", "nightly", "--config", str(config),
                           "--suite", "big"], capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 3, 5):
        raise SystemExit(f"night {n}: zlops exited {done.returncode}\n{done.stderr[-4000:]}")
    steps: dict[str, float] = {}
    for step, seconds in STEP.findall(done.stderr):
        steps[step] = steps.get(step, 0.0) + float(seconds)
    overall = next((line.split("Overall:", 1)[1].strip() for line in done.stderr.splitlines() if "Overall:" in line),
                   "")
    return {"night": n, "wall_s": wall, "steps": steps, "overall": overall, "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--nights", type=int, default=5)
    ap.add_argument("--regress", type=int, default=0, help="this many cases 10%% slower ...")
    ap.add_argument("--regress-from", type=int, default=4, help="... from this night on")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary folder, removed)")
    ap.add_argument("--json", type=Path, help="append each night as a JSON line to this file")
    ns = ap.parse_args(argv)
    work = ns.keep or Path(tempfile.mkdtemp(prefix="zlops-e2e-"))
    try:
        upstream = work / "upstream"
        make_upstream(upstream)
        config = write_config(work / "home", upstream, ns.cases, ns.samples)
        order = ["fetch", "worktree", "env", "run", "compare", "report"]
        print(f"{ns.cases} cases x {ns.samples} samples, SQLite, noise judge; load = 1-min load average at the end")
        print("| night | wall s | " + " | ".join(f"{s} s" for s in order) + " | other s | load | overall |")
        print("|---:|---:|" + "---:|" * len(order) + "---:|---:|---|")
        for n in range(1, ns.nights + 1):
            slow = {str(i): 1.10 for i in range(0, ns.cases, max(1, ns.cases // ns.regress))[:ns.regress]} \
                if ns.regress and n >= ns.regress_from else {}
            row = night(config, upstream, n, slow)
            steps = row["steps"]
            assert isinstance(steps, dict)
            other = float(row["wall_s"]) - sum(steps.get(s, 0.0) for s in order)  # type: ignore[arg-type]
            print(f"| {n} | {row['wall_s']:.1f} | " + " | ".join(f"{steps.get(s, 0.0):.1f}" for s in order)
                  + f" | {other:.1f} | {row['load']:.1f} | {row['overall']} |", flush=True)
            if ns.json:
                with ns.json.open("a") as fh:
                    fh.write(json.dumps({"cases": ns.cases, **row}) + "\n")
    finally:
        if ns.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
