"""Invoices, payments and quotes of the token's business.

Creating an invoice can be refused with 403 when the business's plan has reached its yearly
invoice ceiling (only new invoices; reading and everything else stay open). Deleting a payment
needs the role permission payments:delete besides the payments:write scope. Converting a quote
creates an invoice, so it needs invoices:write (scope and permission) besides quotes:write.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ledgerport import auth, books, catalog

from .._ids import CUSTOMER, INVOICE
from .._openapi import JSON, json_reply, operation
from .._openapi import Body as BodyDoc
from ._blueprint import blueprint
from ._endpoint import REPLAYED_HEADER, Call, data_route
from ._records import (
    ANSWER_HEADERS,
    WRITE_PARAMS,
    Body,
    Changes,
    Date,
    LineIn,
    Lines,
    OptionalLines,
    OptionalText,
    PositiveDecimal,
    Record,
    changed,
    changes_of,
    created,
    deleted,
    reads,
    record_write_params,
    write_raises,
)

Currency = Field(default=None, pattern="^[A-Z]{3}$", description="ISO 4217, e.g. EUR")


class InvoiceIn(Body):
    customerId: str = CUSTOMER.field()
    currency: str | None = Currency
    lines: list[LineIn] = Lines
    issueDate: Date | None = None
    dueDate: Date | None = None


class InvoiceChanges(Changes):
    nullable = frozenset({"issueDate", "dueDate"})
    customerId: str | None = CUSTOMER.field(default=None)
    lines: list[LineIn] | None = OptionalLines
    issueDate: Date | None = None
    dueDate: Date | None = None


class BulkImportIn(Body):
    invoices: list[InvoiceIn] = Field(min_length=1, max_length=catalog.BULK_IMPORT_MAX)


class PaymentIn(Body):
    invoiceId: str = INVOICE.field()
    amount: PositiveDecimal
    receivedOn: Date | None = None
    reference: str | None = OptionalText


class PaymentChanges(Changes):
    nullable = frozenset({"reference"})
    receivedOn: Date | None = None
    reference: str | None = OptionalText


class RefundIn(Body):
    amount: PositiveDecimal | None = Field(
        default=None, description="The amount to refund; by default all that is left of the payment"
    )


class QuoteIn(Body):
    customerId: str = CUSTOMER.field()
    currency: str | None = Currency
    lines: list[LineIn] = Lines
    issueDate: Date | None = None
    validUntil: Date | None = None


class QuoteChanges(Changes):
    nullable = frozenset({"issueDate", "validUntil"})
    customerId: str | None = CUSTOMER.field(default=None)
    lines: list[LineIn] | None = OptionalLines
    issueDate: Date | None = None
    validUntil: Date | None = None


def _invoice_fields(invoice: InvoiceIn) -> dict[str, Any]:
    return {
        "customer_id": invoice.customerId,
        "currency": invoice.currency,
        "lines": [line.model_dump() for line in invoice.lines],
        "issue_date": invoice.issueDate,
        "due_date": invoice.dueDate,
    }


# --- invoices ------------------------------------------------------------------------------------

reads("invoice", "/invoices")
_CEILING = (books.InvoiceCeilingReached,)


@blueprint.post("/invoices")
@operation(
    created("invoice"),
    raises=write_raises(*_CEILING),
    bodies=(BodyDoc(JSON, InvoiceIn),),
    params=WRITE_PARAMS,
)
@data_route("invoices:write", body=InvoiceIn, status=201)
async def create_invoice(tx: Any, call: Call, data: InvoiceIn) -> books.Document:
    """Create a draft invoice, numbered and priced from its lines; emits invoice.created."""
    return await books.create_invoice(
        tx, now=call.now, business_id=call.business_id, **_invoice_fields(data)
    )


@blueprint.post("/invoices/bulk-import")
@operation(
    json_reply(201, dict[str, list[Record]], "Every invoice created", *ANSWER_HEADERS),
    raises=write_raises(*_CEILING),
    bodies=(BodyDoc(JSON, BulkImportIn),),
    params=WRITE_PARAMS,
)
@data_route("invoices:write", body=BulkImportIn, status=201)
async def bulk_import(tx: Any, call: Call, data: BulkImportIn) -> dict[str, Any]:
    """Create up to 200 invoices, all or none: ``{"data": [invoice, ...]}``."""
    invoices = await books.bulk_import_invoices(
        tx,
        now=call.now,
        business_id=call.business_id,
        invoices=[_invoice_fields(invoice) for invoice in data.invoices],
    )
    return {"data": invoices}


@blueprint.patch("/invoices/<record:record_id>")
@operation(
    changed("invoice"),
    raises=write_raises(books.RecordInWrongState),
    bodies=(BodyDoc(JSON, InvoiceChanges, required=False),),
    params=record_write_params("invoice"),
)
@data_route("invoices:write", body=InvoiceChanges)
async def change_invoice(
    tx: Any, call: Call, data: InvoiceChanges, record_id: str
) -> books.Document:
    """Change a draft invoice's customer, dates or lines; emits invoice.updated."""
    return await books.update_invoice(
        tx,
        now=call.now,
        business_id=call.business_id,
        invoice_id=record_id,
        changes=changes_of(data),
    )


