"""Browser sessions on the application host: the login cookie, CSRF tokens for forms, the
notice a form's answer leaves for the page it returns to, and the pages that carry them
(``form_page``).

CSRF uses a double-submit token bound to a random cookie: the form carries HMAC(cookie), which a
page on another origin can neither read nor compute.

A notice (what a form did, or why not) rides in a cookie only the service can set: signed under
the keyring's notice key, naming the page it is for and the moment it stops counting, scoped to
that page's path. The page shows it and clears it, so it shows once. A notice never comes from
the query string: a crafted link would otherwise put anyone's words on a trusted page.
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
from typing import Annotated, TypeVar
from urllib.parse import quote

from pydantic import Field
from quart import Response as PageResponse
from quart import redirect, request
from werkzeug.sansio.response import Response

from ledgerport import auth, catalog

from ._context import platform, unit_of_work
from ._openapi import Param
from ._pages import html_page

_R = TypeVar("_R", bound=Response)

SESSION_COOKIE = "lp_session"
CSRF_COOKIE = "lp_csrf"
NOTICE_COOKIE = "lp_notice"
_NOTICE_MAX_LENGTH = 500
"""Characters of a notice kept: a cookie holds about 4 KB, and a notice is a sentence or two."""
CSRF_COOKIE_PARAM = Param(
    CSRF_COOKIE,
    "cookie",
    "The random value the form's csrf_token is bound to, set by the page showing the form",
    required=True,
)
"""What every form of the application host posts with, in the OpenAPI document."""
CsrfToken = Annotated[str, Field(min_length=1, description="The form's token, bound to lp_csrf")]
"""The field every form of the application host carries, in the OpenAPI document."""


def page_csp(*form_targets: str) -> str:
    """The Content-Security-Policy of the application host's pages. A form's answer may
    redirect only to this origin and to ``form_targets`` (origins): browsers hold a form's
    redirects to form-action too, so the consent form names the app's redirect URI's origin."""
    form_action = " ".join(["'self'", *form_targets])
    return (
        "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
        f"form-action {form_action}; base-uri 'none'; frame-ancestors 'none'"
    )


def _cookie_flags() -> dict[str, object]:
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


def apply_cookies(response: _R, cookies: dict[str, str]) -> _R:
    for name, value in cookies.items():
        response.set_cookie(name, value, **_cookie_flags())  # type: ignore[arg-type]
    return response


def set_session_cookie(response: Response, session: str) -> None:
    response.set_cookie(SESSION_COOKIE, session, **_cookie_flags())  # type: ignore[arg-type]


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/")


async def current_user_id() -> str | None:
    """The signed-in user of this browser, or None."""
    session = request.cookies.get(SESSION_COOKIE)
    if not session:
        return None
    p = platform()
    async with unit_of_work() as tx:
        return await auth.login_session_user(tx, p.keyring, now=p.now(), session=session)


def safe_next(value: str | None) -> str:
    """A same-site path to return to; anything else (absolute URLs, ``//host``) becomes ``/``."""
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or "\\" in value
        or any(ord(ch) < 0x20 for ch in value)
    ):
        return "/"
    return value


def with_notice(path: str, notice: str) -> PageResponse:
    """Back to the page at ``path`` (303), which shows ``notice`` once: what a form did, or why
    not. The notice cookie is signed, names ``path``, lives NOTICE_TTL seconds and is sent to
    that page only."""
    p = platform()
    expires = p.now() + catalog.NOTICE_TTL
    text = json.dumps([path, expires, notice[:_NOTICE_MAX_LENGTH]])
    payload = base64.urlsafe_b64encode(text.encode()).decode()
    # Quoted: a path holds what the request's URL held, control characters included, and a
    # Location header may not.
    response: PageResponse = redirect(quote(path), 303)  # type: ignore[assignment]
    response.set_cookie(
        NOTICE_COOKIE,
        f"{payload}.{p.keyring.notice_mac(payload)}",
        max_age=catalog.NOTICE_TTL,
        **{**_cookie_flags(), "path": quote(path)},  # type: ignore[arg-type]
    )
    return response


def _notice_for_this_page() -> str | None:
    """The notice the service left for this page, if one came with the request: its signature
    holds, it names this page's path and it is still fresh. Anything else is nothing."""
    p = platform()
    for value in request.cookies.getlist(NOTICE_COOKIE):
        payload, _, signature = value.rpartition(".")
        expected = p.keyring.notice_mac(payload)
        # compare_digest refuses non-ASCII text, which a forged cookie may hold.
        if not signature.isascii() or not hmac.compare_digest(signature, expected):
            continue
        # Signed by the service, so it is what with_notice wrote.
        path, expires, notice = json.loads(base64.urlsafe_b64decode(payload))
        if path == request.path and p.now() < expires:
            return str(notice)
    return None


async def form_page(
    template: str, *, status: int = 200, csp: str | None = None, **values: object
) -> PageResponse:
    """A page with forms: rendered with a CSRF token (its cookie set when absent) and the
    notice the last form's answer left for it (:func:`with_notice`), which it clears, so a
    reload shows none; never cached. ``csp`` replaces the application's page policy."""
    cookies: dict[str, str] = {}
    response = await html_page(
        template,
        status=status,
        csp=csp,
        csrf_token=csrf_token(cookies),
        notice=_notice_for_this_page(),
        **values,
    )
    if NOTICE_COOKIE in request.cookies:
        flags = {**_cookie_flags(), "path": quote(request.path)}
        response.delete_cookie(NOTICE_COOKIE, **flags)  # type: ignore[arg-type]
    return apply_cookies(response, cookies)
