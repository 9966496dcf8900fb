"""The event catalog: 45 event types with audience, gating scope, area and sample payload."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

# --- Events --------------------------------------------------------------------------------------

Audience: TypeAlias = Literal["business", "app", "privacy"]


@dataclass(frozen=True, slots=True)
class EventType:
    """One entry of the event catalog.

    ``audience`` decides delivery: business and privacy events reach an app only when the app and
    the business's ACTIVE installation hold ``scope``; app events (``scope`` None) go to the app's
    subscribed webhooks whatever the installation state. ``area`` is the business area the event
    belongs to (None for app events). ``sample`` is the ``data`` payload of a test delivery; treat
    it as read-only and use :meth:`sample_data` for a copy to extend.
    """

    name: str
    audience: Audience
    scope: str | None
    area: str | None
    sample: Mapping[str, object] = field(compare=False)

    def sample_data(self) -> dict[str, object]:
        """Return a fresh, deep copy of the sample payload that the caller may modify."""
        return copy.deepcopy(dict(self.sample))


def _business(name: str, area: str, sample: Mapping[str, object]) -> EventType:
    return EventType(name, "business", f"{area}:read", area, sample)


def _privacy(name: str, area: str, sample: Mapping[str, object]) -> EventType:
    return EventType(name, "privacy", f"{area}:read", area, sample)


def _app(name: str, sample: Mapping[str, object]) -> EventType:
    return EventType(name, "app", None, None, sample)


def _record(base: Mapping[str, object], **changes: object) -> dict[str, object]:
    return {**base, **changes}


_CUSTOMER: Final[Mapping[str, object]] = {
    "id": "cus_7Hq2mX9d",
    "name": "Acme Trading Ltd",
    "email": "accounts@acme.example",
    "createdAt": "2026-09-22T09:14:03Z",
}
_SUPPLIER: Final[Mapping[str, object]] = {
    "id": "sup_3Tb8kR1w",
    "name": "Northwind Paper Co",
    "email": "billing@northwind.example",
    "createdAt": "2026-09-10T15:02:41Z",
}
_INVOICE: Final[Mapping[str, object]] = {
    "id": "inv_4Kp8sT2a",
    "number": "INV-0042",
    "status": "draft",
    "customerId": "cus_7Hq2mX9d",
    "currency": "EUR",
    "total": "1210.00",
    "amountDue": "1210.00",
    "issueDate": "2026-09-22",
    "dueDate": "2026-10-22",
    "lines": [{"description": "Consulting, September", "quantity": "8", "unitPrice": "151.25"}],
}
_PAYMENT: Final[Mapping[str, object]] = {
    "id": "pay_9Wc5nL6e",
    "invoiceId": "inv_4Kp8sT2a",
    "amount": "1210.00",
    "currency": "EUR",
    "status": "received",
    "receivedOn": "2026-10-02",
}
_PURCHASE: Final[Mapping[str, object]] = {
    "id": "pur_2Fm6vQ8j",
    "number": "PUR-0107",
    "status": "open",
    "supplierId": "sup_3Tb8kR1w",
    "currency": "EUR",
    "total": "348.50",
    "amountDue": "348.50",
    "billDate": "2026-09-18",
    "dueDate": "2026-10-18",
}
_PURCHASE_RETURN: Final[Mapping[str, object]] = {
    "id": "prt_5Ld1yH4c",
    "purchaseId": "pur_2Fm6vQ8j",
    "supplierId": "sup_3Tb8kR1w",
    "status": "open",
    "currency": "EUR",
    "total": "49.90",
    "returnDate": "2026-09-25",
}
_QUOTE: Final[Mapping[str, object]] = {
    "id": "quo_8Np3gZ7s",
    "number": "QUO-0019",
    "status": "draft",
    "customerId": "cus_7Hq2mX9d",
    "currency": "EUR",
    "total": "2400.00",
    "issueDate": "2026-09-20",
    "validUntil": "2026-10-20",
}
_ACCOUNT: Final[Mapping[str, object]] = {
    "id": "acc_6Rj4tB3u",
    "code": "4000",
    "name": "Sales revenue",
    "type": "income",
    "archived": False,
}
_JOURNAL_ENTRY: Final[Mapping[str, object]] = {
    "id": "jnl_1Xe9pK5m",
    "number": "JE-0311",
    "status": "posted",
    "date": "2026-09-30",
    "memo": "Accrued September rent",
    "lines": [
        {"accountId": "acc_2Yf7qC8n", "debit": "950.00", "credit": "0.00"},
        {"accountId": "acc_0Zg3rD6o", "debit": "0.00", "credit": "950.00"},
    ],
}
_INSTALLATION_ID: Final = "ins_4Hs2wE9b"

EVENTS: Final[tuple[EventType, ...]] = (
    # App lifecycle and app-level notices: no gating scope.
    _app(
        "app.installed",
        {
            "installationId": _INSTALLATION_ID,
            "state": "ACTIVE",
            "scopes": ["invoices:read", "customers:read"],
        },
    ),
    _app(
        "app.uninstalled",
        {"installationId": _INSTALLATION_ID, "uninstalledAt": "2026-10-05T08:30:00Z"},
    ),
    _app(
        "app.scopes_updated",
        {
            "installationId": _INSTALLATION_ID,
            "scopes": ["invoices:read", "customers:read", "payments:read"],
            "previousScopes": ["invoices:read", "customers:read"],
        },
    ),
    _app(
        "business.redact",
        {"installationId": _INSTALLATION_ID, "requestedAt": "2026-10-07T08:30:00Z"},
    ),
    _app(
        "app_data.updated",
        {
            "id": "apd_3Vk8fN2x",
            "resourceType": "invoice",
            "resourceId": "inv_4Kp8sT2a",
            "key": "syncStatus",
            "value": "exported",
        },
    ),
    # Privacy notices: the app must erase what it holds about the person.
    _privacy(
        "customer.redact",
        "customers",
        {
            "customerId": "cus_7Hq2mX9d",
            "email": "accounts@acme.example",
            "requestedAt": "2026-10-01T12:00:00Z",
        },
    ),
    _privacy(
        "supplier.redact",
        "suppliers",
        {
            "supplierId": "sup_3Tb8kR1w",
            "email": "billing@northwind.example",
            "requestedAt": "2026-10-01T12:00:00Z",
        },
    ),
    # Business events, by area.
    _business("customer.created", "customers", _record(_CUSTOMER)),
    _business("customer.updated", "customers", _record(_CUSTOMER, email="ap@acme.example")),
    _business("customer.deleted", "customers", {"id": "cus_7Hq2mX9d"}),
    _business("supplier.created", "suppliers", _record(_SUPPLIER)),
    _business("supplier.updated", "suppliers", _record(_SUPPLIER, name="Northwind Paper GmbH")),
    _business("supplier.deleted", "suppliers", {"id": "sup_3Tb8kR1w"}),
    _business("invoice.created", "invoices", _record(_INVOICE)),
    _business("invoice.updated", "invoices", _record(_INVOICE, dueDate="2026-10-31")),
    _business(
        "invoice.sent", "invoices", _record(_INVOICE, status="sent", sentAt="2026-09-22T10:05:00Z")
    ),
    _business(
        "invoice.paid",
        "invoices",
        _record(_INVOICE, status="paid", amountDue="0.00", paidAt="2026-10-02T14:21:09Z"),
    ),
    _business("invoice.overdue", "invoices", _record(_INVOICE, status="overdue")),
    _business(
        "invoice.voided",
        "invoices",
        _record(_INVOICE, status="void", amountDue="0.00", voidedAt="2026-09-23T09:00:00Z"),
    ),
    _business("invoice.deleted", "invoices", {"id": "inv_4Kp8sT2a", "number": "INV-0042"}),
    _business("payment.received", "payments", _record(_PAYMENT)),
    _business("payment.updated", "payments", _record(_PAYMENT, receivedOn="2026-10-01")),
    _business(
        "payment.refunded",
        "payments",
        _record(_PAYMENT, status="refunded", refundedAmount="1210.00", refundedOn="2026-10-09"),
    ),
    _business("payment.deleted", "payments", {"id": "pay_9Wc5nL6e"}),
    _business("purchase.created", "purchases", _record(_PURCHASE)),
    _business("purchase.updated", "purchases", _record(_PURCHASE, dueDate="2026-10-25")),
    _business(
        "purchase.paid",
        "purchases",
        _record(_PURCHASE, status="paid", amountDue="0.00", paidAt="2026-10-12T11:40:00Z"),
    ),
    _business("purchase.deleted", "purchases", {"id": "pur_2Fm6vQ8j", "number": "PUR-0107"}),
    _business("purchase_return.created", "purchase-returns", _record(_PURCHASE_RETURN)),
    _business(
        "purchase_return.updated", "purchase-returns", _record(_PURCHASE_RETURN, total="59.90")
    ),
    _business(
        "purchase_return.refunded",
        "purchase-returns",
        _record(_PURCHASE_RETURN, status="refunded", refundedOn="2026-10-03"),
    ),
    _business("purchase_return.deleted", "purchase-returns", {"id": "prt_5Ld1yH4c"}),
    _business("quote.created", "quotes", _record(_QUOTE)),
    _business("quote.updated", "quotes", _record(_QUOTE, total="2200.00")),
    _business(
        "quote.sent", "quotes", _record(_QUOTE, status="sent", sentAt="2026-09-20T16:45:00Z")
    ),
    _business(
        "quote.accepted",
        "quotes",
        _record(_QUOTE, status="accepted", acceptedAt="2026-09-24T08:12:30Z"),
    ),
    _business(
        "quote.declined",
        "quotes",
        _record(_QUOTE, status="declined", declinedAt="2026-09-24T08:12:30Z"),
    ),
    _business(
        "quote.converted",
        "quotes",
        _record(_QUOTE, status="converted", invoiceId="inv_4Kp8sT2a"),
    ),
    _business("quote.deleted", "quotes", {"id": "quo_8Np3gZ7s", "number": "QUO-0019"}),
    _business("account.created", "accounts", _record(_ACCOUNT)),
    _business("account.updated", "accounts", _record(_ACCOUNT, name="Revenue from services")),
    _business("account.archived", "accounts", _record(_ACCOUNT, archived=True)),
    _business("account.deleted", "accounts", {"id": "acc_6Rj4tB3u", "code": "4000"}),
    _business("journal_entry.posted", "journal", _record(_JOURNAL_ENTRY)),
    _business(
        "journal_entry.reversed",
        "journal",
        _record(_JOURNAL_ENTRY, status="reversed", reversalEntryId="jnl_7Cw2hM4q"),
    ),
)
"""The event catalog: 45 event types in a stable order (app, privacy, then business by area)."""

EVENT_NAMES: Final[tuple[str, ...]] = tuple(event.name for event in EVENTS)

_EVENTS_BY_NAME: Final[Mapping[str, EventType]] = MappingProxyType(
    {event.name: event for event in EVENTS}
)

DEFAULT_TEST_EVENT: Final = "invoice.created"
"""Type of a test delivery or test run for a webhook or function subscribed to no event."""


def event_type(name: str) -> EventType | None:
    """Look an event type up by its name; None when the catalog has no such event."""
    return _EVENTS_BY_NAME.get(name)
