"""An app's webhooks in the console: create (the secret shown once), list, edit, delete, test,
rotate the secret, the recent deliveries (filtered), one delivery with its payload and attempt
log, redelivery and the recovery of failed deliveries (contract.md: Developer console API and
its second round).

Every write that queues a delivery notifies the delivery engine when it commits.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from quart import Response, request
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, catalog, queues, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._ids import DELIVERY, EVENT, WEBHOOK
from .._openapi import JSON_BODY_ERRORS, Param, Reply, json_reply, one_of, operation
from ._blueprint import blueprint, developed_app, iso_time

EventName = Annotated[str, WithJsonSchema(one_of(event.name for event in catalog.EVENTS))]
Status = Annotated[str, WithJsonSchema(one_of(queues.DELIVERY_STATUSES))]
WEBHOOK_ID = Param("webhook_id", "path", "The webhook's id", WEBHOOK.schema)
DELIVERY_ID = Param("delivery_id", "path", "The delivery's id", DELIVERY.schema)
_STATUS = "(?:" + "|".join(queues.DELIVERY_STATUSES) + ")"
_TYPE = "(?:" + "|".join(re.escape(name) for name in catalog.EVENT_NAMES) + ")"
STATUS_FILTER = Param(
    "status",
    "query",
    "Comma-separated statuses: only deliveries in one of them",
    {"type": "string", "pattern": f"^{_STATUS}(?:,{_STATUS})*$"},
)
TYPE_FILTER = Param(
    "type",
    "query",
    "Comma-separated event types: only deliveries of one of them",
    {"type": "string", "pattern": f"^{_TYPE}(?:,{_TYPE})*$"},
)
EVENT_FILTER = Param(
    "eventId", "query", "An event's id: only the event's delivery to the webhook", EVENT.schema
)
AFTER = Param(
    "after",
    "query",
    "The next of an earlier page: the deliveries after it, newest first (the same filters)",
    DELIVERY.schema,
)
URL_DESCRIPTION = (
    "Where deliveries are POSTed: https (http only on a loopback host, with"
    " LEDGERPORT_ENV=development or on a service whose API and application hosts are loopback"
    " addresses); in production a host that resolves to a private, loopback, link-local,"
    " multicast or reserved address is refused (a loopback one is allowed on a service reached"
    " only on a loopback address)"
)
EVENTS_DESCRIPTION = (
    "The event types delivered, in order (the first is the type of a test delivery); each at"
    " most once"
)


class WebhookIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=catalog.URI_MAX_LENGTH,
        description=URL_DESCRIPTION,
    )
    events: list[EventName] = Field(description=EVENTS_DESCRIPTION)
    enabled: bool = True


class WebhookChanges(BaseModel):
    """Fields left out stay as they are."""

    model_config = ConfigDict(strict=True, extra="forbid")

    url: str = Field(
        default="",
        min_length=1,
        max_length=catalog.URI_MAX_LENGTH,
        description=URL_DESCRIPTION,
    )
    events: list[EventName] = Field(default_factory=list, description=EVENTS_DESCRIPTION)
    enabled: bool = True


@with_config(ConfigDict(extra="forbid"))
class Webhook(TypedDict):
    id: str
    url: str
    events: list[EventName]
    enabled: bool


@with_config(ConfigDict(extra="forbid"))
class CreatedWebhook(TypedDict):
    """The new webhook and its signing secret, shown only in this answer."""

    id: str
    url: str
    events: list[EventName]
    enabled: bool
    secret: str


@with_config(ConfigDict(extra="forbid"))
class WebhookPage(TypedDict):
    """Every webhook of the app, oldest first: ``next`` is null."""

    data: list[Webhook]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class Rotation(TypedDict):
    """spec: Secret rotation response."""

    secret: str
    previousSecretExpiresAt: str


@with_config(ConfigDict(extra="forbid"))
class Queued(TypedDict):
    deliveryId: str


@with_config(ConfigDict(extra="forbid"))
class Delivery(TypedDict):
    """A delivery: ``attempts`` counts the attempts since it was created or last redelivered,
    ``nextAttemptAt`` is when the next is due while it waits (queued or retrying), and
    ``test`` marks a test delivery (no event)."""

    id: str
    eventId: str | None
    type: EventName
    status: Status
    attempts: int
    responseCode: int | None
    lastError: str | None
    createdAt: str
    nextAttemptAt: str | None
    test: bool


@with_config(ConfigDict(extra="forbid"))
class DeliveryPage(TypedDict):
    """The webhook's deliveries (of those the filters keep), newest first, 100 a page:
    ``next``, when more are left, is the ``after`` of the next page (else null)."""

    data: list[Delivery]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class Attempt(TypedDict):
    """One attempt made. ``attempt`` counts on across redeliveries; ``responseBody`` is the first
    4 KiB of the answer's body as text (UTF-8, what does not decode as U+FFFD), null when no
    answer came, ``responseBodyTruncated`` when the body went on (or was not read to its end);
    ``requestHeaders`` are the headers the request was sent with, the signature of that attempt
    among them. ``responseBodyDroppedAt``: when the kept body was dropped to keep the app
    within its storage quota (``LEDGERPORT_APP_STORAGE_QUOTA_MB``, the app's oldest first;
    ``responseBody`` is then null); null while it is kept."""

    attempt: int
    startedAt: str
    durationMs: float
    responseCode: int | None
    responseBody: str | None
    responseBodyTruncated: bool
    error: str | None
    requestHeaders: dict[str, str]
    responseBodyDroppedAt: str | None


@with_config(ConfigDict(extra="forbid"))
class DeliveryDetail(Delivery):
    """The delivery whole: ``payload`` is the body every attempt sent, the exact text each
    signature was computed over; ``attemptLog`` every attempt ever made, oldest first,
    redeliveries included."""

    payload: str
    attemptLog: list[Attempt]


class RecoverIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    since: str = Field(
        min_length=1,
        max_length=64,
        description="ISO 8601 with a UTC offset (2026-09-22T08:00:00Z), within the last 30 days:"
        " the failed deliveries created at or after it are redelivered",
    )
    after: str | None = DELIVERY.field(
        default=None,
        description="The next of an earlier recovery with the same since: go on after it",
    )


@with_config(ConfigDict(extra="forbid"))
class Recovery(TypedDict):
    """The failed deliveries queued again and those the redelivery rules refused; ``next``,
    when more were left than one recovery looks at, is the ``after`` to go on with (else
    null)."""

    queued: int
    skipped: int
    next: str | None


def _webhook(webhook: apps.Webhook) -> Webhook:
    return {
        "id": webhook.id,
        "url": webhook.url,
        "events": list(webhook.events),
        "enabled": webhook.enabled,
    }


def _delivery(delivery: queues.Delivery) -> Delivery:
    due = delivery.next_attempt_due
    return {
        "id": delivery.id,
        "eventId": delivery.event_id,
        "type": delivery.type,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "responseCode": delivery.response_code,
        "lastError": delivery.last_error,
        "createdAt": iso_time(delivery.created_at),
        "nextAttemptAt": None if due is None else iso_time(due),
        "test": delivery.test,
    }


def _attempt(attempt: queues.LoggedAttempt) -> Attempt:
    return {
        "attempt": attempt.attempt,
        "startedAt": iso_time(attempt.started_at),
        "durationMs": attempt.duration_ms,
        "responseCode": attempt.response_code,
        "responseBody": attempt.response_text,
        "responseBodyTruncated": attempt.response_truncated,
        "error": attempt.error,
        "requestHeaders": attempt.request_headers,
        "responseBodyDroppedAt": (
            None if attempt.body_dropped_at is None else iso_time(attempt.body_dropped_at)
        ),
    }


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


WEBHOOK_RAISES = (*JSON_BODY_ERRORS, InvalidInput, storage.BadValue)


@blueprint.post("/apps/<app_id>/webhooks")
@validate_request(WebhookIn)
@operation(json_reply(201, CreatedWebhook, "The webhook and its secret"), raises=WEBHOOK_RAISES)
async def create_webhook(app_id: str, data: WebhookIn) -> tuple[CreatedWebhook, int]:
    """Create a webhook. Its signing secret (``whsec_``...) is in this answer only."""
    p = platform()
    development, loopback = p.config.development, p.config.loopback_webhooks
    resolver = await apps.resolve_ahead(data.url, development=development, loopback=loopback)
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhook, secret = await apps.create_webhook(
            tx,
            p.keyring,
            now=p.now(),
            app_id=app_id,
            url=data.url,
            events=data.events,
            enabled=data.enabled,
            development=development,
            loopback=loopback,
            resolver=resolver,
        )
    return {**_webhook(webhook), "secret": secret}, 201


@blueprint.get("/apps/<app_id>/webhooks")
@operation(json_reply(200, WebhookPage, "The app's webhooks"), raises=(storage.BadValue,))
async def list_webhooks(app_id: str) -> WebhookPage:
    """The app's webhooks, without their secrets."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhooks = await apps.list_webhooks(tx, app_id)
    return {"data": [_webhook(w) for w in webhooks], "next": None}


