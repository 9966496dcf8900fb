"""Webhook deliveries: fan-out of committed events, claims, attempt outcomes, redelivery, test
deliveries and the history (spec: States and transitions: Webhook delivery, Delivery,
Redelivery, Test delivery).

Fan-out reads the events the log marked for dispatch (``event_dispatch``) and, in one
transaction, creates one delivery per enabled webhook subscribed to the event's type of every
app entitled to it, queues one run per hosted function subscribed to it (``_functions.py``) and
deletes the marks: a crash before the commit leaves all as they were, so every event is fanned
out exactly once. Entitlement is the audience rule of the Events API
(:func:`ledgerport.books.feed_view`): business and privacy events reach an app whose registered
scopes and whose ACTIVE installation in the business both hold the event's gating scope; app
events reach the app they were recorded for, whatever its installations.

A delivery waits in the hot queue (status queued or retrying, indexed by ``next_attempt_at``)
until an engine claims it: the claim names itself in ``lease`` and moves ``next_attempt_at`` to
the lease's end, so a claim whose process dies is due again then and another process takes it
over. Only the claim that holds the lease records the attempt's outcome.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ledgerport import catalog
from ledgerport.books import Event, feed_view
from ledgerport.ids import new_id
from ledgerport.keys import Keyring
from ledgerport.storage import Reader, Row, Transaction, first_per_key, placeholders

from ._errors import RedeliveryRefused
from ._webhooks import Webhook, signing_secrets

DeliveryStatus = Literal["queued", "retrying", "delivered", "failed"]
DELIVERY_STATUSES: tuple[DeliveryStatus, ...] = ("queued", "retrying", "delivered", "failed")
DELIVERIES_CHANNEL = "deliveries"
"""Notified by every commit that queues deliveries for an attempt (a test, a redelivery)."""
FUNCTION_RUNS_CHANNEL = "function_runs"
"""Notified by every commit that queues hosted-function runs."""
TEST_BUSINESS_ID = "test"
"""The businessId of a test delivery (spec: Test delivery)."""


@dataclass(frozen=True)
class Delivery:
    """A delivery as the console shows it."""

    id: str
    webhook_id: str
    event_id: str | None
    type: str
    status: DeliveryStatus
    attempts: int
    response_code: int | None
    last_error: str | None
    created_at: float
    next_attempt_at: float | None

    @classmethod
    def from_row(cls, row: Row) -> Delivery:
        return cls(
            id=row["id"],
            webhook_id=row["webhook_id"],
            event_id=row["event_id"],
            type=row["type"],
            status=row["status"],
            attempts=int(row["attempts"]),
            response_code=row["response_code"],
            last_error=row["last_error"],
            created_at=float(row["created_at"]),
            next_attempt_at=row["next_attempt_at"],
        )


@dataclass(frozen=True)
class ClaimedDelivery:
    """A delivery an engine holds the lease of: what its next attempt sends."""

    id: str
    webhook_id: str
    app_id: str
    event_id: str | None
    business_id: str | None
    type: str
    body: bytes
    attempts: int
    """Attempts made before this one."""
    lease: str
    created_at: float

    @classmethod
    def from_row(cls, row: Row, lease: str) -> ClaimedDelivery:
        return cls(
            id=row["id"],
            webhook_id=row["webhook_id"],
            app_id=row["app_id"],
            event_id=row["event_id"],
            business_id=row["business_id"],
            type=row["type"],
            body=row["body"].encode(),
            attempts=int(row["attempts"]),
            lease=lease,
            created_at=float(row["created_at"]),
        )


def _body(
    delivery_id: str,
    *,
    event_id: str | None,
    type: str,
    api_version: str,
    business_id: str,
    created: float,
    data: Mapping[str, object],
) -> str:
    """The delivery body (spec: Webhook delivery body), fixed for every attempt."""
    return json.dumps(
        {
            "id": delivery_id,
            "eventId": event_id,
            "type": type,
            "apiVersion": api_version,
            "businessId": business_id,
            "created": int(created),
            "data": data,
        },
        separators=(",", ":"),
    )


_INSERT = (
    "INSERT INTO webhook_deliveries (id, webhook_id, app_id, event_id, business_id, type, body,"
    " status, attempts, created_at, updated_at, next_attempt_at, lease)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 0, $8, $8, $9, $10)"
)


# --- Fan-out -------------------------------------------------------------------------------------


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
    """Enabled webhooks with ``app_status``, ``app_scopes`` and ``pinned_version``."""
    functions: list[Row] = field(default_factory=list)
    """Hosted functions not deleted: ``id``, ``app_id``, ``events`` and ``pinned_version``."""


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
    "app_status",
    "app_scopes",
    "pinned_version",
)


def _json_rows(tx: Transaction, relation: str, columns: Sequence[str]) -> str:
    """The rows of ``relation`` as one JSON array of objects (``[]`` when there are none)."""
    pairs = ", ".join(f"'{column}', {column}" for column in columns)
    return (
        f"(SELECT COALESCE({tx.json_array_agg}({tx.json_object}({pairs})), '[]') FROM {relation})"
    )


async def pending_events(tx: Transaction, limit: int) -> Pending:
    """The oldest marks of events not fanned out yet (at most ``limit``; on PostgreSQL those no
    other transaction holds), their events and their audiences (see :class:`Pending`)."""
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
        " a.pinned_version FROM webhooks w JOIN apps a ON a.id = w.app_id"
        " WHERE w.deleted_at IS NULL AND w.enabled AND w.app_id IN (SELECT app_id FROM reachable)),"
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
    return Pending(
        positions=[int(event["position"]) for event in events],
        events=[Event.from_row(event) for event in events],
        installations=json.loads(row["installations"]),
        webhooks=sorted(
            json.loads(row["webhooks"]), key=lambda hook: (hook["created_at"], hook["id"])
        ),
        functions=sorted(json.loads(row["functions"]), key=lambda fn: (fn["created_at"], fn["id"])),
    )


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
    take: Callable[[str, str], bool],
    max_rows: int | None = None,
) -> FanOut:
    """One delivery per enabled webhook subscribed to each event's type, for every app the
    event reaches (spec: Webhook registration and audiences): business and privacy events
    reach an app whose registered scopes and whose ACTIVE installation in the business both
    hold the gating scope (its view of the log, :func:`ledgerport.books.feed_view`); app events
    reach the app they were recorded for, whatever its installations.

    ``take(app_id, webhook_id)`` says whether the caller can attempt a new delivery of that
    webhook (of that app) at once: those are created claimed by ``lease`` (until
    ``lease_until``), with their send-time check; the rest wait in the queue, due now.

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
    claimed: list[ClaimedDelivery] = []
    taken = len(pending.events)
    for index, event in enumerate(pending.events):
        if max_rows is not None and len(rows) + len(runs) >= max_rows:
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
                body = _body(
                    delivery_id,
                    event_id=event.id,
                    type=event.type,
                    api_version=pin or catalog.CURRENT_API_VERSION,
                    business_id=event.business_id or "",
                    created=event.created,
                    data=event.data,
                )
                held = take(app_id, webhook.id)
                rows.append(
                    (
                        delivery_id,
                        webhook.id,
                        app_id,
                        event.id,
                        event.business_id,
                        event.type,
                        body,
                        now,
                        lease_until if held else now,
                        lease if held else None,
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
                        )
                    )
    by_webhook: dict[str, list[ClaimedDelivery]] = {}
    for delivery in claimed:
        by_webhook.setdefault(delivery.webhook_id, []).append(delivery)
    # The audience was worked out from the same reading: what remains of the send-time check
    # is the webhook's app.
    plans = {
        webhook_id: _plan(hook_rows[webhook_id], batch, (), {}, keyring, now)
        for webhook_id, batch in by_webhook.items()
    }
    return FanOut(list(pending.positions[:taken]), rows, claimed, plans, runs)


