"""The one subprocess gateway: every external program zlops runs goes through :func:`run` (wait for
it) or :func:`spawn` (start it and stop it later, e.g. a streaming telemetry sampler).

- argv lists only, never a shell string (untrusted text can never become shell syntax);
- the child gets its own process group, and a timeout (or an interrupt) kills the whole group,
  so a benchmark that forks workers cannot outlive its shard;
- the environment is built from an allowlist (:func:`build_env`) plus what the caller adds, so
  secrets of the parent (Slack tokens, Airflow connections) and stale device-visibility variables
  never leak into a benchmark;
- a failure raises :class:`~zlops.errors.ProcessError` with argv, exit code and output tails.

Anchors: asv ``util.check_output``; pyperf ``_utils.create_environ``.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from zlops.errors import ProcessError

log = logging.getLogger(__name__)

#: Variables passed through from the parent environment (glob patterns). Everything else is dropped.
ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "TERM",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "PIP_*", "UV_*", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "CC", "CXX", "CMAKE_*",
    "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "ROCM_PATH", "HIP_PATH", "MUSA_HOME", "MUSA_PATH",
    "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH", "TOOLCHAIN_HOME",
    "GIT_SSH", "GIT_SSH_COMMAND", "SSH_AUTH_SOCK",
)

#: Never passed through even when a pattern above would match (device pinning is the backend's job).
ENV_DENYLIST: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES",
    "MUSA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "*TOKEN*", "*SECRET*",
    "*PASSWORD*", "AIRFLOW_CONN_*",
)

TAIL_CHARS = 4000

#: The transports git may use, for zlops' own git calls and any git a child runs (pip's git+URLs):
#: ``fd::`` and ``ext::`` would hang a fetch or run a command, so they are never allowed.
GIT_ALLOW_PROTOCOL = "file:git:http:https:ssh"

# Process groups zlops started and still waits for, so an interrupt (SIGTERM, SIGHUP, Ctrl-C) can
# end them all, whichever thread started them; and the reason once an interrupt began.
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIVE_LOCK = threading.Lock()
_INTERRUPTED: list[str] = []


@dataclass(frozen=True)
class Completed:
    """The outcome of one external program."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def build_env(
    extra: Mapping[str, str] | None = None,
    *,
    base: Mapping[str, str] | None = None,
    venv: Path | None = None,
) -> dict[str, str]:
    """The environment of a child process: allowlisted parent variables plus ``extra``.

    ``venv`` puts that virtual environment first on PATH and sets VIRTUAL_ENV, the way
    ``source .venv/bin/activate`` would, without a shell.
    """
    parent = os.environ if base is None else base
    env = {k: v for k, v in parent.items() if _matches(k, ENV_ALLOWLIST) and not _matches(k, ENV_DENYLIST)}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["GIT_ALLOW_PROTOCOL"] = GIT_ALLOW_PROTOCOL
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        env.pop("PYTHONHOME", None)
    if extra:
        env.update(extra)
    return env


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the child's process group, then SIGKILL what is left after ``grace_s``."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; make sure no member of its group survives it
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


