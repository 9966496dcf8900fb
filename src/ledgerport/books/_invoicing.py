"""Invoices, their payments, and quotes.

An invoice is numbered per business (INV-0001), priced from its lines, created ``draft``, then
``sent``; a sent invoice whose due date has passed becomes ``overdue`` (``invoice.overdue``, the
scheduler's :func:`mark_overdue_invoices`). Payments lower its ``amountDue`` and the one that
brings it to zero makes it ``paid`` (``invoice.paid``); deleting or refunding a payment makes it
due again. A ``void`` invoice takes no payments. Creating an invoice counts against the plan's
yearly ceiling (free: a count and a turnover cap; paid: the business's invoice limit, when it
has one); only new invoices are blocked when it is reached.

A quote is created ``draft``, then ``sent``, then ``accepted`` or ``declined`` by the customer
(not past its ``validUntil``); an accepted quote is ``converted`` into a draft invoice of the same
lines. Every change records its events in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.storage import Transaction, placeholders

from ._errors import BusinessNotFound, InvoiceCeilingReached, RecordInWrongState, RecordNotFound
from ._events import record_event
from ._money import ZERO, amount, currency_or_default, decimal_problem, priced_lines
from ._records import (
    Document,
    delete_record,
    due_records,
    get_record,
    insert_numbered_records,
    insert_record,
    iso,
    iso_date,
    numbers_ending,
    save_record,
    set_due_watch,
    unchanged,
)

Line = Mapping[str, Any]
INVOICE_EDITABLE = ("draft",)
INVOICE_PAYABLE = ("draft", "sent", "overdue")
QUOTE_EDITABLE = ("draft",)


async def _save_invoice(
    tx: Transaction, *, now: float, business_id: str, invoice: Document
) -> Document:
    """Store a changed invoice; a sent invoice with a due date is watched for it."""
    invoice = await save_record(
        tx, now=now, business_id=business_id, kind="invoice", document=invoice
    )
    watched = invoice.get("dueDate") if invoice["status"] == "sent" else None
    await set_due_watch(tx, invoice["id"], watched)
    return invoice


def _reopened(invoice: Document, due: Decimal) -> Document:
    """The invoice due ``due`` again after a payment was deleted or refunded."""
    reopened = {**invoice, "amountDue": amount(due)}
    if invoice["status"] == "paid":
        reopened.pop("paidAt", None)
        if "overdueAt" in invoice:  # it was overdue before it was paid, and is again
            reopened["status"] = "overdue"
        else:
            reopened["status"] = "sent" if "sentAt" in invoice else "draft"
    return reopened


def _cents(value: Decimal) -> int:
    return int(value * 100)


TURNOVER_KEPT = 2**62
"""Cents of a year's turnover counted at most (a BIGINT holds 2**63 - 1; one request adds at
most BULK_IMPORT_MAX invoices at MAX_TOTAL, 2 * 10**17 cents): the free plan's cap lies far
below, and nothing else reads the turnover."""


async def _count_against_ceiling(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    totals: Sequence[Decimal],
    customers: Sequence[str],
) -> tuple[set[str], tuple[int, InvoiceCeilingReached] | None, list[str] | None]:
    """Count new invoices in the business's calendar year: one conditional write for all of
    them, so concurrent invoices cannot slip under the plan's ceiling together. Answers which
    of ``customers`` are live customers of the business, read in the same statement; the
    first invoice (by position) past the ceiling with its refusal, as they would have met it
    one by one, or None; and on PostgreSQL the invoices' numbers, drawn in the same statement
    (None: the caller draws them). The caller rolls back on a refusal."""
    year = datetime.fromtimestamp(now, UTC).year
    cents = [_cents(total) for total in totals]
    wanted = sorted(set(customers))
    # The business's plan and the live customers come back with the counts, in the same
    # statement; no row when the business does not exist.
    live = (
        f"(SELECT {tx.json_array_agg}(id) FROM records WHERE business_id = $1"
        " AND kind = 'customer' AND deleted_at IS NULL"
        f" AND id IN ({placeholders(len(wanted), 5)}))"
        if wanted
        else "NULL"
    )
    # On PostgreSQL the numbers are drawn in the same statement (a data-modifying WITH, which
    # SQLite has not: there they are drawn by the next one, in the same turn).
    numbering = tx.kind == "postgresql"
    draw = (
        "WITH numbers AS (INSERT INTO record_numbers (business_id, kind, last)"
        " VALUES ($1, 'invoice', CAST($3 AS INTEGER)) ON CONFLICT (business_id, kind)"
        " DO UPDATE SET last = record_numbers.last + excluded.last RETURNING last) "
        if numbering
        else ""
    )
    row = await tx.fetchrow(
        f"{draw}INSERT INTO invoice_years (business_id, year, invoices, turnover_cents)"
        " SELECT id, CAST($2 AS INTEGER), CAST($3 AS INTEGER), CAST($4 AS BIGINT)"
        " FROM businesses WHERE id = $1"
        " ON CONFLICT (business_id, year) DO UPDATE SET"
        " invoices = invoice_years.invoices + excluded.invoices,"
        # Saturated at TURNOVER_KEPT: a year of paid invoices at MAX_TOTAL would pass a
        # BIGINT (only the free plan's cap, far below, reads it).
        f" turnover_cents = CASE WHEN invoice_years.turnover_cents > {TURNOVER_KEPT}"
        f" - excluded.turnover_cents THEN {TURNOVER_KEPT}"
        " ELSE invoice_years.turnover_cents + excluded.turnover_cents END"
        " RETURNING invoices, turnover_cents,"
        " (SELECT plan FROM businesses WHERE id = $1) AS plan,"
        " (SELECT invoice_limit FROM businesses WHERE id = $1) AS invoice_limit,"
        f" {live} AS customers"
        + (", (SELECT last FROM numbers) AS last_number" if numbering else ""),
        business_id,
        year,
        len(cents),
        sum(cents),
        *wanted,
    )
    if row is None:
        raise BusinessNotFound(business_id)
    found = set(json.loads(row["customers"])) if row["customers"] is not None else set()
    numbers = numbers_ending("invoice", row["last_number"], len(cents)) if numbering else None
    plan = row["plan"]
    free = plan == "free"
    limit = row["invoice_limit"]
    if limit is None and free:
        limit = catalog.FREE_PLAN_YEARLY_INVOICES
    cap = _cents(Decimal(catalog.FREE_PLAN_YEARLY_TURNOVER))
    count = int(row["invoices"]) - len(cents)
    turnover = int(row["turnover_cents"]) - sum(cents)
    for position, each in enumerate(cents):
        count += 1
        turnover += each
        if limit is not None and count > limit:
            return found, (position, InvoiceCeilingReached(plan, "count")), numbers
        if free and turnover > cap:
            return found, (position, InvoiceCeilingReached(plan, "turnover cap")), numbers
    return found, None, numbers


async def _party(tx: Transaction, business_id: str, kind: str, party_id: str) -> None:
    await get_record(tx, business_id, kind, party_id)


def _date_problems(dates: Mapping[str, str | None]) -> list[str]:
    problems = []
    for field, value in dates.items():
        if value is None:
            continue
        try:
            datetime.strptime(value, "%Y-%m-%d")
        except ValueError:
            problems.append(f"{field} must be a date such as 2026-09-22")
    return problems


def check_dates(**dates: str | None) -> None:
    problems = _date_problems(dates)
    if problems:
        raise InvalidInput(problems)


async def create_invoice(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    customer_id: str,
    lines: Sequence[Line],
    currency: str | None = None,
    issue_date: str | None = None,
    due_date: str | None = None,
) -> Document:
    fields = {
        "customer_id": customer_id,
        "lines": lines,
        "currency": currency,
        "issue_date": issue_date,
        "due_date": due_date,
    }
    (invoice,) = await _create_invoices(tx, now=now, business_id=business_id, invoices=[fields])
    return invoice


async def bulk_import_invoices(
    tx: Transaction, *, now: float, business_id: str, invoices: Sequence[Mapping[str, Any]]
) -> list[Document]:
    """Create every invoice or none: the first refusal ends the caller's transaction. Its input
    problems are named by the invoice's position (``invoices.3.lines.0.quantity``)."""
    return await _create_invoices(
        tx, now=now, business_id=business_id, invoices=invoices, where="invoices."
    )