@blueprint.post("/invoices/<record:record_id>/send")
@operation(
    changed("invoice"),
    raises=write_raises(books.RecordInWrongState),
    params=record_write_params("invoice"),
)
@data_route("invoices:write")
async def send_invoice(tx: Any, call: Call, record_id: str) -> books.Document:
    """Mark a draft invoice sent; emits invoice.sent."""
    return await books.send_invoice(
        tx, now=call.now, business_id=call.business_id, invoice_id=record_id
    )


@blueprint.post("/invoices/<record:record_id>/void")
@operation(
    changed("invoice"),
    raises=write_raises(books.RecordInWrongState),
    params=record_write_params("invoice"),
)
@data_route("invoices:write")
async def void_invoice(tx: Any, call: Call, record_id: str) -> books.Document:
    """Void an unpaid invoice; emits invoice.voided."""
    return await books.void_invoice(
        tx, now=call.now, business_id=call.business_id, invoice_id=record_id
    )


@blueprint.delete("/invoices/<record:record_id>")
@operation(
    deleted("invoice"),
    raises=write_raises(books.RecordInWrongState),
    params=record_write_params("invoice"),
)
@data_route("invoices:write", status=204)
async def delete_invoice(tx: Any, call: Call, record_id: str) -> None:
    """Delete a draft invoice; emits invoice.deleted."""
    await books.delete_invoice(tx, now=call.now, business_id=call.business_id, invoice_id=record_id)


# --- payments ------------------------------------------------------------------------------------

reads("payment", "/payments")


@blueprint.post("/payments")
@operation(
    created("payment"),
    raises=write_raises(books.RecordInWrongState),
    bodies=(BodyDoc(JSON, PaymentIn),),
    params=WRITE_PARAMS,
)
@data_route("payments:write", body=PaymentIn, status=201)
async def create_payment(tx: Any, call: Call, data: PaymentIn) -> books.Document:
    """Record a payment of an invoice, partial or full; emits payment.received, and
    invoice.paid when it settles the invoice."""
    return await books.receive_payment(
        tx,
        now=call.now,
        business_id=call.business_id,
        invoice_id=data.invoiceId,
        amount_text=data.amount,
        received_on=data.receivedOn,
        reference=data.reference,
    )


@blueprint.patch("/payments/<record:record_id>")
@operation(
    changed("payment"),
    raises=write_raises(),
    bodies=(BodyDoc(JSON, PaymentChanges, required=False),),
    params=record_write_params("payment"),
)
@data_route("payments:write", body=PaymentChanges)
async def change_payment(
    tx: Any, call: Call, data: PaymentChanges, record_id: str
) -> books.Document:
    """Change when a payment was received or its reference; emits payment.updated."""
    return await books.update_payment(
        tx,
        now=call.now,
        business_id=call.business_id,
        payment_id=record_id,
        changes=changes_of(data),
    )


@blueprint.post("/payments/<record:record_id>/refund")
@operation(
    changed("payment"),
    raises=write_raises(books.RecordInWrongState),
    bodies=(BodyDoc(JSON, RefundIn, required=False),),
    params=record_write_params("payment"),
)
@data_route("payments:write", body=RefundIn)
async def refund_payment(tx: Any, call: Call, data: RefundIn, record_id: str) -> books.Document:
    """Refund a payment, all that is left of it or ``amount``: its invoice is due that much
    again; emits payment.refunded."""
    return await books.refund_payment(
        tx,
        now=call.now,
        business_id=call.business_id,
        payment_id=record_id,
        amount_text=data.amount,
    )


