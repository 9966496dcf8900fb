"""The console's pages for debugging an app's webhooks, on the application host: a webhook with
its deliveries (filtered, a page at a time) and the recovery of its failed ones; a delivery with
its payload as sent and every attempt made, and its redelivery.

Server-rendered from the same domain calls as the JSON console API (``developer/webhooks.py``),
for the signed-in developer; every button is a form with a CSRF token, every filter a GET form
or a link. Anyone else's app, and any webhook or delivery id that is not the app's, is not found
(404). A form's refusal comes back to its page as a notice, by the error table.
"""

from __future__ import annotations

from quart.typing import ResponseReturnValue
from quart_schema import security_scheme

from ledgerport import apps, catalog, queues
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._openapi import (
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    operation,
    page,
    redirect_reply,
)
from .._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_guard
from .._form_models import BUTTON_BODY, query_params, read_query
from .._frame import console_developer, returns_to
from .._notices import form_page, with_notice
from ._debug import (
    _FILTER_LABELS,
    BUTTON_ERRORS,
    LIVE_CSP,
    NOT_THE_APPS,
    PAGE_ERRORS,
    SIGN_IN,
    AppliedFilter,
    blueprint,
    form_time,
    pretty_payload,
    query_string,
    quota_mib,
    url_label,
)
from ._shared import CONSOLE_CSP
from .webhook_queries import DeliveriesQuery
from .webhook_timeline import attempt_items, delivery_rows
from .webhook_words import attempt_lines, endpoint_state, response_or_error, what_happened

ATTEMPTS_SHOWN = 100
"""Attempts a delivery's page shows, the newest: a delivery redelivered again and again has as
many as it was sent, each with up to 4 KiB of answer (the developer API answers every one)."""
DELIVERIES_SHOWN = 20
"""Deliveries the endpoint's page shows a page: its newest first, older ones a link away."""
RECOVER_DEFAULT_SINCE = 86400
"""Seconds before now the recovery form offers to start from: the last day."""


def delivery_happened(delivery: queues.Delivery) -> str:
    """What a delivery's row says of its last answer: what went wrong, or the code it got (as
    the live rows of ``static/live.js`` show it)."""
    return response_or_error(delivery.response_code, delivery.last_error)


def _webhook_path(app_id: str, webhook_id: str) -> str:
    return f"/console/apps/{app_id}/webhooks/{webhook_id}"


def _delivery_path(app_id: str, webhook_id: str, delivery_id: str) -> str:
    return f"{_webhook_path(app_id, webhook_id)}/deliveries/{delivery_id}"


