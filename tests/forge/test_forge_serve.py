"""The documented receiver, started as docs/forge.md starts it (``zlops forge serve``, a real subprocess) on a host
where ``import airflow`` fails: a signed comment runs the compare in-process; a compare that crashes ends in a
finished neutral check with the reason; a replayed delivery runs nothing; a check its previous life left running
is closed when it starts again; every decision is one log line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_forge import GITHUB_TOKEN, GITLAB_TOKEN, FakeForge, deliver, github_delivery, mr_note, pr_comment
from serve_helpers import ServeProcess

from zlops.config.settings import load_config
from zlops.forge.deliver import env_secrets
from zlops.forge.lifecycle import LOCAL, RESTARTED, open_check
from zlops.steps.context import open_store

HEAD = "c" * 40
ENV = {"GH_TOKEN": GITHUB_TOKEN, "GH_HOOK": "s3cret-gh", "GL_TOKEN": GITLAB_TOKEN, "GL_HOOK": "s3cret-gl"}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A config whose suites' repository does not exist (every compare crashes at its first git fetch), a fake
    GitHub and GitLab, alice a writer, bob a reader."""
    forge = FakeForge()
    common = {"command": ["python", "b.py", "--out", "{results}"], "format": "zlops-json", "pools": ["local"],
              "repo": str(tmp_path / "no-such-upstream")}
    data = {"home": str(tmp_path / "home"), "pools": {"local": {"backend": "cpu", "devices": [0]}}, "judge": "simple",
            "suites": {"ops": {**common, "forge": {"kind": "github", "api_url": forge.github_url,
                                                   "repo": "acme/kernels", "token_env": "GH_TOKEN",
                                                   "webhook_secret_env": "GH_HOOK"}},
                       "glops": {**common, "forge": {"kind": "gitlab", "api_url": forge.gitlab_url,
                                                     "repo": "acme/kernels", "token_env": "GL_TOKEN",
                                                     "webhook_secret_env": "GL_HOOK"}}}}
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    forge.state.permissions.update({"alice": "write", "bob": "read"})
    forge.state.members[11] = 30
    forge.state.pulls[5] = {"number": 5, "head": {"ref": "feature/x", "sha": HEAD,
                                                  "repo": {"full_name": "acme/kernels"}},
                            "base": {"repo": {"full_name": "acme/kernels"}}}
    yield {"config": path, "forge": forge, "tmp": tmp_path}
    forge.close()


def _decisions(log: str) -> list[dict[str, str]]:
    out = []
    for line in log.splitlines():
        if "forge delivery " in line:
            fields = line.split("forge delivery ", 1)[1]
            out.append({k: v.strip('"') for k, v in (p.split("=", 1) for p in fields.split(" ") if "=" in p)})
    return out


def test_serve_without_airflow_runs_the_compare_in_process_and_a_crash_ends_neutral(world: dict[str, Any]) -> None:
    forge: FakeForge = world["forge"]
    server = ServeProcess(world["config"], world["tmp"], ENV)
    try:
        first = server.log().splitlines()[0]
        assert "zlops forge serve: trigger local" in first and "no Airflow" not in first, first
        body, headers = github_delivery("issue_comment", pr_comment(5, "/zlops compare", "alice"), "s3cret-gh")
        status, answer = deliver(server.url + "/github", body, headers, timeout=30)
        assert status == 202, answer
        run_id = answer["triggered"][0]["run_id"]
        log = server.wait_for("crashed; its check was closed neutral")
        (run,) = forge.state.runs_on(HEAD, "zlops")
        assert run["status"] == "completed" and run["conclusion"] == "neutral", run
        assert run["output"]["title"].startswith("the compare did not finish: GitError: ")
        assert "no-such-upstream" in run["output"]["summary"]
        assert f"PR compare compare={run_id} suite=ops ref=feature/x pr=5 state=started" in log
        # the same delivery again (a redelivery, or a captured request replayed): nothing runs, nothing is posted
        calls = len(forge.state.calls)
        status, answer = deliver(server.url + "/github", body, headers, timeout=30)
        assert status == 200 and answer["message"].startswith("ignored: this delivery was received at")
        assert answer["triggered"] == [] and len(forge.state.calls) == calls
        # the unsigned header changed does not make it new: the body is what was signed
        status, _ = deliver(server.url + "/github", body, {**headers, "X-GitHub-Delivery": "another-id"}, timeout=30)
        assert status == 200 and len(forge.state.calls) == calls
        # a forged delivery: refused in one sentence, and logged too
        forged, forged_headers = github_delivery("issue_comment", pr_comment(5, "/zlops compare", "alice"), "wrong")
        assert deliver(server.url + "/github", forged, forged_headers, timeout=30) == (
            401, {"message": "refused: the X-Hub-Signature-256 header does not match a configured webhook secret",
                  "triggered": []})
        # the label trigger, with a token that cannot create check runs: the commit-status fallback, finished too
        forge.state.checks_forbidden = True
        label = {"action": "labeled", "label": {"name": "zlops-compare"}, "sender": {"login": "alice"},
                 "repository": {"full_name": "acme/kernels"},
                 "pull_request": {"number": 6, "updated_at": pr_comment(6, "", "alice")["comment"]["created_at"],
                                  "head": {"ref": "feature/y", "sha": "f" * 40, "repo": {"full_name": "acme/kernels"}}}}
        body, headers = github_delivery("pull_request", label, "s3cret-gh")
        assert deliver(server.url + "/github", body, headers, timeout=30)[0] == 202
        server.wait_for("crashed; its check was closed neutral", times=2)
        states = [(s["state"], s["description"]) for s in forge.state.statuses if s["sha"] == "f" * 40]
        assert [s for s, _ in states] == ["pending", "success"], states
        assert states[-1][1].startswith("neutral: the compare did not finish: GitError")
        decided = _decisions(server.log())
        assert [d["decision"] for d in decided] == ["triggered", "duplicate", "duplicate", "refused-signature",
                                                    "triggered"]
        assert decided[0]["who"] == "alice" and decided[0]["pr"] == "5" and decided[0]["repo"] == "acme/kernels"
        assert "ModuleNotFoundError" not in server.log() and GITHUB_TOKEN not in server.log()
    finally:
        server.close()


