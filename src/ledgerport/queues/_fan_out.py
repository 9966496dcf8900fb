"""Fan-out: committed events become deliveries and runs, exactly once (spec: Webhook
registration and audiences).

Fan-out reads the events the log marked for dispatch (``event_dispatch``) and, in one
transaction, creates one delivery per enabled webhook subscribed to the event's type of every
app entitled to it, queues one run per hosted function subscribed to it (``_runs.py``) and
deletes the marks: a crash before the commit leaves all as they were, so every event is fanned
out exactly once. Entitlement is the audience rule of the Events API
(:func:`ledgerport.books.feed_view`): business and privacy events reach an app whose registered
scopes and whose ACTIVE installation in the business both hold the event's gating scope; app
events reach the app they were recorded for, whatever its installations.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ledgerport import catalog
from ledgerport.apps import Webhook
from ledgerport.books import Event, feed_view
from ledgerport.ids import new_id
from ledgerport.keys import Keyring
from ledgerport.storage import Row, Transaction, placeholders

from ._bodies import delivery_body
from ._deliveries import FAN_OUT_LOCK, INSERT_DELIVERY, ClaimedDelivery
from ._runs import FUNCTION_RUNS_CHANNEL, INSERT_RUN
from ._send_checks import SendPlan, plan_for
from ._stream_deliveries import INSERT_STREAM_DELIVERY, STREAM_DELIVERIES_CHANNEL


@dataclass(frozen=True)
class Pending:
    """The oldest events not fanned out yet, with what their fan-out reads about their
    audiences: the ACTIVE installations in their businesses and the webhooks of every app they
    may reach, each webhook with its app's state. One statement reads it all, so fan-out costs
    one round trip (SQLite: one hop to the worker thread) before its first attempts can go."""

    positions: list[int]
    """The events' dispatch marks."""
    events: list[Event]
    """In the order recorded."""
    installations: list[Row]
    """``business_id``, ``app_id``, ``granted`` and ``registered`` (scope lists in JSON)."""
    webhooks: list[Row]
    """Enabled webhooks with ``app_status``, ``app_scopes``, ``pinned_version`` and
    ``developer`` (the app's developer, or the app's own id when it has none: the engine's
    shares are its developer's)."""
    functions: list[Row] = field(default_factory=list)
    """Hosted functions not deleted: ``id``, ``app_id``, ``events`` and ``pinned_version``."""
    open_records: set[tuple[str, str]] = field(default_factory=set)
    """(webhook id, record) of the endpoints ordered by record that have a delivery about that
    record still open (queued or retrying), among the records of these events: a new one
    waits its turn behind it."""


_EVENT_COLUMNS = (
    "position",
    "seq",
    "id",
    "business_id",
    "app_id",
    "type",
    "api_version",
    "data",
    "created_at",
)
_INSTALLATION_COLUMNS = ("business_id", "app_id", "granted", "registered")
_FUNCTION_COLUMNS = ("id", "app_id", "events", "created_at", "pinned_version")
_WEBHOOK_COLUMNS = (
    "id",
    "app_id",
    "url",
    "events",
    "enabled",
    "secret",
    "previous_secret",
    "previous_secret_expires_at",
    "created_at",
    "updated_at",
    "deleted_at",
    "signature",
    "rate_limit",
    "ordering",
    "headers",
    "public_key",
    "disabled_reason",
    "disabled_at",
    "health",
    "consecutive_failures",
    "last_delivery_at",
    "last_error",
    "switched_on_at",
    "failing_since",
    "recent_failures",
    "kind",
    "app_status",
    "app_scopes",
    "pinned_version",
    "developer",
)


def _json_rows(tx: Transaction, relation: str, columns: Sequence[str]) -> str:
    """The rows of ``relation`` as one JSON array of objects (``[]`` when there are none)."""
    pairs = ", ".join(f"'{column}', {column}" for column in columns)
    return (
        f"(SELECT COALESCE({tx.json_array_agg}({tx.json_object}({pairs})), '[]') FROM {relation})"
    )


