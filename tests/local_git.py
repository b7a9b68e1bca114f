"""Real git repositories built in a temp dir for the gitops, envs and runner tests.

The tests drive git directly (not through zlops.host.gitops) so a bug in the code under test cannot
hide itself by also building the fixture.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout.strip()


class LocalRepo:
    """An upstream repository on branch ``main``; :meth:`commit` writes files and returns the SHA."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "--initial-branch=main", str(path)], check=True, env=GIT_ENV)

    def commit(self, files: Mapping[str, str], message: str = "change") -> str:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.path, "rev-parse", "HEAD")

    def checkout(self, *args: str) -> None:
        git(self.path, "checkout", "-q", *args)
