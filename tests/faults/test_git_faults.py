"""git is limited to safe transports, and a fetch past its timeout loses its whole process group."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fault_upstream import alive, wait_gone
from local_git import LocalRepo

from zlops.errors import GitError
from zlops.host import gitops, proc

pytestmark = pytest.mark.timeout(60)


def test_fd_transport_is_refused_fast(tmp_path: Path) -> None:
    mirror = gitops.ensure_mirror("fd::0", tmp_path / "m.git")
    start = time.monotonic()
    with pytest.raises(GitError, match="transport 'fd' not allowed"):
        gitops.fetch_branch(mirror, "main", timeout=30)
    assert time.monotonic() - start < 10


def test_ext_transport_is_refused(tmp_path: Path) -> None:
    mirror = gitops.ensure_mirror(f"ext::touch {tmp_path / 'ran'}", tmp_path / "m.git")
    with pytest.raises(GitError, match="not allowed"):
        gitops.fetch_branch(mirror, "main", timeout=30)
    assert not (tmp_path / "ran").exists()


def test_every_child_gets_the_protocol_allowlist() -> None:
    assert proc.build_env(base={"GIT_ALLOW_PROTOCOL": "fd:ext"})["GIT_ALLOW_PROTOCOL"] == "file:git:http:https:ssh"


def test_local_upstreams_still_work(tmp_path: Path) -> None:
    repo = LocalRepo(tmp_path / "up")
    sha = repo.commit({"a.txt": "1"})
    mirror = gitops.ensure_mirror(str(repo.path), tmp_path / "m.git")
    assert gitops.fetch_branch(mirror, "main") == sha


def test_a_hanging_fetch_is_killed_with_its_process_group_at_the_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "ssh.pid"
    # an ssh transport that never answers (GIT_SSH_COMMAND is passed through to git)
    fake_ssh = tmp_path / "fake-ssh"
    fake_ssh.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    fake_ssh.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(fake_ssh))
    mirror = gitops.ensure_mirror("ssh://git.example.invalid/slow.git", tmp_path / "m.git")
    start = time.monotonic()
    with pytest.raises(GitError, match="timed out after 1 s"):
        gitops.fetch_branch(mirror, "main", timeout=1)
    assert time.monotonic() - start < 10
    pid = int(pidfile.read_text())
    assert wait_gone(pid, 5), f"the transport helper {pid} outlived the fetch timeout"
    assert not alive(pid)
