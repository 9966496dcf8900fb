"""The records' lifecycles past creation: payments updated and refunded, invoices overdue, quotes
sent, accepted, declined and converted, purchases paid, returns changed and deleted, accounts
deleted, journal entries reversed. Every business event of the catalog is recorded by some call.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio

from ledgerport import catalog
from ledgerport.engine import Scheduler

from .data_api import ALL_SCOPES, LINE, Api, member_api, owner_api
from .oauth_helpers import full_grant

DAY = 86_400.0


async def _events(platform: Any, business_id: str) -> list[tuple[str, dict[str, Any]]]:
    async with platform.store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT type, data FROM events WHERE business_id = $1 AND app_id IS NULL ORDER BY seq",
            business_id,
        )
    return [(row["type"], json.loads(row["data"])) for row in rows]


async def _kinds(platform: Any, api: Api) -> list[str]:
    return [kind for kind, _ in await _events(platform, api.world.business_id)]


def _date(platform: Any, days: int = 0) -> str:
    today = datetime.fromtimestamp(platform.now(), UTC).date()
    return (today + timedelta(days=days)).isoformat()


async def _refresh(client: Any, api: Api) -> None:
    """A new access token after the clock moved past the old one's lifetime."""
    api.token = (await full_grant(client, api.world, " ".join(ALL_SCOPES)))["access_token"]


async def _paid_invoice(api: Api, amount: str = "301.00") -> tuple[dict[str, Any], dict[str, Any]]:
    invoice = await api.invoice((await api.customer())["id"])  # 301.00
    await api.ok("POST", f"/invoices/{invoice['id']}/send")
    payment = await api.ok("POST", "/payments", {"invoiceId": invoice["id"], "amount": amount}, 201)
    return invoice, payment


async def _accounts(api: Api) -> tuple[dict[str, Any], dict[str, Any]]:
    cash = await api.ok("POST", "/accounts", {"code": "1000", "name": "Cash", "type": "asset"}, 201)
    sales = await api.ok(
        "POST", "/accounts", {"code": "4000", "name": "Sales", "type": "income"}, 201
    )
    return cash, sales


def _entry(debit_account: str, credit_account: str, amount: str = "10.00") -> dict[str, Any]:
    return {
        "lines": [
            {"accountId": debit_account, "debit": amount},
            {"accountId": credit_account, "credit": amount},
        ]
    }


# --- payments ------------------------------------------------------------------------------------


