"""What every business area of the data API shares: list and get routes, request parts, the
shape of records in the OpenAPI document.

Lists page oldest first with ``limit`` and ``cursor`` and answer ``{data, next}``; a record of
another business (ids are per business) is 404 RECORD_NOT_FOUND.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator, with_config
from quart import request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.routing import BaseConverter

from ledgerport import books, catalog

from .._forms import DATE, NON_NEGATIVE_DECIMAL, POSITIVE_DECIMAL
from .._ids import ANY_RECORD_ID, RECORD_IDS
from .._json import stored
from .._openapi import Param, Reply, json_reply, operation
from ._auth import RATE_LIMIT_HEADERS
from ._blueprint import blueprint
from ._endpoint import (
    IDEMPOTENCY_PARAM,
    READ_RAISES,
    REPLAYED_HEADER,
    VERSION_HEADER,
    VERSION_PARAM,
    WRITE_RAISES,
    Call,
    data_route,
)
from ._paging import PAGE_PARAMS, page_params

RECORD_ID_PATTERN = ANY_RECORD_ID.pattern.strip("^$")
"""A record id: its kind's prefix and 96 random bits (``ids.new_id``)."""


class RecordIdConverter(BaseConverter):
    """``<record:...>`` matches record ids only, so ``/invoices/bulk-import`` is never taken for
    an invoice's id (nor advertised in its Allow header). A well-formed id of no record of the
    business is RECORD_NOT_FOUND; anything else is no route at all."""

    regex = RECORD_ID_PATTERN


ANSWER_HEADERS = (*RATE_LIMIT_HEADERS, VERSION_HEADER)
WRITE_PARAMS = (VERSION_PARAM, IDEMPOTENCY_PARAM)


def record_id_param(kind: str) -> Param:
    """The ``record_id`` path parameter of a route on records of ``kind``: that kind's id (one of
    another kind is no record of the area: 404)."""
    id_kind = RECORD_IDS[kind]
    return Param("record_id", "path", id_kind.description, id_kind.schema)


def record_write_params(kind: str) -> tuple[Param, ...]:
    """The parameters of a write on one record of ``kind``."""
    return (record_id_param(kind), *WRITE_PARAMS)


class Body(BaseModel):
    """A request body: strict types (money and quantities are decimal strings, never numbers),
    unknown fields refused."""

    model_config = ConfigDict(strict=True, extra="forbid")


Text = Field(min_length=1, max_length=200)
# pydantic checks the shape (so the books read a decimal string or a date); the books check the
# value with their own messages; the document states both as one pattern (``_forms``).
DECIMAL_PATTERN = r"^-?[0-9]{1,13}(\.[0-9]{1,4})?$"
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


PositiveDecimal = Annotated[
    str,
    Field(pattern=DECIMAL_PATTERN),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": POSITIVE_DECIMAL,
            "examples": ["10.00"],
            "description": 'A decimal string above 0 such as "10.00": at most 13 digits and 4'
            " decimals",
        }
    ),
]
"""A quantity or an amount."""
NonNegativeDecimal = Annotated[
    str,
    Field(pattern=DECIMAL_PATTERN),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": NON_NEGATIVE_DECIMAL,
            "examples": ["10.00"],
            "description": 'A decimal string of 0 or more such as "10.00": at most 13 digits and'
            " 4 decimals",
        }
    ),
]
"""A price, a debit or a credit."""
Date = Annotated[
    str,
    Field(pattern=DATE_PATTERN),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date",
            "pattern": DATE,
            "examples": ["2026-09-22"],
            "description": "An ISO 8601 date that exists, such as 2026-09-22",
        }
    ),
]
OptionalText = Field(default=None, min_length=1, max_length=200)
LINES_TOTAL = (
    "The lines' total (each quantity times its unitPrice, summed) must be at most"
    f" {books.MAX_TOTAL}; a larger one is refused with 400"
)
Lines = Field(min_length=1, max_length=200, description=LINES_TOTAL)
OptionalLines = Field(default=None, min_length=1, max_length=200, description=LINES_TOTAL)


