"""One redaction rule (zlops.redact) for every URL and secret zlops prints or stores.

The upstream is a real git server over HTTP that wants a password (tests/http_git.py); the night is a
real ``zlops nightly`` subprocess. The token must reach git (the server sees it) and nothing else:
not the mirror's config, a manifest, a report, a log, the store, nor a message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fault_upstream import REPO, fault_config, make_upstream, manifest_of, start_nightly, write_config
from http_git import serve_bare

from zlops.redact import env_for_record, redact_text, redact_url, split_credentials
from zlops.store.retry import redacted_url

TOKEN = "ghp-Zl0psT0kenN0tForLogs"
ENV_SECRET = "env-s3cret-Value-77"
WRONG = "wr0ng-Passw0rd-99"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:tok123456@git.example.com/r.git", "https://user:***@git.example.com/r.git"),
    ("https://tok123456@git.example.com/r.git", "https://***@git.example.com/r.git"),
    ("postgresql+psycopg://zlops:pw-12345@db:5432/zlops", "postgresql+psycopg://zlops:***@db:5432/zlops"),
    ("postgresql+psycopg://zlops@db:5432/zlops", "postgresql+psycopg://zlops@db:5432/zlops"),
    ("ssh://git@git.example.com/r.git", "ssh://git@git.example.com/r.git"),
    ("git@git.example.com:team/r.git", "git@git.example.com:team/r.git"),
    ("/srv/git/r.git", "/srv/git/r.git"),
])
def test_one_rule_for_repository_and_database_urls(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redacted_url(url) == shown  # the database rule is the same function


def test_free_text_loses_urls_credentials_tokens_and_registered_secrets() -> None:
    text = ("fatal: unable to access 'https://zl:tok123456@h/r.git/': 403; slack xoxb-1234-abcd; "
            "db postgresql://u:pw-12345@db/z")
    clean = redact_text(text, ["extra-secret-1"])
    assert "tok123456" not in clean and "xoxb-1234" not in clean and "pw-12345" not in clean
    assert "https://zl:***@h/r.git/" in clean
    assert redact_text("value extra-secret-1 here", ["extra-secret-1"]) == "value *** here"
    assert split_credentials("https://zl:p%40ss-word@h/r.git") == ("https://h/r.git", "zl", "p@ss-word")
    assert split_credentials("https://tok123456@h/r.git") == ("https://h/r.git", "tok123456", "tok123456")
    assert split_credentials("ssh://git@h/r.git") == ("ssh://git@h/r.git", None, None)
    assert env_for_record({"A_TOKEN": "x1", "KNOB": "4"}, ["KNOB"]) == {"A_TOKEN": "***", "KNOB": "4"}


def _leaks(root: Path, secrets: tuple[str, ...], skip: tuple[Path, ...]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink() or any(path.is_relative_to(s) for s in skip):
            continue
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {s}" for s in secrets if s.encode() in data]
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_token_in_the_repo_url_reaches_git_and_nothing_else(tmp_path: Path) -> None:
    up, _ = make_upstream(tmp_path / "up")
    with serve_bare(up.path, tmp_path / "srv", user="zl", password=TOKEN) as (url, seen):
        home, probe = tmp_path / "home", tmp_path / "probe"
        data = fault_config(home, url.replace("http://", f"http://zl:{TOKEN}@"), probe,
                            env={"API_TOKEN": ENV_SECRET, "PUBLIC_KNOB": "42"},
                            database=f"sqlite:///{tmp_path / 'z.db'}")
        data["suites"]["fake"]["env_public"] = ["PUBLIC_KNOB", "FAULT_PROBE"]
        cfg = write_config(tmp_path / "zlops.yaml", data)
        log = tmp_path / "night.log"
        p = start_nightly(cfg, "n1", log=log)
        assert p.wait(240) == 0, log.read_text()[-3000:]
        assert any(h.startswith("Basic ") for h in seen)  # the credentials did reach the server
        manifest = manifest_of(home, "nightly:fake:n1")
        assert manifest["env_added"]["API_TOKEN"] == "***" and manifest["env_added"]["PUBLIC_KNOB"] == "42"
        check = subprocess.run([sys.executable, "-m", "zlops.cli", "config", "check", str(cfg)],
                               capture_output=True, text=True, cwd=REPO)
        assert check.returncode == 0 and "zl:***@127.0.0.1" in check.stdout and TOKEN not in check.stdout

        # a wrong token: the fetch error line names the upstream, never the token
        bad = fault_config(tmp_path / "home2", url.replace("http://", f"http://zl:{WRONG}@"), probe,
                           database=f"sqlite:///{tmp_path / 'z2.db'}")
        cfg2 = write_config(tmp_path / "zlops2.yaml", bad)
        log2 = tmp_path / "night2.log"
        p2 = start_nightly(cfg2, "n1", log=log2)
        assert p2.wait(120) == 1
        out2 = log2.read_text()
        assert "Authentication failed" in out2 and f"{url}" in out2 and "Traceback" not in out2, out2[-2000:]
    # nothing of zlops', nor its output, holds a secret: mirror config, manifests, reports, logs, the store
    secrets = (TOKEN, ENV_SECRET, WRONG)
    assert _leaks(tmp_path, secrets, skip=(tmp_path / "srv", tmp_path / "zlops.yaml", tmp_path / "zlops2.yaml")) == []
    assert (home / "mirrors" / "fake.git" / "config").read_text().count(url) == 1
