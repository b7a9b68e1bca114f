"""Replay upstreams for the FlagGems hold-outs: real FlagGems processes recorded on an H200, served to the real
``zlops nightly``. Three recordings, each described by a :class:`Holdout`:

- ``HOLDOUT1`` (issue 22; tests/data/flaggems_h200/holdout_2026-12-01/, PROVENANCE.md there): mean, amax and add;
  commit A holds the real ``src/flag_gems/ops/mean.py`` of the trimmed FlagGems, then ``n_docs`` README-only
  commits (same code: they replay A's processes), then S with the real ``mean.py`` diff (the extra N/50 pass above
  2**28 elements: +2.8% on ``mean/float16/(1024x1024x1024, 1)``). Processes recorded by a harness of our own,
  with per-test stamps.
- ``HOLDOUT2`` (issue 25; tests/data/flaggems_h200/holdout2_2026-12-02/live/, PROVENANCE.md there): sum, prod and
  mul; A, one README-only commit D1, S (sum's wrapper launches its unchanged kernel once more: +10% on
  ``sum/float16/(1024x1024x1024, 1)``, no compiled kernel changes) and K on S (sum's non-inner kernel reads N/8
  rows twice: its compiled code changes), each with the real ``src/flag_gems/ops/sum.py``. The processes are the
  live nights' own: every nightly shard and A/B run the real ``zlops nightly`` ran, with its Triton cache.
- ``HOLDOUT3`` (issue 22; tests/data/flaggems_h200/holdout3_2026-12-02/live/, PROVENANCE.md there): max, argmax and
  sub; A, ``n_docs`` README-only commits (A's code: they replay A's processes, as the live D1..D4 ran A's code), then
  W (argmax's wrapper launches its unchanged non-inner kernel once more over a [64, 144, K] prefix: +3.42% on
  ``argmax/float16/(1024x1024x1024, 1)`` in the ground truth), each with the real ``src/flag_gems/ops/argmax.py``.
  The processes are the nine live nights' (A A D1 D2 D3 D4 W W W), with their Triton caches. Their device leases
  are in processes.tsv: nights 1-6 (A's code) on two, nights 7-9 (W) on two others, where A itself is ~1.6% faster
  on the slowed shape; the stand-in serves processes by commit, not by lease.

- ``HOLDOUT5`` (issue 22; tests/data/flaggems_h200/holdout5_2026-12-04/lease5/, PROVENANCE.md there): amin, any and
  maximum; A, one README-only commit D1 (A's code), then W (amin's wrapper launches its kernel once more over the
  first 524288 rows: +3.01% on ``amin/float16/(1024x1024x1024, 1)`` in the ground truth), each with the real
  ``src/flag_gems/ops/amin.py``. The processes are lease 5's eleven live nights' (A A A A A D1 W W W W W, one warm
  H200) and night 7's ten A/B runs (``-m amin``), with their Triton caches. Every one of them exited 1 (FlagGems'
  ``test_amin`` raises for the two dtypes not asked for) and was kept by the suite's ``partial_exit_codes: [1]``:
  the stand-in exits with the recorded code and the suite declares the same (``Holdout.exit_codes``).
  ``HOLDOUT5_LEASE6``: the same upstream, served lease 6's processes (A A A A A D1 W W on a fresh H200, zlops
  1b323fe), A/B runs of nights 6-8 included.
- ``HOLDOUT6`` (tests/data/flaggems_h200/holdout6_2026-12-06/live/, PROVENANCE.md there): var_mean, all and cumsum;
  A, one README-only commit D1 (no night ran it), then W (var_mean's wrapper launches its Welford kernel once more
  over the first 262144 rows: +3.92% on ``var_mean/float16/(1024x1024x1024, 1)`` in the H200 ground truth, +3.38%
  on the H100 the nights ran on), each with the real ``src/flag_gems/ops/var_mean.py``. The processes are the six
  live nights' (A A A W W W, one H100 machine, zlops 2f7d3a8) and night 4's twelve whole-subset A/B runs, with their
  Triton caches (cumsum's seven ``reduce_then_scan`` kernels get a new cache key in every process: each process
  "compiles" them).
- ``HOLDOUT7`` (tests/data/flaggems_h200/holdout7_2026-12-06/live/, PROVENANCE.md there): cos, gelu and softmax
  under FlagGems' graph timer (``--mode cudagraph``); A, one README-only commit D1 (no night ran it), then W (cos of
  at most 65536 elements goes through a new kernel that evaluates a 16-term series, one dependent FMA a term: +5.07%
  on the launch-bound ``cos/float16/(64x64)``, ~1.34 us, in the ground truth; +4.81% in the nights' A/B runs). The
  processes are the nine live nights' (A x 7 then W on one H100 machine, W again on a second; zlops c1f9eb3) and the
  finished runs of nights 8 and 9's A/Bs (both cut by the device calls' own time limits: 5 runs each), with their
  Triton caches.
  ``HOLDOUT7_K10`` (tests/data/flaggems_h200/holdout7_2026-12-06/live_k10/, PROVENANCE.md there, "The 10-term
  nights"): the same suite and upstream with W evaluating a 10-term series (+3.83% on ``cos/float16/(64x64)`` in
  its ground truth). Its processes: lease 1's nine nights (A x 7, W, W on one H100; zlops 5412fc3) with night 8's
  ten A/B runs, then lease 2's (another H100, zlops bb81910, begun from the home after night 8): its own night 9
  with ten A/B runs (W against A) and night 10. In recording order, so a replay of nights 1-9 is served lease 1's
  nightly shards and night 8's A/B runs first, lease 2's A/B runs where a side asks for more.

Each commit's message carries ``Replay-Set: <label>``. ``replay_holdout.py`` stands in for ``python -m pytest
benchmark/ -m <ops> --level core ...`` and writes what FlagGems writes (``result_<argv>.log`` in its working
directory): the next recorded process of its commit, keeping only the selected ops' records. ``logs/replay.json``
in the upstream says how it picks (the holdout's ``night_kinds``, ``ab_kinds``, ``op_s``):

- A night (a run outside an ``ab/`` folder) takes the commit's processes of the ``night_kinds`` that ran every op,
  by kind in that order, then in recording order, cycling once used up.
- An A/B side (zlops runs those in ``<run>/ab/<pool>/<NN><side>/``) takes, for its selection, first the processes
  of the ``ab_kinds`` recorded with exactly that selection (hold-out 1's ``-m mean`` processes, hold-out 2's A/B
  runs), then the processes that ran every op, newest first, filtered; so what a night gets never depends on how
  many A/B runs a judge asked for.

Time: with ``$HOLDOUT_REPLAY_TIME_SCALE`` = s, a run lasts s x what the real process took, start-up included:
a process recorded with the selection takes its recorded wall time; a process filtered to fewer ops takes its
wall time minus the recorded time of the dropped tests (its per-test stamps, ``*.timing.tsv``; hold-out 2's
zlops-run processes have none: ``op_s``, the median per-op test time of the ground truth's stamped processes on
the same H200). The replay subtracts the time it has already spent since its interpreter started, and on an A/B
run the smallest gap so far between two of the A/B's runs (zlops' own work around a run, which the scale does not
shrink: a few hundredths of a second a run on a quiet host, tenths on a loaded one, against ~1.2 s runs at
s = 0.05), so an A/B run's duration as zlops sees it is s x the real one on a loaded host as on a quiet one.

Kernels: where zlops sets ``TRITON_CACHE_DIR`` (a suite with ``kernels: triton``) and the process has a recorded
``kernels.json``, the replay asks for each kernel that process had as Triton's compiler does, through Triton's cache
protocol (tests/fake_triton: Triton 3.6's ``triton/runtime/cache.py`` as far as zlops relies on it) and the cache
manager zlops names (``TRITON_CACHE_MANAGER``: its seeding manager on a seeded shard, zlops.kernels.seed): a kernel
the cache has, or that the manager takes from the seed, is reused; on a miss it "compiles" it, putting the recorded
folder's files (its commit's ``triton_cache/<label>/<cache key>/``, or another label's folder of the same key where
the record keeps identical files once) and the group file last. So zlops' inventory, its code hashes and its
compiled/reused/seeded counts are what the H200's kernels give under today's zlops. A process filtered to fewer
ops asks for the kernels a kept op owns by zlops' word rule (``max`` owns ``max_kernel_1``, not
``argmax_kernel_1``), or that no op of the suite owns (``fill_scalar_kernel``).

``served.log`` in ``$HOLDOUT_REPLAY_STATE`` lists, per run: label, selection, the process served, night/ab, the
seconds it stood for (unscaled) and the kernels it compiled / it had (``-`` without a cache).
Served processes are real H200 data but not new measurements: once a sequence cycles, a process is served
twice. The A/B sequences are per commit and selection, not per night: once earlier nights' A/Bs have used a
side's targeted processes, that side gets filtered full processes while the other may still get targeted ones,
and the two kinds differ slightly on the slowed shape (hold-out 1, A: 0.4888-0.4899 ms in `-m mean` processes,
0.4902-0.4912 ms in full ones), so such an A/B sees ~+2.5% rather than +2.7%.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flaggems_replay import GIT_ENV, git

REPLAY = r'''
"""Replays recorded FlagGems processes of this commit (see tests/flaggems_holdout.py in zlops)."""
import json, os, re, subprocess, sys, time

T0 = time.monotonic()
try:  # the interpreter's own start-up counts as part of the replayed process's time
    with open("/proc/self/stat") as fh:
        _ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as fh:
        T0 -= max(0.0, float(fh.read().split()[0]) - _ticks / os.sysconf("SC_CLK_TCK"))
except (OSError, ValueError, IndexError):
    pass
here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "logs")
with open(os.path.join(data, "replay.json")) as fh:
    conf = json.load(fh)
args = sys.argv[1:]
expr = args[args.index("-m") + 1] if "-m" in args else ""
ops = [t.strip() for t in expr.split(" or ") if t.strip()]
msg = subprocess.run(["git", "-C", here, "log", "-1", "--format=%B"], capture_output=True, text=True,
                     check=True).stdout
label = re.search(r"^Replay-Set: (\w+)$", msg, re.M).group(1)
with open(os.path.join(data, "processes.tsv")) as fh:
    lines = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
rows = [dict(zip(lines[0], r)) for r in lines[1:]]
mine = [r for r in rows if r["label"] == label and r["log"] != "-"]
every = set(conf["ops"])
night_kinds = conf["night_kinds"]
full = [r for r in mine if r["kind"] in night_kinds and set(r["selection"].split(" or ")) == every]
sel = " or ".join(ops)
targeted = [r for r in mine if r["kind"] in conf["ab_kinds"] and set(r["selection"].split(" or ")) == set(ops)]
state = os.environ["HOLDOUT_REPLAY_STATE"]
os.makedirs(state, exist_ok=True)


def take(seq):
    path = os.path.join(state, label + "." + seq)
    n = int(open(path).read()) if os.path.exists(path) else 0
    with open(path, "w") as fh:
        fh.write(str(n + 1))
    return n


ab = "/ab/" in os.getcwd().replace(os.sep, "/") + "/"
if ab:
    order = targeted + [r for r in full[::-1] if r not in targeted]
    proc = order[take("ab:" + sel) % len(order)]
else:
    nights = sorted(full, key=lambda r: night_kinds.index(r["kind"]))   # stable: recording order within a kind
    proc = nights[take("night") % len(nights)]
recorded = set(proc["selection"].split(" or "))
kept = set(ops) if ops and set(ops) != recorded else recorded
keep = []
with open(os.path.join(data, proc["log"])) as fh:
    for line in fh.read().splitlines():
        if line.startswith("[INFO] {") and json.loads(line[len("[INFO] "):])["op_name"] not in kept:
            continue
        keep.append(line)
# what the real process took: its wall time, less the recorded time of the tests it would not have run
seconds = float(proc["wall_s"])
if kept != recorded:
    if proc.get("timing", "-") != "-":
        start = {}
        with open(os.path.join(data, proc["timing"])) as fh:
            for line in fh:
                t, ev, what = line.rstrip("\n").split("\t")
                if ev == "start":
                    start[what] = float(t)
                elif ev == "finish" and what.rsplit("::test_", 1)[-1] not in kept:
                    seconds -= float(t) - start[what]
    else:
        seconds -= sum(conf["op_s"][op] for op in recorded - kept)
# the kernels this process had, through Triton's cache protocol (conf["triton"]: tests/fake_triton, Triton 3.6's
# cache module) and the manager zlops names (its seeding manager on a seeded shard): a kernel the cache has, or
# the manager takes from the seed, is reused; a miss is compiled: the recorded folder's files put, the group last
cache_dir = os.environ.get("TRITON_CACHE_DIR")
kernels = "-"
if cache_dir and proc.get("kernels", "-") != "-":
    import importlib
    sys.path.insert(0, conf["triton"])
    from triton.runtime.cache import FileCacheManager
    manager = os.environ.get("TRITON_CACHE_MANAGER")
    cls = getattr(importlib.import_module(manager.split(":")[0]), manager.split(":")[1]) if manager else \
        FileCacheManager
    with open(os.path.join(data, proc["kernels"])) as fh:
        had = json.load(fh)["kernels"]
    def owns(op, name):   # zlops' word rule (zlops.kernels.attribution): max owns max_kernel_1, not argmax_kernel_1
        return re.search(r"(?<![a-z0-9])%s(?![a-z0-9])" % re.escape(op.lower()), name.lower()) is not None
    mine_k = [k for k in had if kept == recorded or any(owns(op, k["name"]) for op in kept)
              or not any(owns(op, k["name"]) for op in every)]
    compiled = 0
    for k in mine_k:
        cache = cls(k["cache_key"])
        if cache.get_group(k["name"] + ".json") is not None:
            continue
        src = os.path.join(data, "triton_cache", label, k["cache_key"])
        if not os.path.isdir(src):   # a folder kept once for labels whose files are the same (hold-out 3's W)
            src = next(os.path.join(data, "triton_cache", other, k["cache_key"])
                       for other in sorted(os.listdir(os.path.join(data, "triton_cache")))
                       if os.path.isdir(os.path.join(data, "triton_cache", other, k["cache_key"])))
        paths = {}
        for f in sorted(os.listdir(src)):
            if not f.startswith("__grp__"):
                with open(os.path.join(src, f), "rb") as fh:
                    paths[f] = cache.put(fh.read(), f, binary=True)
        cache.put_group(k["name"] + ".json", paths)
        compiled += 1
    kernels = "%d/%d" % (compiled, len(mine_k))
scale = float(os.environ.get("HOLDOUT_REPLAY_TIME_SCALE") or 0)
# zlops' own work around a run of an A/B (starting it, parsing its output) is real time that the scale does not
# shrink and that zlops counts as the run's: ~0.05 s a run on a quiet host, several tenths on a loaded one, against a
# run of ~1.2 s at s = 0.05 (~25 s on the H200, where the same work is <1% of a run). The gap since the same A/B's
# previous run ended holds that work, and between rounds also zlops' decision on the pairs so far, which zlops does
# not count: the smallest gap of the A/B so far (the first is within a round) is taken out of this run's sleep.
cwd = os.getcwd().replace(os.sep, "/")
ab_key = ""   # <run>/ab/<pool>: the A/B this run belongs to
if ab:
    _at = cwd.index("/ab/") + 4
    ab_key = cwd[:_at] + cwd[_at:].split("/")[0]
mark = os.path.join(state, "ab.last")
gap = None
if ab and os.path.exists(mark):
    with open(mark) as fh:
        prev_key, prev_end, prev_gap = fh.read().split("\t")
    if prev_key == ab_key:
        gap = max(0.0, T0 - float(prev_end))
        gap = gap if prev_gap == "-" else min(gap, float(prev_gap))
if scale:
    time.sleep(max(0.0, scale * seconds - (time.monotonic() - T0) - (gap or 0.0)))
name = "result_{}.log".format("_".join(a.replace(".py", "").replace("=", "_").replace("/", "_") for a in args))
with open(name.replace("_-", "-"), "w", encoding="utf-8") as fh:
    fh.write("\n".join(keep) + "\n")
with open(os.path.join(state, "served.log"), "a") as fh:
    fh.write("\t".join([label, sel or "*", proc["log"], "ab" if ab else "night", "%.2f" % seconds, kernels]) + "\n")
print("replayed", label, proc["log"], "ops", ops or "all", "as", "%.2f" % seconds, "s", "kernels", kernels)
if ab:
    with open(mark, "w") as fh:
        fh.write("%s\t%.6f\t%s" % (ab_key, time.monotonic(), "-" if gap is None else "%.6f" % gap))
if conf.get("exit_codes") and proc.get("rc", "-") not in ("-", "0"):
    sys.exit(int(proc["rc"]))   # what the real process exited with (a suite's partial_exit_codes keep its results)
'''


@dataclass(frozen=True)
class Commit:
    """One commit of a replay upstream: ``name`` (A, S, K ...), the ``label`` whose processes it replays, the
    version of the changed source file it holds (``<source stem>_<version>.py`` in the holdout's ``sources``) and
    its subject."""

    name: str
    label: str
    version: str
    subject: str


@dataclass(frozen=True)
class Holdout:
    """A recorded hold-out: where its processes are, which ops and slowed case, the commits of its upstream
    (README-only ``D<k>`` commits, replaying the first commit's processes, go after the first), and how the
    stand-in picks processes (see the module docstring)."""

    data: Path                       # processes.tsv and the files it names
    ops: tuple[str, ...]
    slowed_case: str
    slowed_metrics: tuple[str, ...]  # metrics computed from the slowed timing (speedup = torch's latency / ours)
    source: str                      # the file the commits change, e.g. src/flag_gems/ops/mean.py
    sources: Path                    # its versions: <stem>_<version>.py
    commits: tuple[Commit, ...]
    readme: str
    night_kinds: tuple[str, ...]
    ab_kinds: tuple[str, ...]
    n_docs: int = 5
    op_s: Mapping[str, float] = field(default_factory=dict)   # per-op test time, for processes without stamps
    kernels: bool = False            # the suite declares kernels: triton
    ignore: tuple[str, ...] = ()     # what of ``data`` the upstream's logs/ leaves out
    exit_codes: tuple[int, ...] = ()  # the suite's partial_exit_codes; the stand-in then exits as the process did

    def source_text(self, version: str) -> str:
        return (self.sources / f"{Path(self.source).stem}_{version}.py").read_text()


DATA = Path(__file__).parent / "data" / "flaggems_h200" / "holdout_2026-12-01"
FAKE_TRITON = Path(__file__).parent / "fake_triton"   # Triton 3.6's cache module, what the stand-in writes through
DATA2 = Path(__file__).parent / "data" / "flaggems_h200" / "holdout2_2026-12-02"
DATA3 = Path(__file__).parent / "data" / "flaggems_h200" / "holdout3_2026-12-02"
DATA5 = Path(__file__).parent / "data" / "flaggems_h200" / "holdout5_2026-12-04"
DATA6 = Path(__file__).parent / "data" / "flaggems_h200" / "holdout6_2026-12-06"
DATA7 = Path(__file__).parent / "data" / "flaggems_h200" / "holdout7_2026-12-06"

HOLDOUT1 = Holdout(
    data=DATA, ops=("mean", "amax", "add"), slowed_case="mean/float16/(1024x1024x1024, 1)",
    slowed_metrics=("latency", "speedup"), source="src/flag_gems/ops/mean.py", sources=DATA,
    commits=(Commit("A", "A", "A", "FlagGems ed2508bcb5a0 trimmed: flag_gems + benchmark/ for mean amax add"),
             Commit("S", "S", "S", "mean: extra pass over N/50 rows above 2**28 elements (injected ~3% regression)")),
    readme="# FlagGems (trimmed to mean, amax, add; replayed from H200 recordings)\n",
    night_kinds=("cold", "full"), ab_kinds=("sel", "one"),
    # live/: the live nights' record (tests/stats/test_h200_holdout_live.py), not processes to replay
    ignore=("*.md", "mean_*.py", "env*", "driver*", "live"))

HOLDOUT2 = Holdout(
    data=DATA2 / "live", ops=("sum", "prod", "mul"), slowed_case="sum/float16/(1024x1024x1024, 1)",
    slowed_metrics=("latency", "speedup"), source="src/flag_gems/ops/sum.py", sources=DATA2 / "live" / "upstream",
    commits=(Commit("A", "A", "A", "FlagGems ed2508bcb5a0 trimmed: flag_gems + benchmark/ for sum prod mul"),
             Commit("S", "S", "S", "sum: launch the non-inner kernel once more over 1/32 of the input above 2**28 "
                                   "elements (injected regression)"),
             Commit("K", "K", "K", "sum: the non-inner kernel loop reads the first N/8 rows twice (injected kernel "
                                   "change)")),
    readme="# FlagGems (trimmed to sum, prod, mul; replayed from H200 recordings)\n",
    night_kinds=("night", "ab"), ab_kinds=("ab",), n_docs=1,
    # the ground truth's stamped whole-subset processes (groundtruth/pairs, cold): median test time per op
    op_s={"mul": 5.82, "prod": 2.60, "sum": 2.61}, kernels=True,
    ignore=("*.md", "*.txt", "*.yaml", "json", "upstream", "*.manifest.json"))

HOLDOUT3 = Holdout(
    data=DATA3 / "live", ops=("max", "argmax", "sub"), slowed_case="argmax/float16/(1024x1024x1024, 1)",
    slowed_metrics=("latency", "speedup"), source="src/flag_gems/ops/argmax.py", sources=DATA3 / "live" / "upstream",
    commits=(Commit("A", "A", "A", "FlagGems ed2508bcb5a0 trimmed: flag_gems + benchmark/ for max argmax sub"),
             Commit("W", "W", "W", "argmax: launch the non-inner kernel once more over a [64, 144, K] prefix above "
                                   "2**30 elements (injected regression)")),
    readme="# FlagGems (trimmed to max, argmax, sub; replayed from H200 recordings)\n",
    night_kinds=("night", "ab"), ab_kinds=("ab",), n_docs=5,
    # no stamped whole-subset process on this H200: pytest's own session time ("1 passed in X s", processes.tsv's
    # pytest_s) of the live A/B runs of one op, median: -m argmax (10 runs) 4.60 s, -m max (24) 6.74 s; sub: the
    # median of -m "max or sub" (10) 9.84 s less max's
    op_s={"argmax": 4.60, "max": 6.74, "sub": 3.10}, kernels=True,
    # the live record's own files (nights' JSON, CLI output, the homes' tarballs): not processes to replay
    ignore=("*.md", "*.txt", "*.yaml", "nights.tsv", "json", "kernels", "state", "upstream"))

HOLDOUT5 = Holdout(
    data=DATA5 / "lease5", ops=("amin", "any", "maximum"), slowed_case="amin/float16/(1024x1024x1024, 1)",
    slowed_metrics=("latency", "speedup"), source="src/flag_gems/ops/amin.py", sources=DATA5 / "lease5" / "upstream",
    commits=(Commit("A", "A", "A", "FlagGems ed2508bcb5a0 trimmed: flag_gems + benchmark/ for amin any maximum"),
             Commit("W", "W", "W", "amin: launch the reduction kernel once more over the first 524288 rows above "
                                   "2**30 elements (injected regression)")),
    readme="# FlagGems (trimmed to amin, any, maximum; replayed from H200 recordings)\n",
    night_kinds=("night", "ab"), ab_kinds=("ab",), n_docs=1,
    # no stamped process on this lease: pytest's own session time (processes.tsv's pytest_s) of the ten live A/B
    # runs of -m amin, median 6.30 s; any + maximum: the median of the nightly shards' (nights 2-11: night 1
    # compiled every kernel) 10.52 s less amin's, split evenly (only their sum is measured). Used only where an
    # A/B side outruns its ten targeted runs and gets a filtered whole-subset process
    # (tests/stats/test_h200_holdout5_replay.py re-derives these from processes.tsv)
    op_s={"amin": 6.30, "any": 2.11, "maximum": 2.11}, kernels=True, exit_codes=(1,),
    # the lease's own files (nights' JSON, verdicts, env, nvidia-smi): not processes to replay
    ignore=("*.md", "*.txt", "*.yaml", "nights.tsv", "json", "upstream"))

# lease 6 (tests/data/flaggems_h200/holdout5_2026-12-04/lease6/, PROVENANCE.md there, "Lease 6"): the same suite,
# upstream and commits on a fresh H200 under zlops 1b323fe, nights A A A A A D1 W W; its processes: the 8 nightly
# shards and the A/B runs of nights 6 (D1 against A: A's code on both sides), 7 (W against D1) and 8 (W against A,
# killed by the call's timeout: its last run has no record). Its upstream/ is lease 5's (the record script checks
# the mirror's files identical); op_s are lease 5's (used only where an A/B side outruns its recorded runs)
HOLDOUT5_LEASE6 = replace(HOLDOUT5, data=DATA5 / "lease6", ignore=(*HOLDOUT5.ignore, "triton_cache.tsv"))

HOLDOUT6 = Holdout(
    data=DATA6 / "live", ops=("var_mean", "all", "cumsum"), slowed_case="var_mean/float16/(1024x1024x1024, 1)",
    slowed_metrics=("latency", "speedup"), source="src/flag_gems/ops/var_mean.py",
    sources=DATA6 / "live" / "upstream",
    commits=(Commit("A", "A", "A", "FlagGems ed2508bcb5a0 trimmed: flag_gems + benchmark/ for var_mean all cumsum"),
             Commit("W", "W", "W", "var_mean: launch the Welford kernel once more over the first 262144 rows above "
                                   "2**30 elements (injected regression)")),
    readme="# FlagGems (trimmed to var_mean, all, cumsum; replayed from H100 recordings)\n",
    night_kinds=("night", "ab"), ab_kinds=("ab",), n_docs=1,
    # per-op test time, used only where an A/B side outruns its recorded runs and gets a filtered whole-subset
    # process: var_mean the median test time of the six stamped -m var_mean processes of the H100 ground truth
    # (groundtruth_h100/), all + cumsum the median pytest session of the nightly shards (nights 2-6: night 1
    # compiled every kernel) less it, split evenly (only their sum is measured)
    # (tests/stats/test_h200_holdout6_replay.py re-derives these)
    op_s={"var_mean": 4.28, "all": 2.74, "cumsum": 2.74}, kernels=True, exit_codes=(1,),
    # the nights' own files (JSON, verdicts, env, the call's output): not processes to replay
    ignore=("*.md", "*.txt", "*.yaml", "nights.tsv", "json", "upstream"))

HOLDOUT7 = Holdout(
    data=DATA7 / "live", ops=("cos", "gelu", "softmax"), slowed_case="cos/float16/(64x64)",
    slowed_metrics=("latency", "speedup", "tflops"), source="src/flag_gems/ops/cos.py",
    sources=DATA7 / "live" / "upstream",
    commits=(Commit("A", "A", "A", "FlagGems ed2508bcb5a0 trimmed: flag_gems + benchmark/ for cos gelu softmax"),
             Commit("W", "W", "W", "cos: small tensors (<= 65536 elements) evaluate a 16-term Taylor series where "
                                   "|x| < 1 (injected regression)")),
    readme="# FlagGems (trimmed to cos, gelu, softmax; replayed from H100 recordings, --mode cudagraph)\n",
    night_kinds=("night", "ab"), ab_kinds=("ab",), n_docs=1,
    # per-op test time, used only where an A/B side outruns its recorded runs and gets a filtered whole-subset
    # process: cos the median pytest session of the ten finished -m cos A/B runs, gelu + softmax the median pytest
    # session of the nightly shards (nights 2-9: night 1 compiled every kernel) less it, split evenly
    # (tests/stats/test_h200_holdout7_replay.py re-derives these)
    op_s={"cos": 12.475, "gelu": 7.975, "softmax": 7.975}, kernels=True, exit_codes=(1,),
    # the nights' own files (JSON, verdicts, env, the CLI output, reports): not processes to replay
    ignore=("*.md", "*.txt", "*.yaml", "nights.tsv", "json", "upstream", "reports"))

# the 10-term W (tests/data/flaggems_h200/holdout7_2026-12-06/PROVENANCE.md, "The 10-term nights"): lease 1's nights
# 1-9 and night 8's A/B runs, then lease 2's night 9 (its A/B: W against A) and night 10, one processes.tsv
HOLDOUT7_K10 = replace(
    HOLDOUT7, data=DATA7 / "live_k10", sources=DATA7 / "live_k10" / "upstream",
    commits=(HOLDOUT7.commits[0],
             Commit("W", "W", "W", "cos: small tensors (<= 65536 elements) evaluate a 10-term Taylor series where "
                                   "|x| < 1 (injected regression)")),
    # per-op test time, used only where an A/B side outruns its recorded runs: cos the median pytest session of the
    # twenty -m cos A/B runs (both leases), gelu + softmax the median pytest session of the nightly shards (all but
    # lease 1's night 1, which compiled every kernel) less it, split evenly
    # (tests/stats/test_h200_holdout7_k10_replay.py re-derives these)
    op_s={"cos": 11.195, "gelu": 8.4625, "softmax": 8.4625},
    ignore=(*HOLDOUT7.ignore, "lease2", "groundtruth"))

# hold-out 1's names, as its tests import them
OPS = HOLDOUT1.ops
SLOWED_CASE = HOLDOUT1.slowed_case
SLOWED_METRICS = HOLDOUT1.slowed_metrics
README = HOLDOUT1.readme


def mean_py(label: str) -> str:
    """src/flag_gems/ops/mean.py of commit A or S, read from the recorded upstream's diff (mean_S.diff)."""
    return HOLDOUT1.source_text(label)


class HoldoutReplay:
    """A git upstream on ``main``: the holdout's first commit, ``n_docs`` README-only commits, then the rest
    (``.shas`` by name: hold-out 1 A, D1.., S; hold-out 2 A, D1, S, K; hold-out 3 A, D1..D5, W; hold-out 5 A, D1,
    W)."""

    def __init__(self, path: Path, *, n_docs: int | None = None, data: Path | None = None,
                 holdout: Holdout = HOLDOUT1) -> None:
        self.holdout = holdout
        self.path = path
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "--initial-branch=main", str(path)], check=True, env=GIT_ENV)
        (path / "replay_holdout.py").write_text(REPLAY)
        shutil.copytree(data or holdout.data, path / "logs", ignore=shutil.ignore_patterns(*holdout.ignore))
        (path / "logs" / "replay.json").write_text(json.dumps(
            {"ops": list(holdout.ops), "night_kinds": list(holdout.night_kinds), "ab_kinds": list(holdout.ab_kinds),
             "op_s": dict(holdout.op_s), "triton": str(FAKE_TRITON),
             **({"exit_codes": True} if holdout.exit_codes else {})}, indent=1) + "\n")
        (path / Path(holdout.source).parent).mkdir(parents=True)
        self.shas: dict[str, str] = {}
        first, *rest = holdout.commits
        self._commit(first.name, first.label, {"README.md": holdout.readme,
                                               holdout.source: holdout.source_text(first.version)}, first.subject)
        text = holdout.readme
        for k in range(1, (holdout.n_docs if n_docs is None else n_docs) + 1):
            text += f"\nNightly tracking note {k}: see zlops docs/recipes/flaggems.md.\n"
            self._commit(f"D{k}", first.label, {"README.md": text}, f"README: note {k} (docs only)")
        for c in rest:
            self._commit(c.name, c.label, {holdout.source: holdout.source_text(c.version)}, c.subject)

    def _commit(self, name: str, label: str, files: dict[str, str], subject: str) -> None:
        for rel, text in files.items():
            (self.path / rel).write_text(text)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", f"{subject}\n\nReplay-Set: {label}")
        self.shas[name] = git(self.path, "rev-parse", "HEAD")