def interrupt_all(reason: str, *, grace_s: float = 2.0) -> int:
    """Stop everything zlops started and refuse to start more until :func:`clear_interrupt`.

    Called when zlops itself is told to stop (SIGTERM, SIGHUP, SIGINT): every live process group
    gets SIGTERM, then SIGKILL after ``grace_s``, so no benchmark outlives an interrupted night;
    a device thread still waiting for its lock then cannot start one. Returns the groups ended.
    """
    with _LIVE_LOCK:
        if not _INTERRUPTED:
            _INTERRUPTED.append(reason)
        live = list(_LIVE.values())
    for popen in live:
        if popen.poll() is None:
            try:
                os.killpg(popen.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + grace_s
    for popen in live:
        try:
            popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(live)


def interrupted() -> str | None:
    """Why zlops is stopping (``interrupt_all``'s reason), or None while it is not."""
    return _INTERRUPTED[0] if _INTERRUPTED else None


def clear_interrupt() -> None:
    """Allow starting programs again (the clean-up after an interrupt runs git)."""
    with _LIVE_LOCK:
        _INTERRUPTED.clear()


def _check_not_interrupted(label: str, args: Sequence[str]) -> None:
    reason = interrupted()
    if reason is not None:
        raise ProcessError(f"{label}: not started: zlops is stopping ({reason})", argv=args, returncode=None)


def _tail(text: str, n: int = TAIL_CHARS) -> str:
    return text[-n:]


def _read_tail(path: Path, n: int = TAIL_CHARS) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    log_path: Path | None = None,
    check: bool = True,
    input_text: str | None = None,
    what: str | None = None,
    pass_fds: Sequence[int] = (),
    on_start: Callable[[int], None] | None = None,
) -> Completed:
    """Run ``argv`` and wait for it.

    With ``log_path`` stdout and stderr both go (appended) to that file, as ``2>&1 | tee`` would,
    and the returned ``stdout`` is the file's tail; otherwise both are captured.
    ``check`` raises :class:`ProcessError` on a non-zero exit or a timeout.
    ``pass_fds`` are inherited by the child (a device lease's lock: it then lives as long as the
    benchmark does); ``on_start(pid)`` is called once the child runs (its pid is its group id).
    """
    if isinstance(argv, (str, bytes, os.PathLike)):
        raise TypeError("run: argv must be a list of arguments, never a shell string")
    args = [os.fspath(a) for a in argv]
    if not args:
        raise ValueError("run: empty argv")
    child_env = dict(env) if env is not None else build_env()
    label = what or args[0]
    _check_not_interrupted(label, args)
    log.debug("run %s (cwd=%s)", args, cwd)
    start = time.monotonic()
    logfh = None
    try:
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            logfh = log_path.open("ab")
            stdout_target: int | object = logfh
            stderr_target: int | object = subprocess.STDOUT
        else:
            stdout_target = subprocess.PIPE
            stderr_target = subprocess.PIPE
        try:
            proc = subprocess.Popen(
                args, cwd=cwd, env=child_env, stdout=stdout_target, stderr=stderr_target,  # type: ignore[arg-type]
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                start_new_session=True, pass_fds=tuple(pass_fds),
            )
        except FileNotFoundError as exc:
            raise ProcessError(f"{label}: program not found: {args[0]}", argv=args, returncode=None,
                               stderr_tail=str(exc)) from None
        except PermissionError as exc:
            raise ProcessError(f"{label}: not executable: {args[0]}", argv=args, returncode=None,
                               stderr_tail=str(exc)) from None
        with _LIVE_LOCK:
            _LIVE[proc.pid] = proc
        if interrupted() is not None:  # the interrupt came between the check above and Popen
            _kill_group(proc, grace_s=0.5)
        timed_out = False
        try:
            if on_start is not None:
                on_start(proc.pid)
            out_b, err_b = proc.communicate(
                input=input_text.encode() if input_text is not None else None, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            out_b, err_b = proc.communicate()
        except BaseException:
            _kill_group(proc, grace_s=2.0)
            raise
        else:
            # the leader exited; reap any stragglers it left in its group (forked workers)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        finally:
            with _LIVE_LOCK:
                _LIVE.pop(proc.pid, None)
    finally:
        if logfh is not None:
            logfh.close()
    duration = time.monotonic() - start
    if log_path is not None:
        stdout, stderr = _read_tail(log_path), ""
    else:
        stdout = (out_b or b"").decode("utf-8", errors="replace")
        stderr = (err_b or b"").decode("utf-8", errors="replace")
    result = Completed(tuple(args), None if timed_out else proc.returncode, stdout, stderr, duration, timed_out)
    if check and not result.ok:
        msg = f"{label} timed out after {timeout:g} s" if timed_out else f"{label} failed"
        raise ProcessError(msg, argv=args, returncode=result.returncode, stdout_tail=_tail(stdout),
                           stderr_tail=_tail(stderr), timed_out=timed_out)
    return result


class Spawned:
    """A program started by :func:`spawn` and still owned by zlops: it runs in its own process
    group until :meth:`stop` kills that group."""

    def __init__(self, argv: Sequence[str], popen: subprocess.Popen[bytes], files: Sequence[IO[bytes]]) -> None:
        self.argv = tuple(argv)
        self._popen = popen
        self._files = list(files)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """None while the program runs; its exit status once it ended (negative: killed by that signal)."""
        return self._popen.poll()

    def stop(self, grace_s: float = 2.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; returns the exit status.

        Safe to call twice and after the program already exited (its group is still reaped).
        """
        if self._popen.poll() is None:
            _kill_group(self._popen, grace_s=grace_s)
        else:
            try:
                os.killpg(self._popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for fh in self._files:
            fh.close()
        self._files.clear()
        return self._popen.poll()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout_path: Path | None = None,
    stderr_path: Path | None = None,
    what: str | None = None,
) -> Spawned:
    """Start ``argv`` without waiting for it (a streaming sampler, a monitor).

    The same discipline as :func:`run`: argv list only, the environment from :func:`build_env`
    unless given, a new process group. stdout goes to ``stdout_path`` (truncated) or nowhere;
    stderr to ``stderr_path``, else along with stdout. The caller must :meth:`Spawned.stop` it.
    A program that cannot start raises :class:`ProcessError`.
    """
    if isinstance(argv, (str, bytes, os.PathLike)):
        raise TypeError("spawn: argv must be a list of arguments, never a shell string")
    args = [os.fspath(a) for a in argv]
    if not args:
        raise ValueError("spawn: empty argv")
    label = what or args[0]
    _check_not_interrupted(label, args)
    files: list[IO[bytes]] = []
    out: IO[bytes] | int = subprocess.DEVNULL
    if stdout_path is not None:
        stdout_path.parent.mkdir(parents=True, exist_ok=True)
        out = stdout_path.open("wb")
        files.append(out)
    err: IO[bytes] | int = subprocess.STDOUT if stdout_path is not None else subprocess.DEVNULL
    if stderr_path is not None:
        stderr_path.parent.mkdir(parents=True, exist_ok=True)
        err = stderr_path.open("wb")
        files.append(err)
    log.debug("spawn %s (cwd=%s)", args, cwd)
    try:
        popen = subprocess.Popen(args, cwd=cwd, env=dict(env) if env is not None else build_env(), stdout=out,
                                 stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        for fh in files:
            fh.close()
        kind = "program not found" if isinstance(exc, FileNotFoundError) else "cannot start"
        raise ProcessError(f"{label}: {kind}: {args[0]}", argv=args, returncode=None, stderr_tail=str(exc)) from None
    return Spawned(args, popen, files)
