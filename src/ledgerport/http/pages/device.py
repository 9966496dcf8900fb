"""The device verification page on the application host (RFC 8628 section 3.3).

A signed-in user enters the code their device shows, sees the same consent form as the
authorization endpoint, and approves (installing the app in the business they pick) or denies.
Wrong codes count against the IP and the user, so codes cannot be guessed at any useful rate.
"""

from __future__ import annotations

from typing import Annotated

from quart import Blueprint, Response
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import access, apps, auth, catalog, storage
from ledgerport.errors import InvalidInput

from .._browser import current_user_id
from .._context import client_ip, platform, unit_of_work
from .._ids import BUSINESS
from .._oauth_guard import oauth_guard
from .._openapi import (
    FORM,
    RETRY_AFTER,
    SIGNED_IN,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    operation,
    page,
    redirect_reply,
)
from ._consent import REFUSED_APPROVALS, consent_page, consent_problems
from ._csrf import CSRF_COOKIE_PARAM, form_guard
from ._form_models import PageForm, query_params, read_form, read_query
from ._frame import Way, login_redirect, notice_page, problem_page
from ._notices import form_page
from ._page_queries import UserCodeQuery

blueprint = Blueprint("device", __name__, template_folder="templates")

_TOO_MANY_CODES = page(429, "Too many wrong codes from this address or user", RETRY_AFTER)
_FORM_ERRORS = (RequestEntityTooLarge, storage.BadValue, storage.StorageUnavailable)


class UserCodeEntry(PageForm):
    user_code: str = ""


class DeviceDecision(PageForm):
    """The consent form: approve (for the chosen business) or anything else to deny."""

    user_code: str = ""
    decision: str = ""
    business_id: Annotated[str, BUSINESS.document] = ""


WAYS = (Way("Enter a code again", "/device"),)
"""Where a device page's problem offers to go on."""
_AGAIN = WAYS
MSG_WRONG_CODE = "That code is not valid or has expired. Check the code on your device."
MSG_CODE_GONE = "This code has expired or was already used. Start again on your device."
_USER_CODE_INPUT_MAX = 32


async def _code_form(
    user_code: str = "", *, error: str | None = None, status: int = 200
) -> Response:
    return await form_page(
        "device.html", status=status, user_code=user_code[:_USER_CODE_INPUT_MAX], error=error
    )


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
    wait = await oauth_guard().user_code_wait(ip, user_id)
    if wait is not None:
        return await _too_many_codes(entered, wait)
    return user_id, ip


@blueprint.get("/device")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The code entry form"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    raises=(InvalidInput, storage.StorageUnavailable),
    params=query_params(UserCodeQuery),
)
async def device_form() -> ResponseReturnValue:
    """The code entry form; ``user_code`` in the query (verification_uri_complete) pre-fills it."""
    if await current_user_id() is None:
        return login_redirect()
    return await _code_form(read_query(UserCodeQuery).user_code or "")


async def _expired_code_form() -> Response:
    entered = (await read_form(UserCodeEntry)).user_code[:_USER_CODE_INPUT_MAX]
    return await _code_form(entered, error="Your session expired. Please try again.", status=400)


@blueprint.post("/device")
@form_guard(_expired_code_form, token_required=False)
@security_scheme(SIGNED_IN)
@operation(
    page(200, "The consent form for the code's request"),
    page(400, "The form expired (CSRF check failed), or the code is wrong: the form again"),
    _TOO_MANY_CODES,
    raises=(
        auth.NotSignedIn,
        apps.AppNotReviewed,
        access.NoBusinessToConnect,
        access.NoBusinessToInstallIn,
        *_FORM_ERRORS,
    ),
    bodies=(Body(FORM, UserCodeEntry),),
    params=(CSRF_COOKIE_PARAM,),
)
async def device_submit() -> ResponseReturnValue:
    """Check the entered code and show the consent form for its request."""
    entered = (await read_form(UserCodeEntry)).user_code[:_USER_CODE_INPUT_MAX]
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
            await oauth_guard().wrong_user_code(ip, user_id)
            p.metrics.device_decisions.labels("wrong_code").inc()
            return await _code_form(entered, error=MSG_WRONG_CODE, status=400)
        offers = await access.consent_businesses(tx, found.app, user_id, found.scopes)
    user_code = auth.normalize_user_code(entered)
    return await consent_page(
        action="/device/decision",
        app=found.app,
        scopes=found.scopes,
        offers=offers,
        hidden={"user_code": user_code},
        device_code=shown_code(user_code),
    )