def _draft(
    now: float,
    customer_id: str,
    lines: Sequence[Line],
    currency: str | None = None,
    issue_date: str | None = None,
    due_date: str | None = None,
) -> tuple[dict[str, Any], Decimal]:
    """A new invoice's fields, priced, and its total; InvalidInput names what is wrong."""
    priced, total = priced_lines(lines)
    check_dates(issueDate=issue_date, dueDate=due_date)
    fields = {
        "status": "draft",
        "customerId": customer_id,
        "currency": currency_or_default(currency),
        "total": amount(total),
        "amountDue": amount(total),
        "issueDate": issue_date or iso_date(now),
        "dueDate": due_date,
        "lines": priced,
    }
    return fields, total


async def _create_invoices(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    invoices: Sequence[Mapping[str, Any]],
    where: str | None = None,
) -> list[Document]:
    """Create draft invoices, numbered in order, each with ``invoice.created``, as set
    operations: a statement per table whatever their number (customers, the year's counter,
    the numbers, the records, their events).

    Refused as the invoices made one by one would be: by the first (in order) that meets a
    problem, and for that invoice its input first, then its customer, then the plan's ceiling.
    The refusal leaves the caller's transaction to roll back everything written before it.
    ``where`` prefixes an input problem with the invoice's position (``invoices.``)."""
    drafts: list[tuple[dict[str, Any], Decimal]] = []
    refusals: list[tuple[int, int, Exception]] = []
    for position, given in enumerate(invoices):
        try:
            drafts.append(_draft(now, **given))
        except InvalidInput as problem:
            if where is not None:
                problem = InvalidInput([f"{where}{position}.{m}" for m in problem.messages])
            refusals.append((position, 0, problem))
            break
    customers = [fields["customerId"] for fields, _ in drafts]
    numbers = None
    if drafts:
        live, ceiling, numbers = await _count_against_ceiling(
            tx,
            now=now,
            business_id=business_id,
            totals=[total for _, total in drafts],
            customers=customers,
        )
        missing = next((i for i, c in enumerate(customers) if c not in live), None)
        if missing is not None:
            refusals.append((missing, 1, RecordNotFound("customer", customers[missing])))
        if ceiling is not None:
            refusals.append((ceiling[0], 2, ceiling[1]))
    if refusals:
        raise min(refusals, key=lambda refusal: refusal[:2])[2]
    created = await insert_numbered_records(
        tx,
        now=now,
        business_id=business_id,
        kind="invoice",
        fields=[f for f, _ in drafts],
        numbers=numbers,
    )
    for invoice in created:
        await record_event(
            tx, now=now, type="invoice.created", data=invoice, business_id=business_id
        )
    return created