def _run_row(event: Event, function: Row, now: float) -> tuple[object, ...]:
    """A queued run of ``function`` for ``event``: the handler gets the delivery body's shape
    (spec: Webhook delivery body), its ``id`` the run's."""
    run_id = new_id("run")
    body = _body(
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
    )


_INSERT_RUN = (
    "INSERT INTO function_runs (id, function_id, app_id, event_id, business_id, type,"
    " body, status, attempts, created_at, updated_at, next_attempt_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 0, $8, $8, $8)"
)
"""A queued run: (id, function, app, event, business, type, body, now)."""


async def write_fan_out(tx: Transaction, fan_out: FanOut) -> None:
    """Create the deliveries of ``fan_out`` and delete its events' dispatch marks, in the
    transaction that read them (:func:`pending_events`): a crash before the commit leaves both
    as they were, so every event is fanned out exactly once."""
    if fan_out.rows:
        await tx.executemany(_INSERT, fan_out.rows)
    if fan_out.runs:
        await tx.executemany(_INSERT_RUN, fan_out.runs)
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


# --- Claims and attempts -------------------------------------------------------------------------


def tenant_due_times_sql(table: str, key: str) -> str:
    """Each tenant (value of ``key``) with work in ``table``'s hot queue, ``k``, and when its
    earliest work is due, ``due``: a loose scan of the index on ``(key, next_attempt_at)`` of
    that queue, one index step per tenant whatever its backlog."""
    hot = "status IN ('queued', 'retrying')"
    return (
        f"WITH RECURSIVE tenants(k) AS (SELECT MIN({key}) FROM {table} WHERE {hot}"
        f" UNION ALL SELECT (SELECT MIN({key}) FROM {table} WHERE {hot} AND {key} > tenants.k)"
        " FROM tenants WHERE tenants.k IS NOT NULL)"
        f" SELECT k, (SELECT MIN(next_attempt_at) FROM {table} WHERE {hot} AND {key} = tenants.k)"
        " AS due FROM tenants WHERE k IS NOT NULL"
    )


