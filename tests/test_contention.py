"""Host contention and foreign device processes gate verdicts (issue 12, item 2).

Found: with load 5 on 2 cores, unchanged operators on the CPU pool were reported improved by 95% and
23%. These tests use real processes: a CPU hog that is not of this process' tree, a busy child that
is, and the fake nvidia-smi listing a real foreign pid on the shard's GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_devices import use_fakebin

from zlops.config.settings import SuiteConfig, parse_config
from zlops.host.contention import (
    HostLimits,
    HostReading,
    HostSampler,
    busy_reason,
    cpu_list,
    parse_proc_stat,
    shard_invalid_reason,
    wait_for_quiet,
)
from zlops.host.telemetry import summarize_dir
from zlops.model import ShardStatus
from zlops.run.runner import ShardSpec, process_start, run_shard

HOG = "while True: pass"


def detached(code: str) -> int:
    """Start ``python -c code`` outside this process' tree (its shell parent exits at once); its pid."""
    done = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{code}" >/dev/null 2>&1 & echo $!'],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


@pytest.fixture
def hog() -> Iterator[int]:
    pid = detached(HOG)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


# --- the gate, on summaries ------------------------------------------------------------------------

def test_a_busy_host_beyond_the_pool_limit_is_the_reason() -> None:
    summary = {"foreign_cpu_mean_pct": 180.0, "foreign_top": [["stress-ng", 4242, 95.0], ["python3", 77, 85.0]]}
    assert shard_invalid_reason(summary, HostLimits(max_foreign_cpu_pct=25)) == (
        "host busy: other processes used 180% CPU (limit 25%) during the run "
        "(busiest on the host: stress-ng pid 4242 95%, python3 pid 77 85%)")
    assert shard_invalid_reason(summary, HostLimits(max_foreign_cpu_pct=200)) is None
    assert shard_invalid_reason(summary, HostLimits()) is None  # no limit: recorded, never a gate
    assert shard_invalid_reason(summary, {"max_foreign_cpu_pct": 25}) is not None  # a mapping works too
    assert shard_invalid_reason({"steal_max_pct": 12.0}, HostLimits(max_steal_pct=5)) == (
        "host busy: the hypervisor stole 12% of the CPU time (limit 5%)")
    assert shard_invalid_reason(None, HostLimits(max_foreign_cpu_pct=1)) is None
    # measured on the benchmark's own (pinned) CPU: the reason says which
    pinned = {"foreign_cpu_mean_pct": 87.0, "foreign_cpu_pinned": [1]}
    assert shard_invalid_reason(pinned, HostLimits(max_foreign_cpu_pct=25)) == (
        "host busy: other processes used 87% CPU of pinned CPU 1 (limit 25%) during the run")
    # the gate turned off: measured and kept, never a reason
    assert shard_invalid_reason(summary, HostLimits(max_foreign_cpu_pct=25, enabled=False)) is None


def test_the_gate_is_on_by_default_and_can_be_tuned_or_turned_off() -> None:
    def limits(**data: object) -> HostLimits:
        base: dict[str, object] = {"pools": {"p": {"backend": "cpu", "devices": [0]},
                                             "g": {"backend": "cuda", "devices": [0], "contention_gate": False}},
                                   "suites": {"s": {"repo": "/r", "format": "zlops-json", "pools": ["p"],
                                                    "command": ["x"]}}}
        for key, value in data.items():
            base[key] = value
        return parse_config(base).host_limits("p")

    default = limits()
    assert default == HostLimits(max_foreign_cpu_pct=25, max_steal_pct=10, contention_wait_s=60, enabled=True)
    assert default.gates
    assert shard_invalid_reason({"foreign_cpu_mean_pct": 40.0}, default) is not None
    assert not limits(contention={"gate": False}).gates
    assert limits(contention={"max_foreign_cpu_pct": 50}).max_foreign_cpu_pct == 50
    assert limits(contention={"max_foreign_cpu_pct": None}).max_foreign_cpu_pct is None  # that figure: no gate
    off = parse_config({"pools": {"p": {"backend": "cpu", "devices": [0], "contention_gate": False}},
                        "suites": {"s": {"repo": "/r", "format": "zlops-json", "pools": ["p"], "command": ["x"]}}})
    assert off.host_limits("p").enabled is False  # one pool off, the global section on
    assert shard_invalid_reason({"foreign_device_processes": [[1, "x"]]}, off.host_limits("p")) is None


def test_proc_stat_per_cpu_busy_and_cpu_lists() -> None:
    text = ("cpu  13730 0 4869 40546 409 0 114 108 0 0\n"
            "cpu0 5228 1 1994 22523 50 2 19 55 0 0\n"
            "cpu3 8502 0 2874 18022 358 0 95 53 7 0\n"
            "intr 12345\n")
    assert parse_proc_stat(text) == {0: (5228 + 1 + 1994 + 2 + 19, 5228 + 1 + 1994 + 22523 + 50 + 2 + 19 + 55),
                                     3: (8502 + 2874 + 95, 8502 + 2874 + 18022 + 358 + 95 + 53)}
    assert cpu_list([0, 1, 2, 3, 6]) == "0-3,6" and cpu_list([1]) == "1" and cpu_list([4, 2]) == "2,4"


