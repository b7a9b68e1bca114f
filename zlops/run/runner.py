"""Run one benchmark shard: one process on one device, with telemetry beside it.

A shard's artifact folder holds ``run.log`` (stdout+stderr), ``manifest.json`` (argv, commit, the
environment zlops added, start/end, exit status), the results file, ``telemetry.csv`` (or
``telemetry.err``), and for a suite with ``kernels:`` the kernel inventory ``kernels.json``
(zlops.kernels; the process gets a Triton cache of its own). A crash or timeout marks only that shard
failed; it never raises, so the other devices' shards still count.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops import __version__
from zlops.backends import get_backend
from zlops.backends.base import DeviceBackend
from zlops.config.settings import SuiteConfig, command_placeholders
from zlops.errors import DeviceBusy, ProcessError, ZlopsError
from zlops.host import proc
from zlops.host.locks import GangLease, device_lease, gang_lease
from zlops.identity import IDENTITY_FILE, build_identity, read_identity, read_pins, write_identity
from zlops.kernels.inventory import INVENTORY_FILE, Inventory, write_inventory
from zlops.kernels.providers import TRITON_CACHE_NAME, Prepared, Provider, get_provider
from zlops.kernels.seed import SeedPlan
from zlops.model import ShardOutcome, ShardStatus
from zlops.redact import env_for_record
from zlops.run import devices
from zlops.run.selection import selection_argv

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
RUN_LOG = "run.log"
MANIFEST_VERSION = 1
#: the artifact bundle of a shard: run.log, manifest.json, the results file, run_identity.json,
#: telemetry.csv (or telemetry.err) and timing.json; `zlops bundle verify DIR` checks one
BUNDLE_VERSION = 1
TIMING_FILE = "timing.json"
#: the shard's cases, one a line, for a command that takes {cases_file} (empty: every case)
CASES_FILE = "cases.txt"


@dataclass(frozen=True)
class ShardSpec:
    """Everything needed to run one shard; plain values so a worker on any host can run it."""

    run_key: str
    suite_name: str
    suite: SuiteConfig
    sha: str
    pool: str
    backend: str
    device: int
    worktree: Path
    venv: Path
    artifact_dir: Path
    variant: str = "default"
    #: the cases this shard runs (a partitioned suite's share, or an A/B's suspects for a suite that
    #: selects, zlops.run.selection); None: every case
    cases: tuple[str, ...] | None = None
    #: a gang shard's devices (a campaign case on P devices, zlops.campaign.plan), ``device`` first; empty: (device,)
    gang: tuple[int, ...] = ()
    #: more placeholder values ({p}, {stack}, {case}, {size}, {variant} of a campaign shard)
    placeholders: tuple[tuple[str, str], ...] = ()
    #: the folder of the shard's kernel cache (``kernels: triton``: its TRITON_CACHE_DIR); None: its own, in
    #: ``artifact_dir``. Repeated runs of one commit on one device (A/B pairs, bisection) share one, so
    #: only the first of them compiles
    kernel_cache: Path | None = None
    #: where a nightly shard's own kernel cache is seeded from (zlops.kernels.seed: the earlier night's
    #: shard caches, found by zlops.steps.run_device); None: not seeded
    kernel_seed: SeedPlan | None = None

    @property
    def devices(self) -> tuple[int, ...]:
        """Every device the shard holds: its gang, or its one device."""
        return self.gang or (self.device,)

    @property
    def results_file(self) -> Path:
        return self.artifact_dir / self.suite.results_name

    @property
    def cases_file(self) -> Path:
        return self.artifact_dir / CASES_FILE

    @property
    def cwd(self) -> Path:
        """Where the command runs: the worktree, or the artifact folder for a harness that names its
        results file itself (``results_glob``), so shards sharing a worktree never share that file."""
        return self.artifact_dir if self.suite.results_glob else self.worktree


def render_command(spec: ShardSpec) -> list[str]:
    """The suite's argv with its placeholders filled for this shard (no shell is ever involved)."""
    values = {
        "results": str(spec.results_file),
        "device": str(spec.device),
        "devices": ",".join(str(d) for d in spec.devices),
        "rounds": str(spec.suite.rounds),
        "worktree": str(spec.worktree),
        "artifacts": str(spec.artifact_dir),
        "variant": spec.variant,
        "cases_file": str(spec.cases_file),
        **dict(spec.placeholders),
    }
    return [arg.format_map(values) for arg in selection_argv(spec.suite, spec.cases)]


