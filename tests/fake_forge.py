"""A fake GitHub and GitLab REST API on 127.0.0.1 with state: the endpoints zlops.forge calls, answered
as the forges document them (check runs, commit statuses, MR notes, permissions, pull requests), so the
clients are tested over real HTTP, not against mock objects.

``ForgeState`` holds what a forge would show: the check runs of a commit, its statuses, an MR's notes.
``fail_next`` answers the next N API calls with 500 (an outage); ``checks_forbidden`` answers check-run
creation with 403 (a token that is not a GitHub App's). Every call is recorded with its headers.

Also here: the webhook deliveries, signed as the forges sign them, and a uvicorn server in a thread.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

GITHUB_TOKEN = "ghs_fakeTOKEN0123456789"
GITLAB_TOKEN = "glpat-fakeTOKEN0123456789"


@dataclass
class ForgeState:
    check_runs: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)          # GitHub commit statuses
    gl_statuses: list[dict[str, Any]] = field(default_factory=list)       # GitLab commit statuses
    notes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # MR iid -> notes
    permissions: dict[str, str] = field(default_factory=dict)             # GitHub login -> permission
    members: dict[int, int] = field(default_factory=dict)                 # GitLab user id -> access level
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)        # GitHub PR number -> pull
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    fail_next: int = 0
    checks_forbidden: bool = False
    next_id: int = 100

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def runs_on(self, sha: str, name: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.check_runs if r["head_sha"] == sha and (name is None or r["name"] == name)]


class _Handler(BaseHTTPRequestHandler):
    state: ForgeState
    lock: threading.Lock
    repo = "acme/kernels"
    project = "acme/kernels"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        body = self._body() if method in ("POST", "PATCH", "PUT") else None
        with self.lock:
            st = self.state
            st.calls.append((method, self.path, dict(self.headers)))
            if st.fail_next > 0:
                st.fail_next -= 1
                return self._send(500, {"message": "Server Error"})
            if path.startswith("/gh/"):
                if self.headers.get("Authorization") != f"Bearer {GITHUB_TOKEN}":
                    return self._send(401, {"message": "Bad credentials"})
                return self._github(method, path[3:], query, body)
            if path.startswith("/gl/api/v4/"):
                if self.headers.get("PRIVATE-TOKEN") != GITLAB_TOKEN:
                    return self._send(401, {"message": "401 Unauthorized"})
                return self._gitlab(method, path[len("/gl/api/v4"):], query, body)
            return self._send(404, {"message": "Not Found"})

    def _github(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        st, base = self.state, f"/repos/{self.repo}"
        if m := re.fullmatch(base + r"/commits/([0-9a-f]{7,64})/check-runs", path):
            runs = st.runs_on(m.group(1), (query.get("check_name") or [None])[0])
            return self._send(200, {"total_count": len(runs), "check_runs": runs})
        if path == base + "/check-runs" and method == "POST":
            if st.checks_forbidden:
                return self._send(403, {"message": "Resource not accessible by personal access token"})
            if not body.get("head_sha") or not body.get("name"):
                return self._send(422, {"message": "Validation Failed"})
            run = {"id": st.new_id(), **body}
            st.check_runs.append(run)
            return self._send(201, run)
        if (m := re.fullmatch(base + r"/check-runs/(\d+)", path)) and method == "PATCH":
            run = next((r for r in st.check_runs if r["id"] == int(m.group(1))), None)
            if run is None:
                return self._send(404, {"message": "Not Found"})
            if body.get("status") == "in_progress":
                run.pop("conclusion", None)
            run.update(body)
            return self._send(200, run)
        if (m := re.fullmatch(base + r"/statuses/([0-9a-f]{40})", path)) and method == "POST":
            if body.get("state") not in ("error", "failure", "pending", "success"):
                return self._send(422, {"message": "Validation Failed"})
            status = {"id": st.new_id(), "sha": m.group(1), **body}
            st.statuses.append(status)
            return self._send(201, status)
        if m := re.fullmatch(base + r"/collaborators/([^/]+)/permission", path):
            if m.group(1) not in st.permissions:
                return self._send(404, {"message": "Not Found"})
            perm = st.permissions[m.group(1)]
            api = {"maintain": "write", "triage": "read"}.get(perm, perm)
            return self._send(200, {"permission": api, "role_name": perm, "user": {"login": m.group(1)}})
        if m := re.fullmatch(base + r"/pulls/(\d+)", path):
            pull = st.pulls.get(int(m.group(1)))
            return self._send(200, pull) if pull else self._send(404, {"message": "Not Found"})
        return self._send(404, {"message": "Not Found"})

    def _gitlab(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        st = self.state
        proj = "/projects/" + self.project.replace("/", "%2F")
        raw = urlsplit(self.path).path[len("/gl/api/v4"):]   # the project id stays encoded
        if (m := re.fullmatch(re.escape(proj) + r"/statuses/([0-9a-f]{40})", raw)) and method == "POST":
            if body.get("state") not in ("pending", "running", "success", "failed", "canceled"):
                return self._send(400, {"message": "state is invalid"})
            mine = next((s for s in st.gl_statuses if s["sha"] == m.group(1) and s["name"] == body.get("name")), None)
            if mine is None:
                mine = {"id": st.new_id(), "sha": m.group(1)}
                st.gl_statuses.append(mine)
            mine.update(body)
            return self._send(201, mine)
        if m := re.fullmatch(re.escape(proj) + r"/merge_requests/(\d+)/notes(?:/(\d+))?", raw):
            notes = st.notes.setdefault(int(m.group(1)), [])
            if method == "GET" and not m.group(2):
                page, per = int((query.get("page") or ["1"])[0]), int((query.get("per_page") or ["20"])[0])
                return self._send(200, notes[(page - 1) * per: page * per])
            if method == "POST" and not m.group(2):
                note = {"id": st.new_id(), "body": body["body"], "author": {"username": "zlops-bot"}}
                notes.append(note)
                return self._send(201, note)
            if method == "PUT" and m.group(2):
                note = next((n for n in notes if n["id"] == int(m.group(2))), None)
                if note is None:
                    return self._send(404, {"message": "404 Not found"})
                note["body"] = body["body"]
                return self._send(200, note)
        if m := re.fullmatch(re.escape(proj) + r"/members/all/(\d+)", raw):
            level = st.members.get(int(m.group(1)))
            return (self._send(200, {"id": int(m.group(1)), "access_level": level}) if level is not None
                    else self._send(404, {"message": "404 Not found"}))
        return self._send(404, {"message": "404 Not Found"})

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_PUT(self) -> None:
        self._route("PUT")


class FakeForge:
    """The server: ``github_url`` and ``gitlab_url`` are the API base URLs to configure."""

    def __init__(self) -> None:
        self.state = ForgeState()
        handler = type("Handler", (_Handler,), {"state": self.state, "lock": threading.Lock()})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # shutdown() waits for serve_forever's next poll: 0.05 s, not the default 0.5 s, after every test
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        port = self.server.server_address[1]
        self.github_url = f"http://127.0.0.1:{port}/gh"
        self.gitlab_url = f"http://127.0.0.1:{port}/gl/api/v4"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def github_signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(url: str, payload: Any, headers: dict[str, str], *, timeout: float = 600) -> tuple[int, dict[str, Any]]:
    """POST a delivery (already-signed headers) and return (status, JSON answer)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def github_delivery(event: str, payload: dict[str, Any], secret: str | None) -> tuple[bytes, dict[str, str]]:
    """The body and headers GitHub sends: a new delivery id each time (GitHub's GUID), the body signed."""
    body = json.dumps(payload).encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4())}
    if secret is not None:
        headers["X-Hub-Signature-256"] = github_signature(secret, body)
    return body, headers