async def delivery_due_times(tx: Transaction) -> list[tuple[str, float]]:
    """Each app with deliveries waiting for an attempt, and when its earliest is due (a
    claimed delivery is due when its claim runs out)."""
    rows = await tx.fetch(tenant_due_times_sql("webhook_deliveries", "app_id"))
    return [(row["k"], float(row["due"])) for row in rows if row["due"] is not None]


async def claim_due(
    tx: Transaction,
    *,
    now: float,
    lease: str,
    lease_until: float,
    quotas: Sequence[tuple[str, int]],
    take: Callable[[str, str], bool],
    full: Sequence[str] = (),
) -> list[ClaimedDelivery]:
    """Claim due deliveries, for each ``(app_id, n)`` of ``quotas`` the app's ``n`` oldest due
    at most (a tenant's backlog is read through its own index range: it never hides another's
    work); ``take(app_id, webhook_id)`` says whether the caller can attempt one more of that
    webhook now, and the webhooks in ``full`` are passed over (a webhook with a backlog holds up
    no other)."""
    if not quotas:
        return []
    passed_over = f" AND webhook_id NOT IN ({placeholders(len(full), start=2)})" if full else ""
    sql, extra = first_per_key(
        tx,
        select=(
            "SELECT id, webhook_id, app_id, event_id, business_id, type, body, attempts,"
            " created_at FROM webhook_deliveries WHERE status IN ('queued', 'retrying')"
            f" AND next_attempt_at <= $1{passed_over}"
        ),
        key="app_id",
        order="next_attempt_at",
        quotas=quotas,
        start=2 + len(full),
    )
    rows = await tx.fetch(sql, now, *full, *extra)
    chosen = [row for row in rows if take(row["app_id"], row["webhook_id"])]
    if chosen:
        await tx.executemany(
            "UPDATE webhook_deliveries SET lease = $1, next_attempt_at = $2 WHERE id = $3",
            [(lease, lease_until, row["id"]) for row in chosen],
        )
    return [ClaimedDelivery.from_row(row, lease) for row in chosen]


async def next_due_at(tx: Transaction) -> float | None:
    """When the earliest waiting delivery is due (None when none waits)."""
    value = await tx.fetchval(
        "SELECT MIN(next_attempt_at) FROM webhook_deliveries WHERE status IN ('queued', 'retrying')"
    )
    return None if value is None else float(value)


async def queue_depth(tx: Transaction) -> tuple[int, int]:
    """Deliveries waiting for their first attempt, and those waiting for a retry."""
    rows = await tx.fetch(
        "SELECT status, COUNT(*) AS n FROM webhook_deliveries"
        " WHERE status IN ('queued', 'retrying') GROUP BY status"
    )
    counts = {row["status"]: int(row["n"]) for row in rows}
    return counts.get("queued", 0), counts.get("retrying", 0)


