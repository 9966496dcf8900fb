"""An app's webhooks in the console: create (the secret shown once), list, edit, delete, test,
rotate the secret, the recent deliveries and redelivery (contract.md: Developer console API).

Every write that queues a delivery notifies the delivery engine when it commits.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from quart import Response
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, catalog, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._ids import DELIVERY, WEBHOOK
from .._openapi import JSON_BODY_ERRORS, Param, Reply, json_reply, one_of, operation
from ._blueprint import blueprint, developed_app, iso_time

EventName = Annotated[str, WithJsonSchema(one_of(event.name for event in catalog.EVENTS))]
Status = Annotated[str, WithJsonSchema(one_of(apps.DELIVERY_STATUSES))]
WEBHOOK_ID = Param("webhook_id", "path", "The webhook's id", WEBHOOK.schema)
DELIVERY_ID = Param("delivery_id", "path", "The delivery's id", DELIVERY.schema)
URL_DESCRIPTION = (
    "Where deliveries are POSTed: https (http only on a loopback host with"
    " LEDGERPORT_ENV=development); in production a host that resolves to a private, loopback,"
    " link-local, multicast or reserved address is refused"
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
    id: str
    eventId: str | None
    type: EventName
    status: Status
    attempts: int
    responseCode: int | None
    lastError: str | None
    createdAt: str
    nextAttemptAt: str | None


@with_config(ConfigDict(extra="forbid"))
class DeliveryPage(TypedDict):
    """The webhook's 100 most recent deliveries, newest first: ``next`` is null."""

    data: list[Delivery]
    next: str | None


def _webhook(webhook: apps.Webhook) -> Webhook:
    return {
        "id": webhook.id,
        "url": webhook.url,
        "events": list(webhook.events),
        "enabled": webhook.enabled,
    }


def _delivery(delivery: apps.Delivery) -> Delivery:
    waiting = delivery.status in ("queued", "retrying")
    return {
        "id": delivery.id,
        "eventId": delivery.event_id,
        "type": delivery.type,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "responseCode": delivery.response_code,
        "lastError": delivery.last_error,
        "createdAt": iso_time(delivery.created_at),
        "nextAttemptAt": (
            iso_time(delivery.next_attempt_at)
            if waiting and delivery.next_attempt_at is not None
            else None
        ),
    }


WEBHOOK_RAISES = (*JSON_BODY_ERRORS, InvalidInput, storage.BadValue)


@blueprint.post("/apps/<app_id>/webhooks")
@validate_request(WebhookIn)
@operation(json_reply(201, CreatedWebhook, "The webhook and its secret"), raises=WEBHOOK_RAISES)
async def create_webhook(app_id: str, data: WebhookIn) -> tuple[CreatedWebhook, int]:
    """Create a webhook. Its signing secret (``whsec_``...) is in this answer only."""
    p = platform()
    development = p.config.development
    resolver = await apps.resolve_ahead(data.url, development=development)
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
    development = p.config.development
    resolver = await apps.resolve_ahead(changes.get("url"), development=development)
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhook = await apps.update_webhook(
            tx,
            now=p.now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes=changes,
            development=development,
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
        delivery_id = await apps.create_test_delivery(
            tx, now=p.now(), webhook=webhook, pinned_version=app.pinned_version
        )
        await tx.notify(apps.DELIVERIES_CHANNEL)
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
    raises=(storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def list_deliveries(app_id: str, webhook_id: str) -> DeliveryPage:
    """The webhook's 100 most recent deliveries, newest first, with their status, attempts,
    last response code and error, and when the next attempt is due."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.get_webhook(tx, app_id, webhook_id)
        recent = await apps.recent_deliveries(tx, webhook_id)
    return {"data": [_delivery(d) for d in recent], "next": None}


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
@operation(
    json_reply(202, Queued, "The delivery is queued again"),
    raises=(storage.BadValue, apps.WebhookNotFound, apps.RedeliveryRefused),
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
        await apps.redeliver(tx, now=p.now(), webhook=webhook, delivery_id=delivery_id)
        await tx.notify(apps.DELIVERIES_CHANNEL)
    return {"deliveryId": delivery_id}, 202
