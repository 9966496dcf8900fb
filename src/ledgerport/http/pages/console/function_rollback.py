"""Making another version of a function the active one (a rollback, or forward again), confirmed:
the confirmation page shows the diff from the version that runs now to the one that would,
with the lines added and removed counted, before the button that does it.

The sources are read in one transaction and compared after it, in a thread
(``apps.version_diff``): no transaction waits for a diff.
"""

from __future__ import annotations

from urllib.parse import quote

from markupsafe import Markup, escape
from quart import redirect
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import NotFound, RequestEntityTooLarge

from ledgerport import apps
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
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
from .._form_models import read_form
from .._frame import console_developer, returns_to
from .._notices import form_page, with_notice
from ._debug import BUTTON_ERRORS, NOT_THE_APPS, PAGE_ERRORS, SIGN_IN, blueprint
from ._shared import CONSOLE_CSP, ConfirmForm
from .runs import FUNCTION_PARAM, VERSION_PARAM, function_page_path, version_number


def _activate_path(app_id: str, name: str, version: int | str) -> str:
    return f"{function_page_path(app_id, name)}/versions/{version}/activate"


def diff_lines(diff: apps.SourceDiff) -> Markup:
    """A diff's hunks as the confirmation shows them: each hunk's header, then each line with
    its numbers in the old and the new source and its mark (``-``, ``+`` or a space, so that
    what changed reads without colour). Made here rather than by a template loop: a diff
    shows up to a thousand lines."""
    rows = []
    for hunk in diff.hunks:
        rows.append(f'<span class="fn-line fn-hunk">{escape(hunk.header)}</span>')
        for line in hunk.lines:
            old = "" if line.old_line is None else line.old_line
            new = "" if line.new_line is None else line.new_line
            rows.append(
                f'<span class="fn-line fn-{line.kind}"><span class="fn-number"'
                f' aria-hidden="true">{old}</span><span class="fn-number" aria-hidden="true">'
                f"{new}</span>{line.mark} {escape(line.text)}</span>"
            )
    return Markup("".join(rows))


@blueprint.get("/console/apps/<app_id>/functions/<name>/versions/<version>/activate")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(
        200,
        "The confirmation step of activating a version: the diff from the active version,"
        " the lines added and removed, and the button",
    ),
    redirect_reply(SIGN_IN),
    page(404, NOT_THE_APPS.format("function or version")),
    raises=(
        *PAGE_ERRORS,
        NotFound,
        apps.FunctionNotFound,
        apps.FunctionVersionNotFound,
    ),
    params=(FUNCTION_PARAM, VERSION_PARAM),
)
async def activate_page(app_id: str, name: str, version: str) -> ResponseReturnValue:
    """Confirm making the version active: what changes from the version that runs now, as a
    unified diff (the lines added and removed counted, whatever part of it is shown), and the
    button. The active version's own page says it is active already."""
    number = version_number(version)
    async with unit_of_work(reads=True) as tx:
        app, function = await apps.get_developed_function(tx, app_id, console_developer(), name)
        active = await apps.version_source(tx, function, function.version)
        chosen = await apps.version_source(tx, function, number)
    changes = await apps.version_diff(active, chosen)
    back = function_page_path(app_id, name)
    return await form_page(
        "console_function_rollback.html",
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        heading=(
            f"Roll back {name} to version {number}?"
            if number < function.version
            else f"Activate version {number} of {name}?"
        ),
        old=changes.old,
        new=changes.new,
        d=changes.diff,
        diff=diff_lines(changes.diff),
        action=_activate_path(app_id, name, number),
        back=back,
        current="functions",
        below=True,
    )


async def _version_first(version: str, **_: str) -> None:
    """A version that cannot be one is not found, whatever the form holds."""
    version_number(version)


@blueprint.post("/console/apps/<app_id>/functions/<name>/versions/<version>/activate")
@form_guard(
    back_with_notice(lambda app_id, name, version: _activate_path(app_id, name, version)),
    before=_version_first,
)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Activated: back to the function's page, saying which version is active now; or, not"
        " confirmed, to the confirmation page",
        SET_COOKIE.optional(),
    ),
    page(404, NOT_THE_APPS.format("function or version")),
    raises=(
        *PAGE_ERRORS,
        *BUTTON_ERRORS,
        NotFound,
        InvalidInput,
        RequestEntityTooLarge,
        apps.FunctionNotFound,
        apps.FunctionVersionNotFound,
    ),
    bodies=(Body(FORM, ConfirmForm),),
    params=(FUNCTION_PARAM, VERSION_PARAM, CSRF_COOKIE_PARAM),
)
async def activate(app_id: str, name: str, version: str) -> ResponseReturnValue:
    """Make the version the active one, confirmed (a rollback, or forward again), as
    ``POST .../versions/{version}/activate``: runs that start from then on run it. Without
    ``confirm`` ``yes``, the answer is the confirmation page with its diff."""
    number = version_number(version)
    form = await read_form(ConfirmForm)
    back = function_page_path(app_id, name)
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        function = await apps.get_function(tx, app_id, name)
        if form.confirm != "yes":
            await apps.version_source(tx, function, number)  # not found is found first
            return redirect(quote(_activate_path(app_id, name, number)), 303)
        await apps.activate_version(
            tx, now=platform().now(), app_id=app_id, name=name, version=number
        )
    return with_notice(back, "version-activated", number)
