"""What the receiver checks before it lets a verified delivery cost anything, and how it tells what it decided.

- **Replay protection.** Every verified delivery is remembered (``forge_deliveries``, :mod:`zlops.store.forge`) by
  the digest of its body and by the forge's delivery id (``X-GitHub-Delivery``, ``X-Gitlab-Event-UUID``) for
  ``forge.replay_window_s``: the same delivery again (a redelivery, a captured request replayed, whatever its
  unsigned id header says) runs nothing. A delivery whose comment or label event is older than the window is
  refused, so a replay from before the remembered window runs nothing either.
- **Rate limits.** Per pull request: ``forge.rate_per_pr`` compares per ``forge.rate_window_s``; per commenter:
  ``forge.rate_per_user`` requests that reached the forge (triggers and refusals). Past either: ``429``, nothing
  asked of or written to the forge.
- **One refusal.** A commenter without write access gets one refusal check per pull request and window; later
  comments of theirs are answered, logged and otherwise ignored.
- **One line per decision**: :func:`decision_line`, ``delivery=... forge=... repo=... pr=... who=... decision=...
  status=... outcome="..."``, logged by the receiver for every delivery, refused ones included.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

#: what the receiver may decide about a delivery (``forge_deliveries.decision``, the log line's ``decision``)
DECISIONS = ("triggered", "ignored", "ping", "duplicate", "stale", "limited", "refused", "refused-permission",
             "refused-signature", "trigger-failed", "forge-error")
#: decisions that count against a commenter's rate (they made zlops call the forge)
COSTLY = ("triggered", "refused-permission")
_DELIVERY_ID = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
_GITLAB_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.\d+)?\s*(UTC|Z|[+-]\d{2}:?\d{2})?$")


def body_digest(body: bytes) -> str:
    """The SHA-256 of a delivery's body (what a replay cannot change without breaking the signature)."""
    return hashlib.sha256(body).hexdigest()


def delivery_id(kind: str, headers: Mapping[str, str]) -> str | None:
    """The forge's id of a delivery (lower-cased headers), when it has a sane one."""
    raw = headers.get("x-github-delivery" if kind == "github" else "x-gitlab-event-uuid") or ""
    return raw if _DELIVERY_ID.match(raw) else None


def parse_time(value: Any) -> datetime | None:
    """GitHub's ``2026-12-06T05:00:00Z`` or GitLab's ``2026-12-06 05:00:00 UTC`` as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    found = _GITLAB_TIME.match(text)
    if found:
        zone = found.group(3) or "UTC"
        zone = "+00:00" if zone in ("UTC", "Z") else zone
        text = f"{found.group(1)}T{found.group(2)}{zone}"
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


def event_time(kind: str, event: str, payload: Mapping[str, Any]) -> datetime | None:
    """When the comment was made (or the pull request last changed: a label), as the payload says; None when it
    does not say."""
    if kind == "github":
        if event == "issue_comment":
            return parse_time((payload.get("comment") or {}).get("created_at"))
        if event == "pull_request":
            return parse_time((payload.get("pull_request") or {}).get("updated_at"))
        return None
    attrs = payload.get("object_attributes") or {}
    return parse_time(attrs.get("created_at") if event == "Note Hook" else attrs.get("updated_at"))


def stale(at: datetime | None, now: datetime, window_s: int) -> str | None:
    """The refusal sentence for an event older than the replay window (None: fresh, or no time given)."""
    if at is None or at >= now - timedelta(seconds=window_s):
        return None
    return (f"refused: the event is from {at:%Y-%m-%d %H:%M} UTC, older than the replay window of "
            f"{_span(window_s)} (forge.replay_window_s); comment again to run a compare")


def _span(seconds: int) -> str:
    if seconds % 86400 == 0:
        return f"{seconds // 86400} day{'s' if seconds != 86400 else ''}"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} hour{'s' if seconds != 3600 else ''}"
    return f"{seconds // 60} minutes"


def limit_sentence(*, who: str, repo: str, pr: int, by_pr: int, by_user: int, per_pr: int, per_user: int,
                   window_s: int) -> str | None:
    """Why a request is over a rate limit (None: within both). ``by_pr``/``by_user``: what the window holds."""
    if by_user >= per_user:
        return (f"refused: {who} asked zlops {by_user} times in the last {_span(window_s)} "
                f"(forge.rate_per_user: {per_user}); try again later")
    if by_pr >= per_pr:
        return (f"refused: {repo}#{pr} ran {by_pr} compares in the last {_span(window_s)} "
                f"(forge.rate_per_pr: {per_pr}); try again later")
    return None


def decision_line(**fields: Any) -> str:
    """One structured log line: ``key=value`` pairs in the order given, values with spaces JSON-quoted, None as -."""
    parts = []
    for key, value in fields.items():
        if value is None or value == "":
            text = "-"
        else:
            text = str(value)
            if re.search(r"[\s\"=]", text) or not text.isprintable() or not text.isascii():
                text = json.dumps(text)   # one line whatever it holds: newlines and escapes are quoted
        parts.append(f"{key}={text}")
    return " ".join(parts)
