"""What the console reads of a webhook's deliveries and does with them (spec: Redelivery, Test
delivery; contract.md: Developer console API and its second round): the recent deliveries,
filtered, a page at a time; one delivery whole, with its payload and attempt log; test
deliveries; redelivery of one delivery and recovery of a webhook's failed deliveries since a
moment, both by one rule (:func:`redelivery_refusal`), which a page also asks before it offers
the redeliver button (:func:`redelivery_check`) and before it asks to confirm a recovery
(:func:`recover_count`, what the recovery would do, counted by its own selection); and how
many deliveries wait for an attempt (:func:`waiting_deliveries`, those switching a webhook off
fails unsent).

Every read and write here is scoped to one webhook, which the caller has found among its own
app's: a delivery of another webhook is not found, whatever its id or its event.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ledgerport import catalog
from ledgerport.apps import Webhook
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Reader, Row, Transaction, placeholders

from ._attempts import LoggedAttempt
from ._bodies import test_body
from ._deliveries import FAN_OUT_LOCK, INSERT_DELIVERY, Delivery, DeliveryStatus
from ._entitlement import gating_scope, installation_scopes
from ._errors import DeliveryNotFound, RedeliveryRefused
from ._fan_out import delivery_id_for, open_records
from ._stream_deliveries import park_for_listener

RECOVER_MAX = 500
"""Failed deliveries one recovery looks at, at most (one transaction: on SQLite it holds the
one writer); the answer's ``next`` continues after them."""
_UNKNOWN = "it is unknown or more than 30 days old"
"""The refusal of a delivery the webhook does not have (any more)."""
_LISTED = (
    "id, webhook_id, event_id, type, status, attempts, response_code, last_error, created_at,"
    " next_attempt_at"
)


async def create_test_delivery(
    tx: Transaction,
    *,
    now: float,
    webhook: Webhook,
    pinned_version: str | None,
    type: str | None = None,
) -> str:
    """Queue a test delivery (spec: Test delivery) of ``type``'s sample, an event type the
    webhook subscribes to (contract.md, third round; default: its first, else the spec's
    default), and answer its id. A type it does not subscribe to is an InvalidInput. Test
    deliveries are never ordered: they carry no record."""
    if type is not None and type not in webhook.events:
        raise InvalidInput([f"type {type!r} is not an event type the webhook subscribes to"])
    delivery_id = new_id("dlv")
    kind, body = test_body(delivery_id, type or webhook.test_event_type, now, pinned_version)
    await tx.execute(
        INSERT_DELIVERY,
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
        None,
        None,
    )
    if webhook.kind == "stream":
        await park_for_listener(tx, [delivery_id])
    return delivery_id


@dataclass(frozen=True)
class DeliveryPage:
    """A page of a webhook's deliveries, newest first, and where the next page starts: the id
    of this page's last delivery, to pass back as ``after`` (None on the last page)."""

    deliveries: list[Delivery]
    next: str | None


async def delivery_page(
    tx: Transaction,
    webhook_id: str,
    *,
    statuses: Collection[DeliveryStatus] = (),
    types: Collection[str] = (),
    event_id: str | None = None,
    after: str | None = None,
    limit: int = catalog.CONSOLE_DELIVERIES_SHOWN,
) -> DeliveryPage:
    """The webhook's deliveries, newest first, ``limit`` at most (spec: the console shows 100):
    with ``statuses``, ``types`` or ``event_id``, those matching all that are given; with
    ``after`` (the ``next`` of an earlier page), those after that delivery in this order. An
    event's delivery to a webhook has an id derived from both (:func:`delivery_id_for`), so
    ``event_id`` is looked up by it. Raises InvalidInput for an ``after`` that is no delivery
    of the webhook (or one no longer kept)."""
    conditions = ["webhook_id = $1"]
    args: list[object] = [webhook_id]

    def among(column: str, values: Collection[str]) -> None:
        conditions.append(f"{column} IN ({placeholders(len(values), start=len(args) + 1)})")
        args.extend(sorted(values))

    if statuses:
        among("status", statuses)
    if types:
        among("type", types)
    if event_id is not None:
        conditions.append(f"id = ${len(args) + 1} AND event_id = ${len(args) + 2}")
        args += [delivery_id_for(event_id, webhook_id), event_id]
    if after is not None:
        mark = await tx.fetchval(
            "SELECT created_at FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2",
            after,
            webhook_id,
        )
        if mark is None:
            raise InvalidInput(
                ["after must be the next of an earlier page of this webhook's deliveries"]
            )
        conditions.append(f"(created_at, id) < (${len(args) + 1}, ${len(args) + 2})")
        args += [float(mark), after]
    rows = await tx.fetch(
        f"SELECT {_LISTED} FROM webhook_deliveries WHERE {' AND '.join(conditions)}"
        f" ORDER BY created_at DESC, id DESC LIMIT ${len(args) + 1}",
        *args,
        limit + 1,
    )
    deliveries = [Delivery.from_row(row) for row in rows[:limit]]
    return DeliveryPage(deliveries, deliveries[-1].id if len(rows) > limit else None)


