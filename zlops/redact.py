"""THE redaction rule: every URL and secret zlops prints or stores goes through here.

- A URL's credentials become ``***``: ``https://user:token@host/r.git`` -> ``https://user:***@host/r.git``,
  ``https://token@host/r.git`` -> ``https://***@host/r.git`` (over http(s) a lone user is a token);
  a database URL keeps its user: ``postgresql+psycopg://zlops:***@db:5432/zlops``.
  ``ssh://git@host/r.git``, scp-like ``git@host:r.git`` and ``postgresql://zlops@db/zlops`` carry no
  secret and are left alone.
- In free text (git's stderr, an exception, a log line) every such URL is redacted, and so is
  anything shaped like a Slack token (``xoxb-***``) and every value of :func:`register_secret`
  (the credentials taken out of a repository URL, a token read from the environment).
- A suite's ``env:`` values are recorded by name, ``***`` unless the suite lists the name in
  ``env_public`` (:func:`env_for_record`).

The database URL rule (``zlops.store.retry.redacted_url``) is this one; the Slack token rule
(``zlops.slack.outbox.redact``) calls :func:`redact_text`. Nothing else in zlops redacts.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

MASK = "***"

#: scheme://userinfo@ (userinfo without '/', '@' or whitespace); the rest of the URL is untouched
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/@\s'\"<>]+)@")
_SLACK_TOKEN = re.compile(r"\bxox[a-z]-[A-Za-z0-9-]+")
#: users that name an account, never a secret: kept as written when no password follows
_PLAIN_USERS = frozenset({"git", "ssh", "root"})

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()


def register_secret(value: str | None) -> None:
    """Redact ``value`` wherever it appears in text from now on (this process). Values shorter than
    4 characters are ignored: masking every ``1`` of a log would hide more than it protects."""
    if value and len(value) >= 4:
        with _SECRETS_LOCK:
            _SECRETS.add(value)
            _SECRETS.add(unquote(value))


def _userinfo(match: re.Match[str]) -> str:
    scheme, info = match.group("scheme"), match.group("userinfo")
    if ":" in info:
        user = info.split(":", 1)[0]
        return f"{scheme}{user}:{MASK}@"
    if scheme.lower().startswith(("http://", "https://")) and info not in _PLAIN_USERS:
        return f"{scheme}{MASK}@"   # https://TOKEN@host: the lone user *is* the token (GitHub, GitLab)
    return match.group(0)  # ssh://git@host, postgresql://zlops@db: an account name, the key is elsewhere


def redact_url(url: str) -> str:
    """``url`` with its credentials shown as ``***`` (see the module)."""
    return _URL_USERINFO.sub(_userinfo, url)


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(url without credentials, user, password)`` of a URL that carries them in its userinfo;
    ``(url, None, None)`` when it carries none (an ssh account name is not a credential)."""
    match = _URL_USERINFO.match(url)
    if match is None or redact_url(url) == url:
        return url, None, None
    info = match.group("userinfo")
    user, _, password = info.partition(":")
    clean = match.group("scheme") + url[match.end():]
    if not password:  # https://TOKEN@host: git asks for a user name, the token is the password
        return clean, unquote(user), unquote(user)
    return clean, unquote(user), unquote(password)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every credential-bearing URL, Slack-shaped token and known secret masked."""
    if not text:
        return text
    with _SECRETS_LOCK:
        known = sorted({*_SECRETS, *(s for s in secrets if s and len(s) >= 4)}, key=len, reverse=True)
    for value in known:
        text = text.replace(value, MASK)
    text = _URL_USERINFO.sub(_userinfo, text)
    return _SLACK_TOKEN.sub("xox?-" + MASK, text)


def env_for_record(env: Mapping[str, str], public: Iterable[str] = ()) -> dict[str, str]:
    """A suite's ``env:`` as zlops stores it (manifests, run meta): every name, the value ``***``
    unless the name is in ``public`` (the suite's ``env_public``); a public value still has its
    URLs' credentials redacted."""
    shown = set(public)
    return {k: redact_text(v) if k in shown else MASK for k, v in env.items()}


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's message (with its arguments) by :func:`redact_text`;
    the CLI installs it on its handlers, so a log line never carries a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string is logging's problem, not ours
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None and not getattr(record, "_zlops_redacted", False):
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
            record._zlops_redacted = True
        return True
