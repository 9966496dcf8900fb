"""The operator API's blueprint, ``/admin/*``: the operator's token is checked before every
request; request bodies are models validated at the door (strict, unknown members ignored)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict
from quart import Blueprint, request
from quart_schema import security_scheme_blueprint

from ledgerport import auth, books, storage

from .._context import platform
from .._openapi import (
    JSON_BODY_ERRORS,
    Reply,
    blueprint_raises,
)

blueprint = Blueprint("admin", __name__, url_prefix="/admin")
security_scheme_blueprint(blueprint, [{"admin": []}])
# The token is checked before every request; every handler uses the database.
blueprint_raises(blueprint, auth.InvalidAdminToken, storage.StorageUnavailable)


def _whole(value: object) -> object:
    return int(value) if isinstance(value, float) and value.is_integer() else value


WholeNumber = Annotated[int, BeforeValidator(_whole)]
"""An integer, also written with a zero fraction (``5.0``), which JSON Schema's integer is."""


class AdminBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


INPUT_ERRORS = (*JSON_BODY_ERRORS, storage.BadValue)
"""A body that cannot be read or breaks its model, or a value (of the body or the path) that the
database cannot store."""
NOT_FOUND = (books.BusinessNotFound, books.UserNotFound)
DELETED = Reply(204, "Done")


@blueprint.before_request
async def _require_admin_token() -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, presented = header.partition(" ")
    p = platform()
    if (
        scheme.lower() != "bearer"
        or not presented.strip()
        or not auth.admin_token_matches(p.keyring, presented.strip(), p.admin_token_hash)
    ):
        raise auth.InvalidAdminToken()