async def recent_deliveries(
    tx: Transaction,
    webhook_id: str,
    *,
    statuses: Collection[DeliveryStatus] = (),
    types: Collection[str] = (),
    event_id: str | None = None,
) -> list[Delivery]:
    """The first page of :func:`delivery_page`: the webhook's most recent deliveries (of those
    matching the filters given), newest first."""
    page = await delivery_page(tx, webhook_id, statuses=statuses, types=types, event_id=event_id)
    return page.deliveries


@dataclass(frozen=True)
class DeliveryDetail:
    """One delivery whole: what the list shows, the body every attempt sent, and its log, with
    what the redelivery rule reads of it (:func:`redelivery_check`)."""

    delivery: Delivery
    payload: str
    """The body as sent, the text every attempt signed (ASCII JSON: its characters are its
    bytes)."""
    attempt_log: list[LoggedAttempt]
    """Every attempt made (or the newest asked for), oldest first, redeliveries included."""
    redeliverable: Redeliverable
    """The delivery and its app as the redelivery rule reads them."""
    granted: frozenset[str] | None
    """The scopes the app's ACTIVE installation in the delivery's business grants (None: no
    such installation)."""


_DETAIL = (
    ", ".join(f"d.{column.strip()}" for column in _LISTED.split(","))
    + ", d.body, d.app_id, d.business_id, a.status AS app_status, a.scopes AS app_scopes,"
    " i.scopes AS granted"
)
"""A delivery whole with its app and its business's installation, which the redelivery rule
reads (one installation at most: one an app and business)."""
_DETAIL_WIDTH = _DETAIL.count(",") + 1
_LOGGED = tuple(field.name for field in dataclasses.fields(LoggedAttempt))
"""The columns of an attempt in the log that :meth:`LoggedAttempt.from_row` reads: its fields,
each the column of its name."""


def _delivery_whole(newest: int | None) -> str:
    """The delivery (its row first) and its attempts (the ``newest`` only, when given; each
    row after the first, oldest first) in one statement: the delivery's columns in the first
    row, the attempt's, named ``log_`` and their name, in the others, NULL where a row has
    none of them."""
    limit = "" if newest is None else " LIMIT $3"
    return (
        f"SELECT 0 AS part, {_DETAIL}, "
        + ", ".join(f"NULL AS log_{column}" for column in _LOGGED)
        + " FROM webhook_deliveries d JOIN apps a ON a.id = d.app_id"
        " LEFT JOIN installations i ON i.app_id = d.app_id AND i.business_id = d.business_id"
        " AND i.state = 'ACTIVE' WHERE d.id = $1 AND d.webhook_id = $2"
        " UNION ALL SELECT 1, "
        + ", ".join(["NULL"] * _DETAIL_WIDTH)
        + ", "
        + ", ".join(f"l.{column}" for column in _LOGGED)
        + " FROM (SELECT * FROM webhook_attempts WHERE delivery_id = $1"
        f" ORDER BY attempt DESC{limit}) AS l"
        " ORDER BY part, log_attempt"
    )


