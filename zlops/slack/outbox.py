"""Delivering the outbox to Slack with a ``slack_sdk.WebClient``: posts, thread replies, file uploads.

Every message is in the store's outbox before it is sent (:mod:`zlops.store.outbox`), and
:func:`flush_outbox` sends what is pending or failed, oldest first:

- ``chat.postMessage`` for a message; a reply (``parent_id``) waits until its parent is sent and
  then goes into the parent's thread (``thread_ts``, and the channel id Slack answered for it).
- ``files_upload_v2`` for ``{"files": [...]}`` (files.getUploadURLExternal, the upload,
  files.completeUploadExternal); the permalinks Slack returns are kept in the message's ``result``.
  Uploads need a channel ID: the parent's (what Slack answered when it was posted), else a
  configured ``C...`` id, else one learned from an earlier post to the same ``#name``, else
  ``conversations.list`` (the ``channels:read`` scope) once per flush.
- Transient errors are retried inside the step, with backoff, by the client's retry handlers
  (:func:`with_retries` gives every client the same ones, SlackHook's too): a 429 after Slack's
  Retry-After (unless that is longer than :data:`MAX_RETRY_AFTER_S`), a dropped connection, and a
  5xx after 1 s, 2 s, ... (``ServerErrorRetry``; a 5xx may mean the message was posted anyway: a
  rare duplicate is the price of not delaying a night's alerts by a day). After a
  transport failure that outlasts them (5xx, 429, timeout, no connection) the flush stops: Slack
  looks down, so the rest waits for the next flush (``zlops alert flush``, the ``zlops_outbox``
  DAG every 15 minutes, the next report step) instead of each timing out in turn.
- A message that can never be sent is ``abandoned`` with the reason: its files are gone, its thread's
  first message was abandoned, or it is older than ``max_age`` (a week: stale news).

Nothing here raises for a Slack problem; errors are recorded on the message (token redacted) and
logged as warnings. The token is never logged. This module is the one Slack gateway: the nightly,
the PR compare and ``zlops alert`` all send through the outbox with a client from
:func:`client_from_env` (CLI) or the Slack provider's hook (DAGs), both given :func:`with_retries`.
Flushes hold the store's outbox lock, so two flushers never post one message twice.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.errors import ZlopsError

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from zlops.config.settings import SlackConfig
    from zlops.slack.notify import NotifyResult
    from zlops.store import Store
    from zlops.store.outbox import OutboxItem

log = logging.getLogger(__name__)

#: A message older than this is abandoned rather than posted late.
MAX_AGE = timedelta(days=7)
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{6,}")
#: Retries of one call per kind of transient error (429, dropped connection, 5xx).
RETRY_COUNT = 2
#: A 429 asking to wait longer than this is not waited for inside the step (the next flush retries).
MAX_RETRY_AFTER_S = 60
#: First pause before retrying a 5xx; doubled per retry (1 s, 2 s with RETRY_COUNT 2), with jitter.
SERVER_ERROR_BACKOFF_S = 1.0


def redact(text: str, client: Any = None) -> str:
    """``text`` without the client's token or anything shaped like a Slack token."""
    from zlops.redact import redact_text

    token = getattr(client, "token", None)
    if token:
        text = text.replace(token, "***")
    return redact_text(text)


def client_from_env(token_env: str = "SLACK_BOT_TOKEN", *, base_url: str | None = None,
                    environ: Mapping[str, str] | None = None, timeout: int = 30,
                    max_retries: int = RETRY_COUNT) -> WebClient | None:
    """A ``WebClient`` from the bot token in ``environ[token_env]``, or None when it is unset/empty.

    It has :func:`with_retries`' handlers, each allowed ``max_retries`` retries. ``base_url``
    points it elsewhere (a fake server in tests). The token is never logged nor shown in a repr.
    """
    env = os.environ if environ is None else environ
    token = (env.get(token_env) or "").strip()
    if not token:
        log.info("%s is not set; Slack posting is disabled", token_env)
        return None
    from slack_sdk import WebClient

    kwargs: dict[str, Any] = {}
    if base_url is not None:
        kwargs["base_url"] = base_url if base_url.endswith("/") else base_url + "/"
    return with_retries(WebClient(token=token, timeout=timeout, retry_handlers=[], **kwargs), max_retries)