def test_gitlab_through_the_real_command_and_a_check_left_running_is_closed_on_start(
        world: dict[str, Any]) -> None:
    forge: FakeForge = world["forge"]
    config = load_config(world["config"])
    store = open_store(config)
    # a compare of a previous life of the receiver, left running when it stopped
    gl = config.suites["glops"].forge
    assert gl is not None
    open_check(store, gl, lambda f: env_secrets(f, ENV), suite="glops", head_sha="d" * 40, ref="feature/old",
               who="dev", pr=2, run_id="forge__earlier", runner=LOCAL)
    assert forge.state.gl_statuses[-1]["state"] == "running"
    server = ServeProcess(world["config"], world["tmp"], ENV)
    try:
        log = server.wait_for("forge checks left running: 1 closed")
        old = next(s for s in forge.state.gl_statuses if s["sha"] == "d" * 40)
        assert old["state"] == "success" and old["description"].startswith("neutral: the compare did not finish")
        assert RESTARTED in forge.state.notes[2][0]["body"]
        note = mr_note(3, "/zlops compare glops", 11, "dev", branch="feature/x", sha=HEAD)
        headers = {"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": "s3cret-gl", "X-Gitlab-Event-UUID": "e-1"}
        status, answer = deliver(server.url + "/gitlab", note, headers, timeout=30)
        assert status == 202, answer
        server.wait_for("crashed; its check was closed neutral")
        mine = next(s for s in forge.state.gl_statuses if s["sha"] == HEAD)
        assert mine["state"] == "success" and mine["description"].startswith("neutral: the compare did not finish")
        (posted,) = forge.state.notes[3]
        assert "### zlops: neutral" in posted["body"] and "GitError" in posted["body"]
        assert deliver(server.url + "/gitlab", note, headers, timeout=30)[0] == 200   # replayed: nothing
        assert [d["decision"] for d in _decisions(server.log())] == ["triggered", "duplicate"]
        assert "trigger local" in log.splitlines()[0]
    finally:
        server.close()


def test_serve_with_the_airflow_trigger_says_in_one_line_that_airflow_is_missing(world: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError) as failed:
        ServeProcess(world["config"], world["tmp"], ENV, "--trigger", "airflow")
    assert "zlops forge serve --trigger airflow needs Airflow installed" in str(failed.value)
    assert "Traceback" not in str(failed.value)


def test_a_plain_install_without_the_forge_extra_is_told_which_extra_to_install(world: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError) as failed:
        ServeProcess(world["config"], world["tmp"], ENV, blocked=("airflow", "uvicorn", "fastapi"))
    assert "zlops forge serve needs FastAPI and uvicorn" in str(failed.value)
    assert "install the forge extra" in str(failed.value) and "Traceback" not in str(failed.value)


@pytest.mark.slow   # importing Airflow takes the subprocess ~4 s
def test_serve_with_the_airflow_trigger_says_so_first(world: dict[str, Any]) -> None:
    pytest.importorskip("airflow")
    server = ServeProcess(world["config"], world["tmp"], {**ENV, "AIRFLOW_HOME": str(world["tmp"] / "airflow")},
                          "--trigger", "airflow", blocked=("no_such_package_blocked",))
    try:
        first = server.log().splitlines()[0]
        assert "zlops forge serve: trigger airflow (each compare is a zlops_pr_compare DAG run" in first, first
    finally:
        server.close()