async def get_delivery(
    tx: Transaction, webhook_id: str, delivery_id: str, *, attempts: int | None = None
) -> DeliveryDetail:
    """The webhook's delivery ``delivery_id`` whole (with ``attempts``, its newest that many
    attempts only); DeliveryNotFound when the webhook has none of that id (or it aged out).
    One statement: the delivery, what the redelivery rule reads of it, and its attempts."""
    args: tuple[object, ...] = (delivery_id, webhook_id)
    rows = await tx.fetch(
        _delivery_whole(attempts), *(args if attempts is None else (*args, attempts))
    )
    if not rows or rows[0]["part"] != 0:
        raise DeliveryNotFound(delivery_id)
    row = rows[0]
    log = [
        LoggedAttempt.from_row({column: each[f"log_{column}"] for column in _LOGGED})
        for each in rows[1:]
    ]
    granted = row["granted"]
    return DeliveryDetail(
        Delivery.from_row(row),
        row["body"],
        log,
        Redeliverable.from_row(row),
        None if granted is None else frozenset(json.loads(granted)),
    )


# --- Redelivery ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Redeliverable:
    """What the redelivery rule reads of a delivery and its app."""

    id: str
    app_id: str
    event_id: str | None
    business_id: str | None
    type: str
    status: DeliveryStatus
    created_at: float
    app_status: str
    app_scopes: frozenset[str]

    @classmethod
    def from_row(cls, row: Row) -> Redeliverable:
        return cls(
            id=row["id"],
            app_id=row["app_id"],
            event_id=row["event_id"],
            business_id=row["business_id"],
            type=row["type"],
            status=row["status"],
            created_at=float(row["created_at"]),
            app_status=row["app_status"],
            app_scopes=frozenset(json.loads(row["app_scopes"])),
        )

    @property
    def gating_scope(self) -> str | None:
        """The scope its event needs (None for app events and test deliveries)."""
        return None if self.event_id is None else gating_scope(self.type)


def redelivery_refusal(
    delivery: Redeliverable, *, now: float, granted: Mapping[tuple[str, str], frozenset[str]]
) -> str | None:
    """Why the delivery may not be redelivered now, or None when it may (spec: States: Webhook
    delivery, the redeliver operation; Redelivery): it is older than the history kept, it waits
    for an attempt, the app is suspended or deactivated, or, for a business or privacy event,
    the app is no longer installed in the business (``granted``: the scopes each ACTIVE
    installation grants, by app and business) or it, or its installation, no longer holds the
    event's gating scope."""
    if delivery.created_at < now - catalog.DELIVERY_RETENTION:
        return _UNKNOWN
    if delivery.status in ("queued", "retrying"):
        return "it waits for an attempt"
    if delivery.app_status != "ACTIVE":
        return f"the app is {delivery.app_status.lower()}"
    scope = delivery.gating_scope
    if scope is not None:
        held = granted.get((delivery.app_id, delivery.business_id or ""))
        if held is None:
            return "the app is no longer installed in the business"
        if scope not in held or scope not in delivery.app_scopes:
            return f"the app no longer holds {scope}"
    return None


_REDELIVERABLE = (
    "SELECT d.id, d.app_id, d.event_id, d.business_id, d.type, d.status, d.created_at,"
    " a.status AS app_status, a.scopes AS app_scopes"
    " FROM webhook_deliveries d JOIN apps a ON a.id = d.app_id WHERE d.webhook_id = $1"
)


def _lock_deliveries(tx: Transaction) -> str:
    """Lock the deliveries a redelivery reads until it commits, not their app's row."""
    return f"{tx.row_lock} OF d" if tx.row_lock else ""


async def _granted(
    tx: Transaction, deliveries: Sequence[Redeliverable]
) -> dict[tuple[str, str], frozenset[str]]:
    """The installations' scopes the rule reads for ``deliveries``, in one query."""
    gated = [d for d in deliveries if d.gating_scope is not None]
    return await installation_scopes(
        tx,
        sorted({d.app_id for d in gated}),
        sorted({d.business_id or "" for d in gated}),
    )


