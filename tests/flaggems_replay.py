"""An upstream that replays real FlagGems processes recorded on an H200 (tests/data/flaggems_h200/).

Three commits mirror the recorded ones (PROVENANCE.md there): A = the trimmed FlagGems as fetched,
B = A plus a README line (docs only), C = B plus ``abs`` launching its kernel twice, with the real
``src/flag_gems/ops/abs.py`` diff. Each commit's message carries ``Replay-Set: A|B|C``, so the
diffs stay exactly the recorded ones while the harness knows whose processes to serve.

``replay_flaggems.py`` stands in for ``python -m pytest benchmark/ ...`` and behaves like FlagGems'
``benchmark/conftest.py`` where zlops can see it: it takes the same options, reads ``-m`` (the op
marks, ``""`` = every op) and writes ``result_<argv>.log`` into its working directory (the name
FlagGems derives from its argv). What it writes is the next recorded process log of its commit,
with only the selected ops' records:

- a night (any run outside an ``ab/`` artifact folder): the commit's ``cold``/``full`` processes in
  recording order (``seq`` in processes.tsv), cycling when used up;
- an A/B side (zlops runs those in ``<run>/ab/<pool>/<NN><side>/``): the commit's processes that ran
  exactly this selection (the ``abs``-only ones for ``-m abs``), then its full processes newest
  first, cycling; a night's processes therefore do not depend on how many A/B runs a judge asks for.

With ``$FLAGGEMS_REPLAY_TIME_SCALE`` (e.g. ``0.05``) a run takes that share of the recorded process's
wall time (a full process filtered to fewer ops: minus the recorded cost of the dropped ops), so a
judge's device-time budget sees the H200's proportions: ~26 s for the five ops, ~17 s for one, most
of it start-up.

The position of each sequence lives in ``$FLAGGEMS_REPLAY_STATE`` (a folder; ``served.log`` there
lists what each run got), so the order is deterministic. A replayed process is real H200 data but
not a new measurement: once a sequence cycles (an A/B of 8 pairs does), a process is served twice.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "flaggems_h200"

GIT_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}

REPLAY = r'''
"""Replays recorded FlagGems processes of this commit (see tests/flaggems_replay.py in zlops)."""
import json, os, re, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
expr = args[args.index("-m") + 1] if "-m" in args else ""
ops = [t.strip() for t in expr.split(" or ") if t.strip()]
msg = subprocess.run(["git", "-C", here, "log", "-1", "--format=%B"], capture_output=True, text=True,
                     check=True).stdout
label = re.search(r"^Replay-Set: (\w+)$", msg, re.M).group(1)
with open(os.path.join(here, "logs", "processes.tsv")) as fh:
    rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()][1:]
full = [r[8] for r in rows if r[3] == label and r[2] in ("cold", "full")]
targeted = [r[8] for r in rows if r[3] == label and r[2] not in ("cold", "full") and r[2] == " or ".join(ops)]
wall = {r[8]: float(r[5]) for r in rows}
state = os.environ["FLAGGEMS_REPLAY_STATE"]
os.makedirs(state, exist_ok=True)


def take(seq):
    path = os.path.join(state, label + "." + seq)
    n = int(open(path).read()) if os.path.exists(path) else 0
    with open(path, "w") as fh:
        fh.write(str(n + 1))
    return n


# zlops runs an A/B side in <run>/ab/<pool>/<NN><side>/ (the cwd, results_glob): A/B runs draw from
# their own sequence (targeted processes first, then the full ones newest first), so the processes a
# night gets do not depend on how many A/B runs the judge asked for
ab = "/ab/" in os.getcwd().replace(os.sep, "/") + "/"
if ab:
    n = take("ab:" + " or ".join(ops))
    order = targeted + full[::-1]
    log = order[n % len(order)]
else:
    log = full[take("night") % len(full)]
keep, in_log, kept = [], 0, 0
with open(os.path.join(here, "logs", log)) as fh:
    for line in fh.read().splitlines():
        if line.startswith("[INFO] {"):
            in_log += 1
            if ops and json.loads(line[len("[INFO] "):])["op_name"] not in ops:
                continue
            kept += 1
        keep.append(line)
scale = float(os.environ.get("FLAGGEMS_REPLAY_TIME_SCALE") or 0)
if scale:
    # take the recorded process's wall time, scaled; a full process filtered to k of its n ops costs
    # what the recording says one op costs beyond a process's start-up (fit on the -m abs processes)
    seconds = wall[log]
    if kept < in_log:
        one = [float(r[5]) for r in rows if r[2] not in ("cold", "full")]
        n_full = 5
        per_op = (wall[log] - sum(one) / len(one)) / (n_full - 1)
        seconds = wall[log] - per_op * (in_log - kept)
    time.sleep(scale * seconds)
# benchmark/conftest.py: the record log is named from the invocation args, in the working directory
name = "result_{}.log".format("_".join(a.replace(".py", "").replace("=", "_").replace("/", "_") for a in args))
with open(name.replace("_-", "-"), "w", encoding="utf-8") as fh:
    fh.write("\n".join(keep) + "\n")
with open(os.path.join(state, "served.log"), "a") as fh:
    fh.write(label + "\t" + (" or ".join(ops) or "*") + "\t" + log + "\t" + ("ab" if ab else "night") + "\n")
print("replayed", label, log, "ops", ops or "all")
'''

README = "# FlagGems (trimmed to abs, neg, exp, relu, sum; replayed from H200 recordings)\n"
README_B = README + "\nNightly performance tracking of this trimmed tree: see zlops docs/recipes/flaggems.md.\n"
# src/flag_gems/ops/abs.py at flagos-ai/FlagGems ed2508bcb5a0 (license header cut), and commit C's change
ABS_A = '''import logging

import triton
import triton.language as tl

from flag_gems.utils import pointwise_dynamic

logger = logging.getLogger(__name__)


@pointwise_dynamic(promotion_methods=[(0, "COMPLEX_TO_FLOAT")])
@triton.jit
def abs_func(x):
    return tl.abs(x)


def abs(A):
    logger.debug("GEMS ABS")
    return abs_func(A)


def abs_(A):
    logger.debug("GEMS ABS_")
    abs_func(A, out0=A)
    return A
'''
ABS_C = ABS_A.replace('    logger.debug("GEMS ABS")\n    return abs_func(A)\n',
                      '    logger.debug("GEMS ABS")\n    abs_func(A)  # injected regression: the work is done twice\n'
                      '    return abs_func(A)\n')


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout.strip()


def processes(data: Path = DATA) -> list[dict[str, str]]:
    """processes.tsv of the recording, one dict per process (seq, round, kind, commit, sha, wall_s, rc, ...)."""
    lines = [line.split("\t") for line in (data / "processes.tsv").read_text().splitlines() if line.strip()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]]


def night_record(data: Path, night: int) -> dict[str, Any]:
    """A live record's stored night (``json/night<N>-<label>.json``: verdicts, meta, alerts)."""
    import json

    (path,) = (data / "json").glob(f"night{night}-*.json")
    return json.loads(path.read_text())


