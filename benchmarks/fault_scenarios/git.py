"""Upstreams that would hang or hijack git: the fd:: transport, an ssh transport that never answers."""

from __future__ import annotations

from pathlib import Path

import yaml

from . import Outcome, scenario
from ._kit import alive, night, setup, wait_gone


def _with_repo(cfg: Path, repo: str, **top: object) -> None:
    data = yaml.safe_load(cfg.read_text())
    data["suites"]["fake"]["repo"] = repo
    data.update(top)
    cfg.write_text(yaml.safe_dump(data))


@scenario("upstream URL on git's fd:: transport")
def fd_transport(work: Path) -> Outcome:
    cfg, _, _ = setup(work)
    _with_repo(cfg, "fd::0")
    n = night(cfg, "n1", work / "zlops.log", timeout_s=120)
    ok = n.returncode == 1 and n.seconds < 30 and "transport 'fd' not allowed" in n.output \
        and "Traceback" not in n.output
    return Outcome(ok, f"exit {n.returncode} after {n.seconds:.1f} s")


@scenario("ssh upstream that never answers (git_timeout_s 3)")
def hanging_fetch(work: Path) -> Outcome:
    cfg, _, _ = setup(work)
    pidfile = work / "ssh.pid"
    fake_ssh = work / "fake-ssh"
    fake_ssh.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 300\n")
    fake_ssh.chmod(0o755)
    _with_repo(cfg, "ssh://git.example.invalid/slow.git", git_timeout_s=3)
    n = night(cfg, "n1", work / "zlops.log", timeout_s=120, env={"GIT_SSH_COMMAND": str(fake_ssh)})
    helper = int(pidfile.read_text()) if pidfile.exists() else None
    gone = helper is None or wait_gone(helper, 5)
    ok = n.returncode == 1 and n.seconds < 30 and gone and "timed out after 3 s" in n.output \
        and "Traceback" not in n.output
    return Outcome(ok, f"exit {n.returncode} after {n.seconds:.1f} s; transport helper "
                       f"{'ended' if gone else 'still running'}" + ("" if helper is None or not alive(helper) else "!"))