@dataclass(frozen=True)
class SendPlan:
    """What attempts of one webhook's deliveries need, read just before they are sent: the URL
    and the signing secrets, or why each delivery must fail without being sent."""

    url: str
    secrets: tuple[str, ...]
    refusals: Mapping[str, str]
    """Delivery id → why it fails unsent (spec: the send-time check)."""
    secrets_change_at: float | None = None
    """When the previous secret stops signing (the plan's secrets are wrong from then on)."""


async def send_plan(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    webhook_id: str,
    deliveries: Sequence[ClaimedDelivery],
) -> SendPlan:
    """The send-time check of ``deliveries``, all of ``webhook_id`` (see :func:`send_plans`)."""
    plans = await send_plans(tx, keyring, now=now, deliveries={webhook_id: deliveries})
    return plans[webhook_id]


async def send_plans(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    deliveries: Mapping[str, Sequence[ClaimedDelivery]],
) -> dict[str, SendPlan]:
    """The send-time check of each webhook's ``deliveries``, in two queries whatever their
    number: the webhook deleted or switched off, the app suspended or deactivated, and for
    business and privacy events the app no longer installed in the business or the event's
    gating scope no longer held."""
    webhook_ids = sorted(deliveries)
    if not webhook_ids:
        return {}
    rows = await tx.fetch(
        "SELECT w.*, a.status AS app_status, a.scopes AS app_scopes FROM webhooks w"
        f" JOIN apps a ON a.id = w.app_id WHERE w.id IN ({placeholders(len(webhook_ids))})",
        *webhook_ids,
    )
    by_id = {row["id"]: row for row in rows}
    gated = {
        webhook_id: [d for d in batch if d.event_id is not None and _gating_scope(d.type)]
        for webhook_id, batch in deliveries.items()
    }
    granted = await _installation_scopes(
        tx,
        sorted({by_id[w]["app_id"] for w, batch in gated.items() if batch and w in by_id}),
        sorted({d.business_id for batch in gated.values() for d in batch if d.business_id}),
    )
    return {
        webhook_id: _plan(
            by_id.get(webhook_id), deliveries[webhook_id], gated[webhook_id], granted, keyring, now
        )
        for webhook_id in webhook_ids
    }


def _plan(
    row: Row | None,
    deliveries: Sequence[ClaimedDelivery],
    gated: Sequence[ClaimedDelivery],
    granted: Mapping[tuple[str, str], frozenset[str]],
    keyring: Keyring,
    now: float,
) -> SendPlan:
    if row is None:
        return SendPlan("", (), {d.id: "webhook deleted" for d in deliveries})
    common: str | None = None
    if row["deleted_at"] is not None:
        common = "webhook deleted"
    elif not row["enabled"]:
        common = "webhook disabled"
    elif row["app_status"] != "ACTIVE":
        common = f"app {row['app_status'].lower()}"
    if common is not None:
        return SendPlan(row["url"], (), {d.id: common for d in deliveries})
    app_scopes = frozenset(json.loads(row["app_scopes"]))
    refusals: dict[str, str] = {}
    for delivery in gated:
        scope = _gating_scope(delivery.type)
        held = granted.get((row["app_id"], delivery.business_id or ""))
        if held is None:
            refusals[delivery.id] = "app not installed in the business"
        elif scope not in held or scope not in app_scopes:
            refusals[delivery.id] = f"scope {scope} no longer held"
    overlap_ends = row["previous_secret_expires_at"]
    return SendPlan(
        row["url"],
        signing_secrets(row, keyring, now=now),
        refusals,
        overlap_ends if overlap_ends is not None and overlap_ends > now else None,
    )


def _gating_scope(event_type: str) -> str | None:
    kind = catalog.event_type(event_type)
    return None if kind is None or kind.audience == "app" else kind.scope


