"""Application host pages: sign in and sign out, the home page, and the design's static files
with the template helpers every page uses (``asset``, ``ago``, ``stars``, ``markdown``)."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import parse_qs, urlencode, urlsplit

from markupsafe import Markup
from quart import Blueprint, Response, redirect, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import NotFound, RequestEntityTooLarge

from ledgerport import apps, auth, books, storage
from ledgerport.errors import InvalidInput
from ledgerport.storage import Transaction

from .._browser import SESSION_COOKIE, clear_session_cookie, set_session_cookie
from .._context import platform, unit_of_work
from .._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    TEXT,
    Body,
    Header,
    Param,
    Reply,
    operation,
    page,
    redirect_reply,
)
from ._csrf import CSRF_COOKIE_PARAM, form_guard
from ._design import (
    ASSET_CACHE_CONTROL,
    asset_url,
    exact_time,
    render_markdown,
    served_file,
    stars_element,
    time_element,
)
from ._form_models import PageForm, PageQuery, query_params, read_form, read_query
from ._frame import Viewer, Way, current_user, html_page
from ._notices import form_page
from ._query_fields import QUERY_TEXT_MAX, Text

blueprint = Blueprint("pages", __name__, template_folder="templates")
PAGE_TITLE = "Sign in"
"""The title of the page this blueprint's problems are shown on."""
WAYS = (Way("Sign in", "/login"),)
"""Where a problem of these pages offers to go on."""


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


@blueprint.app_template_global("asset")
def _asset(name: str) -> str:
    return asset_url(name)


@blueprint.app_template_filter("ago")
def _ago(moment: float | None) -> Markup:
    return time_element(moment, platform().now())


@blueprint.app_template_filter("exact")
def _exact(moment: float) -> str:
    return exact_time(moment)


@blueprint.app_template_filter("stars")
def _stars(stars: float) -> Markup:
    return stars_element(stars)


@blueprint.app_template_filter("markdown")
def _markdown(text: str) -> Markup:
    return render_markdown(text)


_ASSET_HEADERS = (Header("Cache-Control", "Kept for a year: the name holds the content's hash"),)


@blueprint.get("/assets/<name>")
@operation(
    Reply(200, "The stylesheet", "text/css", None, _ASSET_HEADERS),
    Reply(200, "The product mark, also the favicon", "image/svg+xml", None, _ASSET_HEADERS),
    Reply(200, "The copy button's script", "text/javascript", None, _ASSET_HEADERS),
    page(404, "No design file has that name and hash"),
    raises=(NotFound,),
    params=(Param("name", "path", "The file's name with its content's hash"),),
)
async def design_file(name: str) -> ResponseReturnValue:
    """A static file of the pages' design. Its name holds its content's hash, so it may be
    kept for a year; a name with another hash is not found."""
    found = served_file(name)
    if found is None:
        raise NotFound()
    response = Response(found.data, content_type=found.content_type)
    response.headers["Cache-Control"] = ASSET_CACHE_CONTROL
    return response


NEXT_MAX = QUERY_TEXT_MAX
"""Characters of where the sign-in page returns to: a page's path and query."""


class LoginQuery(PageQuery):
    """The sign-in page's query: where to return once signed in."""

    next: Annotated[str | None, Text(NEXT_MAX)] = None
    """A path on this host to return to (empty, or anything else: /)"""


class LoginForm(PageForm):
    email: str = ""
    password: str = ""
    next: str = ""


class LogoutForm(PageForm):
    next: str = ""
    """Where to go once signed in again (a path of this site): how "switch account" returns."""


_APP_PAGE = re.compile(r"^/apps/([^/]+)")
_LISTING_PAGE = re.compile(r"^/marketplace/([^/]+)(/install)?$")


async def _purpose(tx: Transaction, next_path: str) -> str:
    """What signing in is for, by where it returns: the app the consent page, the install form
    or the app's page is for, a device, the console."""
    parts = urlsplit(next_path)
    query = parse_qs(parts.query)
    if parts.path == "/oauth/authorize" and query.get("client_id"):
        app = await apps.find_app_by_client_id(tx, query["client_id"][0])
        if app is not None and app.active:
            return f"Sign in to continue to {app.name}."
    if parts.path.startswith("/device"):
        return "Sign in to connect a device."
    if parts.path.startswith("/console"):
        return "Sign in to the developer console."
    listing = _LISTING_PAGE.match(parts.path)
    if listing is not None and listing[1] != "assets":
        try:
            listed = await apps.live_listing(tx, listing[1])
        except apps.ListingNotFound:
            listed = None
        if listed is not None:
            verb = "install" if listing[2] else "continue to"
            return f"Sign in to {verb} {listed.live.content.name}."
    opened = _APP_PAGE.match(parts.path)
    if opened is not None:
        try:
            app = await apps.get_app(tx, opened[1])
        except apps.AppNotFound:
            app = None
        if app is not None:
            return f"Sign in to open {app.name}."
    return "Sign in to continue to ledgerport."


