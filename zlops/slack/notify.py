"""What a notifier leaves behind: :class:`NotifyResult` and the ``slack_payload.json`` record.

Sending is :mod:`zlops.slack.outbox`'s job (the one gateway: the outbox, the client factory
:func:`~zlops.slack.outbox.client_from_env`, retries, redaction), and the nightly summary is rendered by
:mod:`zlops.slack.summary`; this module imports neither (the outbox records its results with it).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["PAYLOAD_FILE", "NotifyResult", "write_payload"]

PAYLOAD_FILE = "slack_payload.json"
PAYLOAD_SCHEMA_VERSION = 1


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
