"""Running a vendor's device tool, and the two telemetry samplers built on it (polled, streaming).

Shared by the cuda, ascend, musa and rocm backends. Every program goes through :mod:`zlops.host.proc`.
Telemetry is evidence, not a gate: a missing tool, a permission error, a tool that dies or prints
nothing for a requested device ends up as a line in ``telemetry.err``; nothing here raises into
the benchmark once a sampler has been built, and building one never runs a program.
"""

from __future__ import annotations

import csv
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from zlops.errors import BackendUnavailable, ProcessError
from zlops.host import proc
from zlops.host.telemetry import COLUMNS, CSV_NAME, PollingSampler, TelemetrySample, TelemetrySampler, write_err

log = logging.getLogger(__name__)

Parse = Callable[[str], list[TelemetrySample]]
TOOL_TIMEOUT_S = 30.0


def run_tool(argv: Sequence[str], *, timeout_s: float = TOOL_TIMEOUT_S, check: bool = True) -> proc.Completed:
    """Run a device tool with the allowlisted environment (no visibility variable: the tool must
    see every device). A tool that is not installed raises :class:`BackendUnavailable`."""
    try:
        return proc.run(argv, env=proc.build_env(), timeout=timeout_s, check=check, what=argv[0])
    except ProcessError as exc:
        if exc.returncode is None and not exc.timed_out:
            raise BackendUnavailable(f"{argv[0]} is not installed or not executable here "
                                     f"(PATH={proc.build_env().get('PATH', '')}): {exc.stderr_tail}") from None
        raise


def missing_tool(name: str) -> str | None:
    """Why ``name`` cannot be run here (None when it can), judged on the PATH a child would get."""
    path = proc.build_env().get("PATH", os.defpath)
    if shutil.which(name, path=path) is not None:
        return None
    for folder in path.split(os.pathsep):
        candidate = Path(folder or ".") / name
        if candidate.is_file():  # which() skips files this user may not execute
            return f"{candidate} is not executable by this user; no telemetry for this shard"
    return f"{name} not found on PATH ({path}); no telemetry for this shard"


def requested_devices(visibility_env: str | None, devices: Sequence[int]) -> list[int] | None:
    """The devices to sample: ``devices`` when given; else the indices in the backend's visibility
    variable (``CUDA_VISIBLE_DEVICES=2,3`` -> [2, 3]); None (every device) when neither names any.
    A visibility value that is not a list of indices (UUIDs, MIG ids) also means every device."""
    if devices:
        return sorted({int(d) for d in devices})
    raw = os.environ.get(visibility_env, "") if visibility_env else ""
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if parts and all(p.isdigit() for p in parts):
        return sorted({int(p) for p in parts})
    return None


def _keep(samples: list[TelemetrySample], wanted: list[int] | None) -> list[TelemetrySample]:
    return samples if wanted is None else [s for s in samples if s.index in wanted]


def polling_sampler(out_dir: Path, argv: Sequence[str], parse: Parse, wanted: list[int] | None, *,
                    interval_s: float, timeout_s: float = TOOL_TIMEOUT_S) -> TelemetrySampler:
    """A sampler that runs ``argv`` every ``interval_s`` and keeps the samples of ``wanted``
    (None: all). A requested device the tool never reports is named once in telemetry.err."""
    reason = missing_tool(argv[0])
    if reason:
        return TelemetrySampler(out_dir, reason=reason)
    env = proc.build_env()
    reported: set[int] = set()
    warned = False

    def read() -> list[TelemetrySample]:
        nonlocal warned
        done = proc.run(argv, env=env, timeout=timeout_s, what=f"telemetry sampler {argv[0]}")
        samples = parse(done.stdout)
        reported.update(s.index for s in samples)
        absent = sorted(set(wanted or ()) - reported)
        if absent and not warned:
            warned = True
            write_err(out_dir, f"{argv[0]} reports no device {absent} (it reports {sorted(reported)})")
        return _keep(samples, wanted)

    return PollingSampler(out_dir, read, interval_s=interval_s)


class StreamingSampler(TelemetrySampler):
    """Runs a tool that prints samples until stopped (``nvidia-smi ... -lms N``); its raw output
    goes to ``telemetry.raw`` and becomes telemetry.csv rows when the sampler stops."""

    RAW_NAME = "telemetry.raw"
    RAW_ERR_NAME = "telemetry.raw.err"

    def __init__(self, out_dir: Path, argv: Sequence[str], parse: Parse, wanted: list[int] | None) -> None:
        super().__init__(out_dir)
        self.argv = list(argv)
        self._parse = parse
        self._wanted = wanted
        self._proc: proc.Spawned | None = None

    def start(self) -> None:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with (self.out_dir / CSV_NAME).open("w", newline="", encoding="utf-8") as fh:
                csv.writer(fh).writerow(COLUMNS)
            self._proc = proc.spawn(self.argv, stdout_path=self.out_dir / self.RAW_NAME,
                                    stderr_path=self.out_dir / self.RAW_ERR_NAME, what="telemetry sampler")
        except Exception as exc:  # noqa: BLE001 - a sampler must never take the benchmark down
            write_err(self.out_dir, f"sampler did not start: {type(exc).__name__}: {exc}")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        if self._proc is None:
            return
        spawned, self._proc = self._proc, None
        try:
            died = spawned.returncode
            spawned.stop()
            if died is not None:
                tail = (self.out_dir / self.RAW_ERR_NAME).read_text(encoding="utf-8", errors="replace").strip()
                write_err(self.out_dir, f"{self.argv[0]} exited with code {died} before the benchmark ended"
                                        + (f": {tail[-500:]}" if tail else ""))
            samples = self._parse((self.out_dir / self.RAW_NAME).read_text(encoding="utf-8", errors="replace"))
            absent = sorted(set(self._wanted or ()) - {s.index for s in samples})
            if not samples and died is None:
                write_err(self.out_dir, f"{self.argv[0]} printed no samples while the benchmark ran")
            elif absent and samples:
                write_err(self.out_dir, f"{self.argv[0]} reported no samples for device {absent}")
            with (self.out_dir / CSV_NAME).open("a", newline="", encoding="utf-8") as fh:
                csv.writer(fh).writerows(s.row() for s in _keep(samples, self._wanted))
        except Exception as exc:  # noqa: BLE001 - a sampler must never take the benchmark down
            write_err(self.out_dir, f"sampler output not converted: {type(exc).__name__}: {exc}")


__all__ = ["StreamingSampler", "missing_tool", "polling_sampler", "requested_devices", "run_tool"]
