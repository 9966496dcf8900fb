"""List paging: ``limit`` (1 to 100, default 50) and an opaque ``cursor`` (its form in
``_ids.CURSOR_SCHEMA``; an empty one is refused like any other that no page returned)."""

from __future__ import annotations

from werkzeug.datastructures import MultiDict

from ledgerport import catalog
from ledgerport.errors import InvalidInput

from .._ids import CURSOR_SCHEMA
from .._openapi import Param

PAGE_PARAMS = (
    Param(
        "limit",
        "query",
        f"Items per page (default {catalog.EVENTS_PAGE_DEFAULT})",
        {"type": "integer", "minimum": 1, "maximum": catalog.EVENTS_PAGE_MAX},
    ),
    Param(
        "cursor",
        "query",
        "The next of the previous page: opaque, only that value is valid",
        CURSOR_SCHEMA,
    ),
)
"""The paging parameters, in the OpenAPI document."""


def _limit(raw: str) -> int | None:
    """``raw`` as a limit in range, or None. Decimal digits only: ``int`` also takes signs,
    spaces and underscores, and refuses digits it cannot convert (``"²"``, thousands of them)."""
    if not raw.isdecimal():
        return None
    try:
        limit = int(raw)
    except ValueError:
        return None
    return limit if 1 <= limit <= catalog.EVENTS_PAGE_MAX else None


def page_params(args: MultiDict[str, str]) -> tuple[int, str | None]:
    problems = []
    raw_limit = args.get("limit")
    limit = catalog.EVENTS_PAGE_DEFAULT
    if raw_limit is not None:
        parsed = _limit(raw_limit)
        if parsed is None:
            problems.append(f"limit must be an integer from 1 to {catalog.EVENTS_PAGE_MAX}")
        else:
            limit = parsed
    cursor = args.get("cursor")
    if cursor == "":
        # Present but empty is no page's next (an absent cursor is the first page).
        problems.append("cursor is not a cursor this list returned")
    if problems:
        raise InvalidInput(problems)
    return limit, cursor