async def update_invoice(
    tx: Transaction, *, now: float, business_id: str, invoice_id: str, changes: dict[str, Any]
) -> Document:
    """Change a draft invoice: its customer, dates or lines (repriced)."""
    invoice = await get_record(tx, business_id, "invoice", invoice_id, for_update=True)
    if invoice["status"] not in INVOICE_EDITABLE:
        raise RecordInWrongState("invoice", invoice_id, invoice["status"], "changed")
    check_dates(issueDate=changes.get("issueDate"), dueDate=changes.get("dueDate"))
    if "customerId" in changes:
        await _party(tx, business_id, "customer", changes["customerId"])
    if "lines" in changes:
        priced, total = priced_lines(changes["lines"])
        changes = {**changes, "lines": priced, "total": amount(total), "amountDue": amount(total)}
    if unchanged(invoice, changes):
        return invoice
    invoice = await _save_invoice(
        tx, now=now, business_id=business_id, invoice={**invoice, **changes}
    )
    await record_event(tx, now=now, type="invoice.updated", data=invoice, business_id=business_id)
    return invoice


async def _transition(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    invoice_id: str,
    allowed: Sequence[str],
    action: str,
    changes: dict[str, Any],
    event: str,
) -> Document:
    invoice = await get_record(tx, business_id, "invoice", invoice_id, for_update=True)
    if invoice["status"] not in allowed:
        raise RecordInWrongState("invoice", invoice_id, invoice["status"], action)
    invoice = await _save_invoice(
        tx, now=now, business_id=business_id, invoice={**invoice, **changes}
    )
    await record_event(tx, now=now, type=event, data=invoice, business_id=business_id)
    return invoice


