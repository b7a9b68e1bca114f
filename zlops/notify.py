"""Slack plumbing shared by every notifier: the client, the payload file, one-shot posting, redaction.

:func:`client_from_env` builds a ``slack_sdk.WebClient`` from a bot token in the environment (the
CLI's path; DAGs use the Slack provider's ``SlackHook``); the token is never logged nor shown in a
repr. :func:`post_summary` sends one prepared message and always leaves it in ``slack_payload.json``
with the outcome, so a Slack outage costs a message, never a result (the PR comparison uses it; the
nightly goes through the outbox, :mod:`zlops.slack`). The nightly summary itself is rendered by
:mod:`zlops.slack_summary` (re-exported here).
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.error
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.slack_summary import (
    MAX_BLOCKS,
    MAX_HEADER_CHARS,
    MAX_SECTION_CHARS,
    AlertDigest,
    SummaryMessages,
    slack_summary_messages,
    slack_summary_payload,
)

if TYPE_CHECKING:
    from slack_sdk import WebClient

log = logging.getLogger(__name__)

__all__ = ["MAX_BLOCKS", "MAX_HEADER_CHARS", "MAX_SECTION_CHARS", "AlertDigest", "NotifyResult", "SummaryMessages",
           "client_from_env", "post_summary", "redact", "slack_summary_messages", "slack_summary_payload",
           "write_payload"]

PAYLOAD_FILE = "slack_payload.json"
PAYLOAD_SCHEMA_VERSION = 1
RETRY_COUNT = 2
_TOKEN_PATTERN = re.compile(r"xox[a-z]-[A-Za-z0-9-]+")


@dataclass(frozen=True)
class NotifyResult:
    """What happened to a summary: ``sent`` (with Slack's ``ts``), ``written`` (no client) or ``failed``.

    ``path`` is where the payload file went (``None`` only when even that could not be written).
    """

    status: str
    path: Path | None
    ts: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.status not in ("sent", "written", "failed"):
            raise ValueError(f"NotifyResult.status: expected sent, written or failed, got {self.status!r}")


def post_summary(
    payload: Mapping[str, Any],
    client: WebClient | None,
    *,
    fallback_dir: Path,
) -> NotifyResult:
    """Send ``payload`` with ``client`` (``chat.postMessage``) and record it; never raises.

    Without a client the payload is only written to ``fallback_dir/slack_payload.json``. With one,
    the file is written too, with the outcome: Slack's ``ts`` on success, the error on failure
    (Slack API error, HTTP or connection error, timeout), which is also logged as a WARNING.
    """
    if client is None:
        path = write_payload(fallback_dir, payload, status="written")
        if path is not None:
            log.info("no Slack client configured; Slack payload written to %s", path)
            return NotifyResult(status="written", path=path)
        return NotifyResult(status="failed", path=None, error="payload file could not be written")

    from slack_sdk.errors import SlackApiError

    try:
        response = client.chat_postMessage(**dict(payload))
    except (SlackApiError, urllib.error.URLError, TimeoutError, OSError) as exc:
        error = redact(f"{type(exc).__name__}: {exc}", client)
        path = write_payload(fallback_dir, payload, status="failed", error=error)
        log.warning("Slack post to channel %s failed (%s); payload kept at %s",
                    payload.get("channel"), error, path)
        return NotifyResult(status="failed", path=path, error=error)
    ts = response.get("ts")
    ts = None if ts is None else str(ts)
    path = write_payload(fallback_dir, payload, status="sent", ts=ts)
    log.info("Slack summary posted to channel %s (ts %s)", payload.get("channel"), ts)
    return NotifyResult(status="sent", path=path, ts=ts)


def client_from_env(
    token_env: str = "SLACK_BOT_TOKEN",
    *,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: int = 30,
    max_retries: int = RETRY_COUNT,
) -> WebClient | None:
    """A ``WebClient`` from the bot token in ``environ[token_env]``, or None when it is unset/empty.

    The client retries a 429 after Slack's Retry-After and a dropped connection, each at most
    ``max_retries`` times; a 5xx is not retried, as the message may have been posted already.
    ``base_url`` points the client elsewhere (a fake server in tests).
    """
    env = os.environ if environ is None else environ
    token = (env.get(token_env) or "").strip()
    if not token:
        log.info("%s is not set; Slack posting is disabled", token_env)
        return None

    from slack_sdk import WebClient
    from slack_sdk.http_retry.builtin_handlers import (
        ConnectionErrorRetryHandler,
        RateLimitErrorRetryHandler,
    )

    kwargs: dict[str, Any] = {}
    if base_url is not None:
        kwargs["base_url"] = base_url if base_url.endswith("/") else base_url + "/"
    return WebClient(
        token=token,
        timeout=timeout,
        retry_handlers=[
            RateLimitErrorRetryHandler(max_retry_count=max_retries),
            ConnectionErrorRetryHandler(max_retry_count=max_retries),
        ],
        **kwargs,
    )


def redact(text: str, client: Any = None) -> str:
    """``text`` without the client's token or anything shaped like a Slack token."""
    token = getattr(client, "token", None)
    if token:
        text = text.replace(token, "***")
    return _TOKEN_PATTERN.sub("xox?-***", text)


def write_payload(
    folder: Path, payload: Mapping[str, Any], *, status: str, ts: str | None = None,
    error: str | None = None,
) -> Path | None:
    """Write the payload and its outcome atomically; on a filesystem error log it and return None."""
    record = {"schema_version": PAYLOAD_SCHEMA_VERSION, "status": status, "ts": ts, "error": error,
              "payload": {k: v for k, v in payload.items() if k != "token"}}
    path = Path(folder) / PAYLOAD_FILE
    tmp = path.with_name(PAYLOAD_FILE + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not write the Slack payload to %s: %s", path, exc)
        return None
    return path
