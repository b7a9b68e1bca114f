"""The zlops error hierarchy: narrow, typed errors whose messages say what to fix."""

from __future__ import annotations

import errno
import os
import traceback
from collections.abc import Sequence


class ZlopsError(Exception):
    """Base class of every error zlops raises on purpose."""


class ConfigError(ZlopsError):
    """The configuration file (or a trigger param) is invalid; the message names file and key path."""


class BackendUnavailable(ZlopsError):
    """A device backend was named that does not exist, or its tools are missing on this host."""


class GitError(ZlopsError):
    """A git operation failed: unreachable upstream, unknown ref, worktree trouble."""


class EnvBuildError(ZlopsError):
    """Building the per-worktree Python environment failed."""


class ParseError(ZlopsError):
    """A results file is malformed; the message names the file and, where known, the line."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line


class StoreError(ZlopsError):
    """The result store refused an operation (schema missing, conflicting write)."""


class DatabaseUnavailable(StoreError):
    """The store's database cannot be reached or used; the message is one line, password redacted.

    ``transient`` says whether waiting could help (a refused connect, a terminated connection) or
    not (an unknown host, wrong credentials, an unwritable SQLite file).
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class RunAlreadyAccepted(ZlopsError):
    """A completed run that is a baseline would be re-measured without ``--replace``."""


class RunOwned(ZlopsError):
    """A run id is being run by another live process (zlops.run.recovery.claim_run): a second one is refused."""


class StoreCorrupt(StoreError):
    """The store's file is damaged (not a database, or ``PRAGMA quick_check`` finds problems): nothing is
    written to it; the message says how to restore it (docs/store.md)."""


class CaliberMismatch(ZlopsError):
    """Two runs measured different things; comparing them would publish an artifact."""


class DeviceBusy(ZlopsError):
    """A device is held by another benchmark process and did not become free in time."""


class HostBusy(ZlopsError):
    """A benchmark run the host-contention gate made invalid (foreign load, steal): run it again once the host
    quiets. ``seconds``: what the invalid run cost (device time spent all the same)."""

    def __init__(self, message: str, *, seconds: float | None = None) -> None:
        super().__init__(message)
        self.seconds = seconds


class ProcessError(ZlopsError):
    """An external program failed. Keeps argv, exit code and the tails of stdout/stderr."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str],
        returncode: int | None,
        stdout_tail: str = "",
        stderr_tail: str = "",
        timed_out: bool = False,
    ) -> None:
        detail = [message, f"argv: {list(argv)!r}", f"exit code: {returncode}"]
        if timed_out:
            detail.append("timed out (the whole process group was killed)")
        if stdout_tail.strip():
            detail.append("stdout tail:\n" + stdout_tail.rstrip())
        if stderr_tail.strip():
            detail.append("stderr tail:\n" + stderr_tail.rstrip())
        super().__init__("\n".join(detail))
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout_tail = stdout_tail
        self.stderr_tail = stderr_tail
        self.timed_out = timed_out


class Interrupted(BaseException):
    """zlops was told to stop (SIGTERM, SIGHUP): raised in the main thread by the CLI's signal
    handler. A BaseException like KeyboardInterrupt, so no ``except Exception`` swallows it on the
    way out; the nightly ends its benchmarks and marks the run ``interrupted``."""

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        self.signame = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signame}")


def os_error_line(exc: OSError) -> str:
    """One line for an OSError that always names what it failed on: the path(s) when the error has them,
    else the operation (the innermost function, and the innermost zlops frame that called it), and the
    step it failed in when a progress step recorded it (``zlops_step``). Never a bare "Invalid argument"."""
    what = exc.strerror or str(exc) or type(exc).__name__
    code = errno.errorcode.get(exc.errno) if isinstance(exc.errno, int) else None
    paths = [str(p) for p in (exc.filename, exc.filename2) if p not in (None, "")]
    if paths:
        line = f"{what}: " + " -> ".join(paths)
    else:
        line = f"{what} ({code or type(exc).__name__}) in {_operation(exc)}"
    step = _step_of(exc)
    if step:
        line += f" (step {step})"
    return line


def _step_of(exc: BaseException | None) -> str | None:
    seen = 0
    while exc is not None and seen < 10:
        step = getattr(exc, "zlops_step", None)
        if step:
            return str(step)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _operation(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if not frames:
        return "an operating-system call"
    inner = frames[-1]
    here = f"{inner.name}() at {os.path.basename(inner.filename)}:{inner.lineno}"
    ours = next((f for f in reversed(frames) if f"{os.sep}zlops{os.sep}" in f.filename), None)
    if ours is not None and ours is not inner:
        where = ours.filename.rsplit(os.sep + "zlops" + os.sep, 1)[-1]
        return f"{here}, called from {ours.name}() at zlops/{where}:{ours.lineno}"
    return here