def _null_only_where_nullable(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """The document of a PATCH body: a field offers null only when it is ``nullable``."""
    nullable: frozenset[str] = getattr(model, "nullable", frozenset())
    for name, prop in schema.get("properties", {}).items():
        options = prop.get("anyOf")
        if name in nullable or options is None:
            continue
        kept = [option for option in options if option.get("type") != "null"]
        prop.pop("anyOf")
        prop.pop("default", None)
        if len(kept) == 1:
            prop.update(kept[0])
        else:
            prop["anyOf"] = kept


class Changes(Body):
    """A PATCH body: fields left out stay as they are; null only where a field may be empty
    (``nullable``), else it is a validation failure. The body itself may be left out: it reads
    as ``{}``, a change of no field (the document says so: ``BodyDoc(..., required=False)``)."""

    model_config = ConfigDict(
        strict=True, extra="forbid", json_schema_extra=_null_only_where_nullable
    )
    nullable: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="after")
    def _no_null_where_required(self) -> Self:
        refused = sorted(
            field for field in self.model_fields_set - self.nullable if getattr(self, field) is None
        )
        if refused:
            raise ValueError(f"{', '.join(refused)} must not be null")
        return self


class LineIn(Body):
    description: str = Field(default="", max_length=500)
    quantity: PositiveDecimal
    unitPrice: NonNegativeDecimal


def changes_of(data: BaseModel) -> dict[str, Any]:
    """The fields a PATCH body sent (omitted ones stay as they are), lines as plain dicts."""
    return data.model_dump(exclude_unset=True)


@with_config(ConfigDict(extra="allow"))
class Record(TypedDict):
    """A business record; its fields by kind are in docs/events.md (the same as its events')."""

    id: str


def page_of(name: str) -> type:
    """The ``{data, next}`` page of a kind, for the document."""
    page: type = TypedDict(  # type: ignore[misc]
        name, {"data": list[Record], "next": str | None}
    )
    return with_config(ConfigDict(extra="forbid"))(page)


def reads(kind: str, path: str) -> None:
    """``GET path`` (a page of the business's records of ``kind``) and ``GET path/<id>``."""
    scope = f"{catalog.RECORD_KINDS[kind].area}:read"
    label = kind.replace("_", " ")
    page = page_of(f"{kind.title().replace('_', '')}Page")

    @operation(
        json_reply(200, page, f"A page of {label}s, oldest first", *ANSWER_HEADERS),
        raises=READ_RAISES,
        params=(*PAGE_PARAMS, VERSION_PARAM),
    )
    @data_route(scope)
    async def list_all(tx: Any, call: Call) -> dict[str, Any]:
        limit, after = page_params(request.args)
        texts, next_cursor = await books.list_record_texts(
            tx, call.business_id, kind, limit=limit, after=after
        )
        return {"data": [stored(text) for text in texts], "next": next_cursor}

    @operation(
        json_reply(200, Record, f"The {label}", *ANSWER_HEADERS),
        raises=(*READ_RAISES, books.RecordNotFound),
        params=(record_id_param(kind), VERSION_PARAM),
    )
    @data_route(scope)
    async def get_one(tx: Any, call: Call, record_id: str) -> books.Document:
        return await books.get_record(tx, call.business_id, kind, record_id)

    list_all.__doc__ = f"List the business's {label}s, oldest first: ``{{data, next}}``."
    get_one.__doc__ = f"One {label} of the business."
    blueprint.add_url_rule(path, f"list_{kind}", list_all, methods=["GET"])
    blueprint.add_url_rule(f"{path}/<record:record_id>", f"get_{kind}", get_one, methods=["GET"])


def created(kind: str) -> Reply:
    return json_reply(
        201, Record, f"The new {kind.replace('_', ' ')}", *ANSWER_HEADERS, REPLAYED_HEADER
    )


def changed(kind: str) -> Reply:
    return json_reply(
        200, Record, f"The {kind.replace('_', ' ')} as it is now", *ANSWER_HEADERS, REPLAYED_HEADER
    )


def deleted(kind: str) -> Reply:
    return Reply(204, f"The {kind.replace('_', ' ')} is deleted", None, None, ANSWER_HEADERS)


def write_raises(*more: type[BaseException]) -> tuple[type[BaseException], ...]:
    return (*WRITE_RAISES, *more)