def client_for(slack: SlackConfig | None) -> WebClient | None:
    """The CLI's client for a config's ``slack`` section (None without the section or a token)."""
    return None if slack is None else client_from_env(slack.token_env, base_url=slack.base_url)


@dataclass
class FlushReport:
    """What one flush did, by message id; ``stopped`` says why it stopped early (Slack looked down)."""

    sent: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    abandoned: list[int] = field(default_factory=list)
    stopped: str | None = None

    def line(self) -> str:
        """One line for people: what was sent, what failed and why the flush stopped."""
        parts = [f"sent {len(self.sent)}", f"failed {len(self.failed)}", f"waiting {len(self.waiting)}",
                 f"abandoned {len(self.abandoned)}"]
        stopped = " ".join(self.stopped.split()) if self.stopped else ""
        return "outbox: " + ", ".join(parts) + (f"; stopped: {stopped}" if stopped else "")


class _Abandon(Exception):
    """This message can never be sent (raised inside the sender only)."""


class ChannelNotFound(ZlopsError):
    """A ``#name`` that ``conversations.list`` does not show: configure the channel's ID instead."""


def slack_errors() -> tuple[type[BaseException], ...]:
    """What a Slack call may raise for a Slack-side or network problem (never a bug of ours)."""
    from slack_sdk.errors import SlackClientError

    return (SlackClientError, ChannelNotFound, OSError, http.client.HTTPException, json.JSONDecodeError)


def is_transient(exc: BaseException) -> bool:
    """A 5xx, a 429 past its retries, a timeout or a network error: try again on the next run."""
    from slack_sdk.errors import SlackApiError

    if isinstance(exc, ChannelNotFound):
        return False
    if isinstance(exc, SlackApiError):
        status = getattr(exc.response, "status_code", 200)
        return status >= 500 or status == 429
    return True


def _retry_handlers(max_retries: int) -> list[Any]:
    from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
    from slack_sdk.http_retry.handler import RetryHandler
    from slack_sdk.http_retry.interval_calculator import RetryIntervalCalculator

    class Backoff(RetryIntervalCalculator):
        def calculate_sleep_duration(self, current_attempt: int) -> float:
            return SERVER_ERROR_BACKOFF_S * (2 ** current_attempt) * (1 + 0.2 * random.random())

    class ServerErrorRetry(RetryHandler):
        """Retries any 5xx (Slack's own handler only knows 500 and 503; proxies answer 502 and 504)."""

        def _can_retry(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> bool:
            return response is not None and response.status_code >= 500

    class BoundedRateLimitRetry(RateLimitErrorRetryHandler):
        """Slack's 429 handler, except that a Retry-After beyond MAX_RETRY_AFTER_S is left to the next flush."""

        def _can_retry(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> bool:
            if response is None or response.status_code != 429:
                return False
            wait = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), ["1"])
            try:
                return float(wait[0] if isinstance(wait, list) else wait) <= MAX_RETRY_AFTER_S
            except ValueError:
                return True

    return [BoundedRateLimitRetry(max_retry_count=max_retries),
            ConnectionErrorRetryHandler(max_retry_count=max_retries),
            ServerErrorRetry(max_retry_count=max_retries, interval_calculator=Backoff())]


def with_retries(client: WebClient, max_retries: int = RETRY_COUNT) -> WebClient:
    """Give ``client`` (in place) zlops' retry handlers where it lacks one of their kind: a 429 after
    Retry-After (bounded), a dropped connection, a 5xx with backoff."""
    from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

    handlers = getattr(client, "retry_handlers", None)
    if handlers is None:
        return client
    wanted = _retry_handlers(max_retries)
    kinds = [RateLimitErrorRetryHandler, ConnectionErrorRetryHandler, type(wanted[2])]
    for kind, handler in zip(kinds, wanted, strict=True):
        present = [h for h in handlers if isinstance(h, kind) or type(h).__name__ == type(handler).__name__]
        if not present:
            handlers.append(handler)
    return client