async def pending_events(tx: Transaction, limit: int) -> Pending:
    """The oldest marks of events not fanned out yet (at most ``limit``; on PostgreSQL those no
    other transaction holds), their events and their audiences (see :class:`Pending`).

    On PostgreSQL, fan-outs take turns (a lock held until the transaction ends): ordering by
    record needs each fan-out to see the deliveries the one before it created, so that a later
    event about a record never goes ahead of an earlier one fanned out by another process."""
    if tx.kind == "postgresql":
        await tx.execute("SELECT pg_advisory_xact_lock($1)", FAN_OUT_LOCK)
    row = await tx.fetchrow(
        "WITH marks AS (SELECT position, event_id FROM event_dispatch ORDER BY position"
        f" LIMIT $1{tx.skip_locked}),"
        " pending AS (SELECT e.*, m.position FROM marks m JOIN events e ON e.id = m.event_id),"
        " reached AS (SELECT i.business_id, i.app_id, i.scopes AS granted,"
        " a.scopes AS registered FROM installations i JOIN apps a ON a.id = i.app_id"
        " WHERE i.state = 'ACTIVE' AND i.business_id IN (SELECT business_id FROM pending)),"
        " reachable AS (SELECT app_id FROM reached"
        " UNION SELECT app_id FROM pending WHERE app_id IS NOT NULL),"
        " hooks AS (SELECT w.*, a.status AS app_status, a.scopes AS app_scopes,"
        " a.pinned_version, COALESCE(a.developer_user_id, a.id) AS developer"
        " FROM webhooks w JOIN apps a ON a.id = w.app_id"
        " WHERE w.deleted_at IS NULL AND w.enabled AND w.kind IN ('endpoint', 'stream')"
        " AND w.app_id IN (SELECT app_id FROM reachable)),"
        " fns AS (SELECT f.id, f.app_id, f.events, f.created_at, a.pinned_version"
        " FROM functions f JOIN apps a ON a.id = f.app_id"
        " WHERE f.deleted_at IS NULL AND f.app_id IN (SELECT app_id FROM reachable))"
        f" SELECT {_json_rows(tx, 'pending', _EVENT_COLUMNS)} AS events,"
        f" {_json_rows(tx, 'reached', _INSTALLATION_COLUMNS)} AS installations,"
        f" {_json_rows(tx, 'hooks', _WEBHOOK_COLUMNS)} AS webhooks,"
        f" {_json_rows(tx, 'fns', _FUNCTION_COLUMNS)} AS functions",
        limit,
    )
    assert row is not None
    events = sorted(json.loads(row["events"]), key=lambda event: int(event["seq"]))
    pending = Pending(
        positions=[int(event["position"]) for event in events],
        events=[Event.from_row(event) for event in events],
        installations=json.loads(row["installations"]),
        webhooks=sorted(
            json.loads(row["webhooks"]), key=lambda hook: (hook["created_at"], hook["id"])
        ),
        functions=sorted(json.loads(row["functions"]), key=lambda fn: (fn["created_at"], fn["id"])),
    )
    ordered = [hook for hook in pending.webhooks if hook["ordering"] == "record"]
    if ordered:
        records = {key for key in map(record_of, pending.events) if key is not None}
        pending.open_records.update(
            await open_records(tx, [hook["id"] for hook in ordered], sorted(records))
        )
    return pending


def record_of(event: Event) -> str | None:
    """The record an event is about, for ordering by record: its ``data.id`` (None when it
    has none: such an event is not ordered)."""
    key = event.data.get("id") if isinstance(event.data, Mapping) else None
    return key if isinstance(key, str) and key else None


async def open_records(
    tx: Transaction, webhook_ids: Sequence[str], records: Sequence[str]
) -> set[tuple[str, str]]:
    """Which of ``records`` each of ``webhook_ids`` has an open delivery about (queued or
    retrying, due or waiting its turn)."""
    if not webhook_ids or not records:
        return set()
    rows = await tx.fetch(
        "SELECT DISTINCT webhook_id, order_key FROM webhook_deliveries"
        f" WHERE webhook_id IN ({placeholders(len(webhook_ids))})"
        f" AND order_key IN ({placeholders(len(records), start=len(webhook_ids) + 1)})"
        " AND status IN ('queued', 'retrying')",
        *webhook_ids,
        *records,
    )
    return {(row["webhook_id"], row["order_key"]) for row in rows}


