"""The forge's webhook, answered: verify, parse, check who asked, and trigger ``zlops_pr_compare``.

What triggers a compare:

- GitHub: an ``issue_comment`` (created) on a pull request whose first line is ``/zlops compare
  [suite]``, or a ``pull_request`` ``labeled`` with the suite's ``forge.trigger_label``;
- GitLab: a ``Note Hook`` on a merge request with the same command, or a ``Merge Request Hook`` that
  adds the suite's trigger label.

Every delivery is verified first, before its body is parsed: GitHub's ``X-Hub-Signature-256``
(HMAC-SHA256 of the body with the webhook secret), GitLab's ``X-Gitlab-Token`` (the secret itself),
both compared in constant time (``hmac.compare_digest``). Then the forge is asked whether the author
may write to the repository (GitHub: collaborator permission admin/maintain/write; GitLab: member
access level >= 30); a refusal is said in a check of its own (``<check> / trigger``) and in the
answer. The PR's head branch (GitHub forks: ``pull/N/head``) and the suite go through the PR compare's
own validators (:func:`zlops.forge.prcompare.validate_request`) and reach Airflow as params, never a shell.

Before any of that costs a forge call, :mod:`zlops.forge.guard`: a delivery seen before (same body or
delivery id) or older than the replay window runs nothing, and the rate limits per pull request and per
commenter answer 429. A commenter without write access gets one refusal check per pull request and window.

Anything else is refused or ignored with one sentence (the HTTP answer's ``message``); every decision is
logged in one structured line (:func:`zlops.forge.guard.decision_line`) and kept with the delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from zlops.config.settings import Config, ForgeConfig
from zlops.errors import ConfigError, ZlopsError
from zlops.forge.check import refused_check
from zlops.forge.client import ForgeError, GitHub, GitLab, client_for
from zlops.forge.deliver import SecretSource, channel_of, env_secrets, post_now
from zlops.forge.guard import COSTLY, body_digest, decision_line, delivery_id, event_time, limit_sentence, stale
from zlops.forge.lifecycle import LOCAL, failure_reason, finish_run, open_check
from zlops.redact import redact_text
from zlops.store import forge as rows

if TYPE_CHECKING:
    from zlops.store import Store

log = logging.getLogger(__name__)

COMMAND = re.compile(r"^/zlops[ \t]+compare(?:[ \t]+(?P<suite>[A-Za-z0-9][A-Za-z0-9_.-]{0,63}))?[ \t]*$")
MAX_BODY = 5 * 1024 * 1024
DAG_ID = "zlops_pr_compare"

#: what the receiver calls to start a compare: (the validated conf, the run id the receiver chose: the DAG run's
#: id, or the in-process compare's label) -> the id of the run it started
TriggerFn = Callable[[dict[str, Any], str], str]


@dataclass(frozen=True)
class Answer:
    """The receiver's HTTP answer: a status and one sentence (plus what was triggered), and the decision its log
    line and the delivery's row keep (:data:`zlops.forge.guard.DECISIONS`; by default read off the status)."""

    status: int
    message: str
    triggered: tuple[dict[str, Any], ...] = ()
    decision: str = ""

    def __post_init__(self) -> None:
        if not self.decision:
            derived = {202: "ignored", 401: "refused-signature", 403: "refused-permission", 429: "limited"}
            object.__setattr__(self, "decision", "triggered" if self.triggered else
                               derived.get(self.status, "ignored" if self.status < 300 else "refused"))

    def body(self) -> dict[str, Any]:
        return {"message": self.message, "triggered": list(self.triggered)}


@dataclass(frozen=True)
class Request:
    """A trigger as the forge described it (parsed from a verified delivery)."""

    via: str                     # "comment" | "label"
    repo: str                    # GitHub owner/name; GitLab path_with_namespace
    project_id: str | None       # GitLab's numeric project id
    number: int                  # PR number / MR iid
    actor: str                   # login / username
    actor_id: int | None         # GitLab's user id
    suite: str | None = None     # named in the comment
    label: str | None = None
    head: tuple[str, str, bool] | None = None   # (ref, sha, same repo) when the payload carries it
    labels: tuple[str, ...] = field(default_factory=tuple)


