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
- A 429 is retried after Slack's Retry-After and a dropped connection is retried, by the client's
  retry handlers (:func:`with_retries` adds them to a client that lacks them, such as SlackHook's).
  A 5xx is not retried at once (the message may have been posted): it stays failed until the next
  flush. After a transport failure (5xx, 429 past its retries, timeout, no connection) the flush
  stops: Slack looks down, so the rest waits for the next run instead of each timing out in turn.
- A message that can never be sent is ``abandoned`` with the reason: its files are gone, its thread's
  first message was abandoned, or it is older than ``max_age`` (a week: stale news).

Nothing here raises for a Slack problem; errors are recorded on the message (token redacted) and
logged as warnings. The token is never logged.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.errors import ZlopsError
from zlops.notify import RETRY_COUNT, redact

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from zlops.store import Store
    from zlops.store.outbox import OutboxItem

log = logging.getLogger(__name__)

#: A message older than this is abandoned rather than posted late.
MAX_AGE = timedelta(days=7)
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{6,}")


@dataclass
class FlushReport:
    """What one flush did, by message id; ``stopped`` says why it stopped early (Slack looked down)."""

    sent: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    abandoned: list[int] = field(default_factory=list)
    stopped: str | None = None


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


def with_retries(client: WebClient, max_retries: int = RETRY_COUNT) -> WebClient:
    """Make sure ``client`` retries a 429 after Retry-After and a dropped connection (in place)."""
    from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

    handlers = getattr(client, "retry_handlers", None)
    if handlers is None:
        return client
    if not any(isinstance(h, RateLimitErrorRetryHandler) for h in handlers):
        handlers.append(RateLimitErrorRetryHandler(max_retry_count=max_retries))
    if not any(isinstance(h, ConnectionErrorRetryHandler) for h in handlers):
        handlers.append(ConnectionErrorRetryHandler(max_retry_count=max_retries))
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
        for item in self.store.outbox_items():
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
    """Send what the outbox holds (see :class:`SlackSender`); without a client nothing is sent."""
    if client is None:
        return FlushReport(waiting=[i.id for i in store.outbox_items()])
    return SlackSender(store, client, max_age=max_age).flush()