async def _installation_scopes(
    tx: Transaction, app_ids: Sequence[str], business_ids: Sequence[str]
) -> dict[tuple[str, str], frozenset[str]]:
    """The scopes each (app, business) ACTIVE installation grants (absent: none)."""
    if not app_ids or not business_ids:
        return {}
    rows = await tx.fetch(
        "SELECT app_id, business_id, scopes FROM installations WHERE state = 'ACTIVE'"
        f" AND app_id IN ({placeholders(len(app_ids))})"
        f" AND business_id IN ({placeholders(len(business_ids), start=len(app_ids) + 1)})",
        *app_ids,
        *business_ids,
    )
    return {
        (row["app_id"], row["business_id"]): frozenset(json.loads(row["scopes"])) for row in rows
    }


@dataclass(frozen=True)
class AttemptOutcome:
    """What became of one claimed delivery: delivered, retrying (``next_attempt_at`` set) or
    failed; ``attempts`` counts the attempts made so far (a refusal makes none)."""

    delivery_id: str
    lease: str
    status: DeliveryStatus
    attempts: int
    response_code: int | None
    error: str | None
    finished_at: float
    next_attempt_at: float | None
    first_attempt_at: float | None


async def record_outcomes(tx: Transaction, outcomes: Sequence[AttemptOutcome]) -> None:
    """Record attempt outcomes; an outcome whose claim no longer holds the lease (it expired
    and another process took the delivery over) changes nothing.

    Rows are written in the order of their ids, the order :func:`renew_claims` locks them in:
    two transactions of an engine over the same claims wait for each other, never deadlock."""
    outcomes = sorted(outcomes, key=lambda o: o.delivery_id)
    await tx.executemany(
        "UPDATE webhook_deliveries SET status = $1, attempts = $2, response_code = $3,"
        " last_error = $4, updated_at = $5, next_attempt_at = $6,"
        " first_attempt_at = COALESCE(first_attempt_at, $7), lease = NULL"
        " WHERE id = $8 AND lease = $9",
        [
            (
                o.status,
                o.attempts,
                o.response_code,
                o.error,
                o.finished_at,
                o.next_attempt_at,
                o.first_attempt_at,
                o.delivery_id,
                o.lease,
            )
            for o in outcomes
        ],
    )


async def renew_claims(tx: Transaction, *, lease: str, until: float, limit: int) -> int:
    """Extend to ``until`` at most ``limit`` claims of ``lease`` still waiting for their
    outcome and ending before it; answers how many (the caller calls again, in a transaction
    of its own, while that is ``limit``: no transaction holds the store for all of them)."""
    return await tx.execute(
        "UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE id IN"
        " (SELECT id FROM webhook_deliveries WHERE lease = $2"
        " AND status IN ('queued', 'retrying') AND next_attempt_at < $1"
        f" ORDER BY id LIMIT $3{tx.row_lock})",
        until,
        lease,
        limit,
    )


async def release_claims(tx: Transaction, *, lease: str, now: float) -> int:
    """Give back every claim of ``lease`` (its engine is stopping): due again at ``now``."""
    return await tx.execute(
        "UPDATE webhook_deliveries SET lease = NULL, next_attempt_at = $1"
        " WHERE lease = $2 AND status IN ('queued', 'retrying')",
        now,
        lease,
    )


# --- Failing webhooks ----------------------------------------------------------------------------

FAILING_WINDOW = 900.0
"""Seconds of attempt outcomes :func:`failing_webhooks` looks back on."""
FAILING_AT_LEAST = 5
"""Deliveries a webhook needs to have ended in the window before it can count as failing."""


@dataclass(frozen=True)
class FailingWebhook:
    """A webhook whose recent deliveries mostly fail, with its app and its latest failure."""

    webhook_id: str
    url: str
    enabled: bool
    app_id: str
    app_name: str
    app_status: str
    developer_email: str
    ended: int
    """Its deliveries whose latest attempt ended in the window."""
    failed: int
    """Of those, the ones that failed for good."""
    retrying: int
    """Of those, the ones whose attempt failed and that wait for a retry."""
    last_ended_at: float
    last_error: str | None
    """The latest failed attempt's error (``HTTP 500``, a timeout, a refused connection)."""
    last_response_code: int | None