def served(state: Path) -> list[dict[str, str]]:
    """served.log as dicts: label, selection, log, where (night/ab), seconds (the real process's, unscaled), kernels
    (compiled / the process's kernels, ``-`` where zlops set no TRITON_CACHE_DIR)."""
    path = state / "served.log"
    if not path.exists():
        return []
    keys = ("label", "selection", "log", "where", "seconds", "kernels")
    return [dict(zip(keys, line.split("\t"), strict=True)) for line in path.read_text().splitlines()]


def scaled_noise_defaults(time_scale: float) -> dict[str, float]:
    """The judge's defaults that are absolute seconds (``noise.*_s`` with a number as default, e.g. the A/B
    budget's floor and ceiling), times ``time_scale``: the production defaults in the replay's time unit, where
    a run lasts ``time_scale`` x the real process. Shares and counts are left alone."""
    from zlops.config.settings import NoiseConfig

    out = {}
    for name, fld in NoiseConfig.model_fields.items():
        default = fld.default
        if name.endswith("_s") and isinstance(default, (int, float)) and not isinstance(default, bool) and default > 0:
            out[name] = float(default) * time_scale
    return out


def config_data(home: Path, upstream: Path, state: Path, *, time_scale: float,
                holdout: Holdout = HOLDOUT1) -> dict[str, Any]:
    """The suite as docs/recipes/flaggems.md configures FlagGems (the recorded `-m` ops as `every`), the replay
    in pytest's place, on one cpu pool standing in for the H200; every judge and budget setting is the default,
    those in absolute seconds scaled with the runs (:func:`scaled_noise_defaults`); ``kernels: triton`` where the
    hold-out's live nights had it."""
    suite = {
        "repo": str(upstream), "branch": "main", "install": [],
        "command": ["python", "{worktree}/replay_holdout.py", "{worktree}/benchmark", "-m", "{cases}",
                    "--level", "core", "--dtypes", "float16", "--record", "log"],
        "select": {"token": "^([^/]+)/", "join": " or ", "every": " or ".join(holdout.ops)},
        "results_glob": "result*.log", "results_name": "flaggems_record.log",
        "format": "flaggems-record", "pools": ["h200"], "rounds": 1, "timeout_s": 300,
        "env": {"HOLDOUT_REPLAY_STATE": str(state), "HOLDOUT_REPLAY_TIME_SCALE": str(time_scale)},
        **({"kernels": "triton"} if holdout.kernels else {}),
        **({"partial_exit_codes": list(holdout.exit_codes)} if holdout.exit_codes else {}),
    }
    return {"home": str(home), "pools": {"h200": {"backend": "cpu", "devices": [0]}},
            "suites": {"flaggems": suite}, "device_wait_s": 5, "noise": scaled_noise_defaults(time_scale),
            "contention": {"gate": False}}  # replayed timings: the CI host's load is not what is judged


