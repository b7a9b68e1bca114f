"""The Slack summary of a run: a pure payload builder and a poster that never loses a run.

:func:`slack_summary_payload` renders blocks (pure data); :func:`post_summary` sends them with a
``slack_sdk.WebClient`` it is given and always leaves the payload in ``slack_payload.json``, with
the outcome recorded, so a Slack outage costs a message, never a result. :func:`client_from_env`
builds the client from an environment variable; the token is never logged nor shown in a repr.
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.error
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zlops.model import (
    CompareSummary,
    Comparison,
    RunRecord,
    ShardOutcome,
    ShardStatus,
    Verdict,
)
from zlops.report import cells

if TYPE_CHECKING:
    from slack_sdk import WebClient

log = logging.getLogger(__name__)

PAYLOAD_FILE = "slack_payload.json"
PAYLOAD_SCHEMA_VERSION = 1
#: Slack's limits: 50 blocks per message, 3000 characters per section text, 150 per header.
MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150
#: Lines listed per category; the rest is counted, never silently dropped.
MAX_ITEMS = 15
MAX_LINE_CHARS = 300
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


def slack_summary_payload(
    summary: CompareSummary,
    *,
    run: RunRecord,
    shards: Sequence[ShardOutcome],
    channel: str,
    report_path: str | None = None,
    thresholds: tuple[float, float] = (2.0, 5.0),
    judge: str = "simple",
) -> dict[str, Any]:
    """Build the ``chat.postMessage`` arguments summarising one run (pure).

    Order: header, run line, counts, regressions, potential regressions, improvements, failed
    shards, missing series, report link. Each list shows at most ``MAX_ITEMS`` lines and stays
    within Slack's section and block limits; what does not fit is counted in a
    ``... and N more (see the report)`` line.
    """
    potential_pct, regression_pct = thresholds
    sha = cells.short_sha(run.sha)
    bad = [s for s in shards if s.status is not ShardStatus.OK]
    pools = sorted({s.pool for s in shards} | {c.pool for c in summary.comparisons})
    counts = {v: summary.count(v) for v in Verdict}
    flagged = cells.flagged_order(summary.comparisons)

    header = _truncate(f"{summary.suite} {run.kind} @ {sha}", MAX_HEADER_CHARS)
    shard_text = f"{len(shards) - len(bad)} ok, {len(bad)} failed" if shards else "none"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header}},
        _section(
            f"Run `{_esc(run.run_key)}` on `{_esc(run.branch)}` · {len(pools)} pools "
            f"({_esc(', '.join(pools)) or 'none'}) · shards: {shard_text}"
        ),
        _section(
            f"*{summary.overall_line()}*\n"
            + (f":rotating_light: {counts[Verdict.SEVERE]} severe · " if counts[Verdict.SEVERE] else "")
            + f":red_circle: {counts[Verdict.REGRESSION]} regressions (>{regression_pct:g}%) · "
            f":large_orange_circle: {counts[Verdict.POTENTIAL]} potential (>{potential_pct:g}%) · "
            f":large_green_circle: {counts[Verdict.IMPROVED]} improved · "
            f"{counts[Verdict.UNCHANGED]} unchanged · {counts[Verdict.NEW]} new · "
            f"{counts[Verdict.MISSING]} missing"
            + (f" · {counts[Verdict.SUSPECT]} suspect (unconfirmed)" if counts[Verdict.SUSPECT] else "")
        ),
    ]
    severe = [c for c in flagged if c.verdict is Verdict.SEVERE]
    regressions = [c for c in flagged if c.verdict is Verdict.REGRESSION]
    potential = [c for c in flagged if c.verdict is Verdict.POTENTIAL]
    improved = sorted(
        (c for c in summary.comparisons if c.verdict is Verdict.IMPROVED),
        key=lambda c: (c.judgement.worse_pct if c.judgement.worse_pct is not None else 0.0,
                       c.pool, c.case, c.metric),
    )
    missing = [c for c in cells.sorted_comparisons(summary.comparisons) if c.verdict is Verdict.MISSING]
    gaps = [c for c in cells.sorted_comparisons(summary.comparisons)
            if c.verdict in (Verdict.INVALID, Verdict.UNMEASURABLE, Verdict.INCOMPARABLE)]
    regression_title = (f":red_circle: *Regressions* (confirmed, worse by more than {potential_pct:g}%)"
                        if judge == "noise" else f":red_circle: *Regressions* (worse by more than {regression_pct:g}%)")
    lists = [
        (f":rotating_light: *Severe regressions* (confirmed, worse by more than {regression_pct:g}%)",
         [_change_line(c) for c in severe]),
        (regression_title, [_change_line(c) for c in regressions]),
        (f":large_orange_circle: *Potential regressions* (worse by more than {potential_pct:g}%)",
         [_change_line(c) for c in potential]),
        (":large_green_circle: *Improvements*", [_change_line(c) for c in improved]),
        (":x: *Failed shards*", [_shard_line(s) for s in sorted(bad, key=lambda s: (s.pool, s.device))]),
        (":grey_question: *Missing tonight* (in the baseline, no value tonight)",
         [f"• `{_esc(c.case)}` ({_esc(c.pool)}, {_esc(c.metric)})" for c in missing]),
        (":warning: *Not judged* (caliber change, throttling, or noise hides the target change)",
         [f"• `{_esc(c.case)}` ({_esc(c.pool)}): {c.verdict.value} — {_esc(c.judgement.note[:200])}" for c in gaps]),
    ]
    blocks += [_list_section(title, lines) for title, lines in lists if lines]
    if report_path:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": _truncate(f"Full report: {_esc(report_path)}", MAX_SECTION_CHARS)}]})
    blocks = _cap_blocks(blocks)

    text = (
        f"{summary.suite} @ {sha}: {counts[Verdict.REGRESSION]} regressions, "
        f"{counts[Verdict.POTENTIAL]} potential, {counts[Verdict.IMPROVED]} improved "
        f"of {summary.judged} judged; {counts[Verdict.MISSING]} missing; shards {shard_text}"
    )
    return {"channel": channel, "text": text, "blocks": blocks}


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
        path = _write(fallback_dir, payload, status="written")
        if path is not None:
            log.info("no Slack client configured; Slack payload written to %s", path)
            return NotifyResult(status="written", path=path)
        return NotifyResult(status="failed", path=None, error="payload file could not be written")

    from slack_sdk.errors import SlackApiError

    try:
        response = client.chat_postMessage(**dict(payload))
    except (SlackApiError, urllib.error.URLError, TimeoutError, OSError) as exc:
        error = _redact(f"{type(exc).__name__}: {exc}", client)
        path = _write(fallback_dir, payload, status="failed", error=error)
        log.warning("Slack post to channel %s failed (%s); payload kept at %s",
                    payload.get("channel"), error, path)
        return NotifyResult(status="failed", path=path, error=error)
    ts = response.get("ts")
    ts = None if ts is None else str(ts)
    path = _write(fallback_dir, payload, status="sent", ts=ts)
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


def _change_line(c: Comparison) -> str:
    base = cells.fmt_value(c.base_value, cells.base_unit(c))
    head = cells.fmt_value(c.head_value, c.unit)
    change = cells.fmt_change(cells.change_pct(c))
    return _truncate(f"• `{_esc(c.case)}` ({_esc(c.pool)}, {_esc(c.metric)}): *{change}*  {base} → {head}",
                     MAX_LINE_CHARS)


def _shard_line(s: ShardOutcome) -> str:
    error = (s.error or "").strip().splitlines()[0] if (s.error or "").strip() else ""
    line = f"• {_esc(s.pool)} device {s.device} ({_esc(s.backend)}): {s.status.value}"
    return _truncate(f"{line}: {_esc(error)}" if error else line, MAX_LINE_CHARS)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _truncate(text, MAX_SECTION_CHARS)}}


def _list_section(title: str, lines: Sequence[str]) -> dict[str, Any]:
    """A title and as many ``lines`` as fit MAX_ITEMS and the section limit, then a count of the rest."""
    room = MAX_SECTION_CHARS - 60  # kept for the "... and N more" line
    text = title
    shown = 0
    for line in lines[:MAX_ITEMS]:
        if len(text) + 1 + len(line) > room:
            break
        text += "\n" + line
        shown += 1
    if shown < len(lines):
        text += f"\n... and {len(lines) - shown} more (see the report)"
    return _section(text)


def _cap_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    dropped = len(blocks) - (MAX_BLOCKS - 1)
    return [*blocks[: MAX_BLOCKS - 1], _section(f"... and {dropped} more sections (see the report)")]


def _esc(text: str) -> str:
    """Escape the three characters Slack's mrkdwn reserves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _redact(text: str, client: Any) -> str:
    token = getattr(client, "token", None)
    if token:
        text = text.replace(token, "***")
    return _TOKEN_PATTERN.sub("xox?-***", text)


def _write(
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
