"""The page that signs the ``ledgerport`` command in: ``ledgerport login`` shows a code and this
page's address (``http/cli_login.py`` starts and redeems the login), and the signed-in
developer approves or denies it here. Approved, the command's next poll gets a developer token
acting as this developer in the console API. Wrong codes count against the address and the user
as on the device page, so codes cannot be guessed at any useful rate."""

from __future__ import annotations

from typing import Literal

from quart import Blueprint, Response
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import auth, storage
from ledgerport.errors import InvalidInput

from .._browser import current_user_id
from .._context import client_ip, platform, unit_of_work
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
from ._csrf import CSRF_COOKIE_PARAM, form_guard
from ._form_models import PageForm, query_params, read_form, read_query
from ._frame import Way, login_redirect, notice_page
from ._notices import form_page
from ._page_queries import UserCodeQuery

blueprint = Blueprint("command_line", __name__, template_folder="templates")

PATH = "/console/cli-login"
PAGE_TITLE = "Sign in the command line"
WAYS = (Way("Enter the code again", PATH),)
MSG_WRONG_CODE = (
    "That code is not waiting for approval: it is mistyped, expired or already decided. Run"
    " ledgerport login again for a new one."
)
_CODE_INPUT_MAX = 32


class CliLoginForm(PageForm):
    """The code the command shows, and the decision (anything but approve denies)."""

    user_code: str = ""
    decision: Literal["approve", "deny"] = "deny"


async def _form(user_code: str = "", *, error: str | None = None, status: int = 200) -> Response:
    return await form_page(
        "cli_login.html", status=status, user_code=user_code[:_CODE_INPUT_MAX], error=error
    )


@blueprint.get(PATH)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The code and what approving it means"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    raises=(InvalidInput, storage.StorageUnavailable),
    params=query_params(UserCodeQuery),
)
async def cli_login_form() -> ResponseReturnValue:
    """What approving means, the code (``user_code`` in the query fills it in) and the two
    buttons."""
    if await current_user_id() is None:
        return login_redirect()
    return await _form(read_query(UserCodeQuery).user_code or "")


async def _expired_form() -> Response:
    entered = (await read_form(CliLoginForm)).user_code
    return await _form(entered, error="Your session expired. Please try again.", status=400)


@blueprint.post(PATH)
@form_guard(_expired_form, token_required=False)
@security_scheme(SIGNED_IN)
@operation(
    page(200, "Signed in, or denied: the command's next poll learns which"),
    page(400, "The form expired (CSRF check failed), or the code is not waiting: the form again"),
    page(429, "Too many wrong codes from this address or user", RETRY_AFTER),
    raises=(auth.NotSignedIn, RequestEntityTooLarge, storage.BadValue, storage.StorageUnavailable),
    bodies=(Body(FORM, CliLoginForm),),
    params=(CSRF_COOKIE_PARAM,),
)
async def cli_login_decision() -> ResponseReturnValue:
    """Approve (the command gets a developer token acting as you) or deny the code."""
    form = await read_form(CliLoginForm)
    user_id = await current_user_id()
    if user_id is None:
        raise auth.NotSignedIn("Sign in again and enter the code.")
    guard, ip = oauth_guard(), client_ip()
    wait = await guard.user_code_wait(ip, user_id)
    if wait is not None:
        response = await _form(
            form.user_code, error=f"Too many wrong codes. Try again in {wait} seconds.", status=429
        )
        response.headers["Retry-After"] = str(wait)
        return response
    p = platform()
    approve = form.decision == "approve"
    async with unit_of_work() as tx:
        decided = await auth.decide_cli_login(
            tx, p.keyring, now=p.now(), user_code=form.user_code, user_id=user_id, approve=approve
        )
    if not decided:
        await guard.wrong_user_code(ip, user_id)
        return await _form(form.user_code, error=MSG_WRONG_CODE, status=400)
    if approve:
        return await notice_page(
            "Command line signed in",
            "The ledgerport command is signed in as you.",
            next_words="Return to your terminal: it continues on its own. You can close this"
            " page. ledgerport logout signs it out again.",
        )
    return await notice_page(
        "Sign-in denied",
        "The ledgerport command was not signed in.",
        next_words="Your terminal is told so. You can close this page.",
    )
