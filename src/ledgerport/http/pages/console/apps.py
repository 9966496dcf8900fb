"""The console's home (the apps the signed-in developer develops) and an app's overview."""

from __future__ import annotations

from quart.typing import ResponseReturnValue
from quart_schema import security_scheme

from ledgerport import apps

from ..._context import unit_of_work
from ..._openapi import (
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    operation,
    page,
    redirect_reply,
)
from .._frame import console_developer
from .._notices import (
    form_page,
)
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
    async with unit_of_work() as tx:
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
    async with unit_of_work() as tx:
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
