"""The frame every page of the application host is rendered in, and what rides with it: the
signed-in person in its header, the CSRF token of its forms (the header's sign-out form among
them), the Content-Security-Policy, problem pages, the sign-in detour, and which form page a
handler returns to.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlencode

from quart import Response, g, redirect, render_template, request
from werkzeug.sansio.response import Response as BaseResponse

from .._browser import cookie_flags, csrf_token, signed_in_user

_R = TypeVar("_R", bound=BaseResponse)
log = logging.getLogger("ledgerport.http")

PROBLEM_TITLE = "This app can't connect"
"""Title of the authorization and device pages' problem pages."""
VIEWER = "ledgerport_viewer"
"""Where a request keeps the signed-in person once looked up (``g``), for the page header."""
VIEWER_UNASKED = "ledgerport_viewer_unasked"
"""Set (``g``) when the store is not to be asked who is signed in (it just failed): the header
then shows "Sign in"."""
FORM_BACK = "ledgerport_form_back"
"""Where a form's handler says which page it returns to (``g``): a problem the handler raises
then goes back there as a notice instead of a problem page (``_problems``)."""


@dataclass(frozen=True)
class Viewer:
    """The signed-in person, as the page header shows them."""

    id: str
    name: str | None
    email: str

    @property
    def shown(self) -> str:
        return self.name or self.email


@dataclass(frozen=True)
class Way:
    """A way forward a problem page offers: a link's words and its target on this host."""

    label: str
    href: str


def apply_cookies(response: _R, cookies: dict[str, str]) -> _R:
    for name, value in cookies.items():
        response.set_cookie(name, value, **cookie_flags())  # type: ignore[arg-type]
    return response


def page_csp(
    *form_targets: str, frame_src: str | None = None, scripts: bool = False, live: bool = False
) -> str:
    """The Content-Security-Policy of the application host's pages: the design's stylesheet and
    images (the favicon, the product mark, listing icons and screenshots) from this origin only,
    no inline style, no script. A form's answer may redirect only to this origin and to
    ``form_targets`` (origins): browsers hold a form's redirects to form-action too, so the
    consent form names the app's redirect URI's origin. ``frame_src`` (an origin) lets the page
    frame an app, with the bridge's script and its same-origin token requests; ``scripts`` lets
    a page load the design's scripts from this origin (the copy button's), and nothing else;
    ``live`` lets it load them and open the live streams of this origin too (an EventSource is
    a connection: connect-src)."""
    form_action = " ".join(["'self'", *form_targets])
    if frame_src is not None:
        running = f"script-src 'self'; connect-src 'self'; frame-src {frame_src}; "
    elif live:
        running = "script-src 'self'; connect-src 'self'; "
    elif scripts:
        running = "script-src 'self'; "
    else:
        running = ""
    return (
        f"default-src 'none'; {running}style-src 'self'; img-src 'self'; "
        f"form-action {form_action}; base-uri 'none'; frame-ancestors 'none'"
    )


async def current_user() -> Viewer | None:
    """The signed-in person with their name and email, or None; the page header shows them
    from then on."""
    known: Viewer | None = g.get(VIEWER)
    if known is not None:
        return known
    user = await signed_in_user()
    if user is None:
        return None
    found = Viewer(user.id, user.name, user.email)
    setattr(g, VIEWER, found)
    return found


def viewer() -> Viewer | None:
    """The signed-in person, when this request has looked them up (:func:`current_user`)."""
    found: Viewer | None = g.get(VIEWER)
    return found


def leave_viewer_unasked() -> None:
    """Say the store is not to be asked who is signed in for this page's header (a problem
    page answering the store's own failure)."""
    setattr(g, VIEWER_UNASKED, True)


async def look_up_viewer() -> None:
    """A ``before_request`` of every page blueprint: who is signed in, looked up before the
    handler opens its transaction, so every page's header names them (no page offers "Sign
    in" to someone signed in) without asking the store again while a transaction is open. A
    store that cannot answer leaves the header to say "Sign in"; the handler meets the same
    failure and answers it."""
    try:
        await current_user()
    except Exception:
        log.debug("the header's viewer could not be looked up", exc_info=True)
        leave_viewer_unasked()


async def header_viewer() -> Viewer | None:
    """Who the header names: the signed-in person (:func:`look_up_viewer`); a page outside the
    page blueprints (an unrouted address's) asks here, as no transaction is open there. None
    when nobody is signed in, or when the store is not to be asked
    (:func:`leave_viewer_unasked`) or cannot answer."""
    known = viewer()
    if known is not None or g.get(VIEWER_UNASKED):
        return known
    try:
        return await current_user()
    except Exception:  # the page goes on without the name: "Sign in" shows instead
        log.debug("the header's viewer could not be looked up", exc_info=True)
        return None


async def html_page(
    template: str,
    *,
    status: int = 200,
    csp: str | None = None,
    notice: object = None,
    **values: object,
) -> Response:
    """``template`` rendered in the page frame with ``values``: the signed-in person and the
    CSRF token of the header's sign-out form (and of the page's own forms); never cached;
    ``csp`` replaces the application's page policy."""
    cookies: dict[str, str] = {}
    html = await render_template(
        template,
        csrf_token=csrf_token(cookies),
        viewer=await header_viewer(),
        notice=notice,
        here=request.path,
        **values,
    )
    response = Response(html, status=status, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    if csp is not None:
        response.headers["Content-Security-Policy"] = csp
    return apply_cookies(response, cookies)


async def problem_page(
    message: str,
    status: int = 400,
    *,
    title: str = PROBLEM_TITLE,
    explanation: str | None = None,
    ways: Sequence[Way] = (),
) -> Response:
    """A page that shows what went wrong (``message``), in plain words beside it when the message
    is fixed by the specification (``explanation``), and the ways forward; it never redirects."""
    return await html_page(
        "error.html",
        status=status,
        title=title,
        message=message,
        explanation=explanation,
        ways=ways,
    )


async def notice_page(
    title: str, message: str, status: int = 200, *, next_words: str | None = None
) -> Response:
    """A page that says what happened (``message``) and what comes next (``next_words``)."""
    return await html_page(
        "notice.html", status=status, title=title, message=message, next_words=next_words
    )


def login_redirect() -> Response:
    """To the sign-in form (303), returning to this page afterwards."""
    return redirect(f"/login?{urlencode({'next': request.full_path})}", 303)  # type: ignore[return-value]


async def console_signed_in() -> Response | None:
    """A console blueprint's ``before_request``: every page is the signed-in developer's
    (:func:`console_developer`); anyone else goes to the sign-in page first."""
    user = await current_user()
    if user is None:
        return login_redirect()
    g.console_user_id = user.id
    return None


def console_developer() -> str:
    """The signed-in developer a console page acts for (:func:`console_signed_in`)."""
    user_id: str = g.console_user_id
    return user_id


def returns_to(path: str, query: str = "") -> None:
    """Say which form page this request's handler returns to: a problem it raises from here on
    is answered as a notice on that page (``_problems``), not as a problem page."""
    setattr(g, FORM_BACK, (path, query))


def form_back() -> tuple[str, str] | None:
    """The form page this request returns to (:func:`returns_to`), if it said one."""
    back: tuple[str, str] | None = g.get(FORM_BACK)
    return back