def verify_github(secrets: Mapping[str, str], body: bytes, signature: str | None) -> list[str]:
    """The names (suites) whose secret signed ``body`` (``X-Hub-Signature-256: sha256=<hex>``)."""
    if not signature or not signature.startswith("sha256="):
        return []
    return [name for name, secret in secrets.items()
            if hmac.compare_digest("sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
                                   signature)]


def verify_gitlab(secrets: Mapping[str, str], token: str | None) -> list[str]:
    """The names (suites) whose secret equals ``X-Gitlab-Token``."""
    if not token:
        return []
    return [name for name, secret in secrets.items() if hmac.compare_digest(secret.encode(), token.encode())]


def _command(text: str) -> tuple[bool, str | None] | None:
    """(is the command, suite named) for a comment; None when it is not addressed to zlops."""
    first = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    if not first.startswith("/zlops"):
        return None
    found = COMMAND.match(first)
    return (True, found.group("suite")) if found else (False, None)


def parse_github(event: str, payload: Mapping[str, Any]) -> Request | str:
    """A trigger, or the sentence saying why this delivery triggers nothing."""
    repo = str((payload.get("repository") or {}).get("full_name") or "")
    if event == "issue_comment":
        issue, comment = payload.get("issue") or {}, payload.get("comment") or {}
        if payload.get("action") != "created":
            return f"ignored: a comment {payload.get('action')}, only new comments trigger"
        if not issue.get("pull_request"):
            return "ignored: the comment is on an issue, not a pull request"
        command = _command(str(comment.get("body") or ""))
        if command is None:
            return "ignored: the comment does not start with /zlops"
        if not command[0]:
            return "refused: unknown command; write /zlops compare, or /zlops compare <suite>"
        return Request("comment", repo, None, int(issue["number"]), str((comment.get("user") or {}).get("login")),
                       None, suite=command[1])
    if event == "pull_request":
        if payload.get("action") != "labeled":
            return f"ignored: pull_request {payload.get('action')} is not a trigger (label it, or comment)"
        pr = payload.get("pull_request") or {}
        head = pr.get("head") or {}
        same = (head.get("repo") or {}).get("full_name") == repo
        return Request("label", repo, None, int(pr["number"]), str((payload.get("sender") or {}).get("login")), None,
                       label=str((payload.get("label") or {}).get("name") or ""),
                       head=(str(head.get("ref") or ""), str(head.get("sha") or ""), same))
    return f"ignored: GitHub event {event or '(none)'} is not a trigger (issue_comment, pull_request labeled)"


def parse_gitlab(event: str, payload: Mapping[str, Any]) -> Request | str:
    """A trigger, or the sentence saying why this delivery triggers nothing."""
    project = payload.get("project") or {}
    repo, project_id = str(project.get("path_with_namespace") or ""), str(project.get("id") or "") or None
    user = payload.get("user") or {}
    actor, actor_id = str(user.get("username") or ""), user.get("id")
    if event == "Note Hook":
        attrs, mr = payload.get("object_attributes") or {}, payload.get("merge_request") or {}
        if attrs.get("noteable_type") != "MergeRequest" or not mr:
            return "ignored: the note is not on a merge request"
        command = _command(str(attrs.get("note") or ""))
        if command is None:
            return "ignored: the note does not start with /zlops"
        if not command[0]:
            return "refused: unknown command; write /zlops compare, or /zlops compare <suite>"
        return Request("comment", repo, project_id, int(mr["iid"]), actor, _int(actor_id), suite=command[1],
                       head=_gitlab_head(mr))
    if event == "Merge Request Hook":
        attrs = payload.get("object_attributes") or {}
        change = (payload.get("changes") or {}).get("labels") or {}
        before = {str(x.get("title")) for x in change.get("previous") or []}
        added = tuple(str(x.get("title")) for x in change.get("current") or [] if str(x.get("title")) not in before)
        if not added:
            return "ignored: the merge request event adds no label"
        return Request("label", repo, project_id, int(attrs["iid"]), actor, _int(actor_id), head=_gitlab_head(attrs),
                       labels=added)
    return f"ignored: GitLab event {event or '(none)'} is not a trigger (Note Hook, Merge Request Hook with a label)"


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _gitlab_head(mr: Mapping[str, Any]) -> tuple[str, str, bool]:
    same = mr.get("source_project_id") is not None and mr.get("source_project_id") == mr.get("target_project_id")
    return (str(mr.get("source_branch") or ""), str((mr.get("last_commit") or {}).get("id") or ""), same)