#: files of the shard's own that a results_glob never takes
_OWN_FILES = frozenset({RUN_LOG, MANIFEST, CASES_FILE, TIMING_FILE, IDENTITY_FILE, "telemetry.csv", "telemetry.err",
                        INVENTORY_FILE, INVENTORY_FILE + ".tmp",
                        MANIFEST + ".tmp", TIMING_FILE + ".tmp", IDENTITY_FILE + ".tmp"})


def _named_results(spec: ShardSpec) -> list[Path]:
    assert spec.suite.results_glob is not None
    return sorted(p for p in spec.artifact_dir.glob(spec.suite.results_glob)
                  if p.is_file() and p.name not in _OWN_FILES and p != spec.results_file)


def collect_named_results(spec: ShardSpec) -> str | None:
    """Move the one file the harness named itself (``results_glob``, in the artifact folder it ran
    in) to ``{results}``; the error when there is none or more than one. FlagGems writes
    ``result_<its argv>.log`` into its working directory, whatever the caller wants."""
    found = _named_results(spec)
    if not found:
        return (f"benchmark exited 0 but wrote no file matching {spec.suite.results_glob!r} in {spec.artifact_dir}")
    if len(found) > 1:
        return (f"{len(found)} files match results_glob {spec.suite.results_glob!r} in {spec.artifact_dir} "
                f"({', '.join(p.name for p in found[:5])}); make the glob match the one results file")
    os.replace(found[0], spec.results_file)
    return None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _write_manifest(spec: ShardSpec, data: dict[str, Any]) -> None:
    tmp = spec.artifact_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, spec.artifact_dir / MANIFEST)


