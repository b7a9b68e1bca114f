"""Database faults: which errors are worth retrying, the bounded backoff, and the one-line message.

A nightly meets three kinds of database trouble:

- transient: the server restarted or terminated our connection (``pg_terminate_backend``, a
  failover), it is still starting up, it refused or timed out a connect, SQLite is locked. Retried
  with exponential backoff, bounded by :attr:`RetryPolicy.total_s`; every store write is an
  idempotent upsert, so repeating a unit of work is safe.
- permanent: an unknown host, wrong credentials, a missing database, an unwritable SQLite file.
  Not retried.
- anything else (a constraint, a bug): not a fault of the database; left alone.

Both fault kinds end as :class:`~zlops.errors.DatabaseUnavailable`, whose message is one line naming
the database (password redacted) and the problem, e.g. ``database unreachable:
postgresql+psycopg://zlops:***@db:5432/zlops: connection refused``.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from zlops.errors import DatabaseUnavailable
from zlops.redact import redact_text, redact_url

log = logging.getLogger(__name__)

T = TypeVar("T")

#: (pattern in the driver's message, reason printed, transient?) in order; the first match wins
_REASONS: tuple[tuple[str, str, bool], ...] = (
    (r"connection refused", "connection refused", True),
    ((r"could not translate host name|failed to resolve host|name or service not known|"
     r"nodename nor servname|temporary failure in name resolution|no address associated"), "unknown host", False),
    (r"timeout expired|timed out", "connection timed out", True),
    ((r"terminating connection due to administrator command|server closed the connection unexpectedly|"
     r"consuming input failed|connection is closed|connection already closed|ssl connection has been closed|"
     r"lost synchronization|eof detected|broken pipe|connection reset"), "connection terminated by the server", True),
    (r"the database system is (starting up|shutting down|in recovery mode)|cannot connect now",
     "the server is starting up or shutting down", True),
    (r"is not currently accepting connections|does not allow connections", "the database refuses connections", True),
    (r"too many (connections|clients)|remaining connection slots", "too many connections", True),
    (r"database is locked", "the SQLite file is locked by another writer", True),
    (r"deadlock detected|could not serialize access", "a concurrent transaction conflicted", True),
    (r"password authentication failed|authentication failed|no password supplied|role .* does not exist",
     "authentication failed (check the user and password)", False),
    (r'database ".*" does not exist', "the database does not exist (create it, or fix the URL)", False),
    (r"unable to open database file", "cannot open the SQLite file (does its folder exist and is it writable?)",
     False),
    (r"attempt to write a readonly database|readonly database", "the SQLite file is read-only", False),
    (r"file is not a database|database disk image is malformed|malformed database schema",
     "the SQLite file is corrupt (restore it from a backup; `zlops store check` says what is wrong)", False),
    (r"database or disk is full", "the disk holding the SQLite file is full (free space there)", False),
    (r"disk i/o error", "the SQLite file's disk failed", False),
    (r"permission denied", "permission denied", False),
)


def redacted_url(url: str) -> str:
    """``url`` with its password shown as ``***``: zlops' one redaction rule (:func:`zlops.redact.redact_url`),
    the only way zlops ever prints a database URL."""
    return redact_url(url)


def classify(exc: BaseException) -> tuple[str, bool] | None:
    """``(reason, transient)`` for a database fault, None for an error that is not one.

    SQLAlchemy's ``connection_invalidated`` (the connection died under us) is always transient.
    """
    if isinstance(exc, PermissionError):
        return "permission denied", False
    if not isinstance(exc, DBAPIError):
        return None
    text = str(exc.orig if exc.orig is not None else exc).lower()
    for pattern, reason, transient in _REASONS:
        if re.search(pattern, text):
            return reason, transient or bool(exc.connection_invalidated)
    if exc.connection_invalidated:
        return "the connection was lost", True
    if isinstance(exc, OperationalError):
        first = (text.strip().splitlines() or ["operational error"])[0]
        return first[:200], False
    return None


def as_unavailable(exc: BaseException, url: str) -> DatabaseUnavailable | None:
    """The one-line :class:`DatabaseUnavailable` for ``exc``; None when ``exc`` is no database fault."""
    found = classify(exc)
    if found is None:
        return None
    reason, transient = found
    what = "database unreachable" if transient or reason == "unknown host" else "database unusable"
    try:
        password = make_url(url).password if "://" in url else None
    except ArgumentError:
        password = None
    if password:
        reason = reason.replace(str(password), "***")
    reason = redact_text(reason)
    return DatabaseUnavailable(f"{what}: {redacted_url(url)}: {reason}", transient=transient)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff: ``first_s``, doubled up to ``max_s``, for at most ``total_s``."""

    total_s: float = 60.0
    first_s: float = 0.5
    max_s: float = 8.0

    def __post_init__(self) -> None:
        if self.total_s < 0 or self.first_s <= 0 or self.max_s < self.first_s:
            raise ValueError(f"RetryPolicy: need total_s >= 0 and 0 < first_s <= max_s, got {self}")

    def delays(self) -> list[float]:
        """The sleeps between attempts (jitter is added when sleeping)."""
        out: list[float] = []
        delay, spent = self.first_s, 0.0
        while spent + delay <= self.total_s:
            out.append(delay)
            spent += delay
            delay = min(delay * 2, self.max_s)
        return out


def with_retries(fn: Callable[[], T], *, url: str, policy: RetryPolicy, what: str = "database call",
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Call ``fn`` until it succeeds, retrying transient database faults by ``policy``.

    A permanent fault, or a transient one that outlasts the policy, raises :class:`DatabaseUnavailable`
    (chained to the driver's error, so ``-v`` shows it); other errors pass through untouched.
    """
    delays = policy.delays()
    for attempt in range(len(delays) + 1):
        try:
            return fn()
        except (DBAPIError, PermissionError) as exc:
            fault = as_unavailable(exc, url)
            if fault is None:
                raise
            if not fault.transient or attempt == len(delays):
                raise fault from exc
            pause = delays[attempt] * (1 + 0.2 * random.random())
            log.warning("%s failed (%s); retry %d of %d in %.1f s", what, fault, attempt + 1, len(delays), pause)
            sleep(pause)
    raise AssertionError("unreachable")  # the loop returns or raises