class SlackSender:
    """Sends outbox messages through one client; remembers channel ids and whether Slack is down."""

    def __init__(self, store: Store, client: WebClient, *, max_age: timedelta = MAX_AGE,
                 now: datetime | None = None) -> None:
        self.store = store
        self.client = with_retries(client)
        self.max_age = max_age
        self.now = now
        self.down: str | None = None
        self._channel_ids: dict[str, str] = {}

    def flush(self, report: FlushReport | None = None) -> FlushReport:
        """Send every pending or failed message, oldest first (see the module docstring)."""
        report = report or FlushReport()
        now = self.now or datetime.now(timezone.utc)
        from zlops.store.outbox import FORGE_KIND

        for item in self.store.outbox_items(exclude_kinds=(FORGE_KIND,)):  # checks go to the forge (zlops.forge)
            if self.down:
                report.waiting.append(item.id)
                continue
            if item.created_at < now - self.max_age:
                self._abandon(item, f"stale: queued {item.created_at:%Y-%m-%d %H:%M} UTC, more than "
                                    f"{self.max_age.days} days ago", report)
                continue
            parent = None
            if item.parent_id is not None:
                parent = self._item(item.parent_id)
                if parent.status == "abandoned":
                    self._abandon(item, f"its thread's first message #{parent.id} was abandoned", report)
                    continue
                if parent.status != "sent" or not parent.ts:
                    report.waiting.append(item.id)
                    continue
            self._send(item, parent, report)
        report.stopped = self.down
        return report

    def _item(self, notification_id: int) -> OutboxItem:
        (item,) = self.store.outbox_items(ids=[notification_id])
        return item

    def _abandon(self, item: OutboxItem, reason: str, report: FlushReport) -> None:
        log.warning("Slack message #%d (%s, run %s) abandoned: %s", item.id, item.kind, item.run_key, reason)
        self.store.mark_notification(item.id, "abandoned", error=reason, attempted=False)
        report.abandoned.append(item.id)

    def _send(self, item: OutboxItem, parent: OutboxItem | None, report: FlushReport) -> None:
        try:
            if "files" in item.payload:
                ts, channel_id, result = self._upload(item, parent)
            else:
                ts, channel_id, result = self._post(item, parent)
        except _Abandon as exc:
            self._abandon(item, str(exc), report)
            return
        except slack_errors() as exc:
            error = redact(f"{type(exc).__name__}: {exc}", self.client)
            self.store.mark_notification(item.id, "failed", error=error)
            report.failed.append(item.id)
            if is_transient(exc):
                self.down = error
            log.warning("Slack %s #%d (%s, run %s) to %s failed, kept in the outbox: %s",
                        "upload" if "files" in item.payload else "message", item.id, item.kind, item.run_key,
                        item.channel, error)
            return
        self.store.mark_notification(item.id, "sent", ts=ts, channel_id=channel_id, result=result)
        if ts is not None:
            self.store.record_thread(item.id, ts, channel_id)
            if channel_id:
                self._channel_ids.setdefault(item.channel, channel_id)
        report.sent.append(item.id)
        log.info("Slack %s #%d (%s) sent to %s%s", "upload" if "files" in item.payload else "message", item.id,
                 item.kind, channel_id or item.channel, f" in thread {parent.ts}" if parent else "")

    def _post(self, item: OutboxItem, parent: OutboxItem | None
              ) -> tuple[str | None, str | None, Mapping[str, Any] | None]:
        kwargs = dict(item.payload)
        if parent is not None:
            kwargs["channel"] = parent.channel_id or kwargs.get("channel", item.channel)
            kwargs["thread_ts"] = parent.ts
        response = self.client.chat_postMessage(**kwargs)
        ts = response.get("ts")
        channel_id = response.get("channel")
        return (None if ts is None else str(ts)), (None if channel_id is None else str(channel_id)), None

    def _upload(self, item: OutboxItem, parent: OutboxItem | None
                ) -> tuple[str | None, str | None, Mapping[str, Any] | None]:
        wanted = list(item.payload["files"])
        present = [f for f in wanted if Path(f["path"]).is_file()]
        if not present:
            raise _Abandon("its files are gone: " + ", ".join(str(f["path"]) for f in wanted[:3]))
        channel_id = (parent.channel_id if parent is not None else None) or self.channel_id(item.channel)
        response = self.client.files_upload_v2(
            file_uploads=[{"file": str(f["path"]), "filename": f.get("filename") or Path(f["path"]).name,
                           "title": f.get("title") or Path(f["path"]).name} for f in present],
            channel=channel_id,
            thread_ts=None if parent is None else parent.ts,
            initial_comment=item.payload.get("initial_comment"),
        )
        answered = list(response.get("files") or [])
        # completeUploadExternal answers the files in the order they were sent
        files = [{"path": str(f["path"]), "title": f.get("title"), "id": (a or {}).get("id"),
                  "permalink": (a or {}).get("permalink")}
                 for f, a in zip(present, answered + [None] * (len(present) - len(answered)), strict=True)]
        missing = [str(f["path"]) for f in wanted if f not in present]
        return None, channel_id, {"files": files, "missing": missing}

    def channel_id(self, channel: str) -> str:
        """The channel ID of ``channel`` (``C...`` as is; a ``#name`` looked up, see the module docstring)."""
        if _CHANNEL_ID.fullmatch(channel):
            return channel
        if channel in self._channel_ids:
            return self._channel_ids[channel]
        known = self.store.known_channel_id(channel)
        if known is None:
            name = channel.lstrip("#")
            for page in self.client.conversations_list(types="public_channel,private_channel",
                                                       exclude_archived=True, limit=1000):
                known = next((c["id"] for c in page.get("channels", []) if c.get("name") == name), None)
                if known:
                    break
        if known is None:
            raise ChannelNotFound(f"channel {channel!r} not found by conversations.list: configure its "
                                   "ID (C...) as slack.channel, or invite the bot and grant channels:read")
        self._channel_ids[channel] = known
        return known