async def send_invoice(
    tx: Transaction, *, now: float, business_id: str, invoice_id: str
) -> Document:
    return await _transition(
        tx,
        now=now,
        business_id=business_id,
        invoice_id=invoice_id,
        allowed=("draft",),
        action="sent",
        changes={"status": "sent", "sentAt": iso(now)},
        event="invoice.sent",
    )


async def void_invoice(
    tx: Transaction, *, now: float, business_id: str, invoice_id: str
) -> Document:
    invoice = await get_record(tx, business_id, "invoice", invoice_id, for_update=True)
    if invoice["status"] in INVOICE_PAYABLE and invoice["amountDue"] != invoice["total"]:
        raise RecordInWrongState("invoice", invoice_id, "partly paid", "voided")
    return await _transition(
        tx,
        now=now,
        business_id=business_id,
        invoice_id=invoice_id,
        allowed=INVOICE_PAYABLE,
        action="voided",
        changes={"status": "void", "amountDue": amount(ZERO), "voidedAt": iso(now)},
        event="invoice.voided",
    )


async def mark_overdue_invoices(tx: Transaction, *, now: float, limit: int) -> tuple[int, int]:
    """Mark sent invoices whose due date is before today (UTC) overdue, each with
    ``invoice.overdue``, looking at at most ``limit`` watched invoices; answers (looked at,
    marked). Every invoice looked at leaves the watch list unless it is still due, so a caller
    repeats until fewer than ``limit`` were looked at."""
    today = iso_date(now)
    due_now = await due_records(tx, before=today, limit=limit)
    marked = 0
    for business_id, invoice_id in due_now:
        invoice = await get_record(tx, business_id, "invoice", invoice_id, for_update=True)
        due = invoice.get("dueDate")
        if invoice["status"] != "sent" or due is None or due >= today:
            # Changed since it was watched: watched again only while sent and not yet due.
            await set_due_watch(tx, invoice_id, due if invoice["status"] == "sent" else None)
            continue
        invoice = await _save_invoice(
            tx,
            now=now,
            business_id=business_id,
            invoice={**invoice, "status": "overdue", "overdueAt": iso(now)},
        )
        await record_event(
            tx, now=now, type="invoice.overdue", data=invoice, business_id=business_id
        )
        marked += 1
    return len(due_now), marked


async def delete_invoice(tx: Transaction, *, now: float, business_id: str, invoice_id: str) -> None:
    invoice = await get_record(tx, business_id, "invoice", invoice_id, for_update=True)
    if invoice["status"] not in INVOICE_EDITABLE:
        raise RecordInWrongState("invoice", invoice_id, invoice["status"], "deleted")
    await delete_record(tx, now=now, business_id=business_id, kind="invoice", record_id=invoice_id)
    await record_event(
        tx,
        now=now,
        type="invoice.deleted",
        data={"id": invoice_id, "number": invoice["number"]},
        business_id=business_id,
    )


async def receive_payment(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    invoice_id: str,
    amount_text: str,
    received_on: str | None = None,
    reference: str | None = None,
) -> Document:
    """A payment of an invoice: ``payment.received``, and ``invoice.paid`` when it settles the
    invoice. More than the amount due is refused."""
    problem = decimal_problem(amount_text, "amount", positive=True)
    if problem is not None:
        raise InvalidInput([problem])
    check_dates(receivedOn=received_on)
    invoice = await get_record(tx, business_id, "invoice", invoice_id, for_update=True)
    if invoice["status"] not in INVOICE_PAYABLE:
        raise RecordInWrongState("invoice", invoice_id, invoice["status"], "paid")
    paid, due = Decimal(amount(Decimal(amount_text))), Decimal(invoice["amountDue"])
    if paid > due:
        raise InvalidInput([f"amount must be at most the amount due, {amount(due)}"])
    payment = await insert_record(
        tx,
        now=now,
        business_id=business_id,
        kind="payment",
        fields={
            "invoiceId": invoice_id,
            "amount": amount(paid),
            "currency": invoice["currency"],
            "status": "received",
            "receivedOn": received_on or iso_date(now),
            "reference": reference,
            "refundedAmount": amount(ZERO),
        },
    )
    changes: dict[str, Any] = {"amountDue": amount(due - paid)}
    if due == paid:
        changes |= {"status": "paid", "paidAt": iso(now)}
    invoice = await _save_invoice(
        tx, now=now, business_id=business_id, invoice={**invoice, **changes}
    )
    await record_event(tx, now=now, type="payment.received", data=payment, business_id=business_id)
    if invoice["status"] == "paid":
        await record_event(tx, now=now, type="invoice.paid", data=invoice, business_id=business_id)
    return payment