async def _requeue(tx: Transaction, *, now: float, delivery_ids: Sequence[str]) -> int:
    """Queue the deliveries again, those delivered or failed; answers how many.

    The order rules hold: a delivery ordered by record (it has an ``order_key``) is due now
    only when no other delivery about its record is open and none of those queued here before
    it (by its event's place in the log) is about the same record; else it waits its turn
    (no ``next_attempt_at``), released as the ones before it end. On PostgreSQL it reads the
    open ones holding FAN_OUT_LOCK, as a fan-out does."""
    if not delivery_ids:
        return 0
    rows = await tx.fetch(
        "SELECT id, webhook_id, order_key, event_seq FROM webhook_deliveries"
        f" WHERE id IN ({placeholders(len(delivery_ids))}) AND status IN ('delivered', 'failed')",
        *delivery_ids,
    )
    keyed = sorted(
        (row for row in rows if row["order_key"] is not None),
        key=lambda row: (row["event_seq"] or 0, row["id"]),
    )
    if keyed and tx.kind == "postgresql":
        # Parking behind open deliveries takes turns with fan-outs and the ends of heads.
        await tx.execute("SELECT pg_advisory_xact_lock($1)", FAN_OUT_LOCK)
    busy = await open_records(
        tx,
        sorted({row["webhook_id"] for row in keyed}),
        sorted({row["order_key"] for row in keyed}),
    )
    waiting: list[str] = []
    for row in keyed:
        record = (row["webhook_id"], row["order_key"])
        if record in busy:
            waiting.append(row["id"])
        busy.add(record)
    due = [row["id"] for row in rows if row["id"] not in set(waiting)]
    queued = 0
    for ids, at in ((due, now), (waiting, None)):
        if ids:
            queued += await tx.execute(
                "UPDATE webhook_deliveries SET status = 'queued', attempts = 0,"
                " response_code = NULL, last_error = NULL, next_attempt_at = $1,"
                " updated_at = $2, lease = NULL"
                f" WHERE id IN ({placeholders(len(ids), start=3)})"
                " AND status IN ('delivered', 'failed')",
                at,
                now,
                *ids,
            )
    await park_for_listener(tx, due)
    return queued


async def _refusal(
    tx: Transaction, *, now: float, webhook: Webhook, delivery_id: str, lock: bool
) -> str | None:
    """Why :func:`redelivery_refusal` refuses the webhook's delivery now (or it is unknown),
    or None; with ``lock``, the delivery stays locked until the transaction ends."""
    locking = _lock_deliveries(tx) if lock else ""
    row = await tx.fetchrow(f"{_REDELIVERABLE} AND d.id = $2{locking}", webhook.id, delivery_id)
    if row is None:
        return _UNKNOWN
    delivery = Redeliverable.from_row(row)
    return redelivery_refusal(delivery, now=now, granted=await _granted(tx, [delivery]))


def redelivery_check(detail: DeliveryDetail, *, now: float) -> str | None:
    """Why the delivery read whole (:func:`get_delivery`) may not be redelivered now, by the
    rule :func:`redeliver` applies (:func:`redelivery_refusal`), or None when it may: what a
    page asks before it offers the redeliver button, from what it read already. Nothing is
    locked; the redelivery itself asks again."""
    delivery = detail.redeliverable
    granted = (
        {}
        if detail.granted is None
        else {(delivery.app_id, delivery.business_id or ""): detail.granted}
    )
    return redelivery_refusal(delivery, now=now, granted=granted)


async def redeliver(tx: Transaction, *, now: float, webhook: Webhook, delivery_id: str) -> str:
    """Queue the delivery again: same id, eventId and body, a fresh attempt count (each attempt
    signs afresh; its attempt log goes on). RedeliveryRefused when it is unknown or
    :func:`redelivery_refusal` refuses it."""
    refusal = await _refusal(tx, now=now, webhook=webhook, delivery_id=delivery_id, lock=True)
    if refusal is not None:
        raise RedeliveryRefused(delivery_id, refusal)
    if not await _requeue(tx, now=now, delivery_ids=[delivery_id]):
        raise RedeliveryRefused(delivery_id, "it waits for an attempt")
    return delivery_id


async def first_failed_since(tx: Transaction, webhook_id: str, moment: float) -> float | None:
    """When the oldest of the webhook's deliveries that failed for good at or after ``moment``
    was created (None: none did): where a recovery of what failed since then starts, since a
    recovery goes by when deliveries were created."""
    value = await tx.fetchval(
        "SELECT MIN(created_at) FROM webhook_deliveries"
        " WHERE webhook_id = $1 AND status = 'failed' AND updated_at >= $2",
        webhook_id,
        moment,
    )
    return None if value is None else float(value)


