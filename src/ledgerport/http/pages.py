"""Application host pages: sign in and sign out."""

from __future__ import annotations

from typing import NotRequired
from urllib.parse import urlencode

from quart import Blueprint, Response, redirect, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import auth, books, storage

from ._browser import (
    CSRF_COOKIE_PARAM,
    SESSION_COOKIE,
    CsrfToken,
    clear_session_cookie,
    csrf_valid,
    current_user_id,
    form_page,
    safe_next,
    set_session_cookie,
)
from ._context import platform, unit_of_work
from ._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    TEXT,
    Body,
    Param,
    Reply,
    operation,
    page,
    redirect_reply,
)

blueprint = Blueprint("pages", __name__, template_folder="templates")
PAGE_TITLE = "Sign in"
"""The title of the page this blueprint's problems are shown on."""

_NEXT = "A path on this host to return to; anything else returns to /"


class LoginForm(TypedDict):
    email: NotRequired[str]
    password: NotRequired[str]
    next: NotRequired[str]
    csrf_token: CsrfToken


class LogoutForm(TypedDict):
    csrf_token: CsrfToken
    next: NotRequired[str]
    """Where to go once signed in again (a path of this site): how "switch account" returns."""


async def _login_page(
    *, next_path: str, email: str = "", error: str | None = None, status: int = 200
) -> Response:
    return await form_page(
        "login.html", status=status, action="/login", next=next_path, email=email, error=error
    )


@blueprint.get("/login")
@operation(
    page(200, "The sign-in form", SET_COOKIE.optional()),
    params=(Param("next", "query", _NEXT),),
)
async def login_form() -> Response:
    """The sign-in form; ``next`` is where to return afterwards (a path on this host)."""
    return await _login_page(next_path=safe_next(request.args.get("next")))


@blueprint.post("/login")
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
    form = await request.form
    next_path = safe_next(form.get("next"))
    email = form.get("email", "").strip()
    if not csrf_valid(form.get("csrf_token")):
        platform().metrics.sign_in_failures.labels("expired_form").inc()
        return await _login_page(
            next_path=next_path,
            email=email,
            status=400,
            error="Your session expired. Please try again.",
        )
    p = platform()
    async with unit_of_work() as tx:
        found = await books.find_user_by_email(tx, email)
    user, stored_hash = found if found is not None else (None, None)
    if not await p.passwords.verify(stored_hash, form.get("password", "")) or user is None:
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
    form = await request.form
    if not csrf_valid(form.get("csrf_token")):
        return Response("Bad request", status=400)
    session = request.cookies.get(SESSION_COOKIE)
    if session:
        async with unit_of_work() as tx:
            await auth.end_login_session(tx, platform().keyring, session)
    next_path = safe_next(form.get("next"))
    target = "/login" if next_path == "/" else f"/login?{urlencode({'next': next_path})}"
    response = redirect(target, 303)
    clear_session_cookie(response)
    return response


@blueprint.get("/")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    Reply(200, "Who is signed in", TEXT),
    redirect_reply("Not signed in: to the sign-in page"),
    raises=(storage.StorageUnavailable,),
)
async def home() -> ResponseReturnValue:
    """Where a sign-in without ``next`` lands: who is signed in."""
    user_id = await current_user_id()
    if user_id is None:
        return redirect("/login", 303)
    async with unit_of_work() as tx:
        user = await books.get_user(tx, user_id)
    return Response(f"Signed in as {user.email}", content_type="text/plain; charset=utf-8")
