"""Secrets: a token in the upstream URL (a real git server over HTTP with Basic auth) and a secret in a
suite's ``env:``; counted wherever zlops printed or stored them (issue 24)."""

from __future__ import annotations

import sys
from pathlib import Path

from . import Outcome, scenario
from ._kit import CASES, REPO, counts, db_url, night, setup

TOKEN = "ghp-FaultMatrixT0ken-123"
ENV_SECRET = "env-FaultMatrix-s3cret"
WRONG = "wr0ng-FaultMatrix-pass"


def _count(root: Path, skip: tuple[Path, ...], secrets: tuple[str, ...]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and not any(path.is_relative_to(s) for s in skip):
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}" for s in secrets if s.encode() in data]
    return found


@scenario("token in the upstream URL and a secret in env:, then a wrong token")
def token_in_url(work: Path) -> Outcome:
    import yaml

    if str(REPO / "tests") not in sys.path:
        sys.path.insert(0, str(REPO / "tests"))
    from fault_upstream import make_upstream
    from http_git import serve_bare

    make_upstream(work / "up")
    with serve_bare(work / "up", work / "srv", user="zl", password=TOKEN) as (url, seen):
        cfg, _, _ = setup(work, env={"API_TOKEN": ENV_SECRET})
        data = yaml.safe_load(cfg.read_text())
        data["suites"]["fake"]["repo"] = url.replace("http://", f"http://zl:{TOKEN}@")
        cfg.write_text(yaml.safe_dump(data))
        n1 = night(cfg, "n1", work / "zlops.log")
        data["suites"]["fake"]["repo"] = url.replace("http://", f"http://zl:{WRONG}@")
        data["home"] = str(work / "home-b")
        cfg_bad = cfg.with_name("zlops-bad.yaml")
        cfg_bad.write_text(yaml.safe_dump(data))
        n2 = night(cfg_bad, "n2", work / "zlops.log")
    leaks = _count(work, (work / "srv", cfg, cfg_bad), (TOKEN, ENV_SECRET, WRONG))
    c = counts(db_url(work), "nightly:fake:n1")
    ok = (n1.returncode == 0 and bool(seen) and n2.returncode == 1 and "Authentication failed" in n2.output
          and not leaks)
    return Outcome(ok, f"with the token: exit {n1.returncode} (server saw credentials: {bool(seen)}); wrong token: "
                       f"exit {n2.returncode}; found in: {', '.join(leaks) or 'nothing'}",
                   expected=CASES, stored=c["results"], duplicate_rows=c["duplicates"], secrets=len(leaks))