async def delete_payment(tx: Transaction, *, now: float, business_id: str, payment_id: str) -> None:
    """Delete a payment: its invoice is due that amount again (and no longer paid)."""
    payment = await get_record(tx, business_id, "payment", payment_id, for_update=True)
    invoice = await get_record(tx, business_id, "invoice", payment["invoiceId"], for_update=True)
    kept = Decimal(payment["amount"]) - Decimal(payment.get("refundedAmount", "0.00"))
    due = Decimal(invoice["amountDue"]) + kept
    await _save_invoice(tx, now=now, business_id=business_id, invoice=_reopened(invoice, due))
    await delete_record(tx, now=now, business_id=business_id, kind="payment", record_id=payment_id)
    await record_event(
        tx, now=now, type="payment.deleted", data={"id": payment_id}, business_id=business_id
    )


async def update_payment(
    tx: Transaction, *, now: float, business_id: str, payment_id: str, changes: dict[str, Any]
) -> Document:
    """Change when a payment was received or its reference (its amount stays: refund it or
    delete it instead); emits ``payment.updated``."""
    check_dates(receivedOn=changes.get("receivedOn"))
    payment = await get_record(tx, business_id, "payment", payment_id, for_update=True)
    if unchanged(payment, changes):
        return payment
    payment = await save_record(
        tx, now=now, business_id=business_id, kind="payment", document={**payment, **changes}
    )
    await record_event(tx, now=now, type="payment.updated", data=payment, business_id=business_id)
    return payment


async def refund_payment(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    payment_id: str,
    amount_text: str | None = None,
) -> Document:
    """Refund a payment, whole (by default) or in part: its invoice is due that much again.
    Emits ``payment.refunded``; the payment is ``refunded`` once nothing of it is left, else
    ``partially_refunded``."""
    if amount_text is not None:
        problem = decimal_problem(amount_text, "amount", positive=True)
        if problem is not None:
            raise InvalidInput([problem])
    payment = await get_record(tx, business_id, "payment", payment_id, for_update=True)
    refunded = Decimal(payment.get("refundedAmount", "0.00"))
    left = Decimal(payment["amount"]) - refunded
    if left <= ZERO:
        raise RecordInWrongState("payment", payment_id, payment["status"], "refunded")
    refund = left if amount_text is None else Decimal(amount(Decimal(amount_text)))
    if refund > left:
        raise InvalidInput([f"amount must be at most what is left to refund, {amount(left)}"])
    invoice = await get_record(tx, business_id, "invoice", payment["invoiceId"], for_update=True)
    due = Decimal(invoice["amountDue"]) + refund
    await _save_invoice(tx, now=now, business_id=business_id, invoice=_reopened(invoice, due))
    payment = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind="payment",
        document={
            **payment,
            "refundedAmount": amount(refunded + refund),
            "status": "refunded" if refund == left else "partially_refunded",
            "refundedOn": iso_date(now),
        },
    )
    await record_event(tx, now=now, type="payment.refunded", data=payment, business_id=business_id)
    return payment


async def create_quote(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    customer_id: str,
    lines: Sequence[Line],
    currency: str | None = None,
    issue_date: str | None = None,
    valid_until: str | None = None,
) -> Document:
    priced, total = priced_lines(lines)
    check_dates(issueDate=issue_date, validUntil=valid_until)
    await _party(tx, business_id, "customer", customer_id)
    quote = await insert_record(
        tx,
        now=now,
        business_id=business_id,
        kind="quote",
        numbered=True,
        fields={
            "status": "draft",
            "customerId": customer_id,
            "currency": currency_or_default(currency),
            "total": amount(total),
            "issueDate": issue_date or iso_date(now),
            "validUntil": valid_until,
            "lines": priced,
        },
    )
    await record_event(tx, now=now, type="quote.created", data=quote, business_id=business_id)
    return quote