@dataclass(frozen=True)
class Recovered:
    """What a recovery did: the deliveries queued again, those the rule refused, and where the
    next recovery goes on (the id of the last delivery looked at) when there were more than
    RECOVER_MAX to look at (None: none is left)."""

    queued: int
    skipped: int
    next: str | None


async def _recoverable(
    tx: Transaction,
    *,
    now: float,
    webhook: Webhook,
    since: float,
    after: str | None,
    limit: int,
    lock: bool,
) -> tuple[list[Redeliverable], list[str], bool]:
    """What a recovery looks at (the webhook's failed deliveries created at or after ``since``,
    after ``after``, oldest first, ``limit`` at most), those of them :func:`redelivery_refusal`
    lets go again, and whether more are left; with ``lock``, what it looks at stays locked
    until the transaction ends. Raises InvalidInput as :func:`recover` does."""
    problems = []
    if since < now - catalog.DELIVERY_RETENTION:
        problems.append("since must be within the last 30 days (the history kept)")
    if since > now:
        problems.append("since must not be in the future")
    if problems:
        raise InvalidInput(problems)
    start = "d.created_at >= $2"
    args: list[object] = [webhook.id, since]
    if after is not None:
        mark = await tx.fetchval(
            "SELECT created_at FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2",
            after,
            webhook.id,
        )
        if mark is None or float(mark) < since:
            raise InvalidInput(["after must be the next of an earlier recovery of this webhook"])
        start = "(d.created_at, d.id) > ($3, $4) AND d.created_at >= $2"
        args += [float(mark), after]
    locking = _lock_deliveries(tx) if lock else ""
    rows = await tx.fetch(
        f"{_REDELIVERABLE} AND d.status = 'failed' AND {start}"
        f" ORDER BY d.created_at, d.id LIMIT ${len(args) + 1}{locking}",
        *args,
        limit + 1,
    )
    looked_at = [Redeliverable.from_row(row) for row in rows[:limit]]
    granted = await _granted(tx, looked_at)
    chosen = [d.id for d in looked_at if redelivery_refusal(d, now=now, granted=granted) is None]
    return looked_at, chosen, len(rows) > limit


async def recover(
    tx: Transaction,
    *,
    now: float,
    webhook: Webhook,
    since: float,
    after: str | None = None,
    limit: int = RECOVER_MAX,
) -> Recovered:
    """Redeliver every failed delivery of the webhook created at or after ``since`` (within the
    history kept, and not in the future), oldest first, by the rule of :func:`redeliver`; those
    it refuses are skipped and counted. At most ``limit`` are looked at in this transaction:
    when more are left, ``next`` names the last one looked at, and a recovery ``after`` it goes
    on from there. Raises InvalidInput for a ``since`` out of bounds or an ``after`` that is no
    delivery of the webhook since then."""
    looked_at, chosen, more = await _recoverable(
        tx, now=now, webhook=webhook, since=since, after=after, limit=limit, lock=True
    )
    queued = await _requeue(tx, now=now, delivery_ids=chosen)
    return Recovered(queued, len(looked_at) - queued, looked_at[-1].id if more else None)


async def recover_count(
    tx: Transaction,
    *,
    now: float,
    webhook: Webhook,
    since: float,
    after: str | None = None,
    limit: int = RECOVER_MAX,
) -> Recovered:
    """What :func:`recover` with the same arguments would answer at ``now``, counted by the same
    rule on the same deliveries, changing nothing and locking nothing: what a page says before
    it asks to confirm a recovery. Raises InvalidInput as :func:`recover` does."""
    looked_at, chosen, more = await _recoverable(
        tx, now=now, webhook=webhook, since=since, after=after, limit=limit, lock=False
    )
    return Recovered(len(chosen), len(looked_at) - len(chosen), looked_at[-1].id if more else None)


async def waiting_deliveries(reader: Reader, webhook_id: str) -> int:
    """How many of the webhook's deliveries wait for an attempt (queued, retrying, or waiting
    their turn behind an earlier one about their record): those switching it off or deleting
    it fails unsent (the send-time check), as a page says before it asks to confirm. An
    attempt already under way when it goes off may still be made."""
    count = await reader.fetchval(
        "SELECT COUNT(*) FROM webhook_deliveries"
        " WHERE webhook_id = $1 AND status IN ('queued', 'retrying')",
        webhook_id,
    )
    return int(count)
