"""Invoices of the token's business."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, with_config
from quart import request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import storage
from ledgerport.books import list_invoices
from ledgerport.errors import InvalidInput

from .._context import unit_of_work
from .._openapi import json_reply, operation
from ._auth import RATE_LIMIT_HEADERS, current_grant, requires
from ._blueprint import blueprint
from ._paging import PAGE_PARAMS, page_params


@with_config(ConfigDict(extra="allow"))
class Invoice(TypedDict):
    """An invoice; money is a decimal string."""

    id: str
    number: str
    customerId: str | None
    status: str
    currency: str
    total: str


@with_config(ConfigDict(extra="forbid"))
class InvoicePage(TypedDict):
    """A page of invoices, oldest first; next is the cursor of the next page (null on the last)."""

    data: list[Invoice]
    next: str | None


@blueprint.get("/invoices")
@requires("invoices:read")
@operation(
    json_reply(200, InvoicePage, "A page of invoices", *RATE_LIMIT_HEADERS),
    raises=(InvalidInput, storage.BadValue),
    params=PAGE_PARAMS,
)
async def get_invoices() -> dict[str, Any]:
    """List the business's invoices, oldest first: ``{data, next}``; page with limit and cursor."""
    limit, after = page_params(request.args)
    async with unit_of_work() as tx:
        invoices, next_cursor = await list_invoices(
            tx, current_grant().business_id, limit=limit, after=after
        )
    return {"data": invoices, "next": next_cursor}
