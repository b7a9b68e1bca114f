"""Per-worktree Python environments, built with uv and reused from a cache.

Why a venv per worktree: a worktree is a fresh checkout with nothing built; ``pip install -e .``
compiles extensions from *that commit's* source, and an editable install is bound to its path, so two
commits can never share one environment (the Ascend seed's nanobind ``_task_interface`` trap).

What the cache saves: the third-party dependencies. The cache key is the content of the commit's
dependency files, the install commands, the interpreter version and ``system_site_packages``. When the
key is known, the worktree's ``.venv`` is a copy of the cached template and the install commands are
re-run inside it, which rebuilds only the project itself (the dependencies are already satisfied).
When it is new, the environment is built from scratch in the worktree and then saved as the template.

Install commands whose argv starts with ``pip``/``pip3`` (or ``python -m pip``) run through
``uv pip`` when the environment was made by uv; without uv, zlops falls back to ``python -m venv``
and pip with a warning.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from zlops.errors import EnvBuildError, ProcessError
from zlops.host import proc
from zlops.host.locks import host_lock

log = logging.getLogger(__name__)

ENV_FORMAT = 1
STAMP = ".zlops-env.json"
INSTALL_TIMEOUT_S = 3600.0


def find_uv() -> str | None:
    """The uv binary: the one shipped with the ``uv`` package, else one on PATH."""
    try:
        import uv  # type: ignore[import-untyped]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def base_python() -> str:
    """The interpreter suite environments are made from by default: the one running zlops.

    Its own virtual environment, if it runs in one, is what ``system_site_packages`` exposes
    (see :func:`_inherit_site_packages`): on a GPU host that is where torch was preinstalled.
    """
    return sys.executable


_SITE_PROBE = ("import json, site, sys; print(json.dumps({'venv': sys.prefix != sys.base_prefix, "
               "'site': [p for p in site.getsitepackages() if p]}))")


@dataclass(frozen=True)
class EnvRequest:
    """Everything that decides what an environment contains."""

    install: tuple[tuple[str, ...], ...]
    dependency_globs: tuple[str, ...]
    system_site_packages: bool
    python: str
    extra_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class EnvResult:
    venv: Path
    key: str
    reused: bool          # True when the dependencies came from the cache
    tool: str             # "uv" or "venv"
    seconds: float


def python_version(python: str) -> str:
    done = proc.run([python, "-c", "import sys; print(sys.version)"], what="python --version")
    return done.stdout.strip()


def env_key(worktree: Path, req: EnvRequest, *, python_ver: str | None = None) -> str:
    """Cache key: dependency files' content, install argvs, interpreter version, site-packages mode."""
    h = hashlib.sha256()
    files: list[Path] = []
    for pattern in req.dependency_globs:
        files.extend(p for p in worktree.glob(pattern) if p.is_file())
    meta = {
        "format": ENV_FORMAT,
        "install": [list(a) for a in req.install],
        "system_site_packages": req.system_site_packages,
        "python": python_ver if python_ver is not None else python_version(req.python),
        "env": [list(kv) for kv in req.extra_env],
        "files": sorted(str(p.relative_to(worktree)) for p in set(files)),
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    for p in sorted(set(files)):
        h.update(b"\0" + str(p.relative_to(worktree)).encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:24]


def _create_venv(venv: Path, req: EnvRequest, uv_bin: str | None, log_path: Path) -> str:
    if venv.exists():
        shutil.rmtree(venv)
    if uv_bin is not None:
        argv = [uv_bin, "venv", "--quiet", "--python", req.python, str(venv)]
        if req.system_site_packages:
            argv.insert(2, "--system-site-packages")
        proc.run(argv, env=proc.build_env(dict(req.extra_env)), log_path=log_path, what="uv venv")
        tool = "uv"
    else:
        log.warning("uv not found: falling back to python -m venv + pip (slower; pip install uv to speed up)")
        argv = [req.python, "-m", "venv", str(venv)]
        if req.system_site_packages:
            argv.append("--system-site-packages")
        proc.run(argv, env=proc.build_env(dict(req.extra_env)), log_path=log_path, what="python -m venv")
        tool = "venv"
    if req.system_site_packages:
        _inherit_site_packages(venv, req.python)
    return tool


def _inherit_site_packages(venv: Path, python: str) -> None:
    """Make ``python``'s own venv site-packages visible in ``venv`` (``system_site_packages``).

    ``--system-site-packages`` only exposes the *base* interpreter's site-packages; when zlops runs
    from a venv that holds the preinstalled framework (``/opt/torch/.venv``), that venv's
    site-packages are added with a ``.pth`` file, after the new venv's own (so installs win).
    """
    parent = json.loads(proc.run([python, "-c", _SITE_PROBE], what="site probe").stdout)
    if not parent["venv"]:
        return
    mine = json.loads(proc.run([str(venv / "bin" / "python"), "-c", _SITE_PROBE], what="site probe").stdout)
    target = Path(mine["site"][0])
    (target / "zlops-inherit.pth").write_text("\n".join(parent["site"]) + "\n", encoding="utf-8")
    log.info("venv %s inherits site-packages of %s", venv, ", ".join(parent["site"]))


def install_argv(argv: Sequence[str], venv: Path, tool: str, uv_bin: str | None) -> list[str]:
    """Translate one install command for the environment it runs in (pip -> uv pip under uv)."""
    args = list(argv)
    pip_args: list[str] | None = None
    if args[0] in ("pip", "pip3"):
        pip_args = args[1:]
    elif len(args) >= 3 and args[0] in ("python", "python3") and args[1:3] == ["-m", "pip"]:
        pip_args = args[3:]
    if pip_args is not None:
        if tool == "uv" and uv_bin is not None:
            return [uv_bin, "pip", *pip_args, "--python", str(venv / "bin" / "python")]
        return [str(venv / "bin" / "python"), "-m", "pip", *pip_args]
    if args[0] in ("python", "python3"):
        return [str(venv / "bin" / "python"), *args[1:]]
    return args


def _run_install(venv: Path, worktree: Path, req: EnvRequest, tool: str, uv_bin: str | None,
                 log_path: Path) -> None:
    env = proc.build_env(dict(req.extra_env), venv=venv)
    for argv in req.install:
        real = install_argv(argv, venv, tool, uv_bin)
        try:
            proc.run(real, cwd=worktree, env=env, timeout=INSTALL_TIMEOUT_S, log_path=log_path,
                     what=f"install step {list(argv)!r}")
        except ProcessError as exc:
            raise EnvBuildError(f"install step {list(argv)!r} failed in {worktree} (log: {log_path}):\n{exc}") from exc


def _relocate(venv: Path, old: Path) -> None:
    """Rewrite absolute paths of ``old`` inside a copied venv's scripts and config to ``venv``."""
    old_b, new_b = str(old).encode(), str(venv).encode()
    candidates = [venv / "pyvenv.cfg", *(p for p in (venv / "bin").iterdir() if p.is_file() and not p.is_symlink())]
    for p in candidates:
        try:
            data = p.read_bytes()
        except OSError:
            continue
        if old_b in data and b"\0" not in data[:4096]:
            # replace, never rewrite in place: the file may be a hard link into the template
            tmp = p.with_name(p.name + ".zlops-tmp")
            tmp.write_bytes(data.replace(old_b, new_b))
            shutil.copymode(p, tmp)
            os.replace(tmp, p)


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link a file (instant, no extra disk), copying when the two paths are on different devices.

    Safe because installers replace files (unlink + create) rather than rewrite them, the same
    assumption uv's own hard-linked package cache makes; _relocate replaces too.
    """
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _copy_venv(template: Path, venv: Path) -> None:
    if venv.exists():
        shutil.rmtree(venv)
    shutil.copytree(template, venv, symlinks=True, copy_function=_link_or_copy)
    _relocate(venv, template)


def _evict(envs_dir: Path, keep: int, current: str) -> None:
    """Least-recently-used eviction of templates beyond ``keep`` (never the one in use)."""
    stamps = sorted(envs_dir.glob(f"*/{STAMP}"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stamp in stamps[keep:]:
        entry = stamp.parent
        if entry.name == current:
            continue
        lock = envs_dir / f"{entry.name}.lock"
        with lock.open("a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            try:
                shutil.rmtree(entry, ignore_errors=True)
                log.info("evicted environment template %s", entry.name)
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_env(worktree: Path, req: EnvRequest, envs_dir: Path, *, log_path: Path,
               cache_size: int = 8, use_cache: bool = True, uv_bin: str | None = "auto") -> EnvResult:
    """Build (or reuse) ``<worktree>/.venv`` for ``req``; see the module docstring for the policy."""
    start = time.monotonic()
    uv_path = find_uv() if uv_bin == "auto" else uv_bin
    tool = "uv" if uv_path else "venv"
    key = env_key(worktree, req)
    venv = worktree / ".venv"
    entry = envs_dir / key
    template = entry / "venv"
    with host_lock(envs_dir / f"{key}.lock"):
        reused = use_cache and (entry / STAMP).exists() and template.is_dir()
        if reused:
            stamp = json.loads((entry / STAMP).read_text())
            tool = stamp.get("tool", tool)
            _copy_venv(template, venv)
            _run_install(venv, worktree, req, tool, uv_path, log_path)
            os.utime(entry / STAMP)
        else:
            tool = _create_venv(venv, req, uv_path, log_path)
            _run_install(venv, worktree, req, tool, uv_path, log_path)
            if use_cache:
                shutil.rmtree(entry, ignore_errors=True)
                entry.mkdir(parents=True)
                shutil.copytree(venv, template, symlinks=True)
                _relocate(template, venv)
                stamp_data = {"format": ENV_FORMAT, "key": key, "tool": tool, "built_from": str(worktree),
                              "created": time.time()}
                (entry / STAMP).write_text(json.dumps(stamp_data, indent=1))
    if use_cache:
        _evict(envs_dir, cache_size, key)
    seconds = time.monotonic() - start
    log.info("environment %s for %s (%s, %.1f s)", "reused" if reused else "built", worktree, tool, seconds)
    return EnvResult(venv, key, reused, tool, seconds)