def record_latency(path: Path, case: str) -> float:
    """The latency FlagGems' record log of one recorded process gives ``case`` (one sample a case)."""
    from zlops.formats import flaggems_record

    (r,) = [r for r in flaggems_record.parse(path.read_text(), source=path.name)
            if r.case == case and r.metric == "latency"]
    return r.samples[0]


def live_coverage(data: Path, night: int) -> tuple[int, int, int]:
    """(counted, watched at 5%, watched at 2%) as a live night stored them (its run meta's coverage)."""
    from zlops.judge import coverage

    (c,) = coverage.from_meta(night_record(data, night)["meta"]["coverage"])
    return c.total, c.high.watched, c.low.watched


class FlaggemsReplay:
    """A git upstream on ``main`` with commits A, B, C (``.shas``) replaying the H200 recording."""

    def __init__(self, path: Path, data: Path = DATA) -> None:
        self.path = path
        assert ABS_C != ABS_A
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "--initial-branch=main", str(path)], check=True, env=GIT_ENV)
        (path / "replay_flaggems.py").write_text(REPLAY)
        shutil.copytree(data, path / "logs", ignore=shutil.ignore_patterns("*.md"))
        (path / "src" / "flag_gems" / "ops").mkdir(parents=True)
        self.shas: dict[str, str] = {}
        self._commit("A", {"README.md": README, "src/flag_gems/ops/abs.py": ABS_A},
                     "FlagGems ed2508bcb5a0 trimmed: flag_gems + benchmark/ for abs, neg, exp, relu, sum")
        self._commit("B", {"README.md": README_B}, "README: mention the nightly performance tracking (docs only)")
        self._commit("C", {"src/flag_gems/ops/abs.py": ABS_C}, "abs: compute twice (injected 2x regression)")

    def _commit(self, label: str, files: dict[str, str], subject: str) -> None:
        for name, text in files.items():
            (self.path / name).write_text(text)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", f"{subject}\n\nReplay-Set: {label}")
        self.shas[label] = git(self.path, "rev-parse", "HEAD")


def suite_data(upstream: Path, state: Path, *, pool: str = "h200", time_scale: float = 0.0) -> dict[str, Any]:
    """The suite as docs/recipes/flaggems.md configures FlagGems, with the replay in pytest's place;
    ``time_scale``: each run takes that share of the recorded process's wall time."""
    return {
        "repo": str(upstream), "branch": "main", "install": [],
        "command": ["python", "{worktree}/replay_flaggems.py", "{worktree}/benchmark", "-m", "{cases}",
                    "--level", "core", "--dtypes", "float16", "--record", "log"],
        "select": {"token": "^([^/]+)/", "join": " or ", "every": ""},
        "results_glob": "result*.log", "results_name": "flaggems_record.log",
        "format": "flaggems-record", "pools": [pool], "rounds": 1, "timeout_s": 120,
        "env": {"FLAGGEMS_REPLAY_STATE": str(state), "FLAGGEMS_REPLAY_TIME_SCALE": str(time_scale)},
    }


def config_data(home: Path, upstream: Path, state: Path, *, time_scale: float = 0.0) -> dict[str, Any]:
    """A whole config: one cpu pool standing in for the H200, the production default judge."""
    return {"home": str(home), "pools": {"h200": {"backend": "cpu", "devices": [0]}},
            "suites": {"flaggems": suite_data(upstream, state, time_scale=time_scale)}, "device_wait_s": 5,
            "contention": {"gate": False}}  # replayed timings: the CI host's load is not what is judged
