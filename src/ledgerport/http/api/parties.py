"""Customers and suppliers of the token's business: list, get, create, change, delete."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ledgerport import books

from .._openapi import JSON, operation
from .._openapi import Body as BodyDoc
from ._blueprint import blueprint
from ._endpoint import Call, data_route
from ._records import (
    WRITE_PARAMS,
    Body,
    Changes,
    OptionalText,
    Text,
    changed,
    changes_of,
    created,
    deleted,
    reads,
    record_write_params,
    write_raises,
)

Email = Field(
    default=None,
    min_length=3,
    max_length=320,
    pattern=r"^[^@\s]+@[^@\s]+$",
    # The document states the NUL every request's text is refused with (``_input``) in the
    # field's own pattern.
    json_schema_extra={"pattern": "^[^@\\s\\u0000]+@[^@\\s\\u0000]+$"},
)


class PartyIn(Body):
    name: str = Text
    email: str | None = Email


class PartyChanges(Changes):
    nullable = frozenset({"email"})
    name: str | None = OptionalText
    email: str | None = Email


def _routes(kind: books.PartyKind, path: str) -> None:
    area = path.strip("/")
    reads(kind, path)

    @operation(
        created(kind), raises=write_raises(), bodies=(BodyDoc(JSON, PartyIn),), params=WRITE_PARAMS
    )
    @data_route(f"{area}:write", body=PartyIn, status=201)
    async def create(tx: Any, call: Call, data: PartyIn) -> books.Document:
        return await books.create_party(
            tx,
            now=call.now,
            business_id=call.business_id,
            kind=kind,
            name=data.name,
            email=data.email,
        )

    @operation(
        changed(kind),
        raises=write_raises(),
        bodies=(BodyDoc(JSON, PartyChanges, required=False),),
        params=record_write_params(kind),
    )
    @data_route(f"{area}:write", body=PartyChanges)
    async def change(tx: Any, call: Call, data: PartyChanges, record_id: str) -> books.Document:
        return await books.update_party(
            tx,
            now=call.now,
            business_id=call.business_id,
            kind=kind,
            party_id=record_id,
            changes=changes_of(data),
        )

    @operation(deleted(kind), raises=write_raises(), params=record_write_params(kind))
    @data_route(f"{area}:write", status=204)
    async def delete(tx: Any, call: Call, record_id: str) -> None:
        await books.delete_party(
            tx, now=call.now, business_id=call.business_id, kind=kind, party_id=record_id
        )

    create.__doc__ = f"Create a {kind}; emits {kind}.created."
    change.__doc__ = f"Change a {kind}'s name or email; emits {kind}.updated."
    delete.__doc__ = f"Delete a {kind}; emits {kind}.deleted."
    blueprint.add_url_rule(path, f"create_{kind}", create, methods=["POST"])
    blueprint.add_url_rule(
        f"{path}/<record:record_id>", f"change_{kind}", change, methods=["PATCH"]
    )
    blueprint.add_url_rule(
        f"{path}/<record:record_id>", f"delete_{kind}", delete, methods=["DELETE"]
    )


_routes("customer", "/customers")
_routes("supplier", "/suppliers")