@dataclass
class Night:
    """One replayed night of a hold-out (:func:`replay_nights`)."""

    index: int
    label: str
    run_key: str
    verdicts: dict[tuple[str, str], Any]      # (case, metric) -> Verdict
    comparisons: dict[tuple[str, str], Any]
    ab: dict[str, Any]                       # meta["ab"]["h200"] or {}
    served: list[dict[str, str]]             # what the replay served during this night
    kernels: list[Any]                       # the pool's inventory tonight (KernelRecord)
    announced: list[tuple[str, str, str]] = field(default_factory=list)
    events: list[tuple[int, str, str, str, str, bool]] = field(default_factory=list)   # id, case, metric, kind, to


#: zlops' own work around one replayed process (spawn, parse), which the replay does not scale: the error it adds to
#: an A/B's projected and realised cost, at most about one run's worth (CI, hold-out 3's night 4: 15.15 s of a 15 s
#: scaled budget; an estimate 0.3% past its 30%). The replays' budget and estimate checks allow it.
UNSCALED_RUN_S = 0.3


def replay_nights(tmp: Path, holdout: Holdout, names: tuple[str, ...], *, time_scale: float) -> tuple[Any, Any,
                                                                                                   HoldoutReplay,
                                                                                                   list[Night]]:
    """Run the real ``zlops nightly`` once per commit of ``names`` on ``holdout``'s replay upstream (production
    defaults, :func:`config_data`): ``(config, store, upstream, nights)``."""
    from zlops.config.settings import parse_config
    from zlops.steps.context import open_store
    from zlops.steps.nightly import run_nightly
    from zlops.store.kernels import pool_inventory

    up = HoldoutReplay(tmp / "up", holdout=holdout)
    state = tmp / "replay-state"
    config = parse_config(config_data(tmp / "home", up.path, state, time_scale=time_scale, holdout=holdout),
                          source="t.yaml")
    store = open_store(config)
    nights: list[Night] = []
    for i, name in enumerate(names, 1):
        before = len(served(state))
        night = run_nightly(config, "flaggems", sha=up.shas[name], run_label=f"n{i}-{name}")
        assert night.ok, f"night {i}"
        comps = {(c.case, c.metric): c for c in night.summary.comparisons}
        meta = store.get_run(night.run_key).meta or {}
        events = [(a.id, a.case, a.metric, str(e.get("kind")), str(e.get("to_state")), bool(e.get("announced")))
                  for a, e in store.run_alert_events(night.run_key)]
        announced = [(c, m, to) for _, c, m, _, to, loud in events if loud]
        inv = store.read(pool_inventory, night.run_key, "h200")
        kernels = [k for i_ in (inv.inventories if inv else ()) for k in i_.kernels]
        nights.append(Night(i, name, night.run_key, {k: c.verdict for k, c in comps.items()}, comps,
                            dict((meta.get("ab") or {}).get("h200") or {}), served(state)[before:], kernels,
                            announced, events))
    return config, store, up, nights


