"""The console API's deliveries of a webhook: the history (filtered, a page at a time), one
delivery with its attempts, its redelivery, and the recovery of the failed ones since a moment."""

from __future__ import annotations

from datetime import datetime

from quart import request
from quart_schema import validate_request

from ledgerport import apps, catalog, queues, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._openapi import JSON_BODY_ERRORS, json_reply, operation
from ._blueprint import blueprint, developed_app
from ._webhook_shapes import (
    AFTER,
    DELIVERY_ID,
    EVENT_FILTER,
    STATUS_FILTER,
    TYPE_FILTER,
    WEBHOOK_ID,
    DeliveryDetail,
    DeliveryPage,
    Queued,
    RecoverIn,
    Recovery,
    attempt_json,
    delivery_json,
)


def _filter(name: str, allowed: tuple[str, ...]) -> list[str]:
    """The comma-separated values of every ``name`` query parameter, each one of ``allowed``."""
    values = [part for value in request.args.getlist(name) for part in value.split(",")]
    if any(value not in allowed for value in values):
        raise InvalidInput([f"{name} must be one or more of {', '.join(allowed)}, comma-separated"])
    return values


def _moment(text: str, name: str) -> float:
    """An ISO 8601 time with its UTC offset, in unix seconds."""
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            raise ValueError(text)
        return moment.timestamp()
    except (ValueError, OverflowError):
        raise InvalidInput(
            [f"{name} must be an ISO 8601 time with its UTC offset, as 2026-09-22T08:00:00Z"]
        ) from None


@blueprint.get("/apps/<app_id>/webhooks/<webhook_id>/deliveries")
@operation(
    json_reply(200, DeliveryPage, "The most recent deliveries"),
    raises=(InvalidInput, storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID, STATUS_FILTER, TYPE_FILTER, EVENT_FILTER, AFTER),
)
async def list_deliveries(app_id: str, webhook_id: str) -> DeliveryPage:
    """The webhook's 100 most recent deliveries, newest first, with their status, attempts,
    last response code and error, when the next attempt is due, and whether it is a test
    delivery. ``status`` and ``type`` (each comma-separated) and ``eventId`` keep those
    matching all given: the 100 most recent of them. When more are left, ``next`` is set, and
    the same call with it as ``after`` answers the next 100. An unknown status or type, or an
    ``after`` that is no delivery of the webhook, is a validation 400; an event the webhook has
    no delivery of gives an empty list."""
    statuses = _filter("status", queues.DELIVERY_STATUSES)
    types = _filter("type", catalog.EVENT_NAMES)
    event_id = request.args.get("eventId")
    if event_id == "":
        raise InvalidInput(["eventId must not be empty"])
    after = request.args.get("after")
    if after == "":
        raise InvalidInput(["after must not be empty"])
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.get_webhook(tx, app_id, webhook_id)
        page = await queues.delivery_page(
            tx,
            webhook_id,
            statuses=[status for status in queues.DELIVERY_STATUSES if status in statuses],
            types=types,
            event_id=event_id,
            after=after,
        )
    return {"data": [delivery_json(d) for d in page.deliveries], "next": page.next}


@blueprint.get("/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>")
@operation(
    json_reply(200, DeliveryDetail, "The delivery, its payload and its attempt log"),
    raises=(storage.BadValue, apps.WebhookNotFound, queues.DeliveryNotFound),
    params=(WEBHOOK_ID, DELIVERY_ID),
)
async def get_delivery(app_id: str, webhook_id: str, delivery_id: str) -> DeliveryDetail:
    """One delivery of the webhook: what the list shows, the ``payload`` every attempt sent
    (the exact text its signatures were computed over), and its ``attemptLog``: every attempt
    ever made, oldest first, numbered on across redeliveries, each with when it started, how
    long it took, the response code, the first 4 KiB of the answer, the error and the request
    headers as sent, its signature included."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.get_webhook(tx, app_id, webhook_id)
        detail = await queues.get_delivery(tx, webhook_id, delivery_id)
    return {
        **delivery_json(detail.delivery),
        "payload": detail.payload,
        "attemptLog": [attempt_json(attempt) for attempt in detail.attempt_log],
    }


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
@operation(
    json_reply(202, Queued, "The delivery is queued again"),
    raises=(storage.BadValue, apps.WebhookNotFound, queues.RedeliveryRefused),
    params=(WEBHOOK_ID, DELIVERY_ID),
)
async def redeliver_delivery(app_id: str, webhook_id: str, delivery_id: str) -> tuple[Queued, int]:
    """Send a delivery again: same id, eventId and body, a fresh attempt count and signature.
    400 when it waits for an attempt, is unknown or more than 30 days old, the app is suspended
    or deactivated, or (business and privacy events) the app is no longer installed in the
    business or no longer holds the event's scope."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        await queues.redeliver(tx, now=p.now(), webhook=webhook, delivery_id=delivery_id)
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return {"deliveryId": delivery_id}, 202


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/recover")
@validate_request(RecoverIn)
@operation(
    json_reply(202, Recovery, "The failed deliveries since then are queued again"),
    raises=(*JSON_BODY_ERRORS, InvalidInput, storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def recover_deliveries(app_id: str, webhook_id: str, data: RecoverIn) -> tuple[Recovery, int]:
    """Redeliver every failed delivery of the webhook created at or after ``since`` (ISO 8601
    with its UTC offset, within the last 30 days, not in the future: else a validation 400), by
    the rules of a redelivery: those they refuse (the app suspended or deactivated, no longer
    installed in the business or no longer holding the event's scope) are skipped and counted.
    One call looks at the oldest 500 at most, in one transaction; when more are left ``next``
    is set, and the same call with it as ``after`` goes on after them."""
    p = platform()
    since = _moment(data.since, "since")
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        recovered = await queues.recover(
            tx, now=p.now(), webhook=webhook, since=since, after=data.after
        )
        if recovered.queued:
            await tx.notify(queues.DELIVERIES_CHANNEL)
    answer: Recovery = {
        "queued": recovered.queued,
        "skipped": recovered.skipped,
        "next": recovered.next,
    }
    return answer, 202
