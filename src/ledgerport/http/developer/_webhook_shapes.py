"""What the console API's webhook and delivery endpoints read and answer, as the OpenAPI document
states them: the request models, the answers, and a webhook, a delivery and an attempt as they
are answered."""

from __future__ import annotations

import re
from typing import Annotated, NotRequired

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, catalog, queues

from .._ids import DELIVERY, EVENT, WEBHOOK
from .._openapi import Param, one_of
from ._blueprint import iso_time

EventName = Annotated[str, WithJsonSchema(one_of(event.name for event in catalog.EVENTS))]
Status = Annotated[str, WithJsonSchema(one_of(queues.DELIVERY_STATUSES))]
DisabledReason = Annotated[str, WithJsonSchema(one_of(("gone", "failing")))]
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


SIGNATURE_DESCRIPTION = (
    "How attempts are signed: stripe (the spec's X-Webhook-Signature, the default), standard"
    " (Standard Webhooks HMAC: webhook-id, webhook-timestamp, webhook-signature v1) or"
    " standard-asymmetric (the same headers, v1a Ed25519: the endpoint answers publicKey instead"
    " of a secret). A change of scheme makes a new key at once (answered as for a new endpoint)"
)
RATE_LIMIT_DESCRIPTION = (
    "At most this many attempts start a second for this endpoint, across every process of the"
    " service (1 to 1000); null: no limit of its own"
)
ORDERING_DESCRIPTION = (
    "record: deliveries about the same record (the event's data.id) are attempted one at a"
    " time in event order, each after the one before it is delivered or failed its last"
    " attempt; records differ: in parallel. none (the default): no order"
)
HEADERS_DESCRIPTION = (
    "Sent with every attempt, after the service's own: at most 10; names are HTTP tokens of at"
    " most 64 characters, not host, user-agent, accept-encoding, content-*, webhook-*,"
    " x-webhook-*, proxy-* or a hop-by-hop header; values at most 512 characters of visible"
    " ASCII (spaces between them allowed)"
)
Scheme = Annotated[str, WithJsonSchema(one_of(apps.SCHEMES))]
KINDS = ("push", "stream")
Kind = Annotated[str, WithJsonSchema(one_of(KINDS))]
KIND_DESCRIPTION = (
    "push (the default): the service POSTs each delivery to url. stream: a listener (ledgerport"
    " listen) pulls its deliveries over HTTP (.../stream/pull) and reports each answer"
    " (.../stream/report); url is where the listener forwards them, which the service never"
    " reaches. A stream endpoint signs with the stripe scheme and takes none of signature,"
    " rateLimit, ordering and headers; no pull for an hour deletes it"
)
Ordering = Annotated[str, WithJsonSchema(one_of(apps.ORDERINGS))]
RateLimit = Annotated[
    int | None,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": catalog.WEBHOOK_RATE_LIMIT_MAX},
                {"type": "null"},
            ]
        }
    ),
]
Headers = Annotated[
    dict[str, str],
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": catalog.WEBHOOK_HEADERS_MAX,
            "propertyNames": {
                "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
                "maxLength": catalog.WEBHOOK_HEADER_NAME_MAX,
            },
            "additionalProperties": {
                "type": "string",
                "maxLength": catalog.WEBHOOK_HEADER_VALUE_MAX,
                "pattern": "^[\\x21-\\x7e]+( +[\\x21-\\x7e]+)*$",
            },
        }
    ),
]


class WebhookIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=catalog.URI_MAX_LENGTH,
        description=URL_DESCRIPTION,
    )
    events: list[EventName] | None = Field(
        default=None,
        description=EVENTS_DESCRIPTION + "; required, but for a stream endpoint, which receives"
        " every event the app may receive when they are left out",
    )
    enabled: bool = True
    signature: Scheme = Field(default="stripe", description=SIGNATURE_DESCRIPTION)
    rateLimit: RateLimit = Field(default=None, description=RATE_LIMIT_DESCRIPTION)
    ordering: Ordering = Field(default="none", description=ORDERING_DESCRIPTION)
    headers: Headers = Field(default_factory=dict, description=HEADERS_DESCRIPTION)
    kind: Kind = Field(default="push", description=KIND_DESCRIPTION)


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
    enabled: bool = Field(
        default=True,
        description="false switches it off (waiting deliveries fail unsent); true switches it"
        " back on and clears disabledReason: the deliveries failed since it went off can then be"
        " recovered (recover)",
    )
    signature: Scheme = Field(default="stripe", description=SIGNATURE_DESCRIPTION)
    rateLimit: RateLimit = Field(default=None, description=RATE_LIMIT_DESCRIPTION)
    ordering: Ordering = Field(default="none", description=ORDERING_DESCRIPTION)
    headers: Headers = Field(default_factory=dict, description=HEADERS_DESCRIPTION)


