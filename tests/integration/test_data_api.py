"""The data API's business areas: both gates, records per business, events in the same
transaction, money as decimal strings, the plan's invoice ceiling, versions, idempotency."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import trio

from ledgerport import apps, books, catalog
from ledgerport.engine import Scheduler

from .data_api import ALL_SCOPES, LINE, Api, member_api, owner_api
from .oauth_helpers import full_grant

# What each role may do by default (contract.md role defaults), per representative write.
WRITES = {
    "customer": ("POST", "/customers", {"name": "Northwind"}),
    "account": ("POST", "/accounts", {"code": "4100", "name": "Sales", "type": "income"}),
}
ROLE_MATRIX = [
    ("owner", "customer", 201),
    ("admin", "customer", 201),
    ("accountant", "customer", 201),
    ("viewer", "customer", 403),
    ("owner", "account", 201),
    ("admin", "account", 201),
    ("accountant", "account", 403),
    ("viewer", "account", 403),
]


async def _events(platform: Any, business_id: str) -> list[tuple[str, dict[str, Any]]]:
    async with platform.store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT type, data FROM events WHERE business_id = $1 AND app_id IS NULL ORDER BY seq",
            business_id,
        )
    return [(row["type"], json.loads(row["data"])) for row in rows]


async def _records(platform: Any, kind: str) -> int:
    async with platform.store.transaction() as tx:
        count: int = await tx.fetchval(
            "SELECT COUNT(*) FROM records WHERE kind = $1 AND deleted_at IS NULL", kind
        )
    return count


# --- the two gates -------------------------------------------------------------------------------


@pytest.mark.parametrize(("role", "write", "status"), ROLE_MATRIX)
async def test_role_permissions_gate_writes(
    client: Any, admin_headers: dict[str, str], role: str, write: str, status: int
) -> None:
    owner = await owner_api(client, admin_headers)
    api = owner if role == "owner" else await member_api(client, admin_headers, owner, role)
    method, path, body = WRITES[write]

    response = await api.call(method, path, body)

    answer = await response.get_json()
    assert response.status_code == status, answer
    if status == 403:
        assert answer["code"] == "PERMISSION_DENIED"
        assert not answer["message"].startswith("Insufficient scope")


@pytest.mark.parametrize("role", ["owner", "admin", "accountant", "viewer"])
async def test_every_role_reads(client: Any, admin_headers: dict[str, str], role: str) -> None:
    owner = await owner_api(client, admin_headers)
    await owner.customer()
    api = owner if role == "owner" else await member_api(client, admin_headers, owner, role)

    page = await api.ok("GET", "/customers")

    assert len(page["data"]) == 1


async def test_viewer_token_reads_but_never_writes(client: Any, admin_headers: dict[str, str]):
    owner = await owner_api(client, admin_headers)
    customer = await owner.customer()
    viewer = await member_api(client, admin_headers, owner, "viewer")

    for method, path, body in [
        ("POST", "/customers", {"name": "X"}),
        ("PATCH", f"/customers/{customer['id']}", {"name": "Y"}),
        ("POST", "/invoices", {"customerId": customer["id"], "lines": [LINE]}),
        ("DELETE", f"/customers/{customer['id']}", None),
    ]:
        response = await viewer.call(method, path, body)
        assert response.status_code == 403, (method, path)


async def test_missing_scope_is_insufficient_scope(client: Any, admin_headers: dict[str, str]):
    owner = await owner_api(client, admin_headers)
    narrow = await full_grant(client, owner.world, scope="customers:read")
    api = Api(client, narrow["access_token"], owner.world)

    response = await api.call("POST", "/customers", {"name": "X"})

    answer = await response.get_json()
    assert response.status_code == 403
    assert answer["message"].startswith("Insufficient scope")


@pytest.mark.parametrize(
    ("permission", "method", "path_of"),
    [
        ("journal:post", "POST", lambda ids: "/journal-entries"),
        ("payments:delete", "DELETE", lambda ids: f"/payments/{ids['payment']}"),
    ],
)
async def test_sensitive_permissions_refuse_an_accountant(
    client: Any, admin_headers: dict[str, str], permission: str, method: str, path_of: Any
) -> None:
    owner = await owner_api(client, admin_headers)
    customer = await owner.customer()
    invoice = await owner.invoice(customer["id"])
    payment = await owner.ok(
        "POST", "/payments", {"invoiceId": invoice["id"], "amount": "1.00"}, 201
    )
    accountant = await member_api(client, admin_headers, owner, "accountant")
    body = {
        "lines": [
            {"accountId": "acc_00000000000000000000000a", "debit": "1.00"},
            {"accountId": "acc_00000000000000000000000b"},
        ]
    }

    response = await accountant.call(method, path_of({"payment": payment["id"]}), body)

    answer = await response.get_json()
    assert response.status_code == 403, answer
    assert answer["params"]["p0"] == permission


# --- records per business ------------------------------------------------------------------------


async def test_another_business_record_is_not_found(client: Any, admin_headers: dict[str, str]):
    first = await owner_api(client, admin_headers)
    second = await owner_api(client, admin_headers)
    customer = await first.customer()

    response = await second.call("GET", f"/customers/{customer['id']}")

    answer = await response.get_json()
    assert response.status_code == 404
    assert answer["code"] == "RECORD_NOT_FOUND"
    invoice = await second.call(
        "POST", "/invoices", {"customerId": customer["id"], "lines": [LINE]}
    )
    assert invoice.status_code == 404


async def test_lists_page_with_limit_and_cursor(client: Any, admin_headers: dict[str, str]):
    api = await owner_api(client, admin_headers)
    names = [f"Customer {n}" for n in range(5)]
    for name in names:
        await api.customer(name)

    seen, cursor = [], None
    while True:
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        response = await api.call("GET", "/customers", query=query)
        page = await response.get_json()
        seen += [customer["name"] for customer in page["data"]]
        cursor = page["next"]
        if cursor is None:
            break

    assert seen == names


# --- invoices ------------------------------------------------------------------------------------


async def test_invoices_are_numbered_per_business_and_priced_in_decimals(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    other = await owner_api(client, admin_headers)
    customer = await api.customer()
    lines = [
        {"description": "Hours", "quantity": "3", "unitPrice": "0.10"},
        {"description": "Paper", "quantity": "0.3333", "unitPrice": "3.00"},
    ]

    first = await api.invoice(customer["id"], lines=lines)
    second = await api.invoice(customer["id"])
    elsewhere = await other.invoice((await other.customer())["id"])

    assert (first["number"], second["number"], elsewhere["number"]) == (
        "INV-0001",
        "INV-0002",
        "INV-0001",
    )
    assert first["total"] == "1.30"  # 0.30 + 1.00 (0.9999 rounded per line), not 1.2999...
    assert first["amountDue"] == "1.30"
    assert first["status"] == "draft"


@pytest.mark.parametrize(
    "line",
    [
        {"quantity": 2, "unitPrice": "1.00"},
        {"quantity": "2", "unitPrice": 1.5},
        {"quantity": "1e3", "unitPrice": "1.00"},
        {"quantity": "0", "unitPrice": "1.00"},
        {"quantity": "1", "unitPrice": "-1.00"},
        {"quantity": "1", "unitPrice": "1.00001"},
    ],
    ids=["int-quantity", "float-price", "exponent", "zero-quantity", "negative", "five-decimals"],
)
async def test_money_never_passes_through_numbers(
    client: Any, admin_headers: dict[str, str], line: dict[str, Any]
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer()

    response = await api.call("POST", "/invoices", {"customerId": customer["id"], "lines": [line]})

    answer = await response.get_json()
    assert response.status_code == 400, answer
    assert isinstance(answer["message"], list)
    assert "code" not in answer


async def test_bulk_import_creates_all_or_none(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer()
    good = {"customerId": customer["id"], "lines": [LINE]}
    bad = {"customerId": customer["id"], "lines": [{**LINE, "quantity": "-1"}]}

    refused = await api.call("POST", "/invoices/bulk-import", {"invoices": [good, bad, good]})
    imported = await api.ok("POST", "/invoices/bulk-import", {"invoices": [good, good]}, 201)

    answer = await refused.get_json()
    assert refused.status_code == 400
    assert any(message.startswith("invoices.1.") for message in answer["message"])
    assert [invoice["number"] for invoice in imported["data"]] == ["INV-0001", "INV-0002"]
    assert await _records(platform, "invoice") == 2


async def test_bulk_import_of_more_than_200_is_a_validation_error(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer()
    invoice = {"customerId": customer["id"], "lines": [LINE]}

    response = await api.call(
        "POST", "/invoices/bulk-import", {"invoices": [invoice] * (catalog.BULK_IMPORT_MAX + 1)}
    )

    answer = await response.get_json()
    assert response.status_code == 400
    assert isinstance(answer["message"], list)
    assert "code" not in answer


@pytest.mark.parametrize(
    ("business", "invoices", "total_line"),
    [
        ({"plan": "free", "invoiceLimit": 2}, 2, LINE),
        ({"plan": "paid", "invoiceLimit": 1}, 1, LINE),
        (
            {"plan": "free"},
            0,
            {"description": "Big", "quantity": "1", "unitPrice": "100000.01"},
        ),
    ],
    ids=["free-count", "paid-yearly-limit", "free-turnover-cap"],
)
async def test_plan_ceiling_blocks_only_new_invoices(
    client: Any,
    admin_headers: dict[str, str],
    business: dict[str, Any],
    invoices: int,
    total_line: dict[str, str],
) -> None:
    capped = await owner_api(client, admin_headers, business_fields=business)
    customer = await capped.customer()
    for _ in range(invoices):
        await capped.invoice(customer["id"])

    refused = await capped.call(
        "POST", "/invoices", {"customerId": customer["id"], "lines": [total_line]}
    )

    answer = await refused.get_json()
    assert refused.status_code == 403, answer
    assert answer["code"] == "PLAN_INVOICE_LIMIT_REACHED"
    # Only new invoices: reads and other writes go on.
    assert (await capped.call("GET", "/invoices")).status_code == 200
    assert (await capped.call("POST", "/customers", {"name": "Still fine"})).status_code == 201


async def test_a_year_of_the_largest_invoices_never_overflows_its_turnover(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    """A paid business's year at the edge of what a count of cents holds (as after thousands
    of invoices at the largest total): its invoices are still made, one by one and in bulk."""
    paid = await owner_api(client, admin_headers, business_fields={"plan": "paid"})
    customer = await paid.customer()
    await paid.invoice(customer["id"])
    async with platform.store.transaction() as tx:
        await tx.execute(
            "UPDATE invoice_years SET turnover_cents = $1 WHERE business_id = $2",
            2**63 - 2,
            paid.world.business_id,
        )
    largest = {"description": "Largest", "quantity": "1", "unitPrice": "9999999999999.99"}
    invoice = {"customerId": customer["id"], "lines": [largest]}
    made = await paid.call("POST", "/invoices", invoice)
    assert made.status_code == 201, await made.get_json()
    imported = await paid.call("POST", "/invoices/bulk-import", {"invoices": [invoice] * 3})
    assert imported.status_code == 201, await imported.get_json()
    assert len((await imported.get_json())["data"]) == 3


async def _made(api: Api, kind: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A record of ``kind``: its path, the same values again, and a change of it."""
    if kind in ("customer", "supplier"):
        made = await api.ok("POST", f"/{kind}s", {"name": "Acme"}, 201)
        return f"/{kind}s/{made['id']}", {"name": "Acme"}, {"name": "Acme Trading"}
    if kind == "account":
        made = await api.ok(
            "POST", "/accounts", {"code": "4100", "name": "Sales", "type": "income"}, 201
        )
        return f"/accounts/{made['id']}", {"name": "Sales", "type": "income"}, {"name": "Revenue"}
    if kind in ("invoice", "quote", "payment"):
        customer = await api.customer()
        path = "/quotes" if kind == "quote" else "/invoices"
        made = await api.ok("POST", path, {"customerId": customer["id"], "lines": [LINE]}, 201)
        if kind == "payment":
            paid = {"invoiceId": made["id"], "amount": "1.00"}
            made = await api.ok("POST", "/payments", paid, 201)
            same = {"receivedOn": made["receivedOn"]}
            return f"/payments/{made['id']}", same, {"receivedOn": "2026-01-02"}
        return f"{path}/{made['id']}", {"lines": [LINE]}, {"lines": [{**LINE, "quantity": "3"}]}
    supplier = await api.ok("POST", "/suppliers", {"name": "Northwind"}, 201)
    made = await api.ok("POST", "/purchases", {"supplierId": supplier["id"], "lines": [LINE]}, 201)
    if kind == "purchase_return":
        returned = {"purchaseId": made["id"], "lines": [{**LINE, "quantity": "1"}]}
        made = await api.ok("POST", "/purchase-returns", returned, 201)
        return (
            f"/purchase-returns/{made['id']}",
            {"lines": [{**LINE, "quantity": "1"}]},
            {"returnDate": "2026-01-02"},
        )
    return f"/purchases/{made['id']}", {"lines": [LINE]}, {"dueDate": "2026-12-31"}


