"""The body a delivery sends and a run's handler gets (spec: Webhook delivery body), and the
sample body of a test delivery or a test run (spec: Test delivery)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ledgerport import catalog

TEST_BUSINESS_ID = "test"
"""The businessId of a test delivery (spec: Test delivery)."""


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
