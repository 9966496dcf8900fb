"""Invoices of a business."""

from __future__ import annotations

import json
import re
from typing import Any

from ledgerport.errors import InvalidInput
from ledgerport.storage import Row, Transaction


def invoice_json(row: Row) -> dict[str, Any]:
    extra = json.loads(row["data"])
    return {
        "id": row["id"],
        "number": row["number"],
        "customerId": row["customer_id"],
        "status": row["status"],
        "currency": row["currency"],
        "total": row["total"],
        **extra,
    }


_CURSOR = re.compile(r"c[0-9]{1,18}")
"""A cursor this list returns: ``c`` and a row's sequence number (ASCII digits, within int64)."""


def _decode_cursor(cursor: str) -> int:
    if not _CURSOR.fullmatch(cursor):
        raise InvalidInput(["cursor is not a cursor this list returned"])
    return int(cursor[1:])


async def list_invoices(
    tx: Transaction, business_id: str, *, limit: int, after: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the business's invoices, oldest first, and the cursor of the next page."""
    after_seq = _decode_cursor(after) if after else 0
    rows = await tx.fetch(
        "SELECT * FROM invoices WHERE business_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        business_id,
        after_seq,
        limit + 1,
    )
    page = rows[:limit]
    next_cursor = f"c{page[-1]['seq']}" if len(rows) > limit else None
    return [invoice_json(r) for r in page], next_cursor