async def _login_page(
    *,
    next_path: str,
    email: str = "",
    error: str | None = None,
    status: int = 200,
    signed_in: Viewer | None = None,
) -> Response:
    async with unit_of_work() as tx:
        purpose = await _purpose(tx, next_path)
    return await form_page(
        "login.html",
        status=status,
        action="/login",
        next=next_path,
        email=email,
        error=error,
        purpose=purpose,
        signed_in=signed_in,
    )


@blueprint.get("/login")
@operation(
    page(200, "The sign-in form, or Continue as the signed-in person", SET_COOKIE.optional()),
    raises=(InvalidInput, storage.StorageUnavailable),
    params=query_params(LoginQuery),
)
async def login_form() -> Response:
    """The sign-in form; ``next`` is where to return afterwards (a path on this host). Someone
    signed in already is offered to continue to ``next`` as themselves, or to sign in as
    someone else (which signs them out first), rather than an empty form."""
    return await _login_page(
        next_path=safe_next(read_query(LoginQuery).next), signed_in=await current_user()
    )


async def _expired_login() -> Response:
    """The sign-in form again (400), saying the session expired."""
    form = await read_form(LoginForm)
    platform().metrics.sign_in_failures.labels("expired_form").inc()
    return await _login_page(
        next_path=safe_next(form.next),
        email=form.email.strip(),
        status=400,
        error="Your session expired. Please try again.",
    )


async def _bad_request() -> Response:
    return Response("Bad request", status=400)


@blueprint.post("/login")
@form_guard(_expired_login, token_required=False)
@operation(
    redirect_reply("Signed in: to next, with the session cookie", SET_COOKIE),
    page(400, "The form expired (CSRF check failed): the form again"),
    page(401, "Wrong email or password: the form again"),
    raises=(RequestEntityTooLarge, storage.BadValue, storage.StorageUnavailable),
    bodies=(Body(FORM, LoginForm),),
    params=(CSRF_COOKIE_PARAM,),
)
async def login_submit() -> ResponseReturnValue:
    """Check the credentials, start a cookie session and return (303) to ``next``."""
    form = await read_form(LoginForm)
    next_path = safe_next(form.next)
    email = form.email.strip()
    p = platform()
    async with unit_of_work() as tx:
        found = await books.find_user_by_email(tx, email)
    user, stored_hash = found if found is not None else (None, None)
    if not await p.passwords.verify(stored_hash, form.password) or user is None:
        p.metrics.sign_in_failures.labels("wrong_credentials").inc()
        return await _login_page(
            next_path=next_path, email=email, status=401, error="Wrong email or password."
        )
    async with unit_of_work() as tx:
        session = await auth.start_login_session(tx, p.keyring, now=p.now(), user_id=user.id)
    response = redirect(next_path, 303)
    set_session_cookie(response, session)
    return response


@blueprint.post("/logout")
@form_guard(_bad_request, token_required=False)
@operation(
    redirect_reply(
        "Signed out: to the sign-in page (returning to ``next`` once signed in again), the"
        " session cookie cleared",
        SET_COOKIE,
    ),
    page(400, "The CSRF check failed"),
    raises=(RequestEntityTooLarge, storage.StorageUnavailable),
    bodies=(Body(FORM, LogoutForm),),
    params=(CSRF_COOKIE_PARAM, Param(SESSION_COOKIE, "cookie", "The session to end, if any")),
)
async def logout() -> ResponseReturnValue:
    """End the browser's session."""
    form = await read_form(LogoutForm)
    session = request.cookies.get(SESSION_COOKIE)
    if session:
        async with unit_of_work() as tx:
            await auth.end_login_session(tx, platform().keyring, session)
    next_path = safe_next(form.next)
    target = "/login" if next_path == "/" else f"/login?{urlencode({'next': next_path})}"
    response = redirect(target, 303)
    clear_session_cookie(response)
    return response


@blueprint.get("/")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    Reply(200, "Who is signed in (a client that does not ask for HTML)", TEXT),
    page(200, "Who is signed in, and where to go (a browser, which asks for HTML)"),
    redirect_reply("Not signed in: to the sign-in page"),
    raises=(storage.StorageUnavailable,),
)
async def home() -> ResponseReturnValue:
    """Where a sign-in without ``next`` lands: who is signed in; a browser gets the home page
    with the ways on (the marketplace, the console)."""
    user = await current_user()
    if user is None:
        return redirect("/login", 303)
    wants = request.accept_mimetypes.best_match(["text/plain", "text/html"])
    if wants == "text/html":
        return await html_page("home.html")
    return Response(f"Signed in as {user.email}", content_type="text/plain; charset=utf-8")