async def test_a_payment_changes_its_date_and_reference(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    _, payment = await _paid_invoice(api, "100.00")

    changed = await api.ok(
        "PATCH", f"/payments/{payment['id']}", {"receivedOn": "2026-10-01", "reference": "TX-9"}
    )
    cleared = await api.ok("PATCH", f"/payments/{payment['id']}", {"reference": None})
    bad_date = await api.call("PATCH", f"/payments/{payment['id']}", {"receivedOn": "2026-02-30"})
    no_amount = await api.call("PATCH", f"/payments/{payment['id']}", {"amount": "1.00"})

    assert (changed["receivedOn"], changed["reference"]) == ("2026-10-01", "TX-9")
    assert cleared["reference"] is None
    assert (bad_date.status_code, no_amount.status_code) == (400, 400)
    assert (await _kinds(platform, api)).count("payment.updated") == 2


async def test_refunds_in_part_then_in_full_make_the_invoice_due_again(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    invoice, payment = await _paid_invoice(api)

    part = await api.ok("POST", f"/payments/{payment['id']}/refund", {"amount": "1.00"})
    too_much = await api.call("POST", f"/payments/{payment['id']}/refund", {"amount": "300.01"})
    # No body at all: the rest.
    rest = await api.ok("POST", f"/payments/{payment['id']}/refund", None)
    again = await api.call("POST", f"/payments/{payment['id']}/refund", None)
    reopened = await api.ok("GET", f"/invoices/{invoice['id']}")

    assert (part["status"], part["refundedAmount"]) == ("partially_refunded", "1.00")
    assert too_much.status_code == 400
    assert (rest["status"], rest["refundedAmount"]) == ("refunded", "301.00")
    assert again.status_code == 409
    assert (await again.get_json())["code"] == "INVALID_STATE"
    assert (reopened["status"], reopened["amountDue"]) == ("sent", "301.00")
    assert "paidAt" not in reopened
    kinds = await _kinds(platform, api)
    assert kinds[-2:] == ["payment.refunded", "payment.refunded"]


async def test_deleting_a_partly_refunded_payment_adds_back_only_what_was_kept(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    invoice, payment = await _paid_invoice(api, "100.00")
    await api.ok("POST", f"/payments/{payment['id']}/refund", {"amount": "40.00"})

    await api.ok("DELETE", f"/payments/{payment['id']}", status=204)

    assert (await api.ok("GET", f"/invoices/{invoice['id']}"))["amountDue"] == "301.00"


# --- overdue invoices ----------------------------------------------------------------------------


async def test_a_sent_invoice_past_its_due_date_becomes_overdue_once(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = (await api.customer())["id"]
    due = await api.invoice(customer, dueDate=_date(platform, 3))
    draft = await api.invoice(customer, dueDate=_date(platform, 1))
    voided = await api.invoice(customer, dueDate=_date(platform, 1))
    later = await api.invoice(customer, dueDate=_date(platform, 30))
    for invoice in (due, voided, later):
        await api.ok("POST", f"/invoices/{invoice['id']}/send")
    await api.ok("POST", f"/invoices/{voided['id']}/void")
    scheduler = Scheduler(platform)

    on_the_due_date = (clock.advance(3 * DAY), await scheduler.mark_overdue())[1]
    the_day_after = (clock.advance(DAY), await scheduler.mark_overdue())[1]
    next_run = await scheduler.mark_overdue()
    await _refresh(client, api)

    assert (on_the_due_date, the_day_after, next_run) == (0, 1, 0)
    overdue = await api.ok("GET", f"/invoices/{due['id']}")
    assert overdue["status"] == "overdue"
    assert "overdueAt" in overdue
    for untouched, status in ((draft, "draft"), (voided, "void"), (later, "sent")):
        assert (await api.ok("GET", f"/invoices/{untouched['id']}"))["status"] == status
    overdue_events = [
        d for k, d in await _events(platform, api.world.business_id) if k == "invoice.overdue"
    ]
    assert [event["id"] for event in overdue_events] == [due["id"]]


async def test_an_overdue_invoice_is_paid_and_overdue_again_when_refunded(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    invoice = await api.invoice((await api.customer())["id"], dueDate=_date(platform, 1))
    await api.ok("POST", f"/invoices/{invoice['id']}/send")
    clock.advance(2 * DAY)
    await Scheduler(platform).mark_overdue()
    await _refresh(client, api)

    payment = await api.ok(
        "POST", "/payments", {"invoiceId": invoice["id"], "amount": "301.00"}, 201
    )
    paid = await api.ok("GET", f"/invoices/{invoice['id']}")
    await api.ok("POST", f"/payments/{payment['id']}/refund", None)
    refunded = await api.ok("GET", f"/invoices/{invoice['id']}")
    await Scheduler(platform).mark_overdue()

    assert paid["status"] == "paid"
    assert (refunded["status"], refunded["amountDue"]) == ("overdue", "301.00")
    assert (await _kinds(platform, api)).count("invoice.overdue") == 1


async def test_the_overdue_scan_goes_past_a_full_batch(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = (await api.customer())["id"]
    for _ in range(5):
        invoice = await api.invoice(customer, dueDate=_date(platform, 1))
        await api.ok("POST", f"/invoices/{invoice['id']}/send")
    clock.advance(2 * DAY)

    assert await Scheduler(platform, overdue_batch=2).mark_overdue() == 5


# --- quotes --------------------------------------------------------------------------------------


async def _quote(api: Api, **extra: Any) -> dict[str, Any]:
    body = {"customerId": (await api.customer())["id"], "lines": [LINE], **extra}
    return await api.ok("POST", "/quotes", body, 201)  # type: ignore[no-any-return]


async def test_a_quote_is_sent_accepted_and_converted_into_an_invoice(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    quote = await _quote(api, currency="USD")

    accept_draft = await api.call("POST", f"/quotes/{quote['id']}/accept")
    sent = await api.ok("POST", f"/quotes/{quote['id']}/send")
    edit_sent = await api.call("PATCH", f"/quotes/{quote['id']}", {"validUntil": None})
    accepted = await api.ok("POST", f"/quotes/{quote['id']}/accept")
    invoice = await api.ok("POST", f"/quotes/{quote['id']}/convert", status=201)
    converted = await api.ok("GET", f"/quotes/{quote['id']}")
    twice = await api.call("POST", f"/quotes/{quote['id']}/convert")

    assert accept_draft.status_code == edit_sent.status_code == twice.status_code == 409
    assert (sent["status"], accepted["status"]) == ("sent", "accepted")
    assert (invoice["status"], invoice["customerId"], invoice["currency"]) == (
        "draft",
        quote["customerId"],
        "USD",
    )
    assert (invoice["total"], invoice["lines"]) == (quote["total"], quote["lines"])
    assert (converted["status"], converted["invoiceId"]) == ("converted", invoice["id"])
    kinds = await _kinds(platform, api)
    assert kinds[-4:] == ["quote.sent", "quote.accepted", "invoice.created", "quote.converted"]


async def test_a_declined_or_expired_quote_is_not_accepted(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    declined = await _quote(api)
    expiring = await _quote(api, validUntil=_date(platform, 2))
    for quote in (declined, expiring):
        await api.ok("POST", f"/quotes/{quote['id']}/send")

    await api.ok("POST", f"/quotes/{declined['id']}/decline")
    accept_declined = await api.call("POST", f"/quotes/{declined['id']}/accept")
    clock.advance(3 * DAY)
    await _refresh(client, api)
    accept_expired = await api.call("POST", f"/quotes/{expiring['id']}/accept")
    convert_sent = await api.call("POST", f"/quotes/{expiring['id']}/convert")

    assert accept_declined.status_code == 409
    assert accept_expired.status_code == 409
    assert "expired" in (await accept_expired.get_json())["message"]
    assert convert_sent.status_code == 409
    assert "quote.declined" in await _kinds(platform, api)


async def test_converting_a_quote_needs_invoices_write(
    client: Any, admin_headers: dict[str, str]
) -> None:
    owner = await owner_api(client, admin_headers)
    quote = await _quote(owner)
    await owner.ok("POST", f"/quotes/{quote['id']}/send")
    await owner.ok("POST", f"/quotes/{quote['id']}/accept")
    narrow = await full_grant(client, owner.world, scope="quotes:read quotes:write")
    quotes_only = Api(client, narrow["access_token"], owner.world)

    refused = await quotes_only.call("POST", f"/quotes/{quote['id']}/convert")

    assert refused.status_code == 403
    assert (await refused.get_json())["message"].startswith("Insufficient scope")
    assert (await owner.ok("GET", f"/quotes/{quote['id']}"))["status"] == "accepted"


# --- purchases and returns -----------------------------------------------------------------------


async def _purchase(api: Api) -> dict[str, Any]:
    supplier = await api.ok("POST", "/suppliers", {"name": "Northwind"}, 201)
    body = {"supplierId": supplier["id"], "lines": [LINE]}
    return await api.ok("POST", "/purchases", body, 201)  # type: ignore[no-any-return]


async def test_a_paid_purchase_is_settled_and_no_longer_changed(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    purchase = await _purchase(api)

    paid = await api.ok("POST", f"/purchases/{purchase['id']}/pay", {"paidOn": "2026-10-12"})
    twice = await api.call("POST", f"/purchases/{purchase['id']}/pay")
    edit = await api.call("PATCH", f"/purchases/{purchase['id']}", {"dueDate": "2026-12-31"})

    assert (paid["status"], paid["amountDue"], paid["paidOn"]) == ("paid", "0.00", "2026-10-12")
    assert twice.status_code == edit.status_code == 409
    assert "purchase.paid" in await _kinds(platform, api)


async def test_an_open_return_is_changed_or_deleted_a_refunded_one_is_not(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    purchase = await _purchase(api)  # 301.00
    half = {**LINE, "quantity": "1"}

    first = await api.ok(
        "POST", "/purchase-returns", {"purchaseId": purchase["id"], "lines": [half]}, 201
    )
    changed = await api.ok(
        "PATCH", f"/purchase-returns/{first['id']}", {"lines": [LINE], "returnDate": "2026-10-01"}
    )
    too_much = await api.call(
        "PATCH", f"/purchase-returns/{first['id']}", {"lines": [{**LINE, "quantity": "3"}]}
    )
    await api.ok("DELETE", f"/purchase-returns/{first['id']}", status=204)
    second = await api.ok(
        "POST", "/purchase-returns", {"purchaseId": purchase["id"], "lines": [half]}, 201
    )
    await api.ok("POST", f"/purchase-returns/{second['id']}/refund")
    edit_refunded = await api.call("PATCH", f"/purchase-returns/{second['id']}", {"lines": [half]})
    delete_refunded = await api.call("DELETE", f"/purchase-returns/{second['id']}")

    assert (changed["total"], changed["returnDate"]) == ("301.00", "2026-10-01")
    assert too_much.status_code == 400
    assert (await api.call("GET", f"/purchase-returns/{first['id']}")).status_code == 404
    assert edit_refunded.status_code == delete_refunded.status_code == 409
    kinds = await _kinds(platform, api)
    assert "purchase_return.updated" in kinds
    assert "purchase_return.deleted" in kinds


# --- the ledger ----------------------------------------------------------------------------------


async def test_only_an_account_never_posted_to_is_deleted(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    cash, sales = await _accounts(api)
    unused = await api.ok(
        "POST", "/accounts", {"code": "9999", "name": "Unused", "type": "expense"}, 201
    )
    await api.ok("POST", "/journal-entries", _entry(cash["id"], sales["id"]), 201)

    await api.ok("DELETE", f"/accounts/{unused['id']}", status=204)
    used = await api.call("DELETE", f"/accounts/{sales['id']}")
    code_again = await api.call(
        "POST", "/accounts", {"code": "9999", "name": "Unused", "type": "expense"}
    )

    assert (await api.call("GET", f"/accounts/{unused['id']}")).status_code == 404
    assert used.status_code == 409
    assert (await used.get_json())["code"] == "INVALID_STATE"
    assert code_again.status_code == 409  # the code stays taken by the deleted account
    events = await _events(platform, api.world.business_id)
    assert ("account.deleted", {"id": unused["id"], "code": "9999"}) in events


async def test_posting_and_deleting_one_account_at_once_never_leave_an_orphan(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    outcomes: list[tuple[int, int]] = []
    for round_ in range(5):
        cash = await api.ok(
            "POST", "/accounts", {"code": f"1{round_}", "name": "Cash", "type": "asset"}, 201
        )
        sales = await api.ok(
            "POST", "/accounts", {"code": f"4{round_}", "name": "Sales", "type": "income"}, 201
        )
        answers: dict[str, int] = {}

        async def post(cash: Any = cash, sales: Any = sales, answers: Any = answers) -> None:
            response = await api.call("POST", "/journal-entries", _entry(cash["id"], sales["id"]))
            answers["post"] = response.status_code

        async def delete(sales: Any = sales, answers: Any = answers) -> None:
            answers["delete"] = (await api.call("DELETE", f"/accounts/{sales['id']}")).status_code

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(post)
                nursery.start_soon(delete)
        outcomes.append((answers["post"], answers["delete"]))

    # Either the entry went first (the account is used: 409) or the deletion did (the entry
    # names no account: 400); never both.
    assert set(outcomes) <= {(201, 409), (400, 204)}


async def test_a_reversal_posts_the_opposite_entry_once(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api = await owner_api(client, admin_headers)
    cash, sales = await _accounts(api)
    entry = await api.ok("POST", "/journal-entries", _entry(cash["id"], sales["id"]), 201)
    await api.ok("POST", f"/accounts/{sales['id']}/archive")

    reversal = await api.ok(
        "POST", f"/journal-entries/{entry['id']}/reverse", {"date": "2026-10-31"}, 201
    )
    original = await api.ok("GET", f"/journal-entries/{entry['id']}")
    twice = await api.call("POST", f"/journal-entries/{entry['id']}/reverse")

    assert reversal["lines"] == [
        {"accountId": cash["id"], "debit": "0.00", "credit": "10.00"},
        {"accountId": sales["id"], "debit": "10.00", "credit": "0.00"},
    ]
    assert (reversal["number"], reversal["date"], reversal["reversesEntryId"]) == (
        "JE-0002",
        "2026-10-31",
        entry["id"],
    )
    assert (original["status"], original["reversalEntryId"]) == ("reversed", reversal["id"])
    assert twice.status_code == 409
    kinds = await _kinds(platform, api)
    assert kinds[-2:] == ["journal_entry.posted", "journal_entry.reversed"]


@pytest.mark.parametrize(
    ("method", "path_of"),
    [
        ("POST", lambda ids: f"/journal-entries/{ids['entry']}/reverse"),
        ("DELETE", lambda ids: f"/accounts/{ids['account']}"),
    ],
)
async def test_an_accountant_neither_reverses_nor_deletes_accounts(
    client: Any, admin_headers: dict[str, str], method: str, path_of: Any
) -> None:
    owner = await owner_api(client, admin_headers)
    cash, sales = await _accounts(owner)
    entry = await owner.ok("POST", "/journal-entries", _entry(cash["id"], sales["id"]), 201)
    accountant = await member_api(client, admin_headers, owner, "accountant")

    response = await accountant.call(method, path_of({"entry": entry["id"], "account": cash["id"]}))

    assert response.status_code == 403
    assert not (await response.get_json())["message"].startswith("Insufficient scope")


# --- every business event has a write that records it --------------------------------------------


async def test_every_business_event_of_the_catalog_is_recorded_by_some_call(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer()
    await api.ok("PATCH", f"/customers/{customer['id']}", {"name": "Acme"})
    supplier = await api.ok("POST", "/suppliers", {"name": "Northwind"}, 201)
    await api.ok("PATCH", f"/suppliers/{supplier['id']}", {"name": "Northwind Ltd"})
    for party, path in ((await api.customer("Gone"), "customers"), (supplier, "suppliers")):
        await api.ok("DELETE", f"/{path}/{party['id']}", status=204)

    invoice = await api.invoice(customer["id"], dueDate=_date(platform, 1))
    await api.ok("PATCH", f"/invoices/{invoice['id']}", {"lines": [LINE, LINE]})
    await api.ok("POST", f"/invoices/{invoice['id']}/send")
    payment = await api.ok(
        "POST", "/payments", {"invoiceId": invoice["id"], "amount": "602.00"}, 201
    )
    await api.ok("PATCH", f"/payments/{payment['id']}", {"reference": "R-1"})
    await api.ok("POST", f"/payments/{payment['id']}/refund", {"amount": "2.00"})
    await api.ok("DELETE", f"/payments/{payment['id']}", status=204)
    await api.ok("POST", f"/invoices/{invoice['id']}/void")
    await api.ok("DELETE", f"/invoices/{(await api.invoice(customer['id']))['id']}", status=204)
    overdue = await api.invoice(customer["id"], dueDate=_date(platform, 1))
    await api.ok("POST", f"/invoices/{overdue['id']}/send")

    purchase = await _purchase(api)
    await api.ok("PATCH", f"/purchases/{purchase['id']}", {"dueDate": "2026-12-31"})
    returned = await api.ok(
        "POST", "/purchase-returns", {"purchaseId": purchase["id"], "lines": [LINE]}, 201
    )
    await api.ok("PATCH", f"/purchase-returns/{returned['id']}", {"returnDate": "2026-10-01"})
    await api.ok("POST", f"/purchase-returns/{returned['id']}/refund")
    dropped = await api.ok(
        "POST", "/purchase-returns", {"purchaseId": purchase["id"], "lines": [LINE]}, 201
    )
    await api.ok("DELETE", f"/purchase-returns/{dropped['id']}", status=204)
    await api.ok("POST", f"/purchases/{purchase['id']}/pay")
    await api.ok("DELETE", f"/purchases/{(await _purchase(api))['id']}", status=204)

    quote = await _quote(api)
    await api.ok("PATCH", f"/quotes/{quote['id']}", {"validUntil": "2026-12-31"})
    await api.ok("POST", f"/quotes/{quote['id']}/send")
    await api.ok("POST", f"/quotes/{quote['id']}/accept")
    await api.ok("POST", f"/quotes/{quote['id']}/convert", status=201)
    declined = await _quote(api)
    await api.ok("POST", f"/quotes/{declined['id']}/send")
    await api.ok("POST", f"/quotes/{declined['id']}/decline")
    await api.ok("DELETE", f"/quotes/{declined['id']}", status=204)

    cash, sales = await _accounts(api)
    await api.ok("PATCH", f"/accounts/{cash['id']}", {"name": "Bank"})
    entry = await api.ok("POST", "/journal-entries", _entry(cash["id"], sales["id"]), 201)
    await api.ok("POST", f"/journal-entries/{entry['id']}/reverse", status=201)
    await api.ok("POST", f"/accounts/{sales['id']}/archive")
    spare = await api.ok("POST", "/accounts", {"code": "9", "name": "Spare", "type": "asset"}, 201)
    await api.ok("DELETE", f"/accounts/{spare['id']}", status=204)

    clock.advance(2 * DAY)
    await Scheduler(platform).mark_overdue()
    await _refresh(client, api)
    remaining = await api.ok("POST", "/suppliers", {"name": "Kept"}, 201)
    for party, path in ((customer, "customers"), (remaining, "suppliers")):
        redacted = await client.post(
            f"/admin/businesses/{api.world.business_id}/{path}/{party['id']}/redact",
            headers=admin_headers,
        )
        assert redacted.status_code == 200

    recorded = set(await _kinds(platform, api))
    business = {e.name for e in catalog.EVENTS if e.audience in ("business", "privacy")}
    assert business - recorded == set()
    for kind, data in await _events(platform, api.world.business_id):
        event = catalog.event_type(kind)
        assert event is not None
        assert set(event.sample) <= set(data), kind
