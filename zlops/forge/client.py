"""The forge clients: GitHub and GitLab REST calls the PR check and the webhook receiver need.

One small HTTP layer on the standard library (``urllib``): JSON in and out, a timeout, the token in a
header and nowhere else (errors and logs show the method, the path and the status, never the token).

GitHub (``api_url`` default https://api.github.com):

- a check run per (commit, check name): ``GET /repos/{repo}/commits/{sha}/check-runs?check_name=``
  finds it (by ``external_id``, else the name), ``PATCH /repos/{repo}/check-runs/{id}`` updates it,
  ``POST /repos/{repo}/check-runs`` creates it only when none exists: a re-run never adds a second;
- where the token cannot create check runs (403: a personal or OAuth token; only GitHub Apps can), a
  commit status instead: ``POST /repos/{repo}/statuses/{sha}`` with ``context`` = the check name (GitHub
  keeps the newest status per context, so a re-run replaces it). A status has no ``neutral``: it is
  ``success`` with a description that starts "neutral:";
- ``GET /repos/{repo}/collaborators/{user}/permission``: admin, maintain or write may trigger;
- ``GET /repos/{repo}/pulls/{n}``: the PR's head branch and commit.

GitLab (``api_url`` default https://gitlab.com/api/v4; the project is ``repo`` URL-encoded):

- ``POST /projects/{id}/statuses/{sha}`` with ``name`` = the check name (``success``, ``failed``;
  neutral is ``success`` described "neutral: ...", running is ``running``);
- the merge request's note: ``GET /projects/{id}/merge_requests/{iid}/notes`` finds the note that
  carries the check's marker, ``PUT .../notes/{note_id}`` updates it, ``POST .../notes`` creates it;
- ``GET /projects/{id}/members/all/{user_id}``: ``access_level`` >= 30 (developer) may trigger.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from zlops.config.settings import ForgeConfig
from zlops.errors import ZlopsError
from zlops.forge.check import FAILURE, NEUTRAL, CheckReport

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
#: GitHub's permission names that may trigger a compare (the API answers admin/write/read/none, and
#: role_name maintain/triage for the finer roles)
GITHUB_WRITERS = frozenset({"admin", "maintain", "write"})
#: GitLab's Developer role: push access
GITLAB_WRITE_LEVEL = 30
MAX_PAGES = 10
USER_AGENT = "zlops-forge"


class ForgeError(ZlopsError):
    """A forge call failed: ``status`` is the HTTP status (0 for a network error)."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status

    @property
    def transient(self) -> bool:
        """Worth retrying later: the forge is down or busy (5xx, 429, network), not refusing us."""
        return self.status == 0 or self.status >= 500 or self.status == 429


@dataclass(frozen=True)
class PullInfo:
    """A pull/merge request's head, as the forge reports it."""

    number: int
    head_ref: str
    head_sha: str
    same_repo: bool


@dataclass(frozen=True)
class Posted:
    """What a post did: how (``check-run``, ``status``), the forge's ids, and whether it updated."""

    via: str
    id: int | None = None
    note_id: int | None = None
    updated: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"via": self.via, "id": self.id, "note_id": self.note_id, "updated": self.updated}


