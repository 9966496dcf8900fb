"""The console's home (the apps the signed-in developer develops, and creating one) and an
app's overview."""

from __future__ import annotations

import re

from pydantic import Field
from quart import Response
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, catalog
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
from .._csrf import CSRF_COOKIE_PARAM, form_again, form_guard
from .._design import described_scopes
from .._field_problems import FormField, FormProblems, field_problems
from .._form_models import PageForm, Repeated, read_form
from .._frame import console_developer
from .._notices import (
    Notice,
    form_page,
)
from .._problems import answers_again
from ._shared import APP_PARAM, CONSOLE_CSP, PAGE_ERRORS, blueprint


@blueprint.get("/console")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The apps the signed-in user develops"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    raises=PAGE_ERRORS,
)
async def console_home() -> ResponseReturnValue:
    """The apps the signed-in user develops."""
    user_id = console_developer()
    async with unit_of_work(reads=True) as tx:
        developed = await apps.apps_developed_by(tx, user_id)
    return await form_page("console_home.html", csp=CONSOLE_CSP, apps=developed, current="apps")


@blueprint.get("/console/apps/<app_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's overview"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=PAGE_ERRORS,
    params=(APP_PARAM,),
)
async def app_overview(app_id: str) -> ResponseReturnValue:
    """The app: its client id, status, review, App URL, scopes, pinned version, how many
    webhooks, functions and extensions it has, and its endpoints' operational events (failing,
    switched off, recovered), newest first, with where they are sent."""
    user_id = console_developer()
    async with unit_of_work(reads=True) as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhooks = await apps.list_webhooks(tx, app_id)
        functions = await apps.list_functions(tx, app_id)
        extensions = await apps.list_extensions(tx, app)
        operational = await apps.operational_webhook(tx, app_id)
        events = await apps.operational_events(tx, app_id)
    urls = {webhook.id: webhook.url for webhook in webhooks}
    return await form_page(
        "console_app.html",
        csp=CONSOLE_CSP,
        app=app,
        operational_url=None if operational is None else operational["url"],
        operational_events=events,
        endpoint_urls=urls,
        webhooks=len(webhooks),
        functions=len(functions),
        extensions=extensions,
        current="overview",
    )


# --- Creating an app ----------------------------------------------------------------------------

NEW_APP_FIELDS = (
    FormField("name", "Name", ("name",)),
    FormField("type", "Kind of app", ("type",)),
    FormField("redirect_uris", "Redirect URIs", ("redirectUris",)),
    FormField("scopes", "Scopes", ("scopes",)),
    FormField("app_url", "App URL", ("appUrl",)),
)
"""The new app form's fields in its order: the inputs' ids and labels, and how the app rules
name them."""
_NEW_APP = "the app was not created"
_NUMBERED_URI = re.compile(r"^redirectUris\.(\d+) ")
_DEFAULT_SCOPES = ("profile:read",)


class NewAppForm(PageForm):
    """The new app form: its name, its kind (``CONFIDENTIAL``, with a client secret, or
    ``PUBLIC``), its redirect URIs one per line, the scopes it asks for (``scope`` repeated,
    one per ticked box) and its App URL (optional: where the marketplace opens it)."""

    name: str = ""
    type: str = ""
    redirect_uris: str = ""
    scope: Repeated = Field(default_factory=list)
    app_url: str = ""


def new_app_problems(refused: InvalidInput) -> FormProblems:
    """Why the app was not created, beside the form's fields, each said with its label (a
    redirect URI's problem names its line)."""
    messages = [
        _NUMBERED_URI.sub(lambda m: f"redirectUris, line {int(m[1]) + 1}, ", message)
        for message in refused.messages
    ]
    return field_problems(messages, NEW_APP_FIELDS, outcome=_NEW_APP)


async def _new_app_form(
    form: NewAppForm | None = None,
    *,
    problems: FormProblems | None = None,
    notice: Notice | None = None,
    status: int = 200,
) -> Response:
    ticked = set(form.scope) if form is not None else set(_DEFAULT_SCOPES)
    return await form_page(
        "console_app_new.html",
        status=status,
        csp=CONSOLE_CSP,
        form=form,
        ticked=ticked,
        scopes=described_scopes(catalog.SCOPES),
        problems=problems,
        problem=notice,
        current="apps",
        below=True,
    )


@blueprint.get("/console/apps/new")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that creates an app"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    raises=PAGE_ERRORS,
)
async def new_app() -> ResponseReturnValue:
    """The form that creates an app the signed-in developer develops: its name, its kind, its
    redirect URIs, the scopes it asks for and its App URL."""
    return await _new_app_form()


async def _new_app_again(notice: Notice, status: int) -> Response:
    return await _new_app_form(await read_form(NewAppForm), notice=notice, status=status)


@blueprint.post("/console/apps")
@form_guard(form_again(_new_app_again))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(201, "Created: its client id and, for a confidential app, its secret, shown once"),
    page(
        400,
        "Refused: the form again as it was sent, each problem beside its field, or the form"
        " expired",
        SET_COOKIE.optional(),
    ),
    raises=(*PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, NewAppForm),),
    params=(CSRF_COOKIE_PARAM,),
)
async def create_app() -> ResponseReturnValue:
    """Create an app the signed-in developer develops, as an operator's ``POST /admin/apps``
    does but never reviewed: until it is, it connects only to sandbox businesses. The answer
    shows its client id and, for a confidential app, its client secret, once."""
    user_id = console_developer()
    form = await read_form(NewAppForm)

    async def again(notice: Notice, status: int) -> Response:
        return await _new_app_form(form, notice=notice, status=status)

    answers_again(again)
    scopes = [scope for scope in form.scope if scope]
    if not scopes:
        refused = InvalidInput(["scopes must name at least one scope: tick one"])
        return await _new_app_form(form, problems=new_app_problems(refused), status=400)
    p = platform()
    try:
        async with unit_of_work() as tx:
            app, secret = await apps.create_app(
                tx,
                p.keyring,
                now=p.now(),
                name=form.name,
                type="PUBLIC" if form.type == "PUBLIC" else "CONFIDENTIAL",
                redirect_uris=[line.strip() for line in form.redirect_uris.splitlines() if line],
                scopes=scopes,
                developer_user_id=user_id,
                reviewed=False,
                app_url=form.app_url.strip() or None,
            )
    except InvalidInput as refused:
        return await _new_app_form(form, problems=new_app_problems(refused), status=400)
    return await form_page(
        "console_app_created.html",
        status=201,
        csp=CONSOLE_CSP,
        app=app,
        secret=secret,
        current="overview",
    )
