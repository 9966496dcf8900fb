"""The redelivery rule (spec: States: Webhook delivery, the redeliver operation; Redelivery), one
pure function that both a redelivery and a recovery apply: its table, row by row."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledgerport import catalog
from ledgerport.queues import Redeliverable, redelivery_refusal

NOW = 1_790_000_000.0
APP, BUSINESS = "app_1", "bus_1"
FAILED = Redeliverable(
    id="dlv_1",
    app_id=APP,
    event_id="evt_1",
    business_id=BUSINESS,
    type="customer.created",
    status="failed",
    created_at=NOW - 3600,
    app_status="ACTIVE",
    app_scopes=frozenset({"customers:read"}),
)
INSTALLED = {(APP, BUSINESS): frozenset({"customers:read"})}

ROWS = {
    # name: (delivery, installations' scopes, refusal or None)
    "failed, entitled": (FAILED, INSTALLED, None),
    "delivered, entitled": (replace(FAILED, status="delivered"), INSTALLED, None),
    "queued": (replace(FAILED, status="queued"), INSTALLED, "it waits for an attempt"),
    "retrying": (replace(FAILED, status="retrying"), INSTALLED, "it waits for an attempt"),
    "exactly 30 days old": (
        replace(FAILED, created_at=NOW - catalog.DELIVERY_RETENTION),
        INSTALLED,
        None,
    ),
    "older than 30 days": (
        replace(FAILED, created_at=NOW - catalog.DELIVERY_RETENTION - 1),
        INSTALLED,
        "it is unknown or more than 30 days old",
    ),
    "app suspended": (replace(FAILED, app_status="SUSPENDED"), INSTALLED, "the app is suspended"),
    "app deactivated": (
        replace(FAILED, app_status="DEACTIVATED"),
        INSTALLED,
        "the app is deactivated",
    ),
    "uninstalled": (FAILED, {}, "the app is no longer installed in the business"),
    "installation lost the scope": (
        FAILED,
        {(APP, BUSINESS): frozenset({"invoices:read"})},
        "the app no longer holds customers:read",
    ),
    "app lost the scope": (
        replace(FAILED, app_scopes=frozenset()),
        INSTALLED,
        "the app no longer holds customers:read",
    ),
    "privacy event, uninstalled": (
        replace(FAILED, type="customer.redact"),
        {},
        "the app is no longer installed in the business",
    ),
    "app event, uninstalled": (
        replace(FAILED, type="app.uninstalled", app_scopes=frozenset()),
        {},
        None,
    ),
    "test delivery, uninstalled": (
        replace(FAILED, event_id=None, business_id=None, type="invoice.created"),
        {},
        None,
    ),
    "test delivery, app suspended": (
        replace(FAILED, event_id=None, business_id=None, app_status="SUSPENDED"),
        {},
        "the app is suspended",
    ),
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_the_redelivery_rule(row: str) -> None:
    delivery, granted, refusal = ROWS[row]
    assert redelivery_refusal(delivery, now=NOW, granted=granted) == refusal
