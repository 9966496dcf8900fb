"""Browser sessions on the application host: the login cookie, who is signed in, and the pages
with forms (``form_page``), which show the notice the last form's answer left for them
(``_pages.with_notice``, words from the notice table in ``_errors``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from quart import Response as PageResponse
from werkzeug.sansio.response import Response

from ._errors import notice_text
from ._openapi import Param
from ._pages import (
    CSRF_COOKIE,
    clear_notice,
    cookie_flags,
    html_page,
    notice_for_this_page,
)
from ._pages import SESSION_COOKIE as SESSION_COOKIE
from ._pages import csrf_valid as csrf_valid
from ._pages import current_user as current_user
from ._pages import current_user_id as current_user_id
from ._pages import page_csp as page_csp
from ._pages import require_form_token as require_form_token
from ._pages import returns_to as returns_to
from ._pages import with_notice as with_notice

CSRF_COOKIE_PARAM = Param(
    CSRF_COOKIE,
    "cookie",
    "The random value the form's csrf_token is bound to, set by the page showing the form",
    required=True,
)
"""What every form of the application host posts with, in the OpenAPI document."""
CsrfToken = Annotated[str, Field(min_length=1, description="The form's token, bound to lp_csrf")]
"""The field every form of the application host carries, in the OpenAPI document."""


def set_session_cookie(response: Response, session: str) -> None:
    response.set_cookie(SESSION_COOKIE, session, **cookie_flags())  # type: ignore[arg-type]


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/")


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


async def form_page(
    template: str, *, status: int = 200, csp: str | None = None, **values: object
) -> PageResponse:
    """A page with forms: rendered with a CSRF token (its cookie set when absent) and the
    notice the last form's answer left for it (:func:`with_notice`), which it clears, so a
    reload shows none; never cached. ``csp`` replaces the application's page policy."""
    left = notice_for_this_page()
    notice = notice_text(*left) if left is not None else None
    response = await html_page(template, status=status, csp=csp, notice=notice, **values)
    clear_notice(response)
    return response
