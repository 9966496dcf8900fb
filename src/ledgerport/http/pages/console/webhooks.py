"""The console's webhooks page: each endpoint with its recent deliveries, the test and redeliver
buttons, switching an endpoint off and on, and deleting it (a confirmation page first)."""

from __future__ import annotations

from urllib.parse import quote

from quart import Response, redirect
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, queues
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
from .._form_models import BUTTON_BODY, PageForm, read_form
from .._frame import console_developer, returns_to
from .._notices import (
    form_page,
    with_notice,
)
from ._shared import (
    APP_PARAM,
    CONSOLE_CSP,
    PAGE_ERRORS,
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    WEBHOOK_PARAM,
    ConfirmForm,
    blueprint,
    confirm_page,
    webhook_path,
    webhooks_path,
)


@blueprint.get("/console/apps/<app_id>/webhooks")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's webhooks and their recent deliveries"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=PAGE_ERRORS,
    params=(APP_PARAM,),
)
async def webhooks_page(app_id: str) -> ResponseReturnValue:
    """Each webhook with its 100 most recent deliveries: status, attempts, response code, last
    error; a button to redeliver one that is not waiting for an attempt, and one to send a
    test delivery."""
    user_id = console_developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhooks = [
            (webhook, await queues.recent_deliveries(tx, webhook.id))
            for webhook in await apps.list_webhooks(tx, app_id)
        ]
    return await form_page(
        "console_webhooks.html",
        csp=CONSOLE_CSP,
        app=app,
        webhooks=webhooks,
        now=platform().now(),
        current="webhooks",
    )


def _back(app_id: str, notice: str, *params: object) -> Response:
    return with_notice(f"/console/apps/{app_id}/webhooks", notice, *params)


_BACK_TO_WEBHOOKS = back_with_notice(lambda app_id, **_: webhooks_path(app_id))


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/test")
@form_guard(_BACK_TO_WEBHOOKS, token_required=False)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Back to the webhooks page, saying what was done", SET_COOKIE.optional()),
    page(404, "Not an app of the signed-in developer"),
    raises=(*PAGE_ERRORS, apps.WebhookNotFound),
    bodies=BUTTON_BODY,
    params=(APP_PARAM, CSRF_COOKIE_PARAM),
)
async def send_test(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The test button: a test delivery to the webhook."""
    user_id = console_developer()
    p = platform()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        delivery_id = await queues.create_test_delivery(
            tx, now=p.now(), webhook=webhook, pinned_version=app.pinned_version
        )
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return _back(app_id, "test-queued", delivery_id)


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
@form_guard(_BACK_TO_WEBHOOKS, token_required=False)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the webhooks page, saying what was done or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=(*PAGE_ERRORS, apps.WebhookNotFound),
    bodies=BUTTON_BODY,
    params=(APP_PARAM, CSRF_COOKIE_PARAM),
)
async def redeliver(app_id: str, webhook_id: str, delivery_id: str) -> ResponseReturnValue:
    """The redeliver button: the delivery again, or why it cannot go again."""
    user_id = console_developer()
    p = platform()
    returns_to(f"/console/apps/{app_id}/webhooks")
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        await queues.redeliver(tx, now=p.now(), webhook=webhook, delivery_id=delivery_id)
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return _back(app_id, "redelivered", delivery_id)


class SwitchForm(PageForm):
    """The switch button: ``enabled`` ``true`` switches the endpoint on, anything else off."""

    enabled: str = ""


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/enabled")
@form_guard(_BACK_TO_WEBHOOKS)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the webhooks page, saying what was done or why not", SET_COOKIE.optional()
    ),
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, SwitchForm),),
    params=(APP_PARAM, WEBHOOK_PARAM, CSRF_COOKIE_PARAM),
)
async def switch_webhook(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Switch the endpoint on or off, as ``PATCH`` with ``enabled``: switched off, it gets no
    new deliveries and those waiting for it fail without being sent."""
    user_id = console_developer()
    form = await read_form(SwitchForm)
    back = webhooks_path(app_id)
    enabled = form.enabled == "true"
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.update_webhook(
            tx,
            now=platform().now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes={"enabled": enabled},
        )
    return with_notice(back, "webhook-enabled" if enabled else "webhook-disabled", webhook.url)


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/delete")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The confirmation step of deleting an endpoint: what happens, and the button"),
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound),
    params=(APP_PARAM, WEBHOOK_PARAM),
)
async def delete_webhook_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Confirm deleting the endpoint: what happens to its deliveries, and the button."""
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, console_developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
    return await confirm_page(
        app,
        current="webhooks",
        nav_label="Delete endpoint",
        heading="Delete this endpoint?",
        lead=webhook.url,
        consequences=(
            "It gets no new deliveries, and the deliveries waiting for it fail without being sent.",
            "Its signing secret signs nothing more, and it leaves this console's list with its"
            " recent deliveries.",
            "To switch it off for a while instead, keep it and use its Switch off button.",
        ),
        action=webhook_path(app_id, webhook_id, "delete"),
        button="Delete the endpoint",
        danger=True,
        back=webhooks_path(app_id),
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/delete")
@form_guard(back_with_notice(lambda app_id, webhook_id: webhook_path(app_id, webhook_id, "delete")))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Deleted: back to the webhooks page, saying so; or, not confirmed, to the"
        " confirmation page",
        SET_COOKIE.optional(),
    ),
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ConfirmForm),),
    params=(APP_PARAM, WEBHOOK_PARAM, CSRF_COOKIE_PARAM),
)
async def delete_webhook(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Delete the endpoint, confirmed, as ``DELETE /developer/apps/{appId}/webhooks/{id}``;
    unconfirmed, to its confirmation page (an endpoint that is not there is not found)."""
    user_id = console_developer()
    form = await read_form(ConfirmForm)
    confirming = webhook_path(app_id, webhook_id, "delete")
    back = webhooks_path(app_id)
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        if form.confirm != "yes":
            return redirect(quote(confirming), 303)
        await apps.delete_webhook(tx, now=platform().now(), app_id=app_id, webhook_id=webhook_id)
    return with_notice(back, "webhook-deleted", webhook.url)