def test_a_process_that_ends_between_reads_is_counted_where_its_time_went() -> None:
    """A benchmark's worker (and its own child) exit between two reads: their last CPU time shows
    up in the benchmark's reaped-children figure, and only the part since the last read counts."""
    sampler = HostSampler(own=set)
    sampler._cpu = {10: 5.0, 11: 2.0, 12: 1.0, 20: 3.0}
    sampler._parents = {10: 1, 11: 10, 12: 11, 20: 1}
    now = {10: 5.0 + 0.5 + (2.0 + 0.3) + (1.0 + 0.1), 20: 3.25, 30: 0.4}  # 11 and 12 ended and were reaped
    deltas = sampler._deltas(now)
    assert deltas[10] == pytest.approx(0.9) and deltas[20] == pytest.approx(0.25)
    assert deltas[30] == pytest.approx(0.4)  # new: all it used


def test_zlops_own_processes_are_not_foreign(tmp_path: Path) -> None:
    """This process' tree, its ancestors (pytest's parents, an Airflow task runner) and the zlops
    benchmarks of other devices (found through their device leases, with their zlops process and
    its tree) are zlops' own; a process started beside them is foreign."""
    other_bench = detached("import time; time.sleep(30)")
    try:
        me = os.getpid()
        (tmp_path / "cpu-1.lock").write_text(json.dumps({"pid": 4000, "benchmark_pid": other_bench,
                                                         "benchmark_start": process_start(other_bench)}))
        # a lease whose benchmark ended (its start time does not match): not a zlops benchmark any more
        (tmp_path / "cpu-2.lock").write_text(json.dumps({"pid": 4100, "benchmark_pid": other_bench,
                                                         "benchmark_start": 1}))
        parents = {1: 0, 50: 1, 60: 50, me: 60, 70: me, 71: 70,       # ancestors 60, 50, 1; descendants 70, 71
                   4000: 1, 4001: 4000, other_bench: 1, 4002: other_bench,  # the other zlops process and benchmark
                   4100: 1, 5000: 1, 5001: 60}                          # foreign: a sibling of pytest's parent too
        sampler = HostSampler(locks_dir=tmp_path)
        zlops, own, bench = sampler.family(parents)
        assert own == {me, 70, 71} and bench == {70, 71}
        assert zlops == {1, 50, 60, me, 70, 71, 4000, 4001, other_bench, 4002}
        sampler.benchmark = 71  # once the runner names the benchmark, its tree is the benchmark's
        assert sampler.family(parents)[2] == {71}
    finally:
        os.kill(other_bench, signal.SIGKILL)


def test_a_foreign_device_process_always_invalidates() -> None:
    summary = {"foreign_device_processes": [[31337, "python3 train.py"]]}
    assert shard_invalid_reason(summary, HostLimits()) == (
        "device shared: 1 foreign process(es) on the device during the run: pid 31337 (python3 train.py)")


def test_the_wait_is_bounded_and_ends_when_the_host_quiets() -> None:
    class Readings:
        def __init__(self, values: list[float]) -> None:
            self.values = values

        def read(self) -> HostReading:
            return HostReading(1.0, self.values.pop(0) if len(self.values) > 1 else self.values[0], None, 1.0)

    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    limits = HostLimits(max_foreign_cpu_pct=25, contention_wait_s=10)
    quiet = wait_for_quiet(limits, sampler=Readings([180.0, 90.0, 10.0]), clock=lambda: now[0], sleep=sleep)
    assert quiet.quiet and quiet.waited_s == 3.0
    now[0] = 0.0
    busy = wait_for_quiet(limits, sampler=Readings([180.0]), clock=lambda: now[0], sleep=sleep)
    assert not busy.quiet and busy.waited_s == 10.0
    assert busy.reason == "other processes use 180% CPU (limit 25%)"
    assert wait_for_quiet(HostLimits(contention_wait_s=10)).quiet  # nothing to wait for without a limit
    assert busy_reason(HostReading(5.0, 0.0, None), HostLimits(max_host_load=2)) == "load average 5.00 (limit 2)"


# --- real processes -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.serial  # a real CPU hog: nothing else beside it (tests/conftest.py)
def test_the_host_sampler_sees_a_foreign_hog_and_not_its_own_tree(hog: int) -> None:
    own_child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<3: pass"])
    try:
        sampler = HostSampler()
        time.sleep(1.5)
        reading = sampler.read()
    finally:
        own_child.kill()
        own_child.wait()
    top = {pid: pct for _name, pid, pct in sampler.totals(top_n=1000)["foreign_top"]}
    assert reading.foreign_cpu_pct is not None and reading.foreign_cpu_pct > 25
    assert top.get(hog, 0) > 5, top  # the hog is foreign and busy (its share depends on the host's other load)
    assert own_child.pid not in top and os.getpid() not in top  # the benchmark's own tree never is