def read_manifest(artifact_dir: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((artifact_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


def outcome_from_manifest(data: dict[str, Any], artifact_dir: Path) -> ShardOutcome:
    def ts(v: Any) -> datetime | None:
        return datetime.fromisoformat(v) if isinstance(v, str) and v else None

    status = data.get("status")
    return ShardOutcome(
        pool=data["pool"], device=int(data["device"]), backend=data["backend"],
        status=ShardStatus(status) if status in {s.value for s in ShardStatus} else ShardStatus.FAILED,
        artifact_dir=artifact_dir, exit_code=data.get("exit_code"), started_at=ts(data.get("started_at")),
        ended_at=ts(data.get("ended_at")),
        error=data.get("error") if status in {s.value for s in ShardStatus} else "the shard never finished",
        results_file=Path(data["results_file"]) if data.get("results_file") else None,
    )


def _require_idle(backend: DeviceBackend, device: int, wait_s: float, poll_s: float) -> None:
    """Raise :class:`DeviceBusy` when ``device`` is still busy (memory in use or a process: with
    zlops' own lock held, any process there is foreign) after ``wait_s``. A tool that cannot
    tell (missing, failing) does not block the shard: the benchmark itself will show the problem."""
    if not backend.reports_idleness:
        return
    try:
        if devices.wait_until_idle(backend, device, timeout_s=wait_s, poll_s=poll_s):
            return
        state = devices.describe(devices.find_device(backend, device))
    except ZlopsError as exc:
        log.warning("cannot tell whether %s device %d is idle (%s); running anyway", backend.name, device, exc)
        return
    raise DeviceBusy(f"{backend.name} device {device} is used by a foreign process ({state}) "
                     f"after waiting {round(wait_s, 1):g} s")


def _shard_identity(spec: ShardSpec, backend: Any, *, results_written: bool) -> dict[str, Any]:
    """Backend + zlops + pinned revisions + whatever the harness wrote to ``{artifacts}/run_identity.json``;
    the timer as :func:`zlops.identity.resolve_timer` finds it (the results file is read for it)."""
    harness = read_identity(spec.artifact_dir / IDENTITY_FILE)
    try:
        pins = read_pins(spec.worktree, spec.suite.pins)
    except (OSError, ValueError) as exc:
        pins = {"<error>": str(exc)}
    format_timer = None
    if results_written and not spec.suite.timer and not (harness or {}).get("timer"):
        from zlops.formats import results_timer

        format_timer = results_timer(spec.suite.format, spec.results_file, backend=backend.name,
                                     root=spec.artifact_dir)  # read as ingest will read it
    return build_identity(backend_identity=backend.identity(list(spec.devices)), rounds=spec.suite.rounds, pins=pins,
                          harness=harness, direct_repeat=_direct_repeat(spec.suite.env),
                          configured_timer=spec.suite.timer, format_timer=format_timer)


def _direct_repeat(env: dict[str, str]) -> int:
    try:
        return max(1, int(env.get("ZL_DIRECT_REPEAT", "1") or 1))
    except ValueError:
        return 1


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), or None.

    (pid, start) names one process for good: a pid reused by another program has another start.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return int(text.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs: no such process, or a zombie nobody reaped yet (a zombie
    holds no files, so no device lease either)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return text.rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


def write_error(exc: OSError, where: Path) -> str:
    """The shard error for a failed write: a full disk says so and names the folder."""
    if exc.errno == errno.ENOSPC:
        what = f" (writing {exc.filename})" if exc.filename and str(exc.filename) != str(where) else ""
        return f"no space left under {where}{what}; free space there and re-run the shard"
    if exc.errno == errno.EDQUOT:
        return f"disk quota exceeded under {where}; free space there and re-run the shard"
    return f"cannot write under {where}: {exc}"


def _kernel_provider(spec: ShardSpec) -> tuple[Provider, Prepared] | None:
    """The suite's kernel provider, prepared for this shard (None: the suite records no kernels)."""
    setting = spec.suite.kernels
    if setting is None:
        return None
    provider = get_provider(setting.provider)
    return provider, provider.prepare(spec.kernel_cache or spec.artifact_dir / TRITON_CACHE_NAME,
                                      seed=spec.kernel_seed, suite_env=spec.suite.env)


def _record_kernels(spec: ShardSpec, provider: Provider, prepared: Prepared) -> str:
    """Collect the shard's kernel inventory into ``kernels.json``; its one-line summary for the manifest.
    Never fails the shard: a provider that cannot read its cache records an ``error`` inventory."""
    assert spec.suite.kernels is not None
    try:
        inv = provider.collect(prepared, max_kernels=spec.suite.kernels.max_per_shard)
    except (OSError, ZlopsError, ValueError) as exc:
        inv = Inventory(provider=provider.name, state="error", reason=f"reading the kernels failed: {exc}")
    write_inventory(spec.artifact_dir, inv)
    if inv.dropped:
        log.warning("shard %s/%s: %d kernels over kernels.max_per_shard (%d) dropped from the inventory",
                    spec.pool, spec.device, inv.dropped, spec.suite.kernels.max_per_shard)
    return inv.summary()


#: below this much free space (or 0.1% of a smaller file system) a disk counts as full (:func:`disk_full`)
FULL_DISK_BYTES = 1 << 20


def disk_full(path: Path) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing parent) is full: less than
    :data:`FULL_DISK_BYTES` or 0.1% of it free to this user."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return False
    free, size = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    return free < min(FULL_DISK_BYTES, max(st.f_frsize, size // 1000))


@contextlib.contextmanager
def _lease(spec: ShardSpec, backend: str, locks_dir: Path, wait_s: float) -> Iterator[GangLease]:
    """The shard's device lease, or a gang shard's leases of all its devices at once (zlops.host.locks)."""
    if spec.gang:
        with gang_lease(locks_dir, backend, list(spec.gang), wait_s=wait_s, owner=spec.run_key) as gang:
            yield gang
    else:
        with device_lease(locks_dir, backend, spec.device, wait_s=wait_s, owner=spec.run_key) as one:
            yield GangLease((one,), one.waited)


def partial_note(code: int, run_log: Path) -> str:
    """The note an ok shard carries when its benchmark exited with one of the suite's ``partial_exit_codes``."""
    return (f"partial: the benchmark exited with code {code} (the suite's partial_exit_codes): the results it wrote "
            f"are kept, the cases it did not write are missing; see {run_log}")


def run_shard(spec: ShardSpec, *, locks_dir: Path, device_wait_s: float,
              telemetry_interval_s: float = 1.0, require_idle: bool = False,
              idle_poll_s: float = 5.0) -> ShardOutcome:
    """Run one shard to completion and describe how it ended. Never raises for a benchmark failure,
    nor for a failed write of its artifacts (a full disk): the shard is FAILED with the reason.

    With ``require_idle`` the device must also be idle by its backend's tool (zlops.run.devices) once
    zlops' lock is held; a foreign process is waited for within what is left of ``device_wait_s``,
    then the shard is SKIPPED with the device's state as the reason.
    """
    try:
        return _run_shard(spec, locks_dir=locks_dir, device_wait_s=device_wait_s,
                          telemetry_interval_s=telemetry_interval_s, require_idle=require_idle,
                          idle_poll_s=idle_poll_s)
    except OSError as exc:
        error = write_error(exc, spec.artifact_dir)
        log.warning("shard %s/%s failed: %s", spec.pool, spec.device, error)
        return ShardOutcome(pool=spec.pool, device=spec.device, backend=spec.backend, status=ShardStatus.FAILED,
                            artifact_dir=spec.artifact_dir, exit_code=None, started_at=None, ended_at=_now(),
                            error=error)


def _run_shard(spec: ShardSpec, *, locks_dir: Path, device_wait_s: float, telemetry_interval_s: float,
               require_idle: bool, idle_poll_s: float) -> ShardOutcome:
    spec.artifact_dir.mkdir(parents=True, exist_ok=True)
    backend = get_backend(spec.backend)
    argv = render_command(spec)
    # ZL_BACKEND tells a harness (and the zlops pytest plugin) which device runtime it is on
    own_env = {"ZL_BACKEND": backend.name, **backend.pin_env(list(spec.devices))}
    (spec.artifact_dir / INVENTORY_FILE).unlink(missing_ok=True)
    kernels = _kernel_provider(spec)
    if kernels is not None:  # the shard's own kernel cache (TRITON_CACHE_DIR), zlops.kernels
        own_env.update(kernels[1].env)
    added_env = {**spec.suite.env, **own_env}
    env = proc.build_env(added_env, venv=spec.venv)
    # a re-run of the same shard must not read last attempt's results, log or identity
    for stale in (spec.results_file, spec.artifact_dir / RUN_LOG, spec.artifact_dir / "telemetry.csv",
                  spec.artifact_dir / "telemetry.err", spec.artifact_dir / IDENTITY_FILE,
                  spec.artifact_dir / TIMING_FILE, *(_named_results(spec) if spec.suite.results_glob else ())):
        stale.unlink(missing_ok=True)
    if "cases_file" in command_placeholders(spec.suite.command):
        spec.cases_file.write_text("".join(f"{c}\n" for c in spec.cases or ()), encoding="utf-8")
    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION, "bundle_version": BUNDLE_VERSION, "zlops_version": __version__,
        "run_key": spec.run_key,
        "suite": spec.suite_name, "commit": spec.sha, "pool": spec.pool, "backend": spec.backend,
        "device": spec.device, "devices": list(spec.devices), "host": socket.gethostname(), "argv": argv,
        "cwd": str(spec.cwd),
        # the suite's env by name, values *** unless listed in env_public (zlops.redact): a token never lands here;
        # a value zlops built on the suite's own (PYTHONPATH, the kernel seed's hook first) stays as private as it
        "venv": str(spec.venv), "env_added": env_for_record(added_env, [
            *spec.suite.env_public, *(k for k in own_env if k != "PYTHONPATH" or k not in spec.suite.env)]),
        "timeout_s": spec.suite.timeout_s,
        "results_file": str(spec.results_file), "format": spec.suite.format,
        "cases": None if spec.cases is None else list(spec.cases),
        "identity": backend.identity(list(spec.devices)), "status": "waiting", "started_at": None,
        "ended_at": None, "exit_code": None, "error": None,
    }
    _write_manifest(spec, manifest)
    started = ended = None
    exit_code: int | None = None
    error: str | None = None
    t_leased = time.monotonic()
    held: GangLease | None = None
    try:
        with _lease(spec, backend.name, locks_dir, device_wait_s) as lease:
            held = lease
            waited = lease.waited
            if require_idle:  # every device of a gang must be idle (zlops.run.devices' rule), each in turn
                for device in spec.devices:
                    left = max(0.0, device_wait_s - (time.monotonic() - t_leased))
                    _require_idle(backend, device, left, idle_poll_s)
            manifest.update(status="running", lock_wait_s=round(waited, 3), started_at=_now().isoformat(),
                            lease=str(lease.paths[0]), owner_pid=os.getpid(),
                            **({"leases": [str(p) for p in lease.paths]} if spec.gang else {}))
            _write_manifest(spec, manifest)
            sampler = backend.telemetry_sampler(list(spec.devices), spec.artifact_dir,
                                                interval_s=telemetry_interval_s)
            sampler.attach(locks_dir=locks_dir)  # the other zlops benchmarks here are not foreign load

            def started_benchmark(pid: int) -> None:
                # who holds the device now; an orphan check (zlops.run.recovery) reads it from here
                lease.update(benchmark_pid=pid, benchmark_start=process_start(pid))
                sampler.attach(benchmark_pid=pid)
                manifest.update(benchmark_pid=pid, benchmark_start=process_start(pid))
                try:
                    _write_manifest(spec, manifest)
                except OSError as exc:  # the benchmark still runs; the shard records the write failure
                    log.warning("shard %s/%s: %s", spec.pool, spec.device, write_error(exc, spec.artifact_dir))

            started = _now()
            sampler.start()
            if sampler.pid is not None:
                manifest.update(sampler_pid=sampler.pid, sampler_start=process_start(sampler.pid))
            try:
                # the benchmark inherits the lease's fd: the device stays leased for as long as the
                # benchmark lives, even if this process is killed
                done = proc.run(argv, cwd=spec.cwd, env=env, timeout=spec.suite.timeout_s,
                                log_path=spec.artifact_dir / RUN_LOG, check=False, what="benchmark",
                                pass_fds=lease.fds, on_start=started_benchmark)
            finally:
                sampler.stop()
                ended = _now()
    except DeviceBusy as exc:
        status, error = ShardStatus.SKIPPED, str(exc)
    except ProcessError as exc:  # the program could not even start (missing binary)
        status, error = ShardStatus.FAILED, str(exc)
    else:
        exit_code = done.returncode
        if proc.interrupted() is not None and done.returncode != 0:
            status = ShardStatus.FAILED
            error = f"interrupted ({proc.interrupted()}): the benchmark's process group was ended"
        elif done.timed_out:
            status, error = ShardStatus.TIMEOUT, f"timed out after {spec.suite.timeout_s:g} s; process group killed"
        elif done.returncode != 0 and done.returncode not in spec.suite.partial_exit_codes:
            status = ShardStatus.FAILED
            error = f"benchmark exited with code {done.returncode}; see {spec.artifact_dir / RUN_LOG}"
        elif spec.suite.results_glob and (error := collect_named_results(spec)) is not None:
            status = ShardStatus.FAILED
        elif not spec.results_file.exists() and not spec.results_file.is_symlink():
            status = ShardStatus.FAILED
            error = f"benchmark exited {done.returncode} but wrote no results file {spec.results_file}"
        else:
            status = ShardStatus.OK
            if done.returncode != 0:  # one of the suite's partial_exit_codes: the results written stand
                error = partial_note(done.returncode, spec.artifact_dir / RUN_LOG)
                manifest["partial_exit_codes"] = list(spec.suite.partial_exit_codes)
    if kernels is not None:
        if started is not None:
            manifest["kernels"] = _record_kernels(spec, *kernels)
        kernels[0].release(kernels[1])
    detached = [d for one in (held.leases if held is not None else ()) for d in one.detached]
    if detached:  # the device stays leased until they end (zlops.host.locks); say who keeps it
        manifest["detached"] = detached
        log.warning("shard %s/%s: the benchmark left %s holding the device lease: the device stays busy until "
                    "it ends", spec.pool, spec.device,
                    ", ".join(f"pid {d['pid']} ({d['cmd'][:120]})" for d in detached))
    identity = _shard_identity(spec, backend, results_written=status is ShardStatus.OK)
    manifest.update(status=status.value, ended_at=(ended or _now()).isoformat(), exit_code=exit_code, error=error,
                    started_at=started.isoformat() if started else None, identity=identity)
    write_identity(spec.artifact_dir / IDENTITY_FILE, identity)
    _write_json(spec.artifact_dir / TIMING_FILE, {
        "timing_version": 1, "status": status.value, "started_at": manifest["started_at"],
        "ended_at": manifest["ended_at"], "lock_wait_s": manifest.get("lock_wait_s"),
        "duration_s": (ended - started).total_seconds() if started and ended else None,
        "exit_code": exit_code, "timeout_s": spec.suite.timeout_s})
    _write_manifest(spec, manifest)
    if status is not ShardStatus.OK:
        log.warning("shard %s/%s %s: %s", spec.pool, spec.device, status.value, error)
    return ShardOutcome(pool=spec.pool, device=spec.device, backend=backend.name, status=status,
                        artifact_dir=spec.artifact_dir, exit_code=exit_code, started_at=started, ended_at=ended,
                        error=error, results_file=spec.results_file if status is ShardStatus.OK else None)