@blueprint.patch("/apps/<app_id>/webhooks/<webhook_id>")
@validate_request(WebhookChanges)
@operation(
    json_reply(200, Webhook, "The webhook as it is now"),
    raises=(*WEBHOOK_RAISES, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def change_webhook(app_id: str, webhook_id: str, data: WebhookChanges) -> Webhook:
    """Change any of ``url``, ``events`` and ``enabled``. Switched off, the webhook gets no new
    deliveries and those waiting fail unsent."""
    p = platform()
    changes = data.model_dump(include=data.model_fields_set)
    development, loopback = p.config.development, p.config.loopback_webhooks
    resolver = await apps.resolve_ahead(
        changes.get("url"), development=development, loopback=loopback
    )
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhook = await apps.update_webhook(
            tx,
            now=p.now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes=changes,
            development=development,
            loopback=loopback,
            resolver=resolver,
        )
    return _webhook(webhook)


@blueprint.delete("/apps/<app_id>/webhooks/<webhook_id>")
@operation(
    Reply(204, "The webhook is deleted"),
    raises=(storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def delete_webhook(app_id: str, webhook_id: str) -> Response:
    """Delete the webhook; deliveries waiting for it fail unsent."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.delete_webhook(tx, now=p.now(), app_id=app_id, webhook_id=webhook_id)
    return Response("", status=204)


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/test")
@operation(
    json_reply(202, Queued, "The test delivery is queued"),
    raises=(storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def send_test_delivery(app_id: str, webhook_id: str) -> tuple[Queued, int]:
    """Send a test delivery: the first subscribed event's sample (``invoice.created`` when none)
    with ``test: true``, businessId ``test``, eventId null; signed, retried and listed like any
    other delivery."""
    p = platform()
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        delivery_id = await queues.create_test_delivery(
            tx, now=p.now(), webhook=webhook, pinned_version=app.pinned_version
        )
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return {"deliveryId": delivery_id}, 202


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/rotate-secret")
@operation(
    json_reply(200, Rotation, "The new secret, shown only here"),
    raises=(storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def rotate_webhook_secret(app_id: str, webhook_id: str) -> Rotation:
    """A new signing secret. The previous one keeps signing, as the second ``v1`` value, until
    ``previousSecretExpiresAt`` (24 hours); rotating again within them replaces it."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        secret, expires_at = await apps.rotate_webhook_secret(
            tx, p.keyring, now=p.now(), app_id=app_id, webhook_id=webhook_id
        )
    return {"secret": secret, "previousSecretExpiresAt": iso_time(expires_at)}


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
    return {"data": [_delivery(d) for d in page.deliveries], "next": page.next}


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
        **_delivery(detail.delivery),
        "payload": detail.payload,
        "attemptLog": [_attempt(attempt) for attempt in detail.attempt_log],
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
