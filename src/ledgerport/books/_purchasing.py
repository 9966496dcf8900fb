"""Purchases (supplier bills) and purchase returns.

A purchase is numbered per business (PUR-0001), priced from its lines and ``open`` until it is
paid (``purchase.paid``); only an open purchase is changed or deleted. A return takes goods back
against a purchase, at most its total, and is ``open`` (changed or deleted) until refunded
(``purchase_return.refunded``). Every change records its event in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ledgerport.errors import InvalidInput
from ledgerport.storage import Transaction

from ._errors import RecordInWrongState
from ._events import record_event
from ._invoicing import check_dates
from ._money import ZERO, amount, currency_or_default, priced_lines
from ._records import (
    Document,
    delete_record,
    get_record,
    insert_record,
    iso,
    iso_date,
    save_record,
    unchanged,
)


async def create_purchase(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    supplier_id: str,
    lines: Sequence[Mapping[str, Any]],
    currency: str | None = None,
    bill_date: str | None = None,
    due_date: str | None = None,
) -> Document:
    priced, total = priced_lines(lines)
    check_dates(billDate=bill_date, dueDate=due_date)
    await get_record(tx, business_id, "supplier", supplier_id)
    purchase = await insert_record(
        tx,
        now=now,
        business_id=business_id,
        kind="purchase",
        numbered=True,
        fields={
            "status": "open",
            "supplierId": supplier_id,
            "currency": currency_or_default(currency),
            "total": amount(total),
            "amountDue": amount(total),
            "billDate": bill_date or iso_date(now),
            "dueDate": due_date,
            "lines": priced,
        },
    )
    await record_event(tx, now=now, type="purchase.created", data=purchase, business_id=business_id)
    return purchase


async def update_purchase(
    tx: Transaction, *, now: float, business_id: str, purchase_id: str, changes: dict[str, Any]
) -> Document:
    """Change an open purchase: its supplier, dates or lines (repriced)."""
    purchase = await get_record(tx, business_id, "purchase", purchase_id, for_update=True)
    if purchase["status"] != "open":
        raise RecordInWrongState("purchase", purchase_id, purchase["status"], "changed")
    check_dates(billDate=changes.get("billDate"), dueDate=changes.get("dueDate"))
    if "supplierId" in changes:
        await get_record(tx, business_id, "supplier", changes["supplierId"])
    if "lines" in changes:
        priced, total = priced_lines(changes["lines"])
        changes = {**changes, "lines": priced, "total": amount(total), "amountDue": amount(total)}
    if unchanged(purchase, changes):
        return purchase
    purchase = await save_record(
        tx, now=now, business_id=business_id, kind="purchase", document={**purchase, **changes}
    )
    await record_event(tx, now=now, type="purchase.updated", data=purchase, business_id=business_id)
    return purchase


async def delete_purchase(
    tx: Transaction, *, now: float, business_id: str, purchase_id: str
) -> None:
    purchase = await get_record(tx, business_id, "purchase", purchase_id, for_update=True)
    if purchase["status"] != "open":
        raise RecordInWrongState("purchase", purchase_id, purchase["status"], "deleted")
    await delete_record(
        tx, now=now, business_id=business_id, kind="purchase", record_id=purchase_id
    )
    await record_event(
        tx,
        now=now,
        type="purchase.deleted",
        data={"id": purchase_id, "number": purchase["number"]},
        business_id=business_id,
    )


async def pay_purchase(
    tx: Transaction, *, now: float, business_id: str, purchase_id: str, paid_on: str | None = None
) -> Document:
    """The business paid an open purchase in full; emits ``purchase.paid``."""
    check_dates(paidOn=paid_on)
    purchase = await get_record(tx, business_id, "purchase", purchase_id, for_update=True)
    if purchase["status"] != "open":
        raise RecordInWrongState("purchase", purchase_id, purchase["status"], "paid")
    purchase = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind="purchase",
        document={
            **purchase,
            "status": "paid",
            "amountDue": amount(ZERO),
            "paidOn": paid_on or iso_date(now),
            "paidAt": iso(now),
        },
    )
    await record_event(tx, now=now, type="purchase.paid", data=purchase, business_id=business_id)
    return purchase


async def _returnable(
    tx: Transaction, business_id: str, purchase_id: str, total: Decimal
) -> Document:
    """The purchase a return of ``total`` is made against; InvalidInput past its total."""
    purchase = await get_record(tx, business_id, "purchase", purchase_id)
    if total > Decimal(purchase["total"]):
        raise InvalidInput([f"lines must total at most the purchase's {purchase['total']}"])
    return purchase


async def create_purchase_return(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    purchase_id: str,
    lines: Sequence[Mapping[str, Any]],
    return_date: str | None = None,
) -> Document:
    """Goods sent back against a purchase; the return's total is at most the purchase's."""
    priced, total = priced_lines(lines)
    check_dates(returnDate=return_date)
    purchase = await _returnable(tx, business_id, purchase_id, total)
    purchase_return = await insert_record(
        tx,
        now=now,
        business_id=business_id,
        kind="purchase_return",
        numbered=True,
        fields={
            "purchaseId": purchase_id,
            "supplierId": purchase["supplierId"],
            "status": "open",
            "currency": purchase["currency"],
            "total": amount(total),
            "returnDate": return_date or iso_date(now),
            "lines": priced,
        },
    )
    await record_event(
        tx,
        now=now,
        type="purchase_return.created",
        data=purchase_return,
        business_id=business_id,
    )
    return purchase_return


async def refund_purchase_return(
    tx: Transaction, *, now: float, business_id: str, return_id: str
) -> Document:
    """The supplier refunded the return: ``purchase_return.refunded``."""
    purchase_return = await _open_return(tx, business_id, return_id, "refunded")
    purchase_return = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind="purchase_return",
        document={**purchase_return, "status": "refunded", "refundedOn": iso_date(now)},
    )
    await record_event(
        tx,
        now=now,
        type="purchase_return.refunded",
        data=purchase_return,
        business_id=business_id,
    )
    return purchase_return


async def _open_return(tx: Transaction, business_id: str, return_id: str, action: str) -> Document:
    purchase_return = await get_record(
        tx, business_id, "purchase_return", return_id, for_update=True
    )
    if purchase_return["status"] != "open":
        raise RecordInWrongState("purchase_return", return_id, purchase_return["status"], action)
    return purchase_return


async def update_purchase_return(
    tx: Transaction, *, now: float, business_id: str, return_id: str, changes: dict[str, Any]
) -> Document:
    """Change an open return's lines (repriced, at most its purchase's total) or date; emits
    ``purchase_return.updated``."""
    check_dates(returnDate=changes.get("returnDate"))
    purchase_return = await _open_return(tx, business_id, return_id, "changed")
    if "lines" in changes:
        priced, total = priced_lines(changes["lines"])
        await _returnable(tx, business_id, purchase_return["purchaseId"], total)
        changes = {**changes, "lines": priced, "total": amount(total)}
    if unchanged(purchase_return, changes):
        return purchase_return
    purchase_return = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind="purchase_return",
        document={**purchase_return, **changes},
    )
    await record_event(
        tx, now=now, type="purchase_return.updated", data=purchase_return, business_id=business_id
    )
    return purchase_return


async def delete_purchase_return(
    tx: Transaction, *, now: float, business_id: str, return_id: str
) -> None:
    """Delete an open return; emits ``purchase_return.deleted``."""
    purchase_return = await _open_return(tx, business_id, return_id, "deleted")
    await delete_record(
        tx, now=now, business_id=business_id, kind="purchase_return", record_id=return_id
    )
    await record_event(
        tx,
        now=now,
        type="purchase_return.deleted",
        data={"id": return_id, "number": purchase_return["number"]},
        business_id=business_id,
    )