def delivery_id_for(event_id: str, webhook_id: str) -> str:
    """The id of an event's delivery to a webhook. Derived from both, so an attempt made before
    the fan-out that created the delivery committed carries the id the delivery will have when
    a later fan-out creates it (that commit failed, or the process died)."""
    digest = hashlib.sha256(f"{event_id}/{webhook_id}".encode()).hexdigest()
    return f"dlv_{digest[:24]}"


@dataclass(frozen=True)
class FanOut:
    """The deliveries of a batch of events, worked out and not written yet
    (:func:`plan_fan_out`, then :func:`write_fan_out`)."""

    positions: list[int]
    rows: list[tuple[object, ...]]
    claimed: list[ClaimedDelivery]
    """Created claimed by the caller, to attempt at once."""
    plans: dict[str, SendPlan]
    """The send-time check of the claimed deliveries, per webhook, from the same reading."""
    runs: list[tuple[object, ...]] = field(default_factory=list)
    """Hosted-function runs to queue."""
    streamed: list[tuple[object, ...]] = field(default_factory=list)
    """Deliveries of stream endpoints, for their listeners to pull (``_stream_deliveries``)."""

    @property
    def queued(self) -> int:
        """Deliveries left in the queue (no room for them at once)."""
        return len(self.rows) - len(self.claimed)


def _audience(event: Event) -> str:
    kind = catalog.event_type(event.type)
    return kind.audience if kind is not None else "business"


def plan_fan_out(
    pending: Pending,
    *,
    keyring: Keyring,
    now: float,
    lease: str,
    lease_until: float,
    take: Callable[[str, str, str], bool],
    max_rows: int | None = None,
) -> FanOut:
    """One delivery per enabled webhook subscribed to each event's type, for every app the
    event reaches (spec: Webhook registration and audiences): business and privacy events
    reach an app whose registered scopes and whose ACTIVE installation in the business both
    hold the gating scope (its view of the log, :func:`ledgerport.books.feed_view`); app events
    reach the app they were recorded for, whatever its installations.

    ``take(app_id, business, webhook_id)`` says whether the caller can attempt a new delivery of
    that webhook (of that app, for the event's business: '' for none) at once: those are
    created claimed by ``lease`` (until ``lease_until``), with their send-time check; the rest
    wait in the queue, due now.

    With ``max_rows``, the events are taken in order until their deliveries and runs reach it
    (at least one event): the rest stay marked for the next fan-out, so a transaction's size
    is bounded whatever the number of webhooks an event reaches.
    """
    gated_for: dict[str, list[tuple[str, frozenset[str]]]] = {}
    for row in pending.installations:
        view = feed_view(
            business_id=row["business_id"],
            app_id=row["app_id"],
            app_scopes=json.loads(row["registered"]),
            installation_scopes=json.loads(row["granted"]),
        )
        gated_for.setdefault(row["business_id"], []).append((row["app_id"], view.gated))
    webhooks: dict[str, list[Webhook]] = {}
    hook_rows: dict[str, Row] = {}
    for row in pending.webhooks:
        webhooks.setdefault(row["app_id"], []).append(Webhook.from_row(row))
        hook_rows[row["id"]] = row
    functions: dict[str, list[tuple[Row, frozenset[str]]]] = {}
    for row in pending.functions:
        functions.setdefault(row["app_id"], []).append((row, frozenset(json.loads(row["events"]))))
    runs: list[tuple[object, ...]] = []
    rows: list[tuple[object, ...]] = []
    streamed: list[tuple[object, ...]] = []
    claimed: list[ClaimedDelivery] = []
    open_records = set(pending.open_records)
    taken = len(pending.events)
    for index, event in enumerate(pending.events):
        if max_rows is not None and len(rows) + len(runs) + len(streamed) >= max_rows:
            taken = index
            break
        if _audience(event) == "app":
            recipients = [event.app_id] if event.app_id else []
        else:
            recipients = [
                app_id
                for app_id, gated in gated_for.get(event.business_id or "", [])
                if event.type in gated
            ]
        for app_id in recipients:
            for function, subscribed in functions.get(app_id, []):
                if event.type in subscribed:
                    runs.append(_run_row(event, function, now))
            for webhook in webhooks.get(app_id, []):
                if event.type not in webhook.events:
                    continue
                delivery_id = delivery_id_for(event.id, webhook.id)
                pin = hook_rows[webhook.id]["pinned_version"]
                body = delivery_body(
                    delivery_id,
                    event_id=event.id,
                    type=event.type,
                    api_version=pin or catalog.CURRENT_API_VERSION,
                    business_id=event.business_id or "",
                    created=event.created,
                    data=event.data,
                )
                held = False
                if webhook.kind == "stream":
                    # Pulled by its listener: no engine claims it (no next_attempt_at).
                    into, next_at, order_key = streamed, None, None
                else:
                    order_key = record_of(event) if webhook.ordering == "record" else None
                    waits = False
                    if order_key is not None:
                        # Behind an open delivery about the same record: it waits its turn.
                        waits = (webhook.id, order_key) in open_records
                        open_records.add((webhook.id, order_key))
                    held = not waits and take(app_id, event.business_id or "", webhook.id)
                    into, next_at = rows, None if waits else lease_until if held else now
                into.append(
                    (
                        delivery_id,
                        webhook.id,
                        app_id,
                        event.id,
                        event.business_id,
                        event.type,
                        body,
                        now,
                        next_at,
                        lease if held else None,
                        order_key,
                        event.seq,
                    )
                )
                if held:
                    claimed.append(
                        ClaimedDelivery(
                            delivery_id,
                            webhook.id,
                            app_id,
                            event.id,
                            event.business_id,
                            event.type,
                            body.encode(),
                            0,
                            lease,
                            now,
                            order_key,
                        )
                    )
    by_webhook: dict[str, list[ClaimedDelivery]] = {}
    for delivery in claimed:
        by_webhook.setdefault(delivery.webhook_id, []).append(delivery)
    # The audience was worked out from the same reading: what remains of the send-time check
    # is the webhook's app.
    plans = {
        webhook_id: plan_for(hook_rows[webhook_id], batch, (), {}, keyring, now)
        for webhook_id, batch in by_webhook.items()
    }
    return FanOut(list(pending.positions[:taken]), rows, claimed, plans, runs, streamed)


