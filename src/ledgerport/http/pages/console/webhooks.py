"""The console's webhooks page, health first: one compact row per endpoint (its state, what it
delivered and failed in the last 24 hours, its newest delivery, its last error), each leading to
the endpoint's own page, which carries its actions; and the buttons those actions post: a test
delivery, switching an endpoint on (switching it off and deleting it each ask
first, saying how many waiting deliveries will fail)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from markupsafe import Markup, escape
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
from .._design import time_element
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
    WEBHOOK_NOT_FOUND,
    WEBHOOK_PARAM,
    blueprint,
    webhook_path,
    webhooks_path,
)
from .webhook_words import StateWords, endpoint_state, what_happened


@blueprint.get("/console/apps/<app_id>/webhooks")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's webhooks, one row each: state, the last 24 hours, newest delivery"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=PAGE_ERRORS,
    params=(APP_PARAM,),
)
async def webhooks_page(app_id: str) -> ResponseReturnValue:
    """Each webhook in one row: its URL (to its page), whether it is sending or switched off
    (and why, when the service did it), its deliveries delivered and failed in the last 24
    hours, its newest delivery (when, its status) and its last error. Two statements whatever
    the number of endpoints or deliveries: the endpoints with their health, and each one's
    newest delivery."""
    user_id = console_developer()
    now = platform().now()
    async with unit_of_work(reads=True) as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        health = await apps.webhook_health(tx, app_id, now=now)
        newest = await queues.last_deliveries(tx, app_id)
    rows = [
        EndpointRow(
            h.webhook,
            h.counts,
            endpoint_state(h.webhook),
            newest.get(h.webhook.id),
            what_happened(None, h.webhook.health.last_error),
        )
        for h in health
    ]
    return await form_page(
        "console_webhooks.html",
        csp=CONSOLE_CSP,
        app=app,
        rows=rows,
        row_items=endpoint_rows(rows, base=webhooks_path(app_id), now=now),
        now=now,
        current="webhooks",
    )


@dataclass(frozen=True)
class EndpointRow:
    """A row of the webhooks page."""

    webhook: apps.Webhook
    counts: apps.Counts
    state: StateWords
    newest: queues.Delivery | None
    last_error: str


def endpoint_rows(rows: Sequence[EndpointRow], *, base: str, now: float) -> Markup:
    """The rows of the webhooks page's table (``base``: the page), made in one pass rather
    than by the template's loop (its every call awaited): each endpoint's URL to its page, its
    state, its counts, its newest delivery and its last error."""
    made = []
    for r in rows:
        hook = r.webhook
        url, path = escape(hook.url), f"{escape(base)}/{escape(hook.id)}"
        reason = f' <span class="small">{escape(r.state.reason)}</span>' if r.state.reason else ""
        if r.newest is not None:
            status = escape(r.newest.status)
            newest = (
                f'<a href="{path}/deliveries/{escape(r.newest.id)}" aria-label="Newest delivery'
                f' of {url}: {status}">{time_element(r.newest.created_at, now)}</a>'
                f' <span class="badge badge-{status}">{status}</span>'
            )
        else:
            newest = '<span class="muted">none yet</span>'
        made.append(
            f'<tr id="{escape(hook.id)}">\n'
            f'  <th scope="row" class="wh-url"><a href="{path}">{url}</a></th>\n'
            f'  <td class="wh-state"><span class="badge badge-{escape(r.state.tone)}">'
            f"{escape(r.state.label)}</span>{reason}</td>\n"
            f'  <td class="num wh-count"><span class="wh-hint">Delivered </span>'
            f"{r.counts.delivered}</td>\n"
            f'  <td class="num wh-count{" wh-bad" if r.counts.failed else ""}">'
            f'<span class="wh-hint">Failed </span>{r.counts.failed}</td>\n'
            f'  <td class="wh-last">{newest}</td>\n'
            f'  <td class="wh-error">{escape(r.last_error)}</td>\n'
            "</tr>\n"
        )
    return Markup("".join(made))


def endpoint_path(app_id: str, webhook_id: str) -> str:
    """The endpoint's own page, where its actions are and where they come back to."""
    return f"{webhooks_path(app_id)}/{webhook_id}"


def _back(app_id: str, webhook_id: str, notice: str, *params: object) -> Response:
    return with_notice(endpoint_path(app_id, webhook_id), notice, *params)


_BACK_TO_ENDPOINT = back_with_notice(
    lambda app_id, webhook_id, **_: endpoint_path(app_id, webhook_id)
)


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/test")
@form_guard(_BACK_TO_ENDPOINT, token_required=False)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Back to the endpoint's page, saying what was done", SET_COOKIE.optional()),
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
    return _back(app_id, webhook_id, "test-queued", delivery_id)


class SwitchForm(PageForm):
    """The switch button: ``enabled`` ``true`` switches the endpoint on; anything else switches
    it off when ``confirm`` is ``yes`` (the confirmation page's button), and otherwise answers
    with that confirmation page, which says how many waiting deliveries will fail."""

    enabled: str = ""
    confirm: str = ""


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/enabled")
@form_guard(_BACK_TO_ENDPOINT)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the endpoint's page, saying what was done or why not; or, switching off"
        " unconfirmed, to the confirmation page",
        SET_COOKIE.optional(),
    ),
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, SwitchForm),),
    params=(APP_PARAM, WEBHOOK_PARAM, CSRF_COOKIE_PARAM),
)
async def switch_webhook(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Switch the endpoint on or off, as ``PATCH`` with ``enabled``: switched off, it gets no
    new deliveries and those waiting for it fail without being sent, so switching off is done
    only confirmed."""
    user_id = console_developer()
    form = await read_form(SwitchForm)
    back = endpoint_path(app_id, webhook_id)
    enabled = form.enabled == "true"
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        if not enabled and form.confirm != "yes":
            await apps.get_webhook(tx, app_id, webhook_id)
            return redirect(quote(webhook_path(app_id, webhook_id, "switch-off")), 303)
        webhook = await apps.update_webhook(
            tx,
            now=platform().now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes={"enabled": enabled},
        )
    return with_notice(back, "webhook-enabled" if enabled else "webhook-disabled", webhook.url)