async def update_quote(
    tx: Transaction, *, now: float, business_id: str, quote_id: str, changes: dict[str, Any]
) -> Document:
    quote = await get_record(tx, business_id, "quote", quote_id, for_update=True)
    if quote["status"] not in QUOTE_EDITABLE:
        raise RecordInWrongState("quote", quote_id, quote["status"], "changed")
    check_dates(issueDate=changes.get("issueDate"), validUntil=changes.get("validUntil"))
    if "customerId" in changes:
        await _party(tx, business_id, "customer", changes["customerId"])
    if "lines" in changes:
        priced, total = priced_lines(changes["lines"])
        changes = {**changes, "lines": priced, "total": amount(total)}
    if unchanged(quote, changes):
        return quote
    quote = await save_record(
        tx, now=now, business_id=business_id, kind="quote", document={**quote, **changes}
    )
    await record_event(tx, now=now, type="quote.updated", data=quote, business_id=business_id)
    return quote


async def delete_quote(tx: Transaction, *, now: float, business_id: str, quote_id: str) -> None:
    quote = await get_record(tx, business_id, "quote", quote_id, for_update=True)
    await delete_record(tx, now=now, business_id=business_id, kind="quote", record_id=quote_id)
    await record_event(
        tx,
        now=now,
        type="quote.deleted",
        data={"id": quote_id, "number": quote["number"]},
        business_id=business_id,
    )


async def _quote_transition(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    quote_id: str,
    allowed: str,
    action: str,
    changes: dict[str, Any],
    event: str,
) -> Document:
    quote = await get_record(tx, business_id, "quote", quote_id, for_update=True)
    if quote["status"] != allowed:
        raise RecordInWrongState("quote", quote_id, quote["status"], action)
    if action == "accepted" and (quote.get("validUntil") or "9999-12-31") < iso_date(now):
        raise RecordInWrongState("quote", quote_id, "expired", action)
    quote = await save_record(
        tx, now=now, business_id=business_id, kind="quote", document={**quote, **changes}
    )
    await record_event(tx, now=now, type=event, data=quote, business_id=business_id)
    return quote


async def send_quote(tx: Transaction, *, now: float, business_id: str, quote_id: str) -> Document:
    """Mark a draft quote sent to its customer; emits ``quote.sent``."""
    return await _quote_transition(
        tx,
        now=now,
        business_id=business_id,
        quote_id=quote_id,
        allowed="draft",
        action="sent",
        changes={"status": "sent", "sentAt": iso(now)},
        event="quote.sent",
    )


async def accept_quote(tx: Transaction, *, now: float, business_id: str, quote_id: str) -> Document:
    """The customer accepted a sent quote, not past its ``validUntil``; emits
    ``quote.accepted``."""
    return await _quote_transition(
        tx,
        now=now,
        business_id=business_id,
        quote_id=quote_id,
        allowed="sent",
        action="accepted",
        changes={"status": "accepted", "acceptedAt": iso(now)},
        event="quote.accepted",
    )


async def decline_quote(
    tx: Transaction, *, now: float, business_id: str, quote_id: str
) -> Document:
    """The customer declined a sent quote; emits ``quote.declined``."""
    return await _quote_transition(
        tx,
        now=now,
        business_id=business_id,
        quote_id=quote_id,
        allowed="sent",
        action="declined",
        changes={"status": "declined", "declinedAt": iso(now)},
        event="quote.declined",
    )


async def convert_quote(
    tx: Transaction, *, now: float, business_id: str, quote_id: str
) -> tuple[Document, Document]:
    """Turn an accepted quote into a draft invoice of its customer, currency and lines (counted
    against the plan's ceiling like any new invoice); answers (quote, invoice). Emits
    ``invoice.created`` and ``quote.converted``."""
    quote = await get_record(tx, business_id, "quote", quote_id, for_update=True)
    if quote["status"] != "accepted":
        raise RecordInWrongState("quote", quote_id, quote["status"], "converted")
    invoice = await create_invoice(
        tx,
        now=now,
        business_id=business_id,
        customer_id=quote["customerId"],
        currency=quote["currency"],
        lines=[
            {key: line[key] for key in ("description", "quantity", "unitPrice")}
            for line in quote["lines"]
        ],
    )
    quote = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind="quote",
        document={**quote, "status": "converted", "invoiceId": invoice["id"]},
    )
    await record_event(tx, now=now, type="quote.converted", data=quote, business_id=business_id)
    return quote, invoice