@blueprint.delete("/payments/<record:record_id>")
@operation(deleted("payment"), raises=write_raises(), params=record_write_params("payment"))
@data_route("payments:write", permission=catalog.PERMISSION_PAYMENTS_DELETE, status=204)
async def delete_payment(tx: Any, call: Call, record_id: str) -> None:
    """Delete a payment (role permission payments:delete); its invoice is due again; emits
    payment.deleted."""
    await books.delete_payment(tx, now=call.now, business_id=call.business_id, payment_id=record_id)


# --- quotes --------------------------------------------------------------------------------------

reads("quote", "/quotes")


@blueprint.post("/quotes")
@operation(
    created("quote"), raises=write_raises(), bodies=(BodyDoc(JSON, QuoteIn),), params=WRITE_PARAMS
)
@data_route("quotes:write", body=QuoteIn, status=201)
async def create_quote(tx: Any, call: Call, data: QuoteIn) -> books.Document:
    """Create a draft quote; emits quote.created."""
    return await books.create_quote(
        tx,
        now=call.now,
        business_id=call.business_id,
        customer_id=data.customerId,
        currency=data.currency,
        lines=[line.model_dump() for line in data.lines],
        issue_date=data.issueDate,
        valid_until=data.validUntil,
    )


@blueprint.patch("/quotes/<record:record_id>")
@operation(
    changed("quote"),
    raises=write_raises(books.RecordInWrongState),
    bodies=(BodyDoc(JSON, QuoteChanges, required=False),),
    params=record_write_params("quote"),
)
@data_route("quotes:write", body=QuoteChanges)
async def change_quote(tx: Any, call: Call, data: QuoteChanges, record_id: str) -> books.Document:
    """Change a draft quote; emits quote.updated."""
    return await books.update_quote(
        tx, now=call.now, business_id=call.business_id, quote_id=record_id, changes=changes_of(data)
    )


@blueprint.delete("/quotes/<record:record_id>")
@operation(deleted("quote"), raises=write_raises(), params=record_write_params("quote"))
@data_route("quotes:write", status=204)
async def delete_quote(tx: Any, call: Call, record_id: str) -> None:
    """Delete a quote; emits quote.deleted."""
    await books.delete_quote(tx, now=call.now, business_id=call.business_id, quote_id=record_id)


def _quote_action(path: str, action: Any, summary: str) -> None:
    """``POST /quotes/<id>/<path>``: one of a quote's status changes."""

    @operation(
        changed("quote"),
        raises=write_raises(books.RecordInWrongState),
        params=record_write_params("quote"),
    )
    @data_route("quotes:write")
    async def act(tx: Any, call: Call, record_id: str) -> books.Document:
        quote: books.Document = await action(
            tx, now=call.now, business_id=call.business_id, quote_id=record_id
        )
        return quote

    act.__doc__ = summary
    blueprint.add_url_rule(
        f"/quotes/<record:record_id>/{path}", f"{path}_quote", act, methods=["POST"]
    )


_quote_action("send", books.send_quote, "Mark a draft quote sent; emits quote.sent.")
_quote_action(
    "accept",
    books.accept_quote,
    "The customer accepted a sent quote (not past its validUntil); emits quote.accepted.",
)
_quote_action(
    "decline", books.decline_quote, "The customer declined a sent quote; emits quote.declined."
)


@blueprint.post("/quotes/<record:record_id>/convert")
@operation(
    json_reply(201, Record, "The quote's new draft invoice", *ANSWER_HEADERS, REPLAYED_HEADER),
    raises=write_raises(books.RecordInWrongState, *_CEILING),
    params=record_write_params("quote"),
)
@data_route("quotes:write", status=201)
async def convert_quote(tx: Any, call: Call, record_id: str) -> books.Document:
    """Turn an accepted quote into a draft invoice of its customer, currency and lines (needs
    invoices:write too; counted against the plan's ceiling); answers the invoice; emits
    invoice.created and quote.converted."""
    auth.check_call(call.grant, scope="invoices:write")
    _, invoice = await books.convert_quote(
        tx, now=call.now, business_id=call.business_id, quote_id=record_id
    )
    return invoice
