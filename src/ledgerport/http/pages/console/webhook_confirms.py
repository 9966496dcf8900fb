"""The confirmation steps of an endpoint's consequential actions, each saying what will happen
with numbers before it is done: switching it off and deleting it (how many deliveries waiting
for it will fail, unsent) and recovering its failed deliveries (how many a recovery will queue
again and skip, a dry count by the recovery's own rule)."""

from __future__ import annotations

from urllib.parse import quote

from quart import redirect
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
from .._form_models import read_form
from .._frame import console_developer, returns_to
from .._notices import with_notice
from ._shared import (
    APP_PARAM,
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
from .webhooks import endpoint_path

_OFF = "switch-off"


def waiting_words(waiting: int) -> str:
    """What switching off or deleting does to the deliveries waiting for the endpoint."""
    if waiting == 0:
        return "No delivery waits for it now: none will fail."
    noun = "delivery waits" if waiting == 1 else "deliveries wait"
    return (
        f"{waiting:,} {noun} for it now: {'it' if waiting == 1 else 'they'} will fail without"
        " being sent (an attempt already under way may still be made)."
    )


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/switch-off")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The confirmation step of switching an endpoint off: how many deliveries fail"),
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound),
    params=(APP_PARAM, WEBHOOK_PARAM),
)
async def switch_off_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Confirm switching the endpoint off: how many deliveries waiting for it will fail
    unsent, and that it gets no new deliveries until it is switched on again."""
    async with unit_of_work(reads=True) as tx:
        app, webhook = await apps.get_developed_webhook(tx, app_id, console_developer(), webhook_id)
        waiting = await queues.waiting_deliveries(tx, webhook_id)
    return await confirm_page(
        app,
        current="webhooks",
        nav_label="Switch off",
        heading="Switch this endpoint off?",
        lead=webhook.url,
        consequences=(
            waiting_words(waiting),
            "It gets no new deliveries while it is off: events recorded meanwhile become no"
            " delivery (a receiver catches up on them from the event feed).",
            "Switch it on again from its page at any time.",
        ),
        action=webhook_path(app_id, webhook_id, "switch-off"),
        button="Switch the endpoint off",
        danger=True,
        back=endpoint_path(app_id, webhook_id),
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/switch-off")
@form_guard(back_with_notice(lambda app_id, webhook_id: webhook_path(app_id, webhook_id, _OFF)))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Switched off: back to the endpoint's page, saying so; or, not confirmed, to the"
        " confirmation page",
        SET_COOKIE.optional(),
    ),
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ConfirmForm),),
    params=(APP_PARAM, WEBHOOK_PARAM, CSRF_COOKIE_PARAM),
)
async def switch_off(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Switch the endpoint off, confirmed, as ``PATCH`` with ``enabled`` false; unconfirmed, to
    its confirmation page."""
    form = await read_form(ConfirmForm)
    back = endpoint_path(app_id, webhook_id)
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        await apps.get_webhook(tx, app_id, webhook_id)
        if form.confirm != "yes":
            return redirect(quote(webhook_path(app_id, webhook_id, "switch-off")), 303)
        webhook = await apps.update_webhook(
            tx,
            now=platform().now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes={"enabled": False},
        )
    return with_notice(back, "webhook-disabled", webhook.url)


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
    """Confirm deleting the endpoint: how many deliveries waiting for it will fail unsent, what
    else goes with it, and the button."""
    async with unit_of_work(reads=True) as tx:
        app, webhook = await apps.get_developed_webhook(tx, app_id, console_developer(), webhook_id)
        waiting = await queues.waiting_deliveries(tx, webhook_id)
    return await confirm_page(
        app,
        current="webhooks",
        nav_label="Delete endpoint",
        heading="Delete this endpoint?",
        lead=webhook.url,
        consequences=(
            waiting_words(waiting),
            "It gets no new deliveries.",
            "Its signing secret signs nothing more, and it leaves this console's list with its"
            " recent deliveries.",
            "To switch it off for a while instead, keep it and use its Switch off button.",
        ),
        action=webhook_path(app_id, webhook_id, "delete"),
        button="Delete the endpoint",
        danger=True,
        back=endpoint_path(app_id, webhook_id),
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
