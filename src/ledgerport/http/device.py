"""The device verification page on the application host (RFC 8628 section 3.3).

A signed-in user enters the code their device shows, sees the same consent form as the
authorization endpoint, and approves (installing the app in the business they pick) or denies.
Wrong codes count against the IP and the user, so codes cannot be guessed at any useful rate.
"""

from __future__ import annotations

from quart import Blueprint, Response, render_template, request
from quart.typing import ResponseReturnValue

from ledgerport import access, auth

from ._browser import apply_cookies, csrf_token, csrf_valid, current_user_id
from ._consent import consent_page
from ._context import client_ip, platform, unit_of_work
from ._oauth_guard import oauth_guard
from ._pages import login_redirect, notice_page, problem_page

blueprint = Blueprint("device", __name__, template_folder="templates")

MSG_WRONG_CODE = "That code is not valid or has expired. Check the code on your device."
MSG_CODE_GONE = "This code has expired or was already used. Start again on your device."
_USER_CODE_INPUT_MAX = 32


async def _code_form(
    user_code: str = "", *, error: str | None = None, status: int = 200
) -> Response:
    cookies: dict[str, str] = {}
    html = await render_template(
        "device.html",
        user_code=user_code[:_USER_CODE_INPUT_MAX],
        error=error,
        csrf_token=csrf_token(cookies),
    )
    response = Response(html, status=status, content_type="text/html; charset=utf-8")
    response.headers["Cache-Control"] = "no-store"
    return apply_cookies(response, cookies)


async def _too_many_codes(entered: str, wait: int) -> Response:
    response = await _code_form(
        entered, error=f"Too many wrong codes. Try again in {wait} seconds.", status=429
    )
    response.headers["Retry-After"] = str(wait)
    return response


async def _code_guesser(entered: str) -> tuple[str, str] | Response:
    """The signed-in user and IP that may try a user code now, or the page refusing them."""
    user_id = await current_user_id()
    if user_id is None:
        raise auth.NotSignedIn("Sign in again and re-enter the code.")
    ip = client_ip()
    wait = oauth_guard().user_code_wait(ip, user_id)
    if wait is not None:
        return await _too_many_codes(entered, wait)
    return user_id, ip


@blueprint.get("/device")
async def device_form() -> ResponseReturnValue:
    """The code entry form; ``user_code`` in the query (verification_uri_complete) pre-fills it."""
    if await current_user_id() is None:
        return login_redirect()
    return await _code_form(request.args.get("user_code", ""))


@blueprint.post("/device")
async def device_submit() -> ResponseReturnValue:
    """Check the entered code and show the consent form for its request."""
    form = await request.form
    entered = form.get("user_code", "")[:_USER_CODE_INPUT_MAX]
    if not csrf_valid(form.get("csrf_token")):
        return await _code_form(
            entered, error="Your session expired. Please try again.", status=400
        )
    guesser = await _code_guesser(entered)
    if isinstance(guesser, Response):
        return guesser
    user_id, ip = guesser
    p = platform()
    async with unit_of_work() as tx:
        found = await auth.find_pending_device_request(
            tx, p.keyring, now=p.now(), user_code=entered
        )
        if found is None:
            oauth_guard().wrong_user_code(ip, user_id)
            p.metrics.device_decisions.labels("wrong_code").inc()
            return await _code_form(entered, error=MSG_WRONG_CODE, status=400)
        businesses = await access.consent_businesses(tx, found.app, user_id)
    return await consent_page(
        action="/device/decision",
        app=found.app,
        scopes=found.scopes,
        businesses=businesses,
        hidden={"user_code": auth.normalize_user_code(entered)},
    )


@blueprint.post("/device/decision")
async def device_decision() -> ResponseReturnValue:
    """Approve (install, then the device's next poll gets tokens) or deny (access_denied)."""
    form = await request.form
    if not csrf_valid(form.get("csrf_token")):
        return await problem_page("invalid_request: the form expired, start again")
    guesser = await _code_guesser(form.get("user_code", ""))
    if isinstance(guesser, Response):
        return guesser
    user_id, ip = guesser
    p = platform()
    now = p.now()
    async with unit_of_work() as tx:
        found = await auth.find_pending_device_request(
            tx, p.keyring, now=now, user_code=form.get("user_code", "")
        )
        if found is None:
            # The decision names its code too: a wrong one counts as a guess.
            oauth_guard().wrong_user_code(ip, user_id)
            p.metrics.device_decisions.labels("wrong_code").inc()
            return await problem_page(MSG_CODE_GONE)
        if form.get("decision") != "approve":
            if not await auth.deny_device_request(tx, now=now, request=found, user_id=user_id):
                return await problem_page(MSG_CODE_GONE)
            p.metrics.device_decisions.labels("deny").inc()
            return await notice_page(
                "Access denied", f"{found.app.name} was not connected. You can close this page."
            )
        installation = await access.approve(
            tx,
            now=now,
            app=found.app,
            business_id=form.get("business_id", ""),
            user_id=user_id,
            scopes=found.scopes,
        )
        if not await auth.approve_device_request(
            tx, now=now, request=found, user_id=user_id, installation=installation
        ):
            return await problem_page(MSG_CODE_GONE)
    p.metrics.device_decisions.labels("approve").inc()
    return await notice_page(
        "Device connected", f"{found.app.name} is connected. Return to your device."
    )
