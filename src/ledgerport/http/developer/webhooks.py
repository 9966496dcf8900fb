"""An app's webhooks in the console: create (the secret shown once), list, read one, edit,
delete, test, rotate the secret, the recent deliveries (filtered), one delivery with its payload
and attempt log, redelivery and the recovery of failed deliveries (contract.md: Developer console
API and its second round); the third round's receiver controls (signature scheme, rate limit,
ordering, headers), lifecycle and health, and the app's operational endpoint.

Every write that queues a delivery notifies the delivery engine when it commits.
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError
from quart import Response, request
from quart_schema import validate_request

from ledgerport import apps, queues, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._errors import validation_messages
from .._input import parse_json
from .._openapi import JSON, JSON_BODY_ERRORS, Reply, json_reply, operation
from .._openapi import Body as BodyDoc
from ._blueprint import blueprint, developed_app, iso_time
from ._webhook_shapes import (
    WEBHOOK_ID,
    CreatedWebhook,
    OperationalIn,
    OperationalWebhook,
    Queued,
    Rotation,
    TestIn,
    Webhook,
    WebhookChanges,
    WebhookIn,
    WebhookPage,
    webhook_json,
)


async def _answered(tx: storage.Transaction, webhooks: list[apps.Webhook]) -> list[Webhook]:
    """``webhooks`` as answered, with their counts of the last 24 hours."""
    counts = await apps.health_counts(tx, [w.id for w in webhooks], now=platform().now())
    return [webhook_json(w, counts.get(w.id, apps.Counts())) for w in webhooks]


def _controls(data: BaseModel) -> dict[str, object]:
    """The fields given, by the names the domain takes."""
    given = data.model_dump(include=data.model_fields_set)
    if "rateLimit" in given:
        given["rate_limit"] = given.pop("rateLimit")
    return given


async def _test_type() -> str | None:
    """The ``type`` of a test delivery's optional JSON body (no body: None)."""
    raw = await request.get_data(as_text=False)
    if not raw.strip():
        return None
    try:
        parsed = parse_json(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(["request body must be a JSON object"]) from exc
    try:
        return TestIn.model_validate(parsed).type
    except ValidationError as exc:
        raise InvalidInput(validation_messages(exc)) from exc


WEBHOOK_RAISES = (*JSON_BODY_ERRORS, InvalidInput, storage.BadValue)


@blueprint.post("/apps/<app_id>/webhooks")
@validate_request(WebhookIn)
@operation(json_reply(201, CreatedWebhook, "The webhook and its secret"), raises=WEBHOOK_RAISES)
async def create_webhook(app_id: str, data: WebhookIn) -> tuple[CreatedWebhook, int]:
    """Create a webhook. Its signing secret (``whsec_``...) is in this answer only; a
    standard-asymmetric endpoint answers its ``publicKey`` instead."""
    p = platform()
    if data.kind == "stream":
        return await _create_stream_endpoint(app_id, data)
    if data.events is None:
        raise InvalidInput(["events is required"])
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
            signature=data.signature,  # type: ignore[arg-type]  # one of SCHEMES, validated
            rate_limit=data.rateLimit,
            ordering=data.ordering,  # type: ignore[arg-type]  # one of ORDERINGS, validated
            headers=data.headers,
            development=development,
            loopback=loopback,
            resolver=resolver,
        )
        [answer] = await _answered(tx, [webhook])
    created: CreatedWebhook = {**answer}  # type: ignore[typeddict-item]
    if secret is not None:
        created["secret"] = secret
    return created, 201


_PUSH_ONLY = ("signature", "rateLimit", "ordering", "headers")


async def _create_stream_endpoint(app_id: str, data: WebhookIn) -> tuple[CreatedWebhook, int]:
    given = sorted(set(_PUSH_ONLY) & data.model_fields_set)
    if given:
        raise InvalidInput([f"{name} is not taken by a stream endpoint" for name in given])
    if not data.enabled:
        raise InvalidInput(["a stream endpoint is made enabled"])
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhook, secret = await apps.create_stream_endpoint(
            tx, p.keyring, now=p.now(), app_id=app_id, url=data.url, events=data.events
        )
        [answer] = await _answered(tx, [webhook])
    return {**answer, "secret": secret}, 201


@blueprint.get("/apps/<app_id>/webhooks")
@operation(json_reply(200, WebhookPage, "The app's webhooks"), raises=(storage.BadValue,))
async def list_webhooks(app_id: str) -> WebhookPage:
    """The app's webhooks, without their secrets."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhooks = await apps.list_webhooks(tx, app_id)
        answered = await _answered(tx, webhooks)
    return {"data": answered, "next": None}


@blueprint.get("/apps/<app_id>/webhooks/<webhook_id>")
@operation(
    json_reply(200, Webhook, "The webhook, its lifecycle and its health"),
    raises=(storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def get_webhook(app_id: str, webhook_id: str) -> Webhook:
    """One webhook, without its secret: its configuration, ``disabledReason`` and
    ``health``."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        [answer] = await _answered(tx, [webhook])
    return answer


