"""How long `zlops --help`, `zlops runs` and `zlops alert list` take to start, this checkout beside an old commit.

    python benchmarks/cli_startup.py [--old SHA] [--repeats 9] [--no-pyc] [--json]

Each command runs in a fresh process (``python -c "from zlops.cli import main; ..."``: what the
``zlops`` script runs), as many times as ``--repeats``, the sides interleaved (new, old, new, old...)
so that the host's load falls on both alike; the table shows the median and the range of the wall
time and of the CPU time (user + system, which the load of other jobs moves much less). ``runs`` and
``alert list`` read a SQLite store at the schema's head (made once before timing) through a config
given with ``--config``.

``--old SHA`` makes a detached git worktree of that commit (removed afterwards) and runs the same
commands with ``PYTHONPATH`` pointing at it, with this venv's Python and packages, so only zlops'
own code differs.

Byte-code: uv installs no ``.pyc`` and this shared machine sets ``PYTHONDONTWRITEBYTECODE=1``, so
without ``scripts/bootstrap.sh``'s byte-compile step (scripts/compile_bytecode.py) every process
compiles SQLAlchemy, pydantic and zlops from source. By default both sides run with their ``.pyc``:
one untimed run of each command per side may write what is missing (the old worktree's zlops), as
bootstrap.sh does for the venv. ``--no-pyc`` measures the other case, as a venv that uv made
runs on this machine without that step: the standard library has its ``.pyc`` (the Python install
wrote them), every other module is compiled from source in every process (``PYTHONPYCACHEPREFIX`` at a
folder that holds only the standard library's, warmed untimed; nothing written while timing). The table
says which case it measured, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {"--help": ["--help"], "runs": ["runs"], "alert list": ["alert", "list"]}
_MAIN = "import sys; from zlops.cli import main; sys.exit(main())"
CONFIG = """home: {home}
pools:
  cpu-local: {{backend: cpu, devices: [0]}}
suites:
  demo-ops:
    repo: {home}/upstream
    command: [python, bench.py, "{{results}}"]
    format: zlops-json
    pools: [cpu-local]
"""


def _env(source: Path | None, no_pyc: Path | None, *, write_pyc: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    if no_pyc is not None:  # a cache folder of the standard library's .pyc only (--no-pyc)
        env["PYTHONPYCACHEPREFIX"] = str(no_pyc)
        if not write_pyc:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
    elif write_pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _argv(command: str, config: Path) -> list[str]:
    args = COMMANDS[command]
    return [sys.executable, "-c", _MAIN, *args, *(() if command == "--help" else ("--config", str(config)))]


def _keep_only_stdlib(prefix: Path) -> None:
    """Remove from a ``PYTHONPYCACHEPREFIX`` folder every ``.pyc`` but the standard library's."""
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    keep = prefix / stdlib.relative_to(stdlib.anchor)
    for pyc in prefix.rglob("*.pyc"):
        if keep not in pyc.parents or "site-packages" in pyc.parts:
            pyc.unlink()


def run_once(command: str, config: Path, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process; raises when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(_argv(command, config), env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"`zlops {command}` exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _which_zlops(env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", "import zlops; print(zlops.__file__)"], env=env, cwd=cwd,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _bytecode_state(no_pyc: Path | None) -> str:
    if no_pyc is not None:
        return ("the standard library's only: every other module compiled from source in every process "
                "(--no-pyc)")
    return ("the venv's .pyc (scripts/bootstrap.sh writes them), and each side's zlops .pyc written by one untimed "
            "run of each command")


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", help="a commit to measure beside this checkout (a git worktree of it is made)")
    p.add_argument("--repeats", type=int, default=9, help="fresh processes per command and side (default 9)")
    p.add_argument("--no-pyc", action="store_true", help="compile every module from source in every process")
    p.add_argument("--json", action="store_true", help="print the raw figures as JSON too")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="zlops-cli-startup-"))
    sides: dict[str, Path | None] = {"new": None}
    try:
        if args.old:
            old = work / "old"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(old), args.old],
                           check=True)
            sides["old"] = old
        no_pyc = work / "no-pyc" if args.no_pyc else None
        config = work / "zlops.yaml"
        config.write_text(CONFIG.format(home=work / "home"), encoding="utf-8")
        for side, source in sides.items():  # the store is made (and migrated) here, untimed
            got = _which_zlops(_env(source, None), work)
            expected = (source or REPO) / "zlops" / "__init__.py"
            if Path(got) != expected:
                raise SystemExit(f"{side}: zlops imports from {got}, not {expected}")
            for command in COMMANDS:
                run_once(command, config, _env(source, no_pyc, write_pyc=True), work)
        if no_pyc is not None:  # keep only the standard library's .pyc in the prefix
            _keep_only_stdlib(no_pyc)
        load_before = os.getloadavg()
        figures: dict[str, dict[str, dict[str, list[float]]]] = {
            side: {c: {"wall": [], "cpu": []} for c in COMMANDS} for side in sides}
        for _ in range(args.repeats):
            for command in COMMANDS:
                for side, source in sides.items():
                    wall, cpu = run_once(command, config, _env(source, no_pyc), work)
                    figures[side][command]["wall"].append(wall)
                    figures[side][command]["cpu"].append(cpu)
        load_after = os.getloadavg()
    finally:
        if "old" in sides:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(sides["old"])], check=False)
        shutil.rmtree(work, ignore_errors=True)

    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    print(f"zlops CLI start-up, {args.repeats} fresh processes per command and side, interleaved; "
          f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"byte-code: {_bytecode_state(no_pyc)}")
    names = {"new": f"this checkout ({head}{', modified' if dirty else ''})", "old": f"old ({args.old})"}
    print()
    print("| command | " + " | ".join(f"{names[s]}: wall s | CPU s" for s in sides) + " |")
    print("|---|" + "---:|---:|" * len(sides))
    for command in COMMANDS:
        cells = [f"{_fmt(figures[s][command]['wall'])} | {_fmt(figures[s][command]['cpu'])}" for s in sides]
        print(f"| `zlops {command}` | " + " | ".join(cells) + " |")
    print("\nmedian (min-max) of the wall time and of the CPU time (user + system) of each process")
    if args.json:
        print(json.dumps({"load_before": load_before, "load_after": load_after, "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
