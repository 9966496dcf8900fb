"""Application host pages: sign in and sign out."""

from __future__ import annotations

from quart import Blueprint, Response, redirect, render_template, request
from quart.typing import ResponseReturnValue

from ledgerport import auth, books

from ._browser import (
    SESSION_COOKIE,
    apply_cookies,
    clear_session_cookie,
    csrf_token,
    csrf_valid,
    current_user_id,
    safe_next,
    set_session_cookie,
)
from ._context import platform, unit_of_work

blueprint = Blueprint("pages", __name__, template_folder="templates")


async def _login_page(
    *, next_path: str, email: str = "", error: str | None = None, status: int = 200
) -> Response:
    cookies: dict[str, str] = {}
    token = csrf_token(cookies)
    html = await render_template(
        "login.html",
        action="/login",
        next=next_path,
        email=email,
        error=error,
        csrf_token=token,
    )
    response = Response(html, status=status, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    return apply_cookies(response, cookies)


@blueprint.get("/login")
async def login_form() -> Response:
    """The sign-in form; ``next`` is where to return afterwards (a path on this host)."""
    return await _login_page(next_path=safe_next(request.args.get("next")))


@blueprint.post("/login")
async def login_submit() -> ResponseReturnValue:
    """Check the credentials, start a cookie session and return (303) to ``next``."""
    form = await request.form
    next_path = safe_next(form.get("next"))
    email = form.get("email", "").strip()
    if not csrf_valid(form.get("csrf_token")):
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
        return await _login_page(
            next_path=next_path, email=email, status=401, error="Wrong email or password."
        )
    async with unit_of_work() as tx:
        session = await auth.start_login_session(tx, p.keyring, now=p.now(), user_id=user.id)
    response = redirect(next_path, 303)
    set_session_cookie(response, session)
    return response


@blueprint.post("/logout")
async def logout() -> ResponseReturnValue:
    """End the browser's session."""
    form = await request.form
    if not csrf_valid(form.get("csrf_token")):
        return Response("Bad request", status=400)
    session = request.cookies.get(SESSION_COOKIE)
    if session:
        async with unit_of_work() as tx:
            await auth.end_login_session(tx, platform().keyring, session)
    response = redirect("/login", 303)
    clear_session_cookie(response)
    return response


@blueprint.get("/")
async def home() -> ResponseReturnValue:
    """Where a sign-in without ``next`` lands: who is signed in."""
    user_id = await current_user_id()
    if user_id is None:
        return redirect("/login", 303)
    async with unit_of_work() as tx:
        user = await books.get_user(tx, user_id)
    return Response(f"Signed in as {user.email}", content_type="text/plain; charset=utf-8")