@with_config(ConfigDict(extra="forbid"))
class EndpointHealth(TypedDict):
    """Kept as outcomes are recorded: deliveries (not attempts) delivered and failed for good
    in the last 24 hours, those failed for good since the last delivered one, when the last
    one was delivered, and the last error of an attempt."""

    deliveredLast24h: int
    failedLast24h: int
    consecutiveFailures: int
    lastDeliveryAt: str | None
    lastError: str | None


@with_config(ConfigDict(extra="forbid"))
class Webhook(TypedDict):
    """An endpoint. ``disabledReason``: why the engine switched it off (gone: a 410 answer;
    failing: no delivered attempt for LEDGERPORT_WEBHOOK_DISABLE_AFTER while at least 3
    deliveries failed for good), null when the app did or while it is on. ``publicKey``: a
    standard-asymmetric endpoint's key to verify with (whpk_...), else null. ``kind``: push,
    or stream (its listener pulls its deliveries)."""

    id: str
    kind: Kind
    url: str
    events: list[EventName]
    enabled: bool
    signature: Scheme
    rateLimit: int | None
    ordering: Ordering
    headers: dict[str, str]
    disabledReason: DisabledReason | None
    health: EndpointHealth
    publicKey: str | None


@with_config(ConfigDict(extra="forbid"))
class CreatedWebhook(Webhook):
    """The new webhook and its signing secret, shown only in this answer (a
    standard-asymmetric endpoint has none: its ``publicKey`` is what receivers use)."""

    secret: NotRequired[str]


@with_config(ConfigDict(extra="forbid"))
class WebhookPage(TypedDict):
    """Every webhook of the app, oldest first: ``next`` is null."""

    data: list[Webhook]
    next: str | None


@with_config(ConfigDict(extra="forbid"))
class Rotation(TypedDict):
    """spec: Secret rotation response; a standard-asymmetric endpoint answers its new
    ``publicKey`` and ``previousPublicKeyExpiresAt`` instead."""

    secret: NotRequired[str]
    previousSecretExpiresAt: NotRequired[str]
    publicKey: NotRequired[str]
    previousPublicKeyExpiresAt: NotRequired[str]


class TestIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    type: EventName | None = Field(
        default=None,
        description="An event type the webhook subscribes to: its sample is sent (default: the"
        " first subscribed, else invoice.created)",
    )


class OperationalIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    url: str = Field(min_length=1, max_length=catalog.URI_MAX_LENGTH, description=URL_DESCRIPTION)


@with_config(ConfigDict(extra="forbid"))
class OperationalWebhook(TypedDict):
    """The app's operational endpoint and its signing secret (the stripe scheme), shown in
    this answer only."""

    url: str
    secret: str


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


def webhook_json(webhook: apps.Webhook, counts: apps.Counts) -> Webhook:
    health = webhook.health
    return {
        "id": webhook.id,
        "kind": "stream" if webhook.kind == "stream" else "push",
        "url": webhook.url,
        "events": list(webhook.events),
        "enabled": webhook.enabled,
        "signature": webhook.signature,
        "rateLimit": webhook.rate_limit,
        "ordering": webhook.ordering,
        "headers": dict(webhook.headers),
        "disabledReason": webhook.disabled_reason,
        "health": {
            "deliveredLast24h": counts.delivered,
            "failedLast24h": counts.failed,
            "consecutiveFailures": health.consecutive_failures,
            "lastDeliveryAt": (
                None if health.last_delivery_at is None else iso_time(health.last_delivery_at)
            ),
            "lastError": health.last_error,
        },
        "publicKey": webhook.public_key,
    }


def delivery_json(delivery: queues.Delivery) -> Delivery:
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


def attempt_json(attempt: queues.LoggedAttempt) -> Attempt:
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
