"""Every business area of the data API through a served instance, with an OAuth access token.

An app backend provisioned by the operator exchanges a session token for an access token, then
works through customers, suppliers, invoices (with a bulk import and payments until paid),
purchases and a refunded return, quotes, the chart of accounts and a journal entry; the event
log shows what it did, in order.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ledgerport import catalog

from .served import Server, provision, served

ADMIN_TOKEN = "lp_admin_e2e-data-api-token-0123456789abcdef"
HTTP_TIMEOUT = 10.0
SCOPES = [s for s in catalog.SCOPES if s != "profile:read"]
LINE = {"description": "Consulting", "quantity": "4", "unitPrice": "125.00"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("data-api-e2e")
    with served(workdir, ADMIN_TOKEN, {"LEDGERPORT_PASSWORD_HASHING": "fast"}) as running:
        yield running


def _created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[httpx.Client]:
    """A client of the data API holding an access token with every area scope."""
    made = provision(server.base, ADMIN_TOKEN, SCOPES, "Full Books")
    with httpx.Client(
        base_url=server.base,
        timeout=HTTP_TIMEOUT,
        trust_env=False,
        headers={"Authorization": f"Bearer {made.access_token}"},
    ) as client:
        yield client


def test_every_area_through_a_served_instance(api: httpx.Client) -> None:
    customer = _created(api.post("/customers", json={"name": "Acme", "email": "ap@acme.example"}))
    supplier = _created(api.post("/suppliers", json={"name": "Northwind"}))

    invoice = _created(api.post("/invoices", json={"customerId": customer["id"], "lines": [LINE]}))
    imported = _created(
        api.post(
            "/invoices/bulk-import",
            json={"invoices": [{"customerId": customer["id"], "lines": [LINE]}] * 3},
        )
    )
    sent = _created(api.post(f"/invoices/{invoice['id']}/send"))
    _created(api.post("/payments", json={"invoiceId": invoice["id"], "amount": "200.00"}))
    _created(api.post("/payments", json={"invoiceId": invoice["id"], "amount": "300.00"}))
    paid = _created(api.get(f"/invoices/{invoice['id']}"))

    purchase = _created(
        api.post("/purchases", json={"supplierId": supplier["id"], "lines": [LINE]})
    )
    purchase = _created(api.patch(f"/purchases/{purchase['id']}", json={"dueDate": "2027-01-31"}))
    returned = _created(
        api.post("/purchase-returns", json={"purchaseId": purchase["id"], "lines": [LINE]})
    )
    refunded = _created(api.post(f"/purchase-returns/{returned['id']}/refund"))

    quote = _created(api.post("/quotes", json={"customerId": customer["id"], "lines": [LINE]}))
    assert api.delete(f"/quotes/{quote['id']}").status_code == 204

    cash = _created(api.post("/accounts", json={"code": "1000", "name": "Cash", "type": "asset"}))
    sales = _created(
        api.post("/accounts", json={"code": "4000", "name": "Sales", "type": "income"})
    )
    entry = _created(
        api.post(
            "/journal-entries",
            json={
                "lines": [
                    {"accountId": cash["id"], "debit": "500.00"},
                    {"accountId": sales["id"], "credit": "500.00"},
                ]
            },
        )
    )

    assert invoice["total"] == "500.00"
    assert [i["number"] for i in imported["data"]] == ["INV-0002", "INV-0003", "INV-0004"]
    assert sent["status"] == "sent"
    assert (paid["status"], paid["amountDue"]) == ("paid", "0.00")
    assert purchase["dueDate"] == "2027-01-31"
    assert refunded["status"] == "refunded"
    assert entry["status"] == "posted"
    assert api.get("/invoices", params={"limit": "2"}).json()["next"] is not None

    log = api.get("/events", params={"limit": "100"})
    assert log.status_code == 200, log.text
    kinds = [event["type"] for event in log.json()["data"]]
    expected = [
        "customer.created",
        "supplier.created",
        "invoice.created",
        "invoice.created",
        "invoice.created",
        "invoice.created",
        "invoice.sent",
        "payment.received",
        "payment.received",
        "invoice.paid",
        "purchase.created",
        "purchase.updated",
        "purchase_return.created",
        "purchase_return.refunded",
        "quote.created",
        "quote.deleted",
        "account.created",
        "account.created",
        "journal_entry.posted",
    ]
    assert [kind for kind in kinds if kind in set(expected)] == expected


def test_version_header_and_idempotent_retries(api: httpx.Client) -> None:
    key = {"Idempotency-Key": secrets.token_hex(8)}
    first = api.post("/customers", json={"name": "Once"}, headers=key)
    retry = api.post("/customers", json={"name": "Once"}, headers=key)
    old = api.get("/customers", headers={"Service-Version": "2026-03-01"})
    gone = api.get("/customers", headers={"Service-Version": "2000-01-01"})

    assert first.status_code == retry.status_code == 201
    assert first.json() == retry.json()
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert first.headers["Service-Version"] == catalog.CURRENT_API_VERSION
    assert first.headers["RateLimit-Limit"] == str(catalog.RATE_LIMIT_APP_PER_BUSINESS.limit)
    assert old.headers["Service-Version"] == "2026-03-01"
    assert gone.status_code == 400
    assert gone.json()["code"] == "UNSUPPORTED_API_VERSION"
