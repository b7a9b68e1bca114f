"""Write the ``.pyc`` of every module the ``zlops`` commands load, so that no process compiles them again.

uv installs packages without byte-code, and where ``PYTHONDONTWRITEBYTECODE`` is set (this shared
machine sets it) Python never writes any: then every ``zlops`` process compiles SQLAlchemy, pydantic
and zlops from source, 2-3 s of CPU before a command starts (docs/benchmarks.md, "CLI start-up").
This imports what the commands import (the CLI, the store and its migrations, the config, the nightly
and the demo with the numerical libraries they load when they run) with byte-code writing switched
back on for this process, so each module is compiled once, here, and never again until it changes.
The modules compiled are listed in the venv (``zlops-bytecode.txt``): a later run that finds each of
their ``.pyc`` newer than its source imports nothing (a few ms). Run by scripts/bootstrap.sh with the
venv's Python; it prints one line.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from pathlib import Path

#: what the commands import between them (the nightly, the compare and the report steps load numpy,
#: scipy, pandas and matplotlib when they run)
MODULES = ("zlops.cli.app", "zlops.steps.context", "zlops.triage.actions", "zlops.slack.outbox",
           "zlops.steps.nightly", "zlops.demo",
           "zlops.forge.prcompare", "zlops.steps.rescore", "zlops.store.migrate", "alembic.command", "alembic.script",
           "alembic.runtime.migration", "sqlalchemy.dialects.sqlite", "sqlalchemy.dialects.postgresql",
           "zlops.stats", "zlops.stats.frame", "zlops.store.frames", "zlops.report.figures", "scipy.stats",
           "pandas", "matplotlib.pyplot")


def _fresh(listing: Path) -> int | None:
    """How many modules the last run compiled, when each still has a ``.pyc`` newer than its source
    (then nothing needs importing); None when one changed, lost its ``.pyc``, or there was no last run."""
    try:
        sources = listing.read_text(encoding="utf-8").splitlines()
        for source in sources:
            if os.stat(importlib.util.cache_from_source(source)).st_mtime < os.stat(source).st_mtime:
                return None
    except (OSError, ValueError):
        return None
    return len(sources)


def main() -> int:
    started = time.monotonic()
    listing = Path(sys.prefix) / "zlops-bytecode.txt"  # what the last run compiled, in the venv
    known = _fresh(listing)
    if known is not None:
        print(f"byte-code of the {known} modules zlops commands load: up to date")
        return 0
    sys.dont_write_bytecode = False  # whatever the environment says: writing them is the point
    missing = []
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # an optional extra not installed: the rest still gets its byte-code
            missing.append(f"{name} ({exc})")
    sources = sorted({f for name, m in list(sys.modules.items()) if name != "__main__"  # this script
                      and isinstance(f := getattr(m, "__file__", None), str) and f.endswith(".py")})
    listing.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    note = f"; not importable: {', '.join(missing)}" if missing else ""
    print(f"byte-code of the {len(sources)} modules zlops commands load: written "
          f"({time.monotonic() - started:.1f} s){note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