def shown_code(user_code: str) -> str:
    """A user code the way the device shows it, in two halves joined by a dash."""
    half = catalog.USER_CODE_LENGTH // 2
    if len(user_code) != catalog.USER_CODE_LENGTH:
        return user_code
    return f"{user_code[:half]}-{user_code[half:]}"


async def _expired_decision() -> Response:
    return await problem_page(
        "invalid_request: the form expired, start again",
        explanation="The page was open too long. Enter the code from your device again.",
        ways=_AGAIN,
    )


@blueprint.post("/device/decision")
@form_guard(_expired_decision, token_required=False)
@security_scheme(SIGNED_IN)
@operation(
    page(200, "Connected, or access denied: the device's next poll learns which"),
    page(
        400,
        "The form expired (CSRF check failed), or the code expired or was used; or the consent"
        " form again, the refusal beside the business (one the user may not choose, or may not"
        " install the app in), the device's request waiting still",
    ),
    _TOO_MANY_CODES,
    raises=(
        auth.NotSignedIn,
        apps.AppNotReviewed,
        storage.Conflict,
        *_FORM_ERRORS,
    ),
    bodies=(Body(FORM, DeviceDecision),),
    params=(CSRF_COOKIE_PARAM,),
)
async def device_decision() -> ResponseReturnValue:
    """Approve (install, then the device's next poll gets tokens) or deny (access_denied). An
    approval refused for the business chosen (not offered, or the user's role may not install
    the app there) shows the form again with the refusal beside the business, the device's
    request still waiting."""
    form = await read_form(DeviceDecision)
    guesser = await _code_guesser(form.user_code)
    if isinstance(guesser, Response):
        return guesser
    user_id, ip = guesser
    p = platform()
    now = p.now()
    try:
        async with unit_of_work() as tx:
            found = await auth.find_pending_device_request(
                tx, p.keyring, now=now, user_code=form.user_code
            )
            if found is None:
                # The decision names its code too: a wrong one counts as a guess.
                await oauth_guard().wrong_user_code(ip, user_id)
                p.metrics.device_decisions.labels("wrong_code").inc()
                return await problem_page(MSG_CODE_GONE, ways=_AGAIN)
            if form.decision != "approve":
                if not await auth.deny_device_request(tx, now=now, request=found, user_id=user_id):
                    return await problem_page(MSG_CODE_GONE, ways=_AGAIN)
                p.metrics.device_decisions.labels("deny").inc()
                return await notice_page(
                    "Access denied",
                    f"{found.app.name} was not connected.",
                    next_words="Your device is told so. You can close this page.",
                )
            installation = await access.approve(
                tx,
                now=now,
                app=found.app,
                business_id=form.business_id,
                user_id=user_id,
                scopes=found.scopes,
            )
            if not await auth.approve_device_request(
                tx, now=now, request=found, user_id=user_id, installation=installation
            ):
                return await problem_page(MSG_CODE_GONE, ways=_AGAIN)
    except REFUSED_APPROVALS as refused:
        # Rolled back: the device's request waits still, and the form comes back.
        assert found is not None  # only an approval of a request found is refused so
        async with unit_of_work() as tx:
            offers = await access.consent_businesses(tx, found.app, user_id, found.scopes)
        user_code = auth.normalize_user_code(form.user_code)
        return await consent_page(
            action="/device/decision",
            app=found.app,
            scopes=found.scopes,
            offers=offers,
            hidden={"user_code": user_code},
            device_code=shown_code(user_code),
            problems=consent_problems(refused),
        )
    p.metrics.device_decisions.labels("approve").inc()
    return await notice_page(
        "Device connected",
        f"{found.app.name} is connected.",
        next_words="Return to your device: it continues on its own. You can close this page.",
    )
