"""The health a recording transaction writes for every endpoint of its batch, on both stores: each
endpoint's lifecycle columns and its hourly counts, whatever the number of endpoints a batch
holds (they are written in one statement, or two, for all: ``queues.write_endpoints``), and the
same counts added to those already there."""

from __future__ import annotations

import json

from ledgerport import apps, queues
from ledgerport.engine import record_health
from ledgerport.platform import Platform

HOUR = 3600
NOW = 1_790_000_000.0 - 1_790_000_000.0 % HOUR + 60


def _outcome(delivery_id: str, status: queues.DeliveryStatus, at: float) -> queues.AttemptOutcome:
    delivered = status == "delivered"
    return queues.AttemptOutcome(
        delivery_id=delivery_id,
        lease="engine",
        status=status,
        attempts=1,
        response_code=200 if delivered else 500,
        error=None if delivered else "HTTP 500",
        finished_at=at,
        next_attempt_at=None if status != "retrying" else at + 60,
        first_attempt_at=at,
        made=queues.AttemptMade(
            started_at=at,
            duration_ms=1.0,
            response_body=b"",
            response_truncated=False,
            request_headers={},
        ),
    )


async def _endpoints(platform: Platform, count: int) -> list[str]:
    p = platform
    async with p.store.transaction() as tx:
        app, _ = await apps.create_app(
            tx,
            p.keyring,
            now=NOW - HOUR,
            name="Batch",
            type="PUBLIC",
            redirect_uris=["https://app.example/callback"],
            scopes=["customers:read"],
            developer_user_id=None,
        )
        made = [
            await apps.create_webhook(
                tx,
                p.keyring,
                now=NOW - HOUR,
                app_id=app.id,
                url=f"https://hooks.example/{index}",
                events=["customer.created"],
                development=True,
            )
            for index in range(count)
        ]
    return [webhook.id for webhook, _ in made]


async def _health(platform: Platform, webhook_ids: list[str]) -> dict[str, tuple[object, ...]]:
    async with platform.store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT id, health, consecutive_failures, last_delivery_at, last_error,"
            " recent_failures, enabled, updated_at FROM webhooks ORDER BY id"
        )
        hours = await tx.fetch(
            "SELECT webhook_id, hour, delivered, failed FROM webhook_health_hours"
            " ORDER BY webhook_id, hour"
        )
    counts: dict[str, list[tuple[int, int, int]]] = {}
    for row in hours:
        counts.setdefault(row["webhook_id"], []).append(
            (int(row["hour"]), int(row["delivered"]), int(row["failed"]))
        )
    return {
        row["id"]: (
            row["health"],
            int(row["consecutive_failures"]),
            row["last_delivery_at"],
            row["last_error"],
            len(json.loads(row["recent_failures"])),
            bool(row["enabled"]),
            row["updated_at"],
            counts.get(row["id"], []),
        )
        for row in rows
        if row["id"] in webhook_ids
    }


async def test_every_endpoint_of_a_batch_gets_its_health_and_hourly_counts(
    platform: Platform,
) -> None:
    p = platform
    a, b, c, untouched = sorted(await _endpoints(p, 4))
    before = await _health(p, [untouched])
    hour = int(NOW // HOUR)
    batch = [
        (a, _outcome("d1", "delivered", NOW)),
        (b, _outcome("d2", "failed", NOW + 1)),
        (a, _outcome("d3", "delivered", NOW + 2)),
        (c, _outcome("d4", "retrying", NOW + 3)),
        (b, _outcome("d5", "delivered", NOW + HOUR)),  # the next hour
        (a, _outcome("d6", "failed", NOW + 4)),
    ]
    async with p.store.transaction() as tx:
        switched_off = await record_health(tx, batch, now=NOW + HOUR, disable_after=5 * 86400)
    assert not switched_off
    health = await _health(p, [a, b, c, untouched])
    created = NOW - HOUR
    assert health[a] == ("failing", 1, NOW + 2, "HTTP 500", 1, True, created, [(hour, 2, 1)])
    assert health[b] == (
        "healthy",
        0,
        NOW + HOUR,
        "HTTP 500",
        0,
        True,
        created,
        [(hour, 0, 1), (hour + 1, 1, 0)],
    )
    # A retry is no failure for good: no count, but the endpoint keeps its error.
    assert health[c] == ("healthy", 0, None, "HTTP 500", 0, True, created, [])
    assert health[untouched] == before[untouched]

    # A second batch adds to the counts already there, one endpoint alone too.
    async with p.store.transaction() as tx:
        await record_health(
            tx,
            [(a, _outcome("d7", "delivered", NOW + 5)), (b, _outcome("d8", "failed", NOW + 6))],
            now=NOW + HOUR,
            disable_after=5 * 86400,
        )
    async with p.store.transaction() as tx:
        await record_health(
            tx, [(c, _outcome("d9", "delivered", NOW + 7))], now=NOW + HOUR, disable_after=86400
        )
    health = await _health(p, [a, b, c])
    assert health[a][0] == "healthy"
    assert health[a][7] == [(hour, 3, 1)]
    assert health[b][7] == [(hour, 0, 2), (hour + 1, 1, 0)]
    assert health[c][:3] == ("healthy", 0, NOW + 7)
    assert health[c][7] == [(hour, 1, 0)]