@blueprint.patch("/apps/<app_id>/webhooks/<webhook_id>")
@validate_request(WebhookChanges)
@operation(
    json_reply(
        200, CreatedWebhook, "The webhook as it is now (its new secret after a change of scheme)"
    ),
    raises=(*WEBHOOK_RAISES, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def change_webhook(app_id: str, webhook_id: str, data: WebhookChanges) -> CreatedWebhook:
    """Change any of its fields. Switched off, the webhook gets no new deliveries and those
    waiting fail unsent; switched back on, ``disabledReason`` is cleared. A new ``signature``
    scheme makes a new key at once, answered here as ``secret`` (shown only now; a
    standard-asymmetric endpoint's ``publicKey`` instead): the old key stops signing."""
    p = platform()
    changes = _controls(data)
    development, loopback = p.config.development, p.config.loopback_webhooks
    resolver = await apps.resolve_ahead(
        changes.get("url"), development=development, loopback=loopback
    )
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        before = await apps.get_webhook(tx, app_id, webhook_id)
        webhook = await apps.update_webhook(
            tx,
            now=p.now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes=changes,
            keyring=p.keyring,
            development=development,
            loopback=loopback,
            resolver=resolver,
        )
        [answer] = await _answered(tx, [webhook])
        changed: CreatedWebhook = {**answer}  # type: ignore[typeddict-item]
        if webhook.signature != before.signature and webhook.signature != "standard-asymmetric":
            changed["secret"] = await apps.webhook_secret(
                tx, p.keyring, app_id=app_id, webhook_id=webhook_id
            )
    return changed


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
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        await apps.delete_webhook(tx, now=p.now(), app_id=app_id, webhook_id=webhook_id)
        if webhook.kind == "stream":
            await queues.end_stream_deliveries(
                tx, [webhook_id], now=p.now(), why="the stream endpoint was deleted"
            )
    return Response("", status=204)


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/test")
@operation(
    json_reply(202, Queued, "The test delivery is queued"),
    raises=(*JSON_BODY_ERRORS, InvalidInput, storage.BadValue, apps.WebhookNotFound),
    bodies=(BodyDoc(JSON, TestIn, required=False),),
    params=(WEBHOOK_ID,),
)
async def send_test_delivery(app_id: str, webhook_id: str) -> tuple[Queued, int]:
    """Send a test delivery: the sample of ``type`` (an event type the webhook subscribes to;
    another is a validation 400), by default the first subscribed event's
    (``invoice.created`` when none), with ``test: true``, businessId ``test``, eventId null;
    signed, retried and listed like any other delivery, with no event cursor."""
    p = platform()
    type_ = await _test_type()
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        delivery_id = await queues.create_test_delivery(
            tx, now=p.now(), webhook=webhook, pinned_version=app.pinned_version, type=type_
        )
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return {"deliveryId": delivery_id}, 202


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/rotate-secret")
@operation(
    json_reply(200, Rotation, "The new secret (or public key), shown only here"),
    raises=(storage.BadValue, apps.WebhookNotFound),
    params=(WEBHOOK_ID,),
)
async def rotate_webhook_secret(app_id: str, webhook_id: str) -> Rotation:
    """A new signing key. The previous one keeps signing, as the second signature, until
    ``previousSecretExpiresAt`` (24 hours); rotating again within them replaces it. A
    standard-asymmetric endpoint answers ``{publicKey, previousPublicKeyExpiresAt}``."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        rotation = await apps.rotate_webhook_secret(
            tx, p.keyring, now=p.now(), app_id=app_id, webhook_id=webhook_id
        )
    expires = iso_time(rotation.previous_expires_at)
    if rotation.public_key is not None:
        return {"publicKey": rotation.public_key, "previousPublicKeyExpiresAt": expires}
    assert rotation.secret is not None
    return {"secret": rotation.secret, "previousSecretExpiresAt": expires}


@blueprint.put("/apps/<app_id>/operational-webhook")
@validate_request(OperationalIn)
@operation(
    json_reply(200, OperationalWebhook, "The operational endpoint and its secret"),
    raises=(*JSON_BODY_ERRORS, InvalidInput, storage.BadValue),
)
async def put_operational_webhook(app_id: str, data: OperationalIn) -> OperationalWebhook:
    """Where the app's operational events go (``webhook.endpoint.failing``, ``.disabled``,
    ``.recovered``: ``{id, type, created, data}`` with ``data.webhookId``), signed with the
    ``stripe`` scheme and retried like any delivery. Setting it again changes the URL and keeps
    the secret."""
    p = platform()
    development, loopback = p.config.development, p.config.loopback_webhooks
    resolver = await apps.resolve_ahead(data.url, development=development, loopback=loopback)
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        url, secret = await apps.set_operational_webhook(
            tx,
            p.keyring,
            now=p.now(),
            app_id=app_id,
            url=data.url,
            development=development,
            loopback=loopback,
            resolver=resolver,
        )
    return {"url": url, "secret": secret}


@blueprint.delete("/apps/<app_id>/operational-webhook")
@operation(Reply(204, "The app has no operational endpoint"), raises=(storage.BadValue,))
async def delete_operational_webhook(app_id: str) -> Response:
    """The app's operational events are no longer sent anywhere (the console still shows
    them); what waits for the endpoint fails unsent."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.delete_operational_webhook(tx, now=p.now(), app_id=app_id)
    return Response("", status=204)
