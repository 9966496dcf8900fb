"""The query strings of the function pages as models (``_form_models.read_query``): the
function page's status filter and where a version's source page starts. A value is what the
page's links and chips send: empty is none, spaces around it are dropped, and anything else the
parameter cannot hold is a 400 page that says which parameter and why."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field
from pydantic_core import PydanticCustomError

from ledgerport import queues

from .._form_models import PageQuery
from .._query_fields import Choice, QueryValue
from ._debug import one_of_words

_LINE = re.compile(r"[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class LineNumber(QueryValue):
    """A line's number, from 1, or nothing."""

    def check(self, value: str) -> Any:
        if not _LINE.fullmatch(value):
            raise PydanticCustomError("line", "must be a line of the source, as 12")
        return int(value)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": f"^(?:{_LINE.pattern})?$"}


class RunsQuery(PageQuery):
    """The function page's query string: which of its runs it lists."""

    status: Annotated[
        queues.RunStatus | None, Choice(queues.RUN_STATUSES, one_of_words(queues.RUN_STATUSES))
    ] = None
    """Only the runs in this status (empty: every status)"""


class VersionQuery(PageQuery):
    """A version's source page's query string: the line it starts at."""

    first: Annotated[int | None, LineNumber()] = Field(default=None, alias="from")
    """The first line of the source shown (a page shows 5,000 lines; empty: line 1)"""
