"""Purchases (supplier bills) and purchase returns of the token's business."""

from __future__ import annotations

from typing import Any

from ledgerport import books

from .._ids import PURCHASE, SUPPLIER
from .._openapi import JSON, operation
from .._openapi import Body as BodyDoc
from ._blueprint import blueprint
from ._endpoint import Call, data_route
from ._records import (
    WRITE_PARAMS,
    Body,
    Changes,
    Date,
    LineIn,
    Lines,
    OptionalLines,
    changed,
    changes_of,
    created,
    deleted,
    reads,
    record_write_params,
    write_raises,
)
from .invoicing import Currency


class PurchaseIn(Body):
    supplierId: str = SUPPLIER.field()
    currency: str | None = Currency
    lines: list[LineIn] = Lines
    billDate: Date | None = None
    dueDate: Date | None = None


class PurchaseChanges(Changes):
    nullable = frozenset({"billDate", "dueDate"})
    supplierId: str | None = SUPPLIER.field(default=None)
    lines: list[LineIn] | None = OptionalLines
    billDate: Date | None = None
    dueDate: Date | None = None


class PayIn(Body):
    paidOn: Date | None = None


class PurchaseReturnIn(Body):
    purchaseId: str = PURCHASE.field()
    lines: list[LineIn] = Lines
    returnDate: Date | None = None


class PurchaseReturnChanges(Changes):
    lines: list[LineIn] | None = OptionalLines
    returnDate: Date | None = None


reads("purchase", "/purchases")
reads("purchase_return", "/purchase-returns")
_STATE = (books.RecordInWrongState,)


@blueprint.post("/purchases")
@operation(
    created("purchase"),
    raises=write_raises(),
    bodies=(BodyDoc(JSON, PurchaseIn),),
    params=WRITE_PARAMS,
)
@data_route("purchases:write", body=PurchaseIn, status=201)
async def create_purchase(tx: Any, call: Call, data: PurchaseIn) -> books.Document:
    """Record a supplier's bill, numbered and priced from its lines; emits purchase.created."""
    return await books.create_purchase(
        tx,
        now=call.now,
        business_id=call.business_id,
        supplier_id=data.supplierId,
        currency=data.currency,
        lines=[line.model_dump() for line in data.lines],
        bill_date=data.billDate,
        due_date=data.dueDate,
    )


@blueprint.patch("/purchases/<record:record_id>")
@operation(
    changed("purchase"),
    raises=write_raises(*_STATE),
    bodies=(BodyDoc(JSON, PurchaseChanges, required=False),),
    params=record_write_params("purchase"),
)
@data_route("purchases:write", body=PurchaseChanges)
async def change_purchase(
    tx: Any, call: Call, data: PurchaseChanges, record_id: str
) -> books.Document:
    """Change an open purchase; emits purchase.updated."""
    return await books.update_purchase(
        tx,
        now=call.now,
        business_id=call.business_id,
        purchase_id=record_id,
        changes=changes_of(data),
    )


@blueprint.delete("/purchases/<record:record_id>")
@operation(
    deleted("purchase"), raises=write_raises(*_STATE), params=record_write_params("purchase")
)
@data_route("purchases:write", status=204)
async def delete_purchase(tx: Any, call: Call, record_id: str) -> None:
    """Delete an open purchase; emits purchase.deleted."""
    await books.delete_purchase(
        tx, now=call.now, business_id=call.business_id, purchase_id=record_id
    )


@blueprint.post("/purchases/<record:record_id>/pay")
@operation(
    changed("purchase"),
    raises=write_raises(*_STATE),
    bodies=(BodyDoc(JSON, PayIn, required=False),),
    params=record_write_params("purchase"),
)
@data_route("purchases:write", body=PayIn)
async def pay_purchase(tx: Any, call: Call, data: PayIn, record_id: str) -> books.Document:
    """The business paid an open purchase in full (on ``paidOn``, today by default); emits
    purchase.paid."""
    return await books.pay_purchase(
        tx, now=call.now, business_id=call.business_id, purchase_id=record_id, paid_on=data.paidOn
    )


@blueprint.post("/purchase-returns")
@operation(
    created("purchase_return"),
    raises=write_raises(),
    bodies=(BodyDoc(JSON, PurchaseReturnIn),),
    params=WRITE_PARAMS,
)
@data_route("purchase-returns:write", body=PurchaseReturnIn, status=201)
async def create_purchase_return(tx: Any, call: Call, data: PurchaseReturnIn) -> books.Document:
    """Send goods back against a purchase (at most its total); emits purchase_return.created."""
    return await books.create_purchase_return(
        tx,
        now=call.now,
        business_id=call.business_id,
        purchase_id=data.purchaseId,
        lines=[line.model_dump() for line in data.lines],
        return_date=data.returnDate,
    )


@blueprint.post("/purchase-returns/<record:record_id>/refund")
@operation(
    changed("purchase_return"),
    raises=write_raises(*_STATE),
    params=record_write_params("purchase_return"),
)
@data_route("purchase-returns:write")
async def refund_purchase_return(tx: Any, call: Call, record_id: str) -> books.Document:
    """The supplier refunded the return; emits purchase_return.refunded."""
    return await books.refund_purchase_return(
        tx, now=call.now, business_id=call.business_id, return_id=record_id
    )


@blueprint.patch("/purchase-returns/<record:record_id>")
@operation(
    changed("purchase_return"),
    raises=write_raises(*_STATE),
    bodies=(BodyDoc(JSON, PurchaseReturnChanges, required=False),),
    params=record_write_params("purchase_return"),
)
@data_route("purchase-returns:write", body=PurchaseReturnChanges)
async def change_purchase_return(
    tx: Any, call: Call, data: PurchaseReturnChanges, record_id: str
) -> books.Document:
    """Change an open return's lines (at most its purchase's total) or date; emits
    purchase_return.updated."""
    return await books.update_purchase_return(
        tx,
        now=call.now,
        business_id=call.business_id,
        return_id=record_id,
        changes=changes_of(data),
    )


@blueprint.delete("/purchase-returns/<record:record_id>")
@operation(
    deleted("purchase_return"),
    raises=write_raises(*_STATE),
    params=record_write_params("purchase_return"),
)
@data_route("purchase-returns:write", status=204)
async def delete_purchase_return(tx: Any, call: Call, record_id: str) -> None:
    """Delete an open return; emits purchase_return.deleted."""
    await books.delete_purchase_return(
        tx, now=call.now, business_id=call.business_id, return_id=record_id
    )
