"""List paging: ``limit`` (1 to 100, default 50) and an opaque ``cursor``."""

from __future__ import annotations

from werkzeug.datastructures import MultiDict

from ledgerport import catalog
from ledgerport.errors import InvalidInput


def page_params(args: MultiDict[str, str]) -> tuple[int, str | None]:
    problems = []
    raw_limit = args.get("limit")
    limit = catalog.EVENTS_PAGE_DEFAULT
    if raw_limit is not None:
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= catalog.EVENTS_PAGE_MAX:
            problems.append(f"limit must be an integer from 1 to {catalog.EVENTS_PAGE_MAX}")
        else:
            limit = int(raw_limit)
    cursor = args.get("cursor") or None
    if problems:
        raise InvalidInput(problems)
    return limit, cursor
