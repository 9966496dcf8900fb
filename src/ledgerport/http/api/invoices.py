"""Invoices of the token's business."""

from __future__ import annotations

from typing import Any

from quart import request

from ledgerport.books import list_invoices

from .._context import unit_of_work
from ._auth import current_grant, requires
from ._blueprint import blueprint
from ._paging import page_params


@blueprint.get("/invoices")
@requires("invoices:read")
async def get_invoices() -> dict[str, Any]:
    """List the business's invoices, oldest first: ``{data, next}``; page with limit and cursor."""
    limit, after = page_params(request.args)
    async with unit_of_work() as tx:
        invoices, next_cursor = await list_invoices(
            tx, current_grant().business_id, limit=limit, after=after
        )
    return {"data": invoices, "next": next_cursor}
