"""What every zlops page shares: links, the signed-in user's name, the CSRF token of a browser session.

Used by the app (:mod:`zlops.airflow.ui`) and by the routes it adds (:mod:`zlops.airflow.night_routes`,
:mod:`zlops.airflow.triage_routes`), which import it rather than the app that imports them.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import HTTPException, Request

#: The Airflow cookie that holds the UI's JWT (airflow.api_fastapi.auth.tokens COOKIE_NAME_JWT_TOKEN).
COOKIE = "_token"


def link(route: str, **query: str | int) -> str:
    """A relative link with its query URL-encoded (``+`` and ``:`` of run keys included); the templates
    escape it for the attribute."""
    return f"{route}?{urlencode(query, quote_via=quote, safe='')}" if query else route


def user_name(user: Any) -> str:
    """The name Airflow knows the user by (``BaseUser.get_name``)."""
    get_name = getattr(user, "get_name", None)
    name = get_name() if callable(get_name) else None
    if not name:
        raise HTTPException(403, "the signed-in user has no name to record a change under")
    return str(name)


def csrf_token(request: Request) -> str:
    """The form token of this browser session: an HMAC keyed by its login cookie (another site can neither
    read the cookie nor this page, so it cannot forge the token); empty without the cookie."""
    cookie = request.cookies.get(COOKIE) or ""
    return hmac.new(cookie.encode(), b"zlops-triage-csrf", hashlib.sha256).hexdigest() if cookie else ""


def check_csrf(request: Request, token: str) -> None:
    """403 unless a state-changing request carries an explicit credential (``Authorization: Bearer``, which
    a browser never adds on its own) or the session's :func:`csrf_token`, and is not a cross-site fetch."""
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise HTTPException(403, "cross-site request refused")
    expected = csrf_token(request)
    if not expected or not hmac.compare_digest(expected.encode(), (token or "").encode()):
        raise HTTPException(403, "missing or wrong CSRF token: reload the page and try again")