def _spec(tmp_path: Path, backend: str, seconds: float, *, pin: int | None = None) -> ShardSpec:
    worktree = tmp_path / "wt"
    worktree.mkdir(parents=True, exist_ok=True)
    (worktree / "bench.py").write_text(
        "import json, sys, time\n"
        f"t = time.time()\nwhile time.time() - t < {seconds}: pass\n"
        "json.dump({'schema_version': 1, 'cases': [{'name': 'x', 'metric': 'latency', 'unit': 'ms',"
        " 'samples': [1.0, 1.1]}]}, open(sys.argv[1], 'w'))\n")
    pinning = ["taskset", "-c", str(pin)] if pin is not None else []
    suite = SuiteConfig(repo=str(tmp_path / "up"), format="zlops-json", pools=["p"], rounds=2, timeout_s=60,
                        command=[*pinning, "python", "bench.py", "{results}"])
    return ShardSpec(run_key="r", suite_name="s", suite=suite, sha="0" * 40, pool="p", backend=backend, device=0,
                     worktree=worktree, venv=Path(sys.prefix), artifact_dir=tmp_path / "run" / "p" / "0")


@pytest.mark.slow
@pytest.mark.serial  # a real CPU hog: nothing else beside it (tests/conftest.py)
def test_a_cpu_shard_beside_a_hog_carries_the_figure(tmp_path: Path, hog: int) -> None:
    spec = _spec(tmp_path, "cpu", 2.0)
    out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.5)
    assert out.status is ShardStatus.OK
    summary = summarize_dir(spec.artifact_dir)
    assert summary["foreign_cpu_mean_pct"] > 25 and summary["load1_max"] > 0
    assert summary["foreign_top"]  # the busiest foreign processes are named (the hog among them, load allowing)
    reason = shard_invalid_reason(summary, HostLimits(max_foreign_cpu_pct=25))
    assert reason is not None and reason.startswith("host busy: other processes used ")
    assert "% CPU (limit 25%) during the run" in reason


@pytest.mark.slow
@pytest.mark.serial  # a real CPU hog: nothing else beside it (tests/conftest.py)
@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and two CPUs")
def test_a_hog_pinned_to_the_benchmarks_core_invalidates_it_and_without_it_the_figure_decides(
        tmp_path: Path) -> None:
    """The benchmark runs pinned (``taskset -c 0``): contention is measured on CPU 0 alone, from
    /proc/stat, minus the benchmark's own share. A hog pinned to CPU 0 takes about half of it."""
    cpu = min(os.sched_getaffinity(0))
    limits = HostLimits(max_foreign_cpu_pct=25)
    hog_pid = detached(f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass")
    try:
        spec = _spec(tmp_path / "hog", "cpu", 2.5, pin=cpu)
        out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.5)
    finally:
        os.kill(hog_pid, signal.SIGKILL)
    assert out.status is ShardStatus.OK
    busy = summarize_dir(spec.artifact_dir)
    assert busy["foreign_cpu_pinned"] == [cpu]
    assert busy["foreign_cpu_mean_pct"] > 25, busy
    reason = shard_invalid_reason(busy, limits)
    assert reason is not None and reason.startswith(
        f"host busy: other processes used {busy['foreign_cpu_mean_pct']:.0f}% CPU of pinned CPU {cpu} (limit 25%)")

    quiet_spec = _spec(tmp_path / "quiet", "cpu", 2.5, pin=cpu)  # no hog: whatever else this host runs decides
    run_shard(quiet_spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.5)
    quiet = summarize_dir(quiet_spec.artifact_dir)
    assert quiet["foreign_cpu_pinned"] == [cpu]
    assert (shard_invalid_reason(quiet, limits) is None) == (quiet["foreign_cpu_mean_pct"] <= 25), quiet


@pytest.mark.slow
def test_a_foreign_process_on_the_gpu_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sleeper = detached("import time; time.sleep(60)")
    try:
        procs = tmp_path / "gpu_procs.txt"
        # the foreign sleeper, this process (own tree: not foreign), a pid of another namespace
        procs.write_text(f"0 {sleeper} python3 train.py\n0 {os.getpid()} zlops\n0 4194000 hidden\n1 {sleeper} x\n")
        use_fakebin(monkeypatch, FAKE_NVSMI_PROCS_FILE=str(procs))
        spec = _spec(tmp_path, "cuda", 0.5)
        out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.2)
    finally:
        os.kill(sleeper, signal.SIGKILL)
    assert out.status is ShardStatus.OK
    summary = summarize_dir(spec.artifact_dir)
    assert summary["foreign_device_processes"] == [[sleeper, "python3 train.py"]]
    assert summary["unattributed_device_processes"] == [[4194000, "hidden"]]
    assert shard_invalid_reason(summary, HostLimits()) == (
        f"device shared: 1 foreign process(es) on the device during the run: pid {sleeper} (python3 train.py)")


@pytest.mark.slow
def test_no_foreign_process_no_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch)
    spec = _spec(tmp_path, "cuda", 0.3)
    run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.2)
    summary = summarize_dir(spec.artifact_dir)
    assert summary["foreign_device_processes"] == [] and summary["device_process_polls"] >= 1
    assert shard_invalid_reason(summary, HostLimits()) is None