async def failing_webhooks(
    reader: Reader, *, since: float, created_since: float, at_least: int
) -> list[FailingWebhook]:
    """The webhooks (not deleted) whose deliveries that ended at or after ``since`` (their
    latest attempt's outcome was recorded then) are ``at_least`` or more, and more than half of
    them failed for good or wait for a retry; ordered by app and webhook.

    A delivery ended when an attempt was made: deliveries refused unsent (a switched-off
    webhook, a suspended app; their error says ``not sent``) and deliveries still waiting for
    their first attempt say nothing of the receiver and are not counted. Only deliveries created
    at or after ``created_since`` are read, through the index on ``created_at``: the caller
    passes how far back a delivery ending now can have been created (the window and the retry
    schedule), so the history kept for 30 days is not read at every call."""
    ended = (
        "d.created_at >= $2 AND d.updated_at >= $1 AND d.attempts > 0"
        " AND d.status IN ('delivered', 'failed', 'retrying')"
        " AND (d.last_error IS NULL OR d.last_error NOT LIKE 'not sent:%')"
    )
    rows = await reader.fetch(
        "SELECT g.webhook_id, g.ended, g.failed, g.retrying, g.last_ended_at, w.url, w.enabled,"
        " w.app_id, a.name AS app_name, a.status AS app_status, u.email AS developer_email,"
        " l.last_error, l.response_code"
        " FROM (SELECT d.webhook_id, COUNT(*) AS ended,"
        " SUM(CASE WHEN d.status = 'failed' THEN 1 ELSE 0 END) AS failed,"
        " SUM(CASE WHEN d.status = 'retrying' THEN 1 ELSE 0 END) AS retrying,"
        f" MAX(d.updated_at) AS last_ended_at FROM webhook_deliveries d WHERE {ended}"
        " GROUP BY d.webhook_id HAVING COUNT(*) >= $3"
        " AND 2 * SUM(CASE WHEN d.status = 'delivered' THEN 0 ELSE 1 END) > COUNT(*)) g"
        " JOIN webhooks w ON w.id = g.webhook_id"
        " JOIN apps a ON a.id = w.app_id"
        " JOIN users u ON u.id = a.developer_user_id"
        " LEFT JOIN webhook_deliveries l ON l.id = (SELECT d.id FROM webhook_deliveries d"
        f" WHERE d.webhook_id = g.webhook_id AND {ended} AND d.status <> 'delivered'"
        " ORDER BY d.updated_at DESC, d.id DESC LIMIT 1)"
        " WHERE w.deleted_at IS NULL ORDER BY w.app_id, w.id",
        since,
        created_since,
        at_least,
    )
    return [
        FailingWebhook(
            webhook_id=row["webhook_id"],
            url=row["url"],
            enabled=bool(row["enabled"]),
            app_id=row["app_id"],
            app_name=row["app_name"],
            app_status=row["app_status"],
            developer_email=row["developer_email"],
            ended=int(row["ended"]),
            failed=int(row["failed"]),
            retrying=int(row["retrying"]),
            last_ended_at=float(row["last_ended_at"]),
            last_error=row["last_error"],
            last_response_code=row["response_code"],
        )
        for row in rows
    ]


# --- Console -------------------------------------------------------------------------------------


async def create_test_delivery(
    tx: Transaction, *, now: float, webhook: Webhook, pinned_version: str | None
) -> str:
    """Queue a test delivery (spec: Test delivery); answers its id."""
    delivery_id = new_id("dlv")
    kind, body = _test_body(delivery_id, webhook.test_event_type, now, pinned_version)
    await tx.execute(
        _INSERT,
        delivery_id,
        webhook.id,
        webhook.app_id,
        None,
        None,
        kind,
        body,
        now,
        now,
        None,
    )
    return delivery_id


def _test_body(
    item_id: str, event_type: str, now: float, pinned_version: str | None
) -> tuple[str, str]:
    """The type and body of a test delivery or run: ``event_type``'s sample with ``test:
    true``, businessId ``test``, eventId null."""
    kind = catalog.event_type(event_type)
    assert kind is not None, event_type
    body = _body(
        item_id,
        event_id=None,
        type=kind.name,
        api_version=pinned_version or catalog.CURRENT_API_VERSION,
        business_id=TEST_BUSINESS_ID,
        created=now,
        data={**kind.sample_data(), "test": True},
    )
    return kind.name, body