#: the verdicts a night announces (a change confirmed either way)
LOUD_VALUES = frozenset({"improved", "potential", "regression", "severe"})


def verdict_counts(n: Night) -> dict[str, int]:
    """How many series of a replayed night got each verdict, as the live nights' JSON stores them."""
    counts: dict[str, int] = {}
    for v in n.verdicts.values():
        counts[v.value] = counts.get(v.value, 0) + 1
    return counts


def replay_table(nights: list[Night], coverages: list[Any], alerts: list[Any], slowed_case: str) -> str:
    """The table a hold-out replay prints: per night its verdict counts, loud verdicts, the A/B's run meta, the
    coverage line, the slowed case's latency row and the A/B runs it was served; then every alert."""
    from zlops.judge import coverage

    out = []
    for n, c in zip(nights, coverages, strict=True):
        loud = [f"{c_} {m} {v.value}" for (c_, m), v in sorted(n.verdicts.items()) if v.value in LOUD_VALUES]
        ab = {k: v for k, v in n.ab.items() if k in ("base", "runs", "pairs", "seconds", "est_s", "budget_s",
                                                        "outcomes", "stopped")}
        out.append(f"night {n.index} {n.label}: {dict(sorted(verdict_counts(n).items()))}; loud {loud or '-'}; A/B {ab}")
        out.append(f"    {coverage.coverage_line(c)}")
        row = n.comparisons.get((slowed_case, "latency"))
        if row is not None:
            out.append(f"    {slowed_case} latency: {row.verdict.value}: {row.judgement.note[:240]}")
        ab_served = [s_["log"].split("/")[-1] for s_ in n.served if s_["where"] == "ab"]
        if ab_served:
            out.append(f"    A/B served: {' '.join(ab_served)}")
    out += [f"alert #{a.id} {a.case} {a.metric} {a.state.value}" for a in alerts]
    return "\n".join(out)


def replay_with_coverage(tmp: Path, holdout: Holdout, names: tuple[str, ...], *, time_scale: float,
                         thresholds: Any) -> tuple[Any, HoldoutReplay, list[Night], list[Any], list[Any], str]:
    """:func:`replay_nights`, then each night's pool coverage at ``thresholds`` and the printed table (also written to
    ``$ZLOPS_HOLDOUT_TABLE`` when set): ``(store, upstream, nights, alerts, coverages, table)``."""
    import os

    from zlops.judge import coverage

    _config, store, up, nights = replay_nights(tmp, holdout, names, time_scale=time_scale)
    alerts = list(store.alerts(suite="flaggems", states=None, limit=None))
    covs = []
    for n in nights:
        (c,) = coverage.pool_coverage(n.comparisons.values(), thresholds)
        covs.append(c)
    table = replay_table(nights, covs, alerts, holdout.slowed_case)
    print("\n" + table)
    if out := os.environ.get("ZLOPS_HOLDOUT_TABLE"):
        Path(out).write_text(table + "\n")
    return store, up, nights, alerts, covs, table