@dataclass
class _Seen:
    """What the receiver learnt about one delivery so far: what its decision line and row say."""

    kind: str
    delivery: str | None
    row: int | None = None
    repo: str | None = None
    pr: int | None = None
    actor: str | None = None


class Receiver:
    """Answers one forge's deliveries (see the module docstring). ``trigger(conf, run_id)`` starts the compare
    under the run id the receiver chose and returns the run's id; ``runner`` says who runs it (``local``: this
    process, ``airflow``: a DAG run), so the checks a restarted receiver left running are closed
    (:mod:`zlops.forge.lifecycle`); ``secrets`` gives each suite's token and webhook secret; ``config`` is read
    per delivery; ``store`` (default: the config's) keeps the deliveries and the checks opened."""

    def __init__(self, config: Callable[[], Config], *, trigger: TriggerFn, secrets: SecretSource = env_secrets,
                 runner: str = LOCAL, store: Callable[[Config], Store] | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.config = config
        self.trigger = trigger
        self.secrets = secrets
        self.runner = runner
        self.store = store or _config_store
        self.clock = clock or (lambda: datetime.now(timezone.utc))

    def handle(self, kind: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """Answer a delivery, then log the decision in one line and record it with the delivery."""
        headers = {k.lower(): v for k, v in headers.items()}
        seen = _Seen(kind, delivery_id(kind, headers))
        config: Config | None = None
        try:
            config = self.config()
            answer = self._handle(config, kind, headers, body, seen)
        except ZlopsError as exc:  # a config that no longer reads, a store that does not answer: said, not a 500
            answer = Answer(503, f"refused: zlops cannot take deliveries now: {' '.join(str(exc).split())[:300]}",
                            decision="refused")
        line = decision_line(delivery=seen.delivery, forge=kind, repo=seen.repo, pr=seen.pr, who=seen.actor,
                             decision=answer.decision, status=answer.status, outcome=answer.message,
                             runs=",".join(str(t["run_id"]) for t in answer.triggered) or None)
        log.log(logging.WARNING if answer.status >= 400 and answer.decision != "refused-permission" else logging.INFO,
                "forge delivery %s", line)
        if seen.row is not None and config is not None:
            try:
                self.store(config).unit_of_work(rows.decide_delivery, seen.row, decision=answer.decision,
                                                outcome=answer.message, repo=seen.repo, pr=seen.pr, actor=seen.actor)
            except ZlopsError as exc:  # the answer stands; the row keeps "received" (it still blocks a replay)
                log.warning("forge delivery %s: its decision was not recorded: %s", seen.delivery, exc)
        return answer

    def _handle(self, config: Config, kind: str, headers: Mapping[str, str], body: bytes, seen: _Seen) -> Answer:
        forges = {name: s.forge for name, s in sorted(config.suites.items())
                  if s.forge is not None and s.forge.kind == kind}
        if not forges:
            return Answer(404, f"refused: no suite has a {kind} forge section in the zlops config")
        if len(body) > MAX_BODY:
            return Answer(413, f"refused: the delivery is larger than {MAX_BODY // 1048576} MiB")
        secrets = {name: s for name, f in forges.items() if (s := self.secrets(f).webhook_secret)}
        if kind == "github":
            header = "X-Hub-Signature-256"
            signed = verify_github(secrets, body, headers.get("x-hub-signature-256"))
        else:
            header = "X-Gitlab-Token"
            signed = verify_gitlab(secrets, headers.get("x-gitlab-token"))
        if not signed:
            given = "x-hub-signature-256" if kind == "github" else "x-gitlab-token"
            why = "is missing" if not headers.get(given) else "does not match a configured webhook secret"
            return Answer(401, f"refused: the {header} header {why}", decision="refused-signature")
        try:
            payload = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return Answer(400, "refused: the delivery is not JSON")
        if not isinstance(payload, dict):
            return Answer(400, "refused: the delivery is not a JSON object")
        event = headers.get("x-github-event" if kind == "github" else "x-gitlab-event", "")
        mine = {n: forges[n] for n in signed}
        window = max(f.replay_window_s for f in mine.values())
        store, now = self.store(config), self.clock()
        row, earlier = store.unit_of_work(rows.claim_delivery, forge=kind, delivery=seen.delivery,
                                          body_sha=body_digest(body), now=now,
                                          forget_before=now - timedelta(seconds=2 * window))
        if earlier is not None:
            return Answer(200, f"ignored: this delivery was received at {earlier.received_at:%Y-%m-%d %H:%M:%S} UTC "
                               f"(decided: {earlier.decision}); a replay runs nothing", decision="duplicate")
        seen.row = row
        if kind == "github" and event == "ping":
            return Answer(200, "pong: the signature matches; comment /zlops compare on a pull request",
                          decision="ping")
        try:
            parsed = parse_github(event, payload) if kind == "github" else parse_gitlab(event, payload)
        except (KeyError, TypeError, ValueError) as exc:
            return Answer(400, f"refused: the {event} delivery lacks a field zlops reads ({exc})")
        if isinstance(parsed, str):
            return Answer(422 if parsed.startswith("refused") else 202, parsed)
        seen.repo, seen.pr, seen.actor = parsed.repo, parsed.number, parsed.actor
        too_old = stale(event_time(kind, event, payload), now, window)
        if too_old:
            return Answer(422, too_old, decision="stale")
        return self._request(config, store, now, mine, parsed, seen)

    def _suites(self, forges: Mapping[str, ForgeConfig], req: Request) -> list[str] | Answer:
        mine = {n: f for n, f in forges.items()
                if f.repo.lower() in (req.repo.lower(), (req.project_id or "").lower())}
        if not mine:
            return Answer(422, f"refused: no suite's forge section names the repository {req.repo or '(none)'}")
        if req.via == "label":
            labels = req.labels or ((req.label,) if req.label else ())
            chosen = [n for n, f in mine.items() if f.trigger_label and f.trigger_label in labels]
            return chosen or Answer(202, f"ignored: label {', '.join(labels) or '(none)'} is no suite's trigger_label")
        if req.suite is not None:
            if req.suite not in mine:
                return Answer(422, f"refused: suite {req.suite!r} is not configured for {req.repo}; "
                                   f"write /zlops compare <suite> with one of {', '.join(mine)}")
            return [req.suite]
        if len(mine) > 1:
            return Answer(422, f"refused: {req.repo} has several suites; write /zlops compare <suite> with one of "
                               f"{', '.join(mine)}")
        return list(mine)

    def _limited(self, store: Store, now: datetime, forge: ForgeConfig, req: Request, seen: _Seen) -> Answer | None:
        since = now - timedelta(seconds=forge.rate_window_s)
        by_user = store.read(rows.count_decisions, forge=forge.kind, decisions=COSTLY, since=since, repo=req.repo,
                             actor=req.actor, exclude_id=seen.row)
        by_pr = store.read(rows.count_decisions, forge=forge.kind, decisions=("triggered",), since=since,
                           repo=req.repo, pr=req.number, exclude_id=seen.row)
        sentence = limit_sentence(who=req.actor, repo=req.repo, pr=req.number, by_pr=by_pr, by_user=by_user,
                                  per_pr=forge.rate_per_pr, per_user=forge.rate_per_user,
                                  window_s=forge.rate_window_s)
        return None if sentence is None else Answer(429, sentence, decision="limited")

    def _request(self, config: Config, store: Store, now: datetime, forges: Mapping[str, ForgeConfig],
                 req: Request, seen: _Seen) -> Answer:
        chosen = self._suites(forges, req)
        if isinstance(chosen, Answer):
            return chosen
        forge = forges[chosen[0]]
        limited = self._limited(store, now, forge, req, seen)
        if limited is not None:
            return limited
        token = self.secrets(forge).token
        if not token:
            return Answer(503, f"refused: zlops has no token for {channel_of(forge)} "
                               f"(connection {forge.conn_id} or ${forge.token_env})")
        client = client_for(forge, token)
        try:
            if isinstance(client, GitHub):
                allowed, level = client.can_write(req.actor)
                head = (req.head or _pull_head(client, req.number)) if allowed else req.head
            else:
                assert isinstance(client, GitLab)
                if req.actor_id is None:
                    return Answer(400, "refused: the delivery names no user id")
                allowed, level = client.can_write(req.actor_id)
                head = req.head
        except ForgeError as exc:
            return Answer(502, f"refused: zlops could not ask {forge.kind} about {req.actor}: "
                               f"{redact_text(str(exc), [token])}", decision="forge-error")
        command = "/zlops compare" if req.via == "comment" else f"the label {forge.trigger_label}"
        if not allowed:
            return self._refuse(store, now, forges, chosen, req, seen, level, command, client, head)
        if head is None or not head[1]:
            return Answer(400, "refused: the delivery names no head commit")
        ref, sha, same_repo = head
        if not same_repo:
            if forge.kind != "github":
                return Answer(422, "refused: merge requests from forks are not supported; push the branch to "
                                   f"{req.repo}")
            ref = f"pull/{req.number}/head"
        confs = []
        for name in chosen:
            conf: dict[str, Any] = {"suite": name, "ref": ref, "pr": req.number}
            try:
                from zlops.forge.prcompare import validate_request

                validate_request(config, conf)
            except ConfigError as exc:
                return Answer(422, f"refused: {exc}")
            confs.append(conf)
        triggered = []
        for conf in confs:
            f = forges[conf["suite"]]
            run_id = f"forge__{uuid.uuid4().hex[:16]}"
            open_check(store, f, self.secrets, suite=conf["suite"], head_sha=sha, ref=ref, who=req.actor,
                       pr=req.number, run_id=run_id, runner=self.runner, now=now)
            try:
                made = self.trigger(dict(conf), run_id)
            except Exception as exc:  # noqa: BLE001 - any failure to start: the check must not stay running
                reason = f"the compare could not be started: {failure_reason(exc, [token])}"
                finish_run(store, config, self.secrets, run_id, reason=reason)
                return Answer(503, f"refused: {reason}", tuple(triggered), decision="trigger-failed")
            if made != run_id:
                store.unit_of_work(rows.rename_run, run_id, made)
            triggered.append({"run_id": made, "conf": conf, "head_sha": sha})
        suites = ", ".join(t["conf"]["suite"] for t in triggered)
        return Answer(202, f"triggered {DAG_ID} for {suites} on {ref} ({req.actor} has {level})", tuple(triggered),
                      decision="triggered")

    def _refuse(self, store: Store, now: datetime, forges: Mapping[str, ForgeConfig], chosen: list[str],
                req: Request, seen: _Seen, level: str, command: str, client: GitHub | GitLab,
                head: tuple[str, str, bool] | None) -> Answer:
        """A commenter without write access: one refusal check per pull request and window, then nothing."""
        forge = forges[chosen[0]]
        sentence = (f"refused: {req.actor} has {level} on {req.repo}; only users with write access can "
                    f"trigger zlops ({command})")
        told = store.read(rows.count_decisions, forge=forge.kind, decisions=("refused-permission",),
                          since=now - timedelta(seconds=forge.rate_window_s), repo=req.repo, pr=req.number,
                          actor=req.actor, exclude_id=seen.row)
        if told:
            return Answer(403, sentence + " (said once on the pull request already)", decision="refused-permission")
        if head is None and isinstance(client, GitHub):
            try:
                head = _pull_head(client, req.number)
            except ForgeError:
                head = None
        if head is not None and head[1]:
            for name in chosen:
                f = forges[name]
                post_now(f, refused_check(suite=name, name=f.check_name, head_sha=head[1], sentence=sentence,
                                          pr=req.number), self.secrets)
        return Answer(403, sentence, decision="refused-permission")


def _config_store(config: Config) -> Store:
    from zlops.steps.context import open_store

    return open_store(config)


def _pull_head(client: GitHub, number: int) -> tuple[str, str, bool]:
    pull = client.pull(number)
    return pull.head_ref, pull.head_sha, pull.same_repo