_COMMENT_IDS = itertools.count(1001)


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pr_comment(number: int, body: str, login: str, repo: str = "acme/kernels", *,
               created_at: str | None = None) -> dict[str, Any]:
    """GitHub's issue_comment payload (the fields zlops reads, as GitHub sends them): each call is a new
    comment (its own id, made now unless ``created_at``)."""
    return {"action": "created",
            "issue": {"number": number, "pull_request": {"url": f"https://api.github.com/repos/{repo}/pulls/{number}"}},
            "comment": {"id": next(_COMMENT_IDS), "body": body, "user": {"login": login},
                        "created_at": created_at or _now_iso()},
            "repository": {"full_name": repo}, "sender": {"login": login}}


def mr_note(iid: int, note: str, user_id: int, username: str, *, branch: str, sha: str,
            project: str = "acme/kernels", project_id: int = 7, created_at: str | None = None) -> dict[str, Any]:
    """GitLab's Note Hook payload on a merge request (a new note each call, made now unless ``created_at``;
    GitLab writes times as ``2026-12-06 05:00:00 UTC``)."""
    at = created_at or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return {"object_kind": "note", "user": {"id": user_id, "username": username},
            "project": {"id": project_id, "path_with_namespace": project},
            "object_attributes": {"id": next(_COMMENT_IDS), "note": note, "noteable_type": "MergeRequest",
                                  "created_at": at},
            "merge_request": {"iid": iid, "source_branch": branch, "source_project_id": project_id,
                              "target_project_id": project_id, "last_commit": {"id": sha}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AppServer:
    """A FastAPI app served by uvicorn on 127.0.0.1 in a thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start within 20 s")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
