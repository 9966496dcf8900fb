"""The developer console's pages on the application host: an app's overview, its webhooks with
their recent deliveries (redeliver and test buttons), its functions with their recent runs and
logs, and its marketplace listing with its revisions. Server-rendered from the same domain calls
as the JSON console API (``/developer/*``, the contract), for the signed-in developer (the
session cookie); the buttons are forms with a CSRF token that come back to the page. Only an
app's developer sees it: anyone else's app is not found."""

from __future__ import annotations

from quart import Blueprint, Response, g, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, storage

from ._browser import (
    CSRF_COOKIE_PARAM,
    CsrfToken,
    csrf_valid,
    current_user_id,
    form_page,
    with_notice,
)
from ._context import platform, unit_of_work
from ._ids import APP
from ._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    Param,
    operation,
    page,
    redirect_reply,
)
from ._pages import login_redirect
from .developer import iso_time

blueprint = Blueprint("console_pages", __name__)

PAGE_TITLE = "Console"
"""Title of the console pages' problem pages."""
_APP = Param("app_id", "path", "The app", APP.schema)


class ConsoleForm(TypedDict):
    """A console button's form: its CSRF token. A form that fails the check, like one the
    action refuses, answers the redirect back to the page, which says why."""

    csrf_token: CsrfToken


_FORM = (Body(FORM, ConsoleForm),)
_PAGE_ERRORS = (storage.BadValue, apps.AppNotFound, storage.StorageUnavailable)


@blueprint.before_request
async def _signed_in() -> ResponseReturnValue | None:
    """Every page is the signed-in developer's: anyone else goes to the sign-in page first."""
    user_id = await current_user_id()
    if user_id is None:
        return login_redirect()
    g.console_user_id = user_id
    return None


def _developer() -> str:
    user_id: str = g.console_user_id
    return user_id


CONSOLE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none';"
    " frame-ancestors 'none'"
)
"""The console pages load nothing but their own inline style."""


@blueprint.get("/console")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The apps the signed-in user develops"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    raises=_PAGE_ERRORS,
)
async def console_home() -> ResponseReturnValue:
    """The apps the signed-in user develops."""
    user_id = _developer()
    async with unit_of_work() as tx:
        developed = await apps.apps_developed_by(tx, user_id)
    return await form_page("console_home.html", csp=CONSOLE_CSP, apps=developed)


@blueprint.get("/console/apps/<app_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's overview"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def app_overview(app_id: str) -> ResponseReturnValue:
    """The app: its client id, status, review, App URL, scopes, pinned version, and how many
    webhooks, functions and extensions it has."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhooks = await apps.list_webhooks(tx, app_id)
        functions = await apps.list_functions(tx, app_id)
        extensions = await apps.list_extensions(tx, app)
    return await form_page(
        "console_app.html",
        csp=CONSOLE_CSP,
        app=app,
        webhooks=len(webhooks),
        functions=len(functions),
        extensions=extensions,
    )


@blueprint.get("/console/apps/<app_id>/webhooks")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's webhooks and their recent deliveries"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def webhooks_page(app_id: str) -> ResponseReturnValue:
    """Each webhook with its 100 most recent deliveries: status, attempts, response code, last
    error; a button to redeliver one that is not waiting for an attempt, and one to send a
    test delivery."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhooks = [
            (webhook, await apps.recent_deliveries(tx, webhook.id))
            for webhook in await apps.list_webhooks(tx, app_id)
        ]
    return await form_page(
        "console_webhooks.html", csp=CONSOLE_CSP, app=app, webhooks=webhooks, iso=iso_time
    )


def _back(app_id: str, notice: str) -> Response:
    return with_notice(f"/console/apps/{app_id}/webhooks", notice)


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/test")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Back to the webhooks page, saying what was done", SET_COOKIE.optional()),
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    bodies=_FORM,
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def send_test(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The test button: a test delivery to the webhook."""
    user_id = _developer()
    if not csrf_valid((await request.form).get("csrf_token")):
        return _back(app_id, "The form expired: try again")
    p = platform()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        delivery_id = await apps.create_test_delivery(
            tx, now=p.now(), webhook=webhook, pinned_version=app.pinned_version
        )
        await tx.notify(apps.DELIVERIES_CHANNEL)
    return _back(app_id, f"Test delivery {delivery_id} queued")


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the webhooks page, saying what was done or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    bodies=_FORM,
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def redeliver(app_id: str, webhook_id: str, delivery_id: str) -> ResponseReturnValue:
    """The redeliver button: the delivery again, or why it cannot go again."""
    user_id = _developer()
    if not csrf_valid((await request.form).get("csrf_token")):
        return _back(app_id, "The form expired: try again")
    p = platform()
    try:
        async with unit_of_work() as tx:
            await apps.get_developed_app(tx, app_id, user_id)
            webhook = await apps.get_webhook(tx, app_id, webhook_id)
            await apps.redeliver(tx, now=p.now(), webhook=webhook, delivery_id=delivery_id)
            await tx.notify(apps.DELIVERIES_CHANNEL)
    except apps.RedeliveryRefused as refused:
        return _back(app_id, f"Not redelivered: {refused.rendered}")
    return _back(app_id, f"Delivery {delivery_id} queued again")


@blueprint.get("/console/apps/<app_id>/functions")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's functions and their recent runs"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def functions_page(app_id: str) -> ResponseReturnValue:
    """Each function with its version, events and 100 most recent runs: status, duration,
    logs, error and result."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        functions = [
            (function, await apps.recent_runs(tx, function))
            for function in await apps.list_functions(tx, app_id)
        ]
    return await form_page(
        "console_functions.html",
        csp=CONSOLE_CSP,
        app=app,
        functions=functions,
        iso=iso_time,
    )


@blueprint.get("/console/apps/<app_id>/listing")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's marketplace listing and its revisions"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def listing_page(app_id: str) -> ResponseReturnValue:
    """The listing: the live revision and the open one, with its state and the reviewer's
    note, a button to submit a draft for review, and every revision with its state."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        listing = await apps.find_listing(tx, app_id)
        revisions = await apps.listing_revisions(tx, listing.id) if listing else []
        ratings = await apps.rating_summary(tx, app_id)
    return await form_page(
        "console_listing.html",
        csp=CONSOLE_CSP,
        app=app,
        listing=listing,
        revisions=revisions,
        ratings=ratings,
        iso=iso_time,
    )


@blueprint.post("/console/apps/<app_id>/listing/submit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the listing page, saying what was done or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    bodies=_FORM,
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def submit_listing(app_id: str) -> ResponseReturnValue:
    """The submit button: the draft revision goes to review, as
    ``POST /developer/apps/{appId}/listing/submit``."""
    user_id = _developer()
    back = f"/console/apps/{app_id}/listing"
    if not csrf_valid((await request.form).get("csrf_token")):
        return with_notice(back, "The form expired: try again")
    try:
        async with unit_of_work() as tx:
            app = await apps.get_developed_app(tx, app_id, user_id)
            listing = await apps.submit_listing(tx, now=platform().now(), app=app)
    except (apps.ListingNotFound, apps.RevisionInWrongState) as refused:
        return with_notice(back, f"Not submitted: {refused.rendered}")
    assert listing.open is not None
    return with_notice(back, f"Revision {listing.open.number} submitted for review")
