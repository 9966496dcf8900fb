"""Browser sessions on the application host, which the pages and the console's JSON API share:
the login cookie and who is signed in, the cookie flags, the CSRF token bound to a random
cookie, and whether an ``Origin`` is the service's own.

CSRF uses a double-submit token bound to a random cookie: a form (or a page's script, in
``X-CSRF-Token``) carries HMAC(cookie), which a page on another origin can neither read nor
compute.
"""

from __future__ import annotations

import hmac
import secrets

from quart import g, request
from werkzeug.sansio.response import Response

from ledgerport import auth, books

from ._context import platform, unit_of_work

SESSION_COOKIE = "lp_session"
CSRF_COOKIE = "lp_csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: the CSRF checks let them through."""
_SIGNED_IN = "ledgerport_signed_in"
"""Where a request keeps the signed-in user's id once looked up (``g``)."""


def is_service_origin(origin: str) -> bool:
    """Whether ``origin`` is the application host's or the API host's, compared as origins
    (scheme, host and port, the default port spelled or not, the case of either)."""
    config = platform().config
    try:
        return auth.origin_of(origin) in {
            auth.origin_of(url) for url in (config.auth_url, config.base_url)
        }
    except ValueError:  # a malformed port or IPv6 literal names no origin of ours
        return False


def cookie_flags() -> dict[str, object]:
    return {
        "httponly": True,
        "samesite": "Lax",
        "secure": not platform().config.development,
        "path": "/",
    }


def csrf_token(response_cookies: dict[str, str]) -> str:
    """The token to embed in a form; sets the CSRF cookie (via ``response_cookies``) if absent."""
    seed = request.cookies.get(CSRF_COOKIE) or response_cookies.get(CSRF_COOKIE)
    if not seed:
        seed = secrets.token_urlsafe(32)
        response_cookies[CSRF_COOKIE] = seed
    return platform().keyring.mac(f"csrf:{seed}")


def csrf_valid(submitted: str | None) -> bool:
    seed = request.cookies.get(CSRF_COOKIE)
    # A token is ASCII; compare_digest refuses to compare other text (TypeError).
    if not seed or not submitted or not submitted.isascii():
        return False
    return hmac.compare_digest(platform().keyring.mac(f"csrf:{seed}"), submitted)


def set_session_cookie(response: Response, session: str) -> None:
    response.set_cookie(SESSION_COOKIE, session, **cookie_flags())  # type: ignore[arg-type]


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/")


async def current_user_id() -> str | None:
    """The signed-in user of this browser, or None (looked up once per request)."""
    if hasattr(g, _SIGNED_IN):
        known: str | None = getattr(g, _SIGNED_IN)
        return known
    session = request.cookies.get(SESSION_COOKIE)
    user_id = None
    if session:
        p = platform()
        async with unit_of_work(reads=True) as tx:
            user_id = await auth.login_session_user(tx, p.keyring, now=p.now(), session=session)
    setattr(g, _SIGNED_IN, user_id)
    return user_id


async def signed_in_user() -> books.User | None:
    """The signed-in user of this browser with their email and name, or None: the session and
    its user read in one statement (the id kept for :func:`current_user_id`)."""
    if hasattr(g, _SIGNED_IN):
        known: str | None = getattr(g, _SIGNED_IN)
        if known is None:
            return None
        async with unit_of_work(reads=True) as tx:
            return await books.get_user(tx, known)
    session = request.cookies.get(SESSION_COOKIE)
    user = None
    if session:
        p = platform()
        async with unit_of_work(reads=True) as tx:
            user = await auth.login_session_person(tx, p.keyring, now=p.now(), session=session)
    setattr(g, _SIGNED_IN, None if user is None else user.id)
    return user
