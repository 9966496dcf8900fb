"""The body a delivery sends and a run's handler gets (spec: Webhook delivery body), the
sample body of a test delivery or a test run (spec: Test delivery), and the body of a scheduled
run (contract.md, third round: Hosted functions, schedules)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

from ledgerport import catalog

TEST_BUSINESS_ID = "test"
"""The businessId of a test delivery (spec: Test delivery)."""
SCHEDULE_TYPE = "schedule"
"""The type of a scheduled run's event (no event of the catalog has it)."""


def delivery_body(
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


def test_body(
    item_id: str, event_type: str, now: float, pinned_version: str | None
) -> tuple[str, str]:
    """The type and body of a test delivery or run: ``event_type``'s sample with ``test:
    true``, businessId ``test``, eventId null."""
    kind = catalog.event_type(event_type)
    assert kind is not None, event_type
    body = delivery_body(
        item_id,
        event_id=None,
        type=kind.name,
        api_version=pinned_version or catalog.CURRENT_API_VERSION,
        business_id=TEST_BUSINESS_ID,
        created=now,
        data={**kind.sample_data(), "test": True},
    )
    return kind.name, body


def schedule_body(
    run_id: str, *, business_id: str, tick: float, now: float, pinned_version: str | None
) -> str:
    """The event a scheduled run's handler gets: the delivery body's shape with ``eventId``
    null, ``type`` "schedule" and ``data.scheduledAt``, the tick it runs for (ISO 8601, UTC, to
    the second, as the data API writes times); ``created`` is when it was queued."""
    scheduled_at = datetime.fromtimestamp(int(tick), UTC).isoformat().replace("+00:00", "Z")
    return delivery_body(
        run_id,
        event_id=None,
        type=SCHEDULE_TYPE,
        api_version=pinned_version or catalog.CURRENT_API_VERSION,
        business_id=business_id,
        created=now,
        data={"scheduledAt": scheduled_at},
    )
