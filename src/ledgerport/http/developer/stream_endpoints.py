"""A stream endpoint's listener (``ledgerport listen``): it pulls the endpoint's deliveries and
reports each answer, with no inbound connection (contract.md: the app author's CLI).

- ``POST .../webhooks/{webhookId}/stream/pull?wait=S&limit=N`` leases what is due (a long poll:
  it answers at once when something is, else when a delivery comes due or ``wait`` seconds
  pass, with an empty list); each delivery comes with the headers to forward it with, signed,
  and its ``lease``.
- ``POST .../webhooks/{webhookId}/stream/report`` records the answers of leased deliveries as
  their attempts; each lease is reported once (a second report, or one after the lease ran
  out and the delivery was leased again, records nothing: ``recorded: false``).

Only the app's developer reaches either (the console API's gate); the engine's half is
``engine/_stream.py``. A pull also keeps the endpoint alive: one no listener pulled from for an
hour is deleted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import trio
from pydantic import BaseModel, ConfigDict, Field
from quart import request
from quart_schema import validate_request
from typing_extensions import TypedDict

from ledgerport import apps, auth, ops, queues, storage
from ledgerport.errors import InvalidInput

from .._context import app_state, platform, unit_of_work
from .._developer_bounds import PULLS_PER_DEVELOPER, TooManyPulls
from .._ids import DELIVERY
from .._openapi import JSON_BODY_ERRORS, Param, json_reply, operation
from ._blueprint import blueprint, developed_app, developer_id, iso_time
from ._webhook_shapes import WEBHOOK_ID, EventName, Status

WAIT_MAX = 30
"""Seconds a pull waits at most for a delivery to come due."""
WAIT_DEFAULT = 25
PULL_MAX = queues.STREAM_HELD
REPORT_MAX = 32
"""Reports one request carries at most (with their bodies, within the request body's bound)."""
BODY_KEPT = queues.RESPONSE_BODY_KEPT
WAIT = Param(
    "wait",
    "query",
    f"Seconds to wait for a delivery to come due when none is (0 to {WAIT_MAX}, default"
    f" {WAIT_DEFAULT})",
    {"type": "integer", "minimum": 0, "maximum": WAIT_MAX},
)
LIMIT = Param(
    "limit",
    "query",
    f"Deliveries leased at most (1 to {PULL_MAX}, default {PULL_MAX}); the endpoint has at most"
    f" {PULL_MAX} leased at once",
    {"type": "integer", "minimum": 1, "maximum": PULL_MAX},
)


class StreamDelivery(TypedDict):
    """A leased delivery: forward ``body`` (the exact text signed) with ``headers`` as they
    are, then report the answer naming ``id`` and ``lease`` before ``leaseExpiresAt`` (after
    it, the delivery is due again). ``attempt``: the number of this attempt."""

    id: str
    lease: str
    leaseExpiresAt: str
    type: EventName
    eventId: str | None
    attempt: int
    headers: list[list[str]]
    body: str


class Pulled(TypedDict):
    """The deliveries leased, oldest due first (empty when none came due within ``wait``)."""

    data: list[StreamDelivery]


class ReportIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    deliveryId: str = DELIVERY.field(description="The delivery the pull answered")
    lease: str = Field(min_length=1, max_length=64, description="The lease the pull answered")
    responseCode: int | None = Field(
        ge=100, le=599, description="The answer's status code; null when no answer came"
    )
    durationMs: float = Field(ge=0, le=queues.STREAM_LEASE * 1000)
    responseBody: str = Field(
        default="",
        max_length=BODY_KEPT,
        description=f"The answer's body as text, its first {BODY_KEPT} bytes at most",
    )
    responseBodyTruncated: bool = False
    error: str | None = Field(
        default=None,
        max_length=500,
        description="Why no answer came (a refused connection, a timeout)",
    )
    retryAfter: str | None = Field(
        default=None, max_length=100, description="The answer's Retry-After, if any"
    )


class ReportsIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    data: list[ReportIn] = Field(min_length=1, max_length=REPORT_MAX)


class ReportedOut(TypedDict):
    """What became of a reported delivery: ``recorded`` false when its lease no longer held
    (reported already, or run out and leased again), and nothing changed."""

    deliveryId: str
    recorded: bool
    status: Status | None
    attempts: int | None
    nextAttemptAt: str | None


class Reports(TypedDict):
    data: list[ReportedOut]


class Pulling(Counter[str]):
    """The pulls waiting in this process, by developer."""


@contextmanager
def _counted() -> Iterator[None]:
    pulling = app_state(Pulling, Pulling)
    developer = developer_id()
    if pulling[developer] >= PULLS_PER_DEVELOPER:
        raise TooManyPulls
    pulling[developer] += 1
    try:
        yield
    finally:
        pulling[developer] -= 1
        if pulling[developer] <= 0:
            del pulling[developer]


def _int_arg(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidInput([f"{name} must be an integer from {low} to {high}"])
    return int(raw)


async def _stream_endpoint(tx: storage.Transaction, app_id: str, webhook_id: str) -> None:
    await developed_app(tx, app_id)
    webhook = await apps.get_webhook(tx, app_id, webhook_id)
    if webhook.kind != "stream":
        raise InvalidInput([f"{webhook_id} is not a stream endpoint: its deliveries are pushed"])


def _delivery(pulled: queues.Pulled) -> StreamDelivery:
    d = pulled.delivery
    return {
        "id": d.id,
        "lease": d.lease,
        "leaseExpiresAt": iso_time(pulled.lease_until),
        "type": d.type,
        "eventId": d.event_id,
        "attempt": d.attempts + 1,
        "headers": [[name, value] for name, value in pulled.headers],
        "body": d.body.decode(),
    }


def _desk() -> queues.StreamDesk:
    desk = platform().stream_desk
    if desk is None:  # a process that runs no delivery engine
        raise ops.NotReady(["stream endpoints"])
    return desk


_RAISES = (InvalidInput, storage.BadValue, apps.WebhookNotFound, ops.NotReady, auth.RateLimited)


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/stream/pull")
@operation(
    json_reply(200, Pulled, "The deliveries leased (none when none came due in time)"),
    raises=_RAISES,
    params=(WEBHOOK_ID, WAIT, LIMIT),
)
async def pull_stream(app_id: str, webhook_id: str) -> Pulled:
    """Lease the stream endpoint's due deliveries, waiting up to ``wait`` seconds for one to
    come due. A delivery made while no listener pulls waits, using no attempt; a lease not
    reported within its time is due again (at least once, never lost)."""
    wait = _int_arg("wait", WAIT_DEFAULT, 0, WAIT_MAX)
    limit = _int_arg("limit", PULL_MAX, 1, PULL_MAX)
    with _counted():
        return await _pull(app_id, webhook_id, wait=wait, limit=limit)


async def _pull(app_id: str, webhook_id: str, *, wait: int, limit: int) -> Pulled:
    p = platform()
    deadline = trio.current_time() + wait
    woken = trio.Event()

    def wake() -> None:
        woken.set()

    async with p.store.listen(queues.STREAM_DELIVERIES_CHANNEL, wake):
        first = True
        while True:
            woken = trio.Event()
            async with unit_of_work() as tx:
                if first:
                    await _stream_endpoint(tx, app_id, webhook_id)
                    await apps.stream_pulled(tx, webhook_id=webhook_id, now=p.now())
                    first = False
                pulled = await _desk().pull(tx, webhook_id=webhook_id, limit=limit)
                due = None if pulled else await queues.next_stream_due(tx, webhook_id)
            if pulled:
                # What it leased is acted on outside: only once its commit is durable.
                await p.store.durable()
                return {"data": [_delivery(item) for item in pulled]}
            now = trio.current_time()
            if now >= deadline:
                return {"data": []}
            until = deadline if due is None else min(deadline, now + max(due - p.now(), 0.0))
            with trio.move_on_at(until):
                await woken.wait()


@blueprint.post("/apps/<app_id>/webhooks/<webhook_id>/stream/report")
@validate_request(ReportsIn)
@operation(
    json_reply(200, Reports, "What became of each delivery reported"),
    raises=(*JSON_BODY_ERRORS, *_RAISES),
    params=(WEBHOOK_ID,),
)
async def report_stream(app_id: str, webhook_id: str, data: ReportsIn) -> Reports:
    """Record the answers of leased deliveries as their attempts (logged, counted to the
    endpoint's health): a 2xx delivers; anything else is retried on the webhook retry schedule
    (its ``Retry-After`` heeded), for the listener to pull again then, until the last attempt
    fails it. A lease is reported once."""
    reports = [
        queues.StreamReport(
            delivery_id=r.deliveryId,
            lease=r.lease,
            response_code=r.responseCode,
            duration_ms=round(r.durationMs, 3),
            response_body=r.responseBody.encode()[:BODY_KEPT],
            response_truncated=r.responseBodyTruncated or len(r.responseBody.encode()) > BODY_KEPT,
            error=r.error,
            retry_after=r.retryAfter,
        )
        for r in data.data
    ]
    async with unit_of_work() as tx:
        await _stream_endpoint(tx, app_id, webhook_id)
        reported = await _desk().report(tx, webhook_id=webhook_id, reports=reports)
    return {
        "data": [
            {
                "deliveryId": r.delivery_id,
                "recorded": r.recorded,
                "status": r.status,
                "attempts": r.attempts,
                "nextAttemptAt": None if r.next_attempt_at is None else iso_time(r.next_attempt_at),
            }
            for r in reported
        ]
    }