def flush_outbox(store: Store, client: WebClient | None, *, max_age: timedelta = MAX_AGE) -> FlushReport:
    """Send what the outbox holds (see :class:`SlackSender`), under the store's outbox lock;
    without a client nothing is sent. Checks on pull requests wait for zlops.forge's flush."""
    from zlops.store.outbox import FORGE_KIND

    if client is None:
        return FlushReport(waiting=[i.id for i in store.outbox_items(exclude_kinds=(FORGE_KIND,))])
    with store.outbox_lock() as held:
        if not held:
            log.warning("another flush of the outbox has been running for minutes; leaving the messages to it")
            return FlushReport(waiting=[i.id for i in store.outbox_items(exclude_kinds=(FORGE_KIND,))],
                               stopped="another flush is running")
        return SlackSender(store, client, max_age=max_age).flush()


def send_message(store: Store, client: WebClient | None, *, run_key: str, kind: str, channel: str,
                 payload: Mapping[str, Any], fallback_dir: Path) -> NotifyResult:
    """Queue one message in the outbox, flush, and record the outcome in ``fallback_dir/slack_payload.json``.

    What the PR compare sends; never raises for Slack. ``sent`` with Slack's ts, ``written`` when no
    client is configured (the message waits in the outbox), ``failed`` when Slack did not take it now
    (it stays in the outbox for the next flush).
    """
    from zlops.slack.notify import NotifyResult, write_payload

    note = store.queue_notification(run_key, kind, channel, payload)
    report = flush_outbox(store, client)
    (item,) = store.outbox_items(ids=[note])
    if client is None:
        status, error = "written", None
        log.info("no Slack client configured; message %s of %s kept in the outbox", kind, run_key)
    elif item.status == "sent":
        status, error = "sent", None
    else:
        status = "failed"
        error = item.last_error or (f"not sent: {report.stopped}" if report.stopped else "waiting in the outbox")
        log.warning("Slack message %s of %s to %s not sent (%s); it stays in the outbox", kind, run_key,
                    channel, error)
    path = write_payload(fallback_dir, payload, status=status, ts=item.ts, error=error)
    if path is None and status == "written":
        status, error = "failed", "payload file could not be written"
    return NotifyResult(status=status, path=path, ts=item.ts, error=error)