# --- A webhook ------------------------------------------------------------------------------------


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(
        200,
        "The webhook, its actions, health and operational events, its deliveries (filtered, a"
        " page at a time) and its recovery form",
    ),
    redirect_reply(SIGN_IN),
    page(404, NOT_THE_APPS.format("webhook")),
    raises=(*PAGE_ERRORS, InvalidInput, apps.WebhookNotFound),
    params=query_params(DeliveriesQuery),
)
async def webhook_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The webhook: its state and every action on it (a test delivery, edit, switch off or
    on, rotate the secret, recover, delete), its health and operational events, its
    configuration; its deliveries, newest first, 20 a
    page (``after``: the next of the page before), filtered by status, event type and event
    id (each kept in the address and shown as applied), each with its event, status, attempts,
    response and when its next attempt is due, test deliveries marked; and the form that
    redelivers every failed delivery since a moment. When attempts' kept answers were dropped
    to keep the app within its storage quota, it says so."""
    query = read_query(DeliveriesQuery)
    status, event_type, event_id = query.status, query.event_type, query.event_id
    after, recover_after = query.after, query.recover_after
    since_text = query.recover_since or ""
    p = platform()
    async with unit_of_work(reads=True) as tx:
        app, storage = await queues.developed_app_storage(tx, app_id, console_developer())
        health = await apps.get_webhook_health(tx, app_id, webhook_id, now=p.now())
        webhook = health.webhook
        deliveries = await queues.delivery_page(
            tx,
            webhook.id,
            statuses=[status] if status else [],
            types=[event_type] if event_type else [],
            event_id=event_id,
            after=after,
            limit=DELIVERIES_SHOWN,
        )
        events = await apps.endpoint_events(tx, app_id, webhook.id)
        # While it fails, or after the service switched it off: from the first delivery that
        # failed since its failures began (a recovery goes by when deliveries were created).
        trouble = webhook.health.failing_since or webhook.disabled_at
        failed_from = (
            await queues.first_failed_since(tx, webhook.id, trouble)
            if trouble is not None
            and (webhook.health.state == "failing" or webhook.disabled_reason)
            else None
        )
    filters = {"status": status, "type": event_type, "eventId": event_id}
    here = _webhook_path(app_id, webhook_id)
    applied = [
        AppliedFilter(_FILTER_LABELS[name], value, here + query_string({**filters, name: None}))
        for name, value in filters.items()
        if value
    ]
    now = p.now()
    earliest = now - catalog.DELIVERY_RETENTION + 60
    if not since_text:
        default = failed_from if failed_from is not None else now - RECOVER_DEFAULT_SINCE
        since_text = form_time(max(min(default, now), earliest))
    subscribed = list(webhook.events) or [webhook.test_event_type]
    return await form_page(
        "console_webhook.html",
        csp=LIVE_CSP,
        live=not applied and after is None,
        app=app,
        webhook=webhook,
        webhook_label=url_label(webhook.url),
        counts=health.counts,
        state=endpoint_state(webhook),
        last_error=what_happened(None, webhook.health.last_error),
        events=events,
        delivery_rows=delivery_rows(
            [(d, delivery_happened(d)) for d in deliveries.deliveries], base=here, now=now
        ),
        delivery_count=len(deliveries.deliveries),
        page_size=DELIVERIES_SHOWN,
        now=now,
        filters=filters,
        applied=applied,
        subscribed_types=subscribed,
        other_types=[name for name in catalog.EVENT_NAMES if name not in subscribed],
        next_href=(
            here + query_string({**filters, "after": deliveries.next}) if deliveries.next else None
        ),
        newest_href=here + query_string(filters) if after else None,
        paged=after is not None,
        statuses=queues.DELIVERY_STATUSES,
        recover_since=since_text,
        recover_after=recover_after,
        recover_min=form_time(earliest),
        recover_max=form_time(now),
        recover_max_count=queues.RECOVER_MAX,
        storage=storage,
        quota_mib=quota_mib(),
        current="webhooks",
        below=True,
    )


# --- A delivery -----------------------------------------------------------------------------------


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The delivery: its payload as sent and every attempt made"),
    redirect_reply(SIGN_IN),
    page(404, NOT_THE_APPS.format("webhook or delivery")),
    raises=(*PAGE_ERRORS, apps.WebhookNotFound, queues.DeliveryNotFound),
)
async def delivery_page(app_id: str, webhook_id: str, delivery_id: str) -> ResponseReturnValue:
    """The delivery: its status, event, when it was created and when its next attempt is due;
    the payload as sent (pretty-printed, and the exact text its signatures were computed over);
    every attempt ever made, oldest first, as a timeline of one line each (its number, when it
    started, how long it took, the response code, what went wrong), each redelivery marked
    where it began, and each line opening onto the request's headers as sent (its signature
    among them) and the first 4 KiB of the answer (marked when the answer went on, or saying
    it was dropped for the app's storage quota), the 100 newest when there are more;
    and the redeliver button when the redelivery rules allow it, else why not."""
    p = platform()
    async with unit_of_work(reads=True) as tx:
        app, webhook = await apps.get_developed_webhook(tx, app_id, console_developer(), webhook_id)
        detail = await queues.get_delivery(tx, webhook.id, delivery_id, attempts=ATTEMPTS_SHOWN)
    refusal = queues.redelivery_check(detail, now=p.now())
    made = detail.attempt_log[-1].attempt if detail.attempt_log else 0
    lines = attempt_lines(
        detail.attempt_log,
        current_run=detail.delivery.attempts,
        attempts_made=made,
        max_attempts=len(p.config.webhook_retry_delays),
    )
    return await form_page(
        "console_delivery.html",
        csp=CONSOLE_CSP,
        app=app,
        webhook=webhook,
        webhook_label=url_label(webhook.url),
        delivery=detail.delivery,
        payload=detail.payload,
        pretty=pretty_payload(detail.payload),
        attempts=lines,
        attempt_items=attempt_items(
            lines, now=p.now(), quota_mib=quota_mib(), body_kept=queues.RESPONSE_BODY_KEPT
        ),
        attempts_made=made,
        refusal=refusal,
        body_kept=queues.RESPONSE_BODY_KEPT,
        quota_mib=quota_mib(),
        current="webhooks",
        below=True,
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/resend")
@form_guard(back_with_notice(_delivery_path))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the delivery's page, saying it is queued again or why not",
        SET_COOKIE.optional(),
    ),
    page(404, NOT_THE_APPS.format("webhook or delivery")),
    raises=(
        *PAGE_ERRORS,
        *BUTTON_ERRORS,
        apps.WebhookNotFound,
        queues.DeliveryNotFound,
        queues.RedeliveryRefused,
    ),
    bodies=BUTTON_BODY,
    params=(CSRF_COOKIE_PARAM,),
)
async def resend(app_id: str, webhook_id: str, delivery_id: str) -> ResponseReturnValue:
    """The delivery page's redeliver button: the delivery again, as
    ``POST .../deliveries/{deliveryId}/redeliver`` (same id, event and body, a fresh attempt
    count and signature), back to its page; a refusal of the redelivery rules comes back as a
    notice there."""
    back = _delivery_path(app_id, webhook_id, delivery_id)
    p = platform()
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        await queues.get_delivery(tx, webhook.id, delivery_id)
        await queues.redeliver(tx, now=p.now(), webhook=webhook, delivery_id=delivery_id)
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return with_notice(back, "redelivered", delivery_id)
