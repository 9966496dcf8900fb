"""A bulk import written as set operations: every invoice or none, numbered in order, each with
its event, in a fixed number of statements whatever the count; refused as the invoices made one
by one would be, by the first that meets a problem (its input, then its customer, then the
plan's ceiling)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledgerport import books, catalog

from ..stores import CountingTransaction
from .data_api import LINE, Api, owner_api

BAD_LINE = {**LINE, "quantity": "-1"}
HUGE_LINE = {**LINE, "quantity": "9999999999999", "unitPrice": "9999999999999.9999"}
"""Each value of the largest form, their product (about 10^26) past the largest total."""
UNKNOWN = "cus_0000000000000000000000ff"


async def _state(platform: Any, business_id: str) -> dict[str, Any]:
    """What an import writes: the invoices, their events, the year's counter, the numbering."""
    async with platform.store.transaction() as tx:
        invoices = await tx.fetch(
            "SELECT number, data FROM records WHERE business_id = $1 AND kind = 'invoice'"
            " ORDER BY number",
            business_id,
        )
        events = await tx.fetch(
            "SELECT type, data FROM events WHERE business_id = $1 AND type = 'invoice.created'"
            " ORDER BY seq",
            business_id,
        )
        years = await tx.fetch(
            "SELECT invoices, turnover_cents FROM invoice_years WHERE business_id = $1",
            business_id,
        )
        numbering = await tx.fetchval(
            "SELECT last FROM record_numbers WHERE business_id = $1 AND kind = 'invoice'",
            business_id,
        )
    return {
        "invoices": [(row["number"], json.loads(row["data"])["id"]) for row in invoices],
        "events": [json.loads(row["data"])["number"] for row in events],
        "years": [(row["invoices"], row["turnover_cents"]) for row in years],
        "numbering": numbering,
    }


async def _capped(client: Any, admin_headers: dict[str, str], limit: int) -> tuple[Api, str]:
    api = await owner_api(client, admin_headers, business_fields={"invoiceLimit": limit})
    return api, (await api.customer())["id"]


def _invoice(customer: str, line: dict[str, str] = LINE) -> dict[str, Any]:
    return {"customerId": customer, "lines": [line]}


# (what each invoice is, the invoice limit, the refusal expected): the first problem by
# position wins, and at one position the input before the customer before the ceiling.
REFUSALS = [
    (["ok", "bad", "unknown"], 10, (400, None, "invoices.1.lines.0.quantity")),
    (["ok", "unknown", "bad"], 10, (404, "RECORD_NOT_FOUND", UNKNOWN)),
    (["ok", "ok", "unknown"], 1, (403, "PLAN_INVOICE_LIMIT_REACHED", None)),
    (["ok", "unknown", "ok"], 2, (404, "RECORD_NOT_FOUND", UNKNOWN)),
    (["ok", "unknown"], 1, (404, "RECORD_NOT_FOUND", UNKNOWN)),
    (["ok", "ok", "bad"], 2, (400, None, "invoices.2.lines.0.quantity")),
    (["ok", "huge", "bad"], 10, (400, None, "invoices.1.lines must total at most")),
]


@pytest.mark.parametrize(("invoices", "limit", "refusal"), REFUSALS)
async def test_the_first_problem_refuses_the_whole_import(
    client: Any,
    admin_headers: dict[str, str],
    platform: Any,
    invoices: list[str],
    limit: int,
    refusal: tuple[int, str | None, str | None],
) -> None:
    api, customer = await _capped(client, admin_headers, limit)
    before = await _state(platform, api.world.business_id)
    kinds = {
        "ok": _invoice(customer),
        "bad": _invoice(customer, BAD_LINE),
        "huge": _invoice(customer, HUGE_LINE),
        "unknown": _invoice(UNKNOWN),
    }

    response = await api.call(
        "POST", "/invoices/bulk-import", {"invoices": [kinds[kind] for kind in invoices]}
    )

    answer = await response.get_json()
    status, code, mention = refusal
    assert response.status_code == status, answer
    assert answer.get("code") == code
    if mention is not None:
        assert mention in json.dumps(answer["message"])
    assert await _state(platform, api.world.business_id) == before  # nothing written


async def test_an_import_numbers_counts_and_tells_in_order(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api, customer = await _capped(client, admin_headers, 1000)
    await api.invoice(customer)

    imported = await api.ok(
        "POST",
        "/invoices/bulk-import",
        {"invoices": [_invoice(customer)] * catalog.BULK_IMPORT_MAX},
        201,
    )

    numbers = [f"INV-{n:0{catalog.NUMBER_DIGITS}d}" for n in range(2, catalog.BULK_IMPORT_MAX + 2)]
    assert [invoice["number"] for invoice in imported["data"]] == numbers
    state = await _state(platform, api.world.business_id)
    assert [number for number, _ in state["invoices"]][1:] == numbers
    assert state["events"][1:] == numbers  # one invoice.created each, in order
    assert state["years"] == [(1 + catalog.BULK_IMPORT_MAX, 30100 * (1 + catalog.BULK_IMPORT_MAX))]
    assert state["numbering"] == 1 + catalog.BULK_IMPORT_MAX
    listed = await api.ok("GET", "/invoices?limit=100")
    assert [invoice["number"] for invoice in listed["data"]][:3] == ["INV-0001", *numbers[:2]]


async def test_an_import_is_a_fixed_number_of_statements(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    api, customer = await _capped(client, admin_headers, 1000)
    counts = []
    for size in (2, catalog.BULK_IMPORT_MAX):
        async with platform.store.transaction() as tx:
            counting = CountingTransaction(tx)
            created = await books.bulk_import_invoices(
                counting,  # type: ignore[arg-type]
                now=platform.now(),
                business_id=api.world.business_id,
                invoices=[{"customer_id": customer, "lines": [LINE]}] * size,
            )
            assert len(created) == size
            counts.append(counting.statements)
    # The year's counter with the business's plan and the live customers (and on PostgreSQL
    # the numbers), the numbers on SQLite, the records; their events go with the commit.
    assert counts == ([2, 2] if platform.store.kind == "postgresql" else [3, 3])
