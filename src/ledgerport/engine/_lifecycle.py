"""The endpoint lifecycle in the store: the outcomes a transaction records become happenings of
their endpoints' pure core (``_health.py``), whose new states, hourly counts and operational
events are written in the same transaction, so that an endpoint's health is exactly what its
recorded outcomes made it.

An attempt's outcome is a happening of its endpoint when an attempt was made (a delivery
refused unsent, or given back unattempted, says nothing of the receiver): delivered; failed
(final when no attempt is left); or gone (a 410). The endpoints are locked in the order of
their ids, after the deliveries (``queues.record_outcomes`` locks those first, in theirs), so
two recording transactions wait for each other, never deadlock. An endpoint the engine switches
off notifies the entitlement channel: every engine checks its deliveries again before sending,
and those waiting fail unsent, as when the app switches it off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ledgerport import apps, queues
from ledgerport.ops import Metrics
from ledgerport.storage import Row, Transaction

from ._health import Delivered, Endpoint, Failed, Gone, Happening, Notice, Tick, step
from ._retry import GONE

_TYPES: dict[str, apps.OperationalType] = {
    "failing": "webhook.endpoint.failing",
    "disabled": "webhook.endpoint.disabled",
    "recovered": "webhook.endpoint.recovered",
}


async def record_batch(
    tx: Transaction,
    batch: Sequence[tuple[str, str, queues.AttemptOutcome]],
    *,
    now: float,
    disable_after: float,
) -> Counter[str]:
    """Record a batch of (app id, webhook id, outcome) and what they did to their endpoints, in
    one transaction; answers the endpoints the engine switched off, by reason."""
    await queues.record_outcomes(tx, [outcome for _, _, outcome in batch])
    return await record_health(
        tx,
        [(webhook_id, outcome) for _, webhook_id, outcome in batch],
        now=now,
        disable_after=disable_after,
    )


def count_switched_off(metrics: Metrics, switched_off: Counter[str]) -> None:
    """The endpoints a committed transaction switched off, to the metrics."""
    for reason, count in switched_off.items():
        metrics.webhook_endpoints_disabled.labels(reason).inc(count)


def happening(outcome: queues.AttemptOutcome) -> Happening | None:
    """What an outcome says of its endpoint (None: nothing, no attempt was made)."""
    if outcome.made is None:
        return None
    at = outcome.finished_at
    if outcome.status == "delivered":
        return Delivered(at)
    error = outcome.error or "failed"
    if outcome.response_code == GONE:
        return Gone(at, error)
    return Failed(at, error, final=outcome.status == "failed")


def _endpoint(row: Row) -> Endpoint:
    return Endpoint(
        enabled=bool(row["enabled"]),
        disabled_reason=row["disabled_reason"],
        disabled_at=row["disabled_at"],
        health=apps.EndpointState.from_row(row),
    )


async def record_health(
    tx: Transaction,
    outcomes: Iterable[tuple[str, queues.AttemptOutcome]],
    *,
    now: float,
    disable_after: float,
) -> Counter[str]:
    """Apply ``(webhook id, outcome)`` pairs, oldest first, to their endpoints; answers the
    endpoints the engine switched off, by reason."""
    by_endpoint: dict[str, list[Happening]] = {}
    hours: Counter[tuple[str, int, str]] = Counter()
    for webhook_id, outcome in outcomes:
        event = happening(outcome)
        if event is None:
            continue
        by_endpoint.setdefault(webhook_id, []).append(event)
        if isinstance(event, Delivered):
            hours[webhook_id, apps.hour_of(event.at), "delivered"] += 1
        elif isinstance(event, Gone) or (isinstance(event, Failed) and event.final):
            hours[webhook_id, apps.hour_of(event.at), "failed"] += 1
    if not by_endpoint:
        return Counter()
    rows = await queues.lock_endpoints(tx, list(by_endpoint))
    counts = [
        (webhook_id, hour, n if kind == "delivered" else 0, n if kind == "failed" else 0)
        for (webhook_id, hour, kind), n in hours.items()
        if webhook_id in rows
    ]
    return await _apply(tx, rows, by_endpoint, now=now, disable_after=disable_after, hours=counts)


async def tick_endpoints(tx: Transaction, *, now: float, disable_after: float) -> Counter[str]:
    """The clock's part of the disable rule: endpoints whose window closed with no attempt at
    all; answers how many were switched off."""
    failing = await queues.endpoints_failing(tx)
    rows = await queues.lock_endpoints(tx, failing)
    ticks: dict[str, list[Happening]] = {webhook_id: [Tick(now)] for webhook_id in rows}
    return await _apply(tx, rows, ticks, now=now, disable_after=disable_after)


async def _apply(
    tx: Transaction,
    rows: dict[str, Row],
    happenings: dict[str, list[Happening]],
    *,
    now: float,
    disable_after: float,
    hours: Sequence[tuple[str, int, int, int]] = (),
) -> Counter[str]:
    """Step the endpoints of ``rows`` through their ``happenings`` and write those that changed,
    with ``hours`` (their hourly counts: ``queues.write_endpoints``, one statement or two for
    all); then their operational events."""
    writes: list[queues.EndpointWrite] = []
    raised: list[tuple[Row, Notice]] = []
    switched_off: Counter[str] = Counter()
    for webhook_id, row in sorted(rows.items()):
        before = endpoint = _endpoint(row)
        for event in sorted(happenings[webhook_id], key=lambda event: event.at):
            endpoint, notices = step(endpoint, event, disable_after=disable_after)
            raised += [(row, notice) for notice in notices]
        if endpoint != before:
            writes.append(
                queues.EndpointWrite(
                    webhook_id,
                    endpoint.enabled,
                    endpoint.disabled_reason,
                    endpoint.disabled_at,
                    endpoint.health,
                )
            )
        if before.enabled and not endpoint.enabled:
            switched_off[endpoint.disabled_reason or "app"] += 1
    await queues.write_endpoints(tx, writes, now=now, hours=hours)
    await _raise(tx, raised, now=now)
    if switched_off:
        await tx.notify(apps.ENTITLEMENTS_CHANNEL)
    return switched_off


async def _raise(tx: Transaction, raised: Sequence[tuple[Row, Notice]], *, now: float) -> None:
    """Record the operational events of the app's endpoints and queue them for its operational
    endpoint; the operational endpoint's own changes raise none."""
    queued = False
    for index, (row, notice) in enumerate(raised):
        if row["kind"] != "endpoint":
            continue
        data = {} if notice.reason is None else {"reason": notice.reason}
        event = await apps.add_operational_event(
            tx,
            # Raised together (a 410's failing, then disabled): a microsecond apart, in order.
            now=now + index / 1_000_000,
            app_id=row["app_id"],
            webhook_id=row["id"],
            type=_TYPES[notice.type],
            data=data,
        )
        queued = await queues.queue_operational_delivery(tx, event, now=now) is not None or queued
    if queued:
        await tx.notify(queues.DELIVERIES_CHANNEL)