def _run_row(event: Event, function: Row, now: float) -> tuple[object, ...]:
    """A queued run of ``function`` for ``event``: the handler gets the delivery body's shape
    (spec: Webhook delivery body), its ``id`` the run's."""
    run_id = new_id("run")
    body = delivery_body(
        run_id,
        event_id=event.id,
        type=event.type,
        api_version=function["pinned_version"] or catalog.CURRENT_API_VERSION,
        business_id=event.business_id or "",
        created=event.created,
        data=event.data,
    )
    return (
        run_id,
        function["id"],
        function["app_id"],
        event.id,
        event.business_id,
        event.type,
        body,
        now,
        None,
    )


async def write_fan_out(tx: Transaction, fan_out: FanOut) -> None:
    """Create the deliveries of ``fan_out`` and delete its events' dispatch marks, in the
    transaction that read them (:func:`pending_events`): a crash before the commit leaves both
    as they were, so every event is fanned out exactly once."""
    if fan_out.rows:
        await tx.executemany(INSERT_DELIVERY, fan_out.rows)
    if fan_out.streamed:
        await tx.executemany(INSERT_STREAM_DELIVERY, fan_out.streamed)
        await tx.notify(STREAM_DELIVERIES_CHANNEL)
    if fan_out.runs:
        await tx.executemany(INSERT_RUN, fan_out.runs)
        await tx.notify(FUNCTION_RUNS_CHANNEL)
    if fan_out.positions:
        await tx.execute(
            "DELETE FROM event_dispatch"
            f" WHERE position IN ({placeholders(len(fan_out.positions))})",
            *fan_out.positions,
        )


async def dispatch_backlog(tx: Transaction) -> int:
    """How many committed events wait for fan-out."""
    return int(await tx.fetchval("SELECT COUNT(*) FROM event_dispatch"))


async def event_log_length(tx: Transaction) -> int:
    """The sequence number of the newest committed event (0 for none): its rate is the log's
    append rate, every process's writes together. One step of the primary key's index."""
    return int(await tx.fetchval("SELECT COALESCE(MAX(seq), 0) FROM events"))
