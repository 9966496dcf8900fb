"""An app's live streams: its delivery attempts and its runs as they end, as Server-Sent Events
(contract.md: Live streams for the console and the CLI). The console's webhook and function
pages add what they send to their tables; ``ledgerport tail`` prints it.

Each event is the list item the console API answers for the delivery (``webhooks.py``) or the
run (``functions.py``) as it stands when the event is read, with what says where it belongs:
``webhookId`` and the ``attempt`` that ended for a delivery, ``functionId`` and ``function``
(its name) for a run. Its ``id`` is the stream's cursor: a client that reconnects with it as
``Last-Event-ID`` gets what ended since, within the last hour. How the events are found and
sent is ``_live.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orjson import dumps
from quart import Response, request

from ledgerport import auth, queues
from ledgerport.errors import InvalidInput

from .._context import app_state, platform, unit_of_work
from .._developer_bounds import STREAMS_PER_DEVELOPER
from .._live import Broadcaster, event_data, live_event
from .._openapi import Param, Reply, operation
from ._blueprint import blueprint, developed_app, developer_id, iso_time
from ._function_shapes import Run, run_json
from ._webhook_shapes import Delivery, delivery_json

EVENT_STREAM = "text/event-stream"
LAST_EVENT_ID = Param(
    "Last-Event-ID",
    "header",
    "The id of the last event received (an EventSource sends it as it reconnects): the stream"
    " goes on after it, with what ended since within the last hour",
    {"type": "string", "pattern": r"^[0-9]{1,18}-[0-9]{1,18}$"},
)
_STREAM_ERRORS = (InvalidInput, auth.RateLimited)


class DeliveryEvent(Delivery):
    """A ``delivery`` event's data: the delivery's list item as it stands, its webhook, and the
    number of the attempt that ended (counted on across redeliveries, as in its attempt
    log)."""

    webhookId: str
    attempt: int


class RunEvent(Run):
    """A ``run`` event's data: the run's list item as it stands, and its function (id and
    name)."""

    functionId: str
    function: str


_DELIVERY_EVENT = (
    b"id: %d-%d\nevent: delivery\ndata: "
    b'{"id":%s,"eventId":%s,"type":%s,"status":%s,"attempts":%d,"responseCode":%s,'
    b'"lastError":%s,"createdAt":"%s","nextAttemptAt":%s,"test":%s,"webhookId":%s,"attempt":%d}'
    b"\n\n"
)
"""A ``delivery`` event, as :func:`live_event` writes it with :func:`delivery_event_data`'s
data: the same bytes, written at once from the row's columns (each string by orjson, as
orjson writes the whole item)."""


def delivery_event(row: Sequence[Any]) -> bytes:
    """A deliveries stream's row (its values, ``queues.ATTEMPT_COLUMNS``) as its ``delivery``
    event (``id:`` to the blank line). One a delivery attempt that ends, with every stream
    open: written straight from the row's values, with no delivery object and no item dict in
    between (three times as fast), the bytes :func:`delivery_event_data` would give (a test
    holds them to it)."""
    (
        xid,
        seq,
        _,
        attempt,
        id_,
        webhook_id,
        event_id,
        type_,
        status,
        attempts,
        code,
        error,
        at,
        next_at,
    ) = row
    due = queues.next_attempt_due(status, next_at)
    return _DELIVERY_EVENT % (
        xid,
        seq,
        dumps(id_),
        dumps(event_id),
        dumps(type_),
        dumps(status),
        attempts,
        b"null" if code is None else b"%d" % code,
        dumps(error),
        iso_time(float(at)).encode(),
        b"null" if due is None else b'"%s"' % iso_time(float(due)).encode(),
        b"true" if event_id is None else b"false",
        dumps(webhook_id),
        attempt,
    )


def delivery_event_data(item: queues.EndedAttempt) -> DeliveryEvent:
    """A ``delivery`` event's data: the delivery's list item with its webhook and attempt."""
    return {
        **delivery_json(item.delivery),
        "webhookId": item.delivery.webhook_id,
        "attempt": item.attempt,
    }


def run_event(row: Sequence[Any]) -> bytes:
    """A runs stream's row (its values, ``queues.RUN_COLUMNS``) as its ``run`` event (``id:``
    to the blank line)."""
    item = queues.EndedRun.from_row(row)
    data: RunEvent = {
        **run_json(item.run),
        "functionId": item.function_id,
        "function": item.function_name,
    }
    return live_event("runs", item.cursor, event_data(data))


def _stream_reply(what: str, data: str) -> Reply:
    return Reply(
        200,
        f"Server-Sent Events: one `{what}` event per {what} ended, its `data:` one line of JSON"
        f" ({data}), its `id:` what `Last-Event-ID` resumes from; a comment line at least every"
        " 15 s",
        EVENT_STREAM,
    )


_DELIVERY_DATA = (
    "the delivery's list item, as `GET .../webhooks/{webhookId}/deliveries` answers it, with"
    " `webhookId` and `attempt`"
)
_RUN_DATA = (
    "the run's list item, as `GET .../functions/{name}/runs` answers it, with `functionId` and"
    " `function`"
)


@blueprint.get("/apps/<app_id>/deliveries/stream")
@operation(
    _stream_reply("delivery", _DELIVERY_DATA), raises=_STREAM_ERRORS, params=(LAST_EVENT_ID,)
)
async def deliveries_stream(app_id: str) -> Response:
    """Every delivery attempt of the app's webhooks, as it ends: a ``delivery`` event whose
    data is the delivery's list item as it stands (its status, attempts, response code, error
    and next attempt), with its ``webhookId`` and the ``attempt`` that ended. Without
    ``Last-Event-ID``, from now on; with it, after that event, within the last hour. A comment
    line comes at least every 15 s. At most 10 streams are open at once for a developer (in
    each serving process): one more is a 429."""
    return await _stream(app_id, "deliveries")


@blueprint.get("/apps/<app_id>/runs/stream")
@operation(_stream_reply("run", _RUN_DATA), raises=_STREAM_ERRORS, params=(LAST_EVENT_ID,))
async def runs_stream(app_id: str) -> Response:
    """Every run of the app's functions, as it ends (each attempt of it: ``retrying`` when
    another is due): a ``run`` event whose data is the run's list item as it stands, with its
    ``functionId`` and ``function`` (name). Without ``Last-Event-ID``, from now on; with it,
    after that event, within the last hour. A comment line comes at least every 15 s. At most
    10 streams are open at once for a developer (in each serving process): one more is a
    429."""
    return await _stream(app_id, "runs")


async def _stream(app_id: str, kind: queues.StreamKind) -> Response:
    p = platform()
    resume = request.headers.get("Last-Event-ID", "").strip()
    cursor = queues.Cursor.parse(resume) if resume else None
    if resume and cursor is None:
        raise InvalidInput(["Last-Event-ID must be the id of an event of this stream"])
    broadcaster = app_state(
        Broadcaster,
        # A bound like the rate limits: LEDGERPORT_RATE_LIMIT_FACTOR (development) scales it.
        lambda: Broadcaster(
            p.store, p.now, per_developer=STREAMS_PER_DEVELOPER * p.config.rate_limit_factor
        ),
    )
    async with unit_of_work(reads=True) as tx:
        await developed_app(tx, app_id)
        if cursor is None:
            start = await queues.stream_start(tx, kind, app_id, postgresql=tx.kind == "postgresql")
        else:
            start = queues.StreamStart(cursor)
    slot = broadcaster.admit(developer_id())
    try:
        body = broadcaster.events(
            kind,
            app_id,
            start,
            slot=slot,
            render=delivery_event if kind == "deliveries" else run_event,
        )
        response = Response(
            body,
            status=200,
            mimetype=EVENT_STREAM,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
    except BaseException:
        slot.release()
        raise
    response.timeout = None  # it lasts as long as the client stays
    slot.guard(body)
    return response