class Http:
    """JSON over HTTP with a token header; the token never appears in an error or a log line."""

    def __init__(self, base_url: str, headers: Mapping[str, str], *, timeout: float = TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **headers}
        self.timeout = timeout

    def __repr__(self) -> str:   # no headers: they hold the token
        return f"Http({self.base_url!r})"

    def call(self, method: str, path: str, *, body: Any = None,
             params: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        url = self.base_url + path + (("?" + urlencode(params)) if params else "")
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # http(s) only
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            text = exc.read()[:300].decode("utf-8", "replace")
            raise ForgeError(f"{method} {path}: HTTP {exc.code}: {_message(text)}", status=exc.code) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ForgeError(f"{method} {path}: {type(exc).__name__}: {reason}", status=0) from None
        try:
            return status, (json.loads(raw) if raw.strip() else None)
        except json.JSONDecodeError:
            raise ForgeError(f"{method} {path}: HTTP {status}: the answer is not JSON", status=502) from None


def _message(text: str) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return " ".join(text.split())[:200] or "(no body)"
    if isinstance(data, dict):
        return str(data.get("message") or data.get("error") or data)[:200]
    return str(data)[:200]


class GitHub:
    """GitHub's REST API for one repository (``owner/name``)."""

    kind = "github"

    def __init__(self, forge: ForgeConfig, token: str, *, timeout: float = TIMEOUT_S) -> None:
        self.repo = forge.repo
        self.http = Http(forge.api, {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
                                     "X-GitHub-Api-Version": "2022-11-28"}, timeout=timeout)

    def post_check(self, check: CheckReport) -> Posted:
        """Create or update the check run; a commit status when check runs are refused (403)."""
        try:
            return self._check_run(check)
        except ForgeError as exc:
            if exc.status != 403:
                raise
            log.info("GitHub refused check runs for %s (%s); posting a commit status instead", self.repo, exc)
        return self._status(check)

    def _check_run(self, check: CheckReport) -> Posted:
        base = f"/repos/{self.repo}"
        _, found = self.http.call("GET", f"{base}/commits/{check.head_sha}/check-runs",
                                  params={"check_name": check.name, "per_page": 100})
        runs = list((found or {}).get("check_runs") or [])
        mine = ([r for r in runs if r.get("external_id") == check.external_id]
                or [r for r in runs if r.get("name") == check.name])
        body: dict[str, Any] = {"name": check.name, "status": check.status, "external_id": check.external_id,
                                "output": {"title": check.title[:250], "summary": check.summary[:65000]}}
        if check.conclusion is not None:
            body["conclusion"] = check.conclusion
        if check.details_url:
            body["details_url"] = check.details_url
        if mine:
            run_id = int(min(mine, key=lambda r: int(r["id"]))["id"])
            self.http.call("PATCH", f"{base}/check-runs/{run_id}", body=body)
            return Posted("check-run", run_id, updated=True)
        _, made = self.http.call("POST", f"{base}/check-runs", body={**body, "head_sha": check.head_sha})
        return Posted("check-run", int((made or {}).get("id") or 0) or None)

    def _status(self, check: CheckReport) -> Posted:
        state = {None: "pending", FAILURE: "failure"}.get(check.conclusion, "success")
        body = {"state": state, "context": check.name, "description": check.description}
        if check.details_url:
            body["target_url"] = check.details_url
        _, made = self.http.call("POST", f"/repos/{self.repo}/statuses/{check.head_sha}", body=body)
        return Posted("status", int((made or {}).get("id") or 0) or None)

    def can_write(self, user: str) -> tuple[bool, str]:
        """(may trigger, the permission GitHub reported) for a login."""
        try:
            _, data = self.http.call("GET", f"/repos/{self.repo}/collaborators/{quote(user, safe='')}/permission")
        except ForgeError as exc:
            if exc.status == 404:   # not a collaborator (or an unknown login)
                return False, "none"
            raise
        permission = str((data or {}).get("permission") or "none")
        role = str((data or {}).get("role_name") or permission)
        return (permission in GITHUB_WRITERS or role in GITHUB_WRITERS), role

    def pull(self, number: int) -> PullInfo:
        _, data = self.http.call("GET", f"/repos/{self.repo}/pulls/{number}")
        head = (data or {}).get("head") or {}
        head_repo = (head.get("repo") or {}).get("full_name")
        base_repo = (((data or {}).get("base") or {}).get("repo") or {}).get("full_name") or self.repo
        return PullInfo(number, str(head.get("ref") or ""), str(head.get("sha") or ""), head_repo == base_repo)


class GitLab:
    """GitLab's REST API (v4) for one project (``group/project`` or its numeric id)."""

    kind = "gitlab"

    def __init__(self, forge: ForgeConfig, token: str, *, timeout: float = TIMEOUT_S) -> None:
        self.project = quote(forge.repo, safe="")
        self.http = Http(forge.api, {"PRIVATE-TOKEN": token}, timeout=timeout)

    def post_check(self, check: CheckReport) -> Posted:
        """The commit status, then (with a merge request) the MR note, updated in place on a re-run."""
        state = {None: "running", FAILURE: "failed"}.get(check.conclusion, "success")
        body = {"state": state, "name": check.name, "description": check.description}
        if check.details_url:
            body["target_url"] = check.details_url
        _, made = self.http.call("POST", f"/projects/{self.project}/statuses/{check.head_sha}", body=body)
        status_id = int((made or {}).get("id") or 0) or None
        if check.pr is None:
            return Posted("status", status_id)
        note_id, updated = self._note(check)
        return Posted("status+note", status_id, note_id=note_id, updated=updated)

    def _note(self, check: CheckReport) -> tuple[int | None, bool]:
        marker = f"<!-- zlops-check:{check.external_id} -->"
        heading = {None: "running", NEUTRAL: "neutral"}.get(check.conclusion, check.conclusion)
        body = f"{marker}\n### {check.name}: {heading}\n\n{check.title}\n\n{check.summary}"
        notes = f"/projects/{self.project}/merge_requests/{check.pr}/notes"
        for page in range(1, MAX_PAGES + 1):
            _, found = self.http.call("GET", notes, params={"per_page": 100, "page": page, "sort": "asc"})
            found = list(found or [])
            mine = next((n for n in found if marker in str(n.get("body") or "")), None)
            if mine is not None:
                self.http.call("PUT", f"{notes}/{int(mine['id'])}", body={"body": body})
                return int(mine["id"]), True
            if len(found) < 100:
                break
        _, made = self.http.call("POST", notes, body={"body": body})
        return (int((made or {}).get("id") or 0) or None), False

    def can_write(self, user_id: int) -> tuple[bool, str]:
        """(may trigger, the access level GitLab reported) for a user id."""
        try:
            _, data = self.http.call("GET", f"/projects/{self.project}/members/all/{int(user_id)}")
        except ForgeError as exc:
            if exc.status == 404:
                return False, "not a member"
            raise
        level = int((data or {}).get("access_level") or 0)
        return level >= GITLAB_WRITE_LEVEL, f"access level {level}"


def client_for(forge: ForgeConfig, token: str, *, timeout: float = TIMEOUT_S) -> GitHub | GitLab:
    """The client of a suite's ``forge`` section."""
    return GitHub(forge, token, timeout=timeout) if forge.kind == "github" else GitLab(forge, token, timeout=timeout)
