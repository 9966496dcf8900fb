"""The console's functions page: each function in one row with its health (the list that leads to
a function's own page), the test button, and deleting a function (a confirmation page first)."""

from __future__ import annotations

from urllib.parse import quote

from quart import redirect
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, auth, queues
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._function_budget import queue_test_run
from ..._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    operation,
    page,
    redirect_reply,
)
from .._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_guard
from .._form_models import BUTTON_BODY, read_form
from .._frame import console_developer, returns_to
from .._notices import (
    form_page,
    with_notice,
)
from ._shared import (
    APP_PARAM,
    CONSOLE_CSP,
    FUNCTION_NOT_FOUND,
    NAME_PARAM,
    PAGE_ERRORS,
    SIGNED_OUT,
    ConfirmForm,
    blueprint,
    confirm_page,
    function_path,
    functions_path,
)

LISTED_EXCERPT_CHARS = 300
"""Characters of a run's log lines, error and result a page listing runs shows (the run's page
shows them whole): 20 functions' 100 runs with 4,096 of each made one page of 66 MB in 1.2 s."""


def function_home(app_id: str, name: str) -> str:
    """The address of a function's own page."""
    return f"{functions_path(app_id)}/{name}"


@blueprint.get("/console/apps/<app_id>/functions")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's functions, one row each with its health"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=PAGE_ERRORS,
    params=(APP_PARAM,),
)
async def functions_page(app_id: str) -> ResponseReturnValue:
    """Each function in one row, health first: its state (the active version, rolled back,
    or why it runs no more), its runs and failures in the last 24 hours, its last run (when,
    how, linking to it), its last error (linking to the run that had it) and the next tick of
    its schedule. Read in one statement for all (``queues.function_health``); the function's
    own page has its actions and runs."""
    user_id = console_developer()
    async with unit_of_work(reads=True) as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        functions = await queues.function_health(tx, app_id, now=platform().now())
    return await form_page(
        "console_functions.html", csp=CONSOLE_CSP, app=app, functions=functions, current="functions"
    )


@blueprint.get("/console/apps/<app_id>/functions/<name>/delete")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The confirmation step of deleting a function: what happens, and the button"),
    SIGNED_OUT,
    FUNCTION_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.FunctionNotFound),
    params=(APP_PARAM, NAME_PARAM),
)
async def delete_function_page(app_id: str, name: str) -> ResponseReturnValue:
    """Confirm deleting the function: what happens to its runs, and the button."""
    async with unit_of_work(reads=True) as tx:
        app, function = await apps.get_developed_function(tx, app_id, console_developer(), name)
    return await confirm_page(
        app,
        current="functions",
        nav_label=f"Delete {function.name}",
        heading=f"Delete the function {function.name}?",
        lead=f"Version {function.version} of it runs now.",
        consequences=(
            "It runs no more: runs still queued for it fail without running.",
            "It leaves this console's list with its recent runs, and its name is free again.",
        ),
        action=function_path(app_id, name, "delete"),
        button="Delete the function",
        danger=True,
        back=functions_path(app_id),
    )


@blueprint.post("/console/apps/<app_id>/functions/<name>/delete")
@form_guard(back_with_notice(lambda app_id, name: function_path(app_id, name, "delete")))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Deleted: back to the functions page, saying so; or, not confirmed, to the"
        " confirmation page",
        SET_COOKIE.optional(),
    ),
    FUNCTION_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.FunctionNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ConfirmForm),),
    params=(APP_PARAM, NAME_PARAM, CSRF_COOKIE_PARAM),
)
async def delete_function(app_id: str, name: str) -> ResponseReturnValue:
    """Delete the function, confirmed, as ``DELETE /developer/apps/{appId}/functions/{name}``."""
    form = await read_form(ConfirmForm)
    confirming = function_path(app_id, name, "delete")
    back = functions_path(app_id)
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        await apps.get_function(tx, app_id, name)
        if form.confirm != "yes":
            return redirect(quote(confirming), 303)
        await apps.delete_function(tx, now=platform().now(), app_id=app_id, name=name)
    return with_notice(back, "function-deleted", name)


@blueprint.post("/console/apps/<app_id>/functions/<name>/test")
@form_guard(back_with_notice(lambda app_id, name: function_home(app_id, name)))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the function's page, saying the test run is queued or why not",
        SET_COOKIE.optional(),
    ),
    FUNCTION_NOT_FOUND,
    raises=(
        *PAGE_ERRORS,
        apps.FunctionNotFound,
        auth.RateLimited,
        InvalidInput,
        RequestEntityTooLarge,
    ),
    bodies=BUTTON_BODY,
    params=(APP_PARAM, NAME_PARAM, CSRF_COOKIE_PARAM),
)
async def test_run(app_id: str, name: str) -> ResponseReturnValue:
    """The test button, as ``POST /developer/apps/{appId}/functions/{name}/test``: one run of
    the function on the sample of its first event type (``invoice.created`` for a function on
    none) with ``test: true``, businessId ``test``, eventId null, in no business; listed with
    its runs. Counted against the app's upload budget."""
    back = function_home(app_id, name)
    returns_to(back)
    run_id, function_name = await queue_test_run(app_id, name, console_developer())
    return with_notice(back, "test-run-queued", run_id, function_name)
