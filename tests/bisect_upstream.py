"""A real git upstream for bisection tests: the fake upstream's deterministic timings, plus commits that do
not build and commits whose timing alternates run by run between two levels (a step no A/B can decide)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from fake_upstream import BENCH, PYPROJECT, Upstream

# alternate.json {"alpha": 1.3}: every other run of this commit multiplies alpha by 1.3 (a counter file
# in the worktree keeps the parity), so its runs sit on two levels and its median between them
ALTERNATING_BENCH = BENCH.replace(
    't = json.load(open("timings.json"))',
    't = json.load(open("timings.json"))\n'
    'if os.path.exists("alternate.json"):\n'
    '    n = int(open(".runs").read()) if os.path.exists(".runs") else 0\n'
    '    open(".runs", "w").write(str(n + 1))\n'
    '    if n % 2:\n'
    '        t = {k: v * json.load(open("alternate.json")).get(k, 1.0) for k, v in t.items()}')


class BisectUpstream(Upstream):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        (path / "bench.py").write_text(ALTERNATING_BENCH)

    def commit(self, timings: Mapping[str, float], message: str = "change",
               behaviour: Mapping[str, str] | None = None) -> str:
        with (self.path / "CHANGES").open("a") as fh:  # every commit changes something, even a "docs" one
            fh.write(message + "\n")
        return super().commit(timings, message, behaviour)

    def commit_special(self, timings: Mapping[str, float], message: str, *, broken: bool = False,
                       alternate: Mapping[str, float] | None = None) -> str:
        """A commit that does not build (``broken``), or whose ``alternate`` cases alternate run by run."""
        (self.path / "pyproject.toml").write_text("[project\nthis is not toml\n" if broken else PYPROJECT)
        alt = self.path / "alternate.json"
        if alternate:
            alt.write_text(json.dumps(dict(alternate)))
        sha = self.commit(timings, message)
        (self.path / "pyproject.toml").write_text(PYPROJECT)
        alt.unlink(missing_ok=True)
        return sha