async def create_test_run(
    tx: Transaction,
    *,
    now: float,
    function_id: str,
    app_id: str,
    event_type: str,
    pinned_version: str | None,
) -> str:
    """Queue a test run of the function (the console's "test run"): ``event_type``'s sample
    with ``test: true``, businessId ``test``, eventId null, as a test delivery has it. It runs
    in no business, so its ``context.api`` calls answer 503; it is listed with the function's
    runs like any other. Answers its id."""
    run_id = new_id("run")
    kind, body = _test_body(run_id, event_type, now, pinned_version)
    await tx.execute(_INSERT_RUN, run_id, function_id, app_id, None, None, kind, body, now)
    await tx.notify(FUNCTION_RUNS_CHANNEL)
    return run_id


async def recent_deliveries(tx: Transaction, webhook_id: str) -> list[Delivery]:
    """The webhook's most recent deliveries, newest first (spec: the console shows 100)."""
    rows = await tx.fetch(
        "SELECT * FROM webhook_deliveries WHERE webhook_id = $1"
        " ORDER BY created_at DESC, id DESC LIMIT $2",
        webhook_id,
        catalog.CONSOLE_DELIVERIES_SHOWN,
    )
    return [Delivery.from_row(row) for row in rows]


async def redeliver(tx: Transaction, *, now: float, webhook: Webhook, delivery_id: str) -> str:
    """Queue the delivery again: same id, eventId and body, a fresh attempt count (each attempt
    signs afresh). RedeliveryRefused (spec: Redelivery) when it is unknown or older than the
    history kept, waits for an attempt, the app is suspended or deactivated, or, for a business
    or privacy event, the app is no longer installed there or the scope no longer held."""
    row = await tx.fetchrow(
        "SELECT d.*, a.status AS app_status, a.scopes AS app_scopes FROM webhook_deliveries d"
        " JOIN apps a ON a.id = d.app_id WHERE d.id = $1 AND d.webhook_id = $2" + tx.row_lock,
        delivery_id,
        webhook.id,
    )
    if row is None or float(row["created_at"]) < now - catalog.DELIVERY_RETENTION:
        raise RedeliveryRefused(delivery_id, "it is unknown or more than 30 days old")
    if row["status"] in ("queued", "retrying"):
        raise RedeliveryRefused(delivery_id, "it waits for an attempt")
    if row["app_status"] != "ACTIVE":
        raise RedeliveryRefused(delivery_id, f"the app is {row['app_status'].lower()}")
    scope = _gating_scope(row["type"]) if row["event_id"] is not None else None
    if scope is not None:
        granted = await _installation_scopes(tx, [row["app_id"]], [row["business_id"] or ""])
        held = granted.get((row["app_id"], row["business_id"] or ""))
        if held is None:
            raise RedeliveryRefused(delivery_id, "the app is no longer installed in the business")
        if scope not in held or scope not in json.loads(row["app_scopes"]):
            raise RedeliveryRefused(delivery_id, f"the app no longer holds {scope}")
    changed = await tx.execute(
        "UPDATE webhook_deliveries SET status = 'queued', attempts = 0, response_code = NULL,"
        " last_error = NULL, next_attempt_at = $1, updated_at = $1, lease = NULL"
        " WHERE id = $2 AND status IN ('delivered', 'failed')",
        now,
        delivery_id,
    )
    if not changed:
        raise RedeliveryRefused(delivery_id, "it waits for an attempt")
    return delivery_id


async def purge_deliveries(tx: Transaction, *, now: float) -> int:
    """Delete delivered and failed deliveries past the history kept (30 days), and deleted
    webhooks nothing refers to any more; answers the deliveries removed."""
    cutoff = now - catalog.DELIVERY_RETENTION
    removed = await tx.execute(
        "DELETE FROM webhook_deliveries WHERE created_at < $1"
        " AND status IN ('delivered', 'failed')",
        cutoff,
    )
    await tx.execute(
        "DELETE FROM webhooks WHERE deleted_at IS NOT NULL AND deleted_at < $1 AND NOT EXISTS"
        " (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = webhooks.id)",
        cutoff,
    )
    return removed
