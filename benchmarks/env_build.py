"""Environment build for the demo upstream: zlops (cold / reused from cache) vs plain venv + pip.

Run:  python benchmarks/env_build.py [--repeat 3] [--no-network-cold]

Every variant builds the environment of a fresh worktree of the demo upstream (numpy + the project
installed editable) and is timed end to end, side by side in one run, ``--repeat`` times each:

- ``zlops cold``: no environment template yet; uv's package cache warm (the everyday cold case)
- ``zlops cold, empty uv cache``: as above with a new UV_CACHE_DIR (downloads numpy; needs network)
- ``zlops reused``: a template with the same dependency files exists: copy + re-run the install
- ``venv + pip``: ``python -m venv`` then ``pip install -e .`` (pip's cache warm), what the Ascend
  seed does per worktree (~26 s there, with a C++ extension build)
- ``venv + pip, no cache``: as above with ``--no-cache-dir``

Prints a markdown table (median and min over the repeats, in seconds).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from zlops.demo import create_upstream
from zlops.host import envs, gitops


def _worktree(mirror: gitops.Mirror, sha: str, root: Path, name: str) -> Path:
    path = root / name
    gitops.add_worktree(mirror, sha, path)
    return path


def _request() -> envs.EnvRequest:
    return envs.EnvRequest(install=(("pip", "install", "-e", "."),),
                           dependency_globs=("pyproject.toml", "setup.py", "setup.cfg", "requirements*.txt"),
                           system_site_packages=False, python=envs.base_python())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-network-cold", action="store_true", help="skip the empty-uv-cache variant")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zlops-envbench-"))
    try:
        upstream = root / "upstream"
        shas = create_upstream(upstream)
        mirror = gitops.ensure_mirror(str(upstream), root / "mirror.git")
        gitops.fetch_branch(mirror, "main")
        sha = shas[-1]
        counter = iter(range(10_000))

        def fresh() -> Path:
            return _worktree(mirror, sha, root / "wt", f"w{next(counter)}")

        def zlops_cold() -> None:
            envs.ensure_env(fresh(), _request(), root / f"envs-cold-{next(counter)}", log_path=root / "log")

        def zlops_cold_empty_uv() -> None:
            cache = root / f"uv-cache-{next(counter)}"
            os.environ["UV_CACHE_DIR"] = str(cache)
            try:
                envs.ensure_env(fresh(), _request(), root / f"envs-cold-{next(counter)}", log_path=root / "log")
            finally:
                del os.environ["UV_CACHE_DIR"]
                shutil.rmtree(cache, ignore_errors=True)

        shared_envs = root / "envs-shared"
        envs.ensure_env(fresh(), _request(), shared_envs, log_path=root / "log")  # the template

        def zlops_reused() -> None:
            res = envs.ensure_env(fresh(), _request(), shared_envs, log_path=root / "log")
            assert res.reused

        def venv_pip(no_cache: bool) -> Callable[[], None]:
            def run() -> None:
                wt = fresh()
                venv = wt / ".venv"
                subprocess.run([envs.base_python(), "-m", "venv", str(venv)], check=True)
                cmd = [str(venv / "bin" / "pip"), "install", "-q", "-e", str(wt)]
                if no_cache:
                    cmd.append("--no-cache-dir")
                subprocess.run(cmd, check=True, cwd=wt)
            return run

        variants: list[tuple[str, Callable[[], None]]] = [
            ("zlops cold (uv cache warm)", zlops_cold),
            ("zlops reused from cache", zlops_reused),
            ("python -m venv + pip install -e .", venv_pip(False)),
            ("python -m venv + pip install -e . --no-cache-dir", venv_pip(True)),
        ]
        if not args.no_network_cold:
            variants.insert(1, ("zlops cold, empty uv cache (downloads)", zlops_cold_empty_uv))
        times: dict[str, list[float]] = {name: [] for name, _ in variants}
        for _ in range(args.repeat):  # interleaved, so drift hits every variant alike
            for name, fn in variants:
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        print(f"environment build of the demo upstream (numpy + editable project), {args.repeat} repeats, "
              f"python {sys.version.split()[0]}, uv {envs.find_uv()}")
        print()
        print("| variant | median (s) | min (s) |")
        print("|---|---:|---:|")
        for name, _ in variants:
            print(f"| {name} | {statistics.median(times[name]):.2f} | {min(times[name]):.2f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