@pytest.mark.parametrize(
    "kind",
    [
        "customer",
        "supplier",
        "account",
        "invoice",
        "quote",
        "payment",
        "purchase",
        "purchase_return",
    ],
)
async def test_an_update_that_changes_nothing_records_no_event(
    client: Any, admin_headers: dict[str, str], platform: Any, kind: str
) -> None:
    """A PATCH with nothing in it, or with the values the record has, answers the record as it
    is and records no ``.updated`` event for webhooks and functions to act on; a change does."""
    api = await owner_api(client, admin_headers)
    path, same, change = await _made(api, kind)
    before = await api.ok("GET", path)
    updated = f"{kind}.updated"

    assert await api.ok("PATCH", path, {}) == before
    assert await api.ok("PATCH", path, same) == before
    kinds = [event for event, _ in await _events(platform, api.world.business_id)]
    assert updated not in kinds

    changed = await api.ok("PATCH", path, change)
    assert changed != before
    kinds = [event for event, _ in await _events(platform, api.world.business_id)]
    assert kinds.count(updated) == 1


# --- payments ------------------------------------------------------------------------------------


async def test_partial_then_full_payment_pays_the_invoice(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer()
    invoice = await api.invoice(customer["id"])  # 301.00

    await api.ok("POST", "/payments", {"invoiceId": invoice["id"], "amount": "100.00"}, 201)
    over = await api.call("POST", "/payments", {"invoiceId": invoice["id"], "amount": "201.01"})
    await api.ok("POST", "/payments", {"invoiceId": invoice["id"], "amount": "201"}, 201)
    paid = await api.ok("GET", f"/invoices/{invoice['id']}")
    again = await api.call("POST", "/payments", {"invoiceId": invoice["id"], "amount": "1.00"})

    assert over.status_code == 400
    assert (paid["status"], paid["amountDue"]) == ("paid", "0.00")
    assert again.status_code == 409
    kinds = [kind for kind, _ in await _events(platform, api.world.business_id)]
    assert kinds[-3:] == ["payment.received", "payment.received", "invoice.paid"]


async def test_deleting_a_payment_reopens_the_invoice(client: Any, admin_headers: dict[str, str]):
    api = await owner_api(client, admin_headers)
    invoice = await api.invoice((await api.customer())["id"])
    payment = await api.ok(
        "POST", "/payments", {"invoiceId": invoice["id"], "amount": "301.00"}, 201
    )

    await api.ok("DELETE", f"/payments/{payment['id']}", status=204)

    reopened = await api.ok("GET", f"/invoices/{invoice['id']}")
    assert (reopened["status"], reopened["amountDue"]) == ("draft", "301.00")
    assert (await api.call("GET", f"/payments/{payment['id']}")).status_code == 404


# --- purchases, returns, quotes, ledger ---------------------------------------------------------


async def test_purchases_returns_and_quotes_record_their_events(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    supplier = await api.ok("POST", "/suppliers", {"name": "Northwind"}, 201)
    purchase = await api.ok(
        "POST", "/purchases", {"supplierId": supplier["id"], "lines": [LINE]}, 201
    )
    await api.ok("PATCH", f"/purchases/{purchase['id']}", {"dueDate": "2026-12-31"})
    returned = await api.ok(
        "POST", "/purchase-returns", {"purchaseId": purchase["id"], "lines": [LINE]}, 201
    )
    refunded = await api.ok("POST", f"/purchase-returns/{returned['id']}/refund")
    too_much = await api.call(
        "POST",
        "/purchase-returns",
        {"purchaseId": purchase["id"], "lines": [{**LINE, "quantity": "3"}]},
    )
    quote = await api.ok(
        "POST", "/quotes", {"customerId": (await api.customer())["id"], "lines": [LINE]}, 201
    )
    await api.ok("DELETE", f"/quotes/{quote['id']}", status=204)

    assert refunded["status"] == "refunded"
    assert too_much.status_code == 400
    kinds = [kind for kind, _ in await _events(platform, api.world.business_id)]
    for expected in (
        "purchase.created",
        "purchase.updated",
        "purchase_return.created",
        "purchase_return.refunded",
        "quote.created",
        "quote.deleted",
    ):
        assert expected in kinds


async def test_journal_entries_must_balance(client: Any, admin_headers: dict[str, str]):
    api = await owner_api(client, admin_headers)
    cash = await api.ok("POST", "/accounts", {"code": "1000", "name": "Cash", "type": "asset"}, 201)
    sales = await api.ok(
        "POST", "/accounts", {"code": "4000", "name": "Sales", "type": "income"}, 201
    )
    taken = await api.call("POST", "/accounts", {"code": "1000", "name": "Again", "type": "asset"})

    unbalanced = await api.call(
        "POST",
        "/journal-entries",
        {
            "lines": [
                {"accountId": cash["id"], "debit": "10.00"},
                {"accountId": sales["id"], "credit": "9.99"},
            ]
        },
    )
    posted = await api.ok(
        "POST",
        "/journal-entries",
        {
            "lines": [
                {"accountId": cash["id"], "debit": "10.00"},
                {"accountId": sales["id"], "credit": "10"},
            ]
        },
        201,
    )
    await api.ok("POST", f"/accounts/{sales['id']}/archive")
    archived = await api.call(
        "POST",
        "/journal-entries",
        {
            "lines": [
                {"accountId": cash["id"], "debit": "1.00"},
                {"accountId": sales["id"], "credit": "1.00"},
            ]
        },
    )

    assert (await taken.get_json())["code"] == "ACCOUNT_CODE_TAKEN"
    assert unbalanced.status_code == 400
    assert "not balanced" in " ".join((await unbalanced.get_json())["message"])
    assert (posted["number"], posted["lines"][1]["credit"]) == ("JE-0001", "10.00")
    assert archived.status_code == 400


# --- events: the outbox ---------------------------------------------------------------------------


async def test_event_payloads_carry_the_catalog_samples_fields(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer()
    invoice = await api.invoice(customer["id"])
    await api.ok("POST", "/payments", {"invoiceId": invoice["id"], "amount": "301.00"}, 201)

    for kind, data in await _events(platform, api.world.business_id):
        event = catalog.event_type(kind)
        assert event is not None
        assert set(event.sample) <= set(data), kind


async def test_a_failed_write_leaves_no_event_and_no_record(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    before = await _events(platform, api.world.business_id)

    response = await api.call(
        "POST", "/invoices", {"customerId": "cus_00000000000000000000000f", "lines": [LINE]}
    )

    assert response.status_code == 404
    assert await _events(platform, api.world.business_id) == before
    assert await _records(platform, "invoice") == 0


async def test_an_event_never_outlives_its_write(platform: Any) -> None:
    """A failure after the write, in the same transaction: neither the record nor its event."""

    class Interrupted(Exception):
        pass

    async with platform.store.transaction() as tx:
        business = await books.create_business(tx, now=platform.now(), name="Outbox")

    async def create_then_fail() -> None:
        async with platform.store.transaction() as tx:
            await books.create_party(
                tx,
                now=platform.now(),
                business_id=business.id,
                kind="customer",
                name="A",
                email=None,
            )
            raise Interrupted

    with trio.fail_after(30), pytest.raises(Interrupted):
        await create_then_fail()

    assert await _events(platform, business.id) == []
    assert await _records(platform, "customer") == 0


# --- versions ------------------------------------------------------------------------------------


async def test_version_from_header_else_pin_else_current(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    current = await api.call("GET", "/customers")
    chosen = await api.call("GET", "/customers", headers={"Service-Version": "2026-03-01"})
    unknown = await api.call("GET", "/customers", headers={"Service-Version": "2020-01-01"})
    async with platform.store.transaction() as tx:
        await apps.pin_version(
            tx, api.world.app_id, "2026-03-01", today=catalog.API_VERSIONS[-1].released
        )
    pinned = await api.call("GET", "/customers")
    overridden = await api.call("GET", "/customers", headers={"Service-Version": "2026-09-22"})

    assert current.headers["Service-Version"] == catalog.CURRENT_API_VERSION
    assert chosen.headers["Service-Version"] == "2026-03-01"
    assert unknown.status_code == 400
    assert (await unknown.get_json())["code"] == "UNSUPPORTED_API_VERSION"
    assert pinned.headers["Service-Version"] == "2026-03-01"
    assert overridden.headers["Service-Version"] == "2026-09-22"


@pytest.mark.parametrize("pinned", [None, "2026-03-01"], ids=["unpinned", "pinned"])
@pytest.mark.parametrize("sent", ["", "   "], ids=["empty", "blank"])
async def test_an_empty_version_header_names_no_version(
    client: Any, admin_headers: dict[str, str], platform: Any, pinned: str | None, sent: str
) -> None:
    """An absent header means the pin or the current version; a header sent empty names a
    version that does not exist (spec: Versioning), whatever the pin."""
    api = await owner_api(client, admin_headers)
    async with platform.store.transaction() as tx:
        await apps.pin_version(
            tx, api.world.app_id, pinned, today=catalog.API_VERSIONS[-1].released
        )

    response = await api.call("GET", "/customers", headers={"Service-Version": sent})

    assert response.status_code == 400
    assert (await response.get_json())["code"] == "UNSUPPORTED_API_VERSION"


async def test_a_version_past_its_sunset_is_refused(
    client: Any, admin_headers: dict[str, str], clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    oldest = catalog.API_VERSIONS[0]
    clock.set(
        datetime(oldest.sunset.year, oldest.sunset.month, oldest.sunset.day, tzinfo=UTC).timestamp()
    )
    api.token = await _fresh_token(client, api)
    response = await api.call("GET", "/customers", headers={"Service-Version": oldest.name})

    assert response.status_code == 400
    assert (await response.get_json())["code"] == "UNSUPPORTED_API_VERSION"


async def _fresh_token(client: Any, api: Api) -> str:
    return str((await full_grant(client, api.world, " ".join(ALL_SCOPES)))["access_token"])


# --- idempotency ---------------------------------------------------------------------------------


async def test_same_key_and_body_replays_and_writes_once(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    key = {"Idempotency-Key": "create-northwind-1"}

    first = await api.call("POST", "/customers", {"name": "Northwind"}, headers=key)
    second = await api.call("POST", "/customers", {"name": "Northwind"}, headers=key)
    other_body = await api.call("POST", "/customers", {"name": "Southwind"}, headers=key)

    assert first.status_code == second.status_code == 201
    assert await first.get_json() == await second.get_json()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert other_body.status_code == 400
    assert (await other_body.get_json())["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert await _records(platform, "customer") == 1


async def test_a_key_is_forgotten_after_24_hours(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    key = {"Idempotency-Key": "k-1"}
    await api.call("POST", "/customers", {"name": "Northwind"}, headers=key)
    clock.advance(catalog.IDEMPOTENCY_WINDOW)
    api.token = await _fresh_token(client, api)

    again = await api.call("POST", "/customers", {"name": "Northwind"}, headers=key)

    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again.headers
    assert await _records(platform, "customer") == 2


async def test_twenty_requests_with_one_key_write_once(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer()
    key = {"Idempotency-Key": "bulk-once"}
    body = {"customerId": customer["id"], "lines": [LINE]}
    answers: list[Any] = []

    async def send() -> None:
        response = await api.call("POST", "/invoices", body, headers=key)
        answers.append((response.status_code, await response.get_json()))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(send)

    assert {status for status, _ in answers} == {201}
    assert len({answer["id"] for _, answer in answers}) == 1
    assert await _records(platform, "invoice") == 1


# --- outside the partner surface, privacy notices ------------------------------------------------


@pytest.mark.parametrize("path", ["/users", "/settings/billing", "/roles/owner"])
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_product_routes_are_not_exposed_to_oauth_clients(
    client: Any, admin_headers: dict[str, str], path: str, method: str
) -> None:
    api = await owner_api(client, admin_headers)

    response = await api.call(method, path, {} if method == "POST" else None)

    answer = await response.get_json()
    assert response.status_code == 403
    assert answer["code"] == "ENDPOINT_NOT_EXPOSED"
    assert not answer["message"].startswith("Insufficient scope")


async def test_operator_redacts_a_customer_and_apps_are_told(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.ok("POST", "/customers", {"name": "Ada", "email": "ada@x.example"}, 201)

    response = await client.post(
        f"/admin/businesses/{api.world.business_id}/customers/{customer['id']}/redact",
        headers=admin_headers,
    )

    assert response.status_code == 200
    erased = await api.ok("GET", f"/customers/{customer['id']}")
    assert (erased["name"], erased["email"]) == ("Redacted", None)
    kind, data = (await _events(platform, api.world.business_id))[-1]
    assert kind == "customer.redact"
    assert (data["customerId"], data["email"]) == (customer["id"], "ada@x.example")


async def test_operator_redacts_a_business_and_every_installed_app_is_told(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)

    response = await client.post(
        f"/admin/businesses/{api.world.business_id}/redact", headers=admin_headers
    )

    assert response.status_code == 202
    assert (await response.get_json())["notified"] == 1
    async with platform.store.transaction() as tx:
        notices = await tx.fetch(
            "SELECT app_id FROM events WHERE type = 'business.redact' AND business_id = $1",
            api.world.business_id,
        )
    assert [row["app_id"] for row in notices] == [api.world.app_id]


async def test_the_cleanup_forgets_keys_older_than_24_hours(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    await api.call("POST", "/customers", {"name": "Kept a day"}, headers={"Idempotency-Key": "k"})
    scheduler = Scheduler(platform)

    kept = await scheduler.cleanup_once()
    clock.advance(catalog.IDEMPOTENCY_WINDOW)
    purged = await scheduler.cleanup_once()

    assert (kept["idempotency_key"], purged["idempotency_key"]) == (0, 1)
