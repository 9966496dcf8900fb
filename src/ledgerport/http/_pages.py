"""The frame every page of the application host is rendered in, and what rides with it: the
cookie flags, the CSRF token of its forms (the header's sign-out form among them), the
Content-Security-Policy, the notice a form's answer leaves for the page it returns to, problem
pages and the sign-in detour.

CSRF uses a double-submit token bound to a random cookie: the form carries HMAC(cookie), which a
page on another origin can neither read nor compute.

A notice (what a form did, or why not) is a code of the notice table (``_errors.NOTICES``, or an
exception's row of ``_errors.ANSWERS``) with the values its words are filled with. It rides in a
cookie only the service can set: signed under the keyring's notice key, naming the page it is
for and the moment it stops counting, scoped to that page's path. The page looks the code up and
shows its words once; an unknown code shows nothing. A notice never comes from the query string:
a crafted link would otherwise put anyone's words on a trusted page.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote, urlencode

from quart import Response, g, redirect, render_template, request
from werkzeug.sansio.response import Response as BaseResponse

from ledgerport import auth, books, catalog
from ledgerport.errors import InvalidInput

from ._context import platform, unit_of_work

_R = TypeVar("_R", bound=BaseResponse)

SESSION_COOKIE = "lp_session"
CSRF_COOKIE = "lp_csrf"
NOTICE_COOKIE = "lp_notice"
PROBLEM_TITLE = "This app can't connect"
"""Title of the authorization and device pages' problem pages."""
_SIGNED_IN = "ledgerport_signed_in"
"""Where a request keeps the signed-in user's id once looked up (``g``)."""
VIEWER = "ledgerport_viewer"
"""Where a request keeps the signed-in person once looked up (``g``), for the page header."""
FORM_BACK = "ledgerport_form_back"
"""Where a form's handler says which page it returns to (``g``): a problem the handler raises
then goes back there as a notice instead of a problem page (``_errors``)."""
_NOTICE_PARAM_MAX = 300
"""Characters of each value a notice's words are filled with: a cookie holds about 4 KB."""


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


MISSING_FORM = "The form was not sent from its page: open the page and try again"


def require_form_token(submitted: str | None) -> None:
    """A form posted without its CSRF token at all did not come from its page: a 400 problem
    page (InvalidInput), where an expired token goes back to the form with a notice."""
    if not submitted:
        raise InvalidInput([MISSING_FORM])


def apply_cookies(response: _R, cookies: dict[str, str]) -> _R:
    for name, value in cookies.items():
        response.set_cookie(name, value, **cookie_flags())  # type: ignore[arg-type]
    return response


def page_csp(*form_targets: str, frame_src: str | None = None, scripts: bool = False) -> str:
    """The Content-Security-Policy of the application host's pages: the design's stylesheet and
    images (the favicon, the product mark, listing icons and screenshots) from this origin only,
    no inline style, no script. A form's answer may redirect only to this origin and to
    ``form_targets`` (origins): browsers hold a form's redirects to form-action too, so the
    consent form names the app's redirect URI's origin. ``frame_src`` (an origin) lets the page
    frame an app, with the bridge's script and its same-origin token requests; ``scripts`` lets
    a page load the design's scripts from this origin (the copy button's), and nothing else."""
    form_action = " ".join(["'self'", *form_targets])
    if frame_src is not None:
        running = f"script-src 'self'; connect-src 'self'; frame-src {frame_src}; "
    elif scripts:
        running = "script-src 'self'; "
    else:
        running = ""
    return (
        f"default-src 'none'; {running}style-src 'self'; img-src 'self'; "
        f"form-action {form_action}; base-uri 'none'; frame-ancestors 'none'"
    )


async def current_user_id() -> str | None:
    """The signed-in user of this browser, or None (looked up once per request)."""
    if hasattr(g, _SIGNED_IN):
        known: str | None = getattr(g, _SIGNED_IN)
        return known
    session = request.cookies.get(SESSION_COOKIE)
    user_id = None
    if session:
        p = platform()
        async with unit_of_work() as tx:
            user_id = await auth.login_session_user(tx, p.keyring, now=p.now(), session=session)
    setattr(g, _SIGNED_IN, user_id)
    return user_id


async def current_user() -> Viewer | None:
    """The signed-in person with their name and email, or None; the page header shows them
    from then on."""
    known: Viewer | None = g.get(VIEWER)
    if known is not None:
        return known
    user_id = await current_user_id()
    if user_id is None:
        return None
    async with unit_of_work() as tx:
        user = await books.get_user(tx, user_id)
    found = Viewer(user.id, user.name, user.email)
    setattr(g, VIEWER, found)
    return found


def viewer() -> Viewer | None:
    """The signed-in person, when this request has looked them up (``_browser.current_user``):
    the header shows them with a sign-out button; a page that never asked shows "Sign in"."""
    found: Viewer | None = g.get(VIEWER)
    return found


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
        viewer=viewer(),
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


def returns_to(path: str, query: str = "") -> None:
    """Say which form page this request's handler returns to: a problem it raises from here on
    is answered as a notice on that page (``_errors``), not as a problem page."""
    setattr(g, FORM_BACK, (path, query))


def form_back() -> tuple[str, str] | None:
    """The form page this request returns to (:func:`returns_to`), if it said one."""
    back: tuple[str, str] | None = g.get(FORM_BACK)
    return back


def with_notice(path: str, code: str, *params: object, query: str = "") -> Response:
    """Back to the page at ``path`` (303; ``query`` added, as a form's choices), which shows
    the notice ``code`` with ``params`` once. The notice cookie is signed, names ``path``, lives
    NOTICE_TTL seconds and is sent to that page only."""
    p = platform()
    expires = p.now() + catalog.NOTICE_TTL
    values = [str(value)[:_NOTICE_PARAM_MAX] for value in params]
    text = json.dumps([path, expires, code, values])
    payload = base64.urlsafe_b64encode(text.encode()).decode()
    # Quoted: a path holds what the request's URL held, control characters included, and a
    # Location header may not.
    location = quote(path) + (f"?{query}" if query else "")
    response: Response = redirect(location, 303)  # type: ignore[assignment]
    response.set_cookie(
        NOTICE_COOKIE,
        f"{payload}.{p.keyring.notice_mac(payload)}",
        max_age=catalog.NOTICE_TTL,
        **{**cookie_flags(), "path": quote(path)},  # type: ignore[arg-type]
    )
    return response


def notice_for_this_page() -> tuple[str, tuple[str, ...]] | None:
    """The notice code and values the service left for this page, if one came with the request:
    its signature holds, it names this page's path and it is still fresh. Anything else is
    nothing."""
    p = platform()
    for value in request.cookies.getlist(NOTICE_COOKIE):
        payload, _, signature = value.rpartition(".")
        expected = p.keyring.notice_mac(payload)
        # compare_digest refuses non-ASCII text, which a forged cookie may hold.
        if not signature.isascii() or not hmac.compare_digest(signature, expected):
            continue
        try:
            path, expires, code, values = json.loads(base64.urlsafe_b64decode(payload))
        except (ValueError, binascii.Error):
            continue  # signed, but not in this version's shape
        if path == request.path and p.now() < expires:
            return str(code), tuple(str(v) for v in values)
    return None


def clear_notice(response: BaseResponse) -> None:
    """A page that shows its notice clears it, so a reload shows none."""
    if NOTICE_COOKIE in request.cookies:
        flags = {**cookie_flags(), "path": quote(request.path)}
        response.delete_cookie(NOTICE_COOKIE, **flags)  # type: ignore[arg-type]
