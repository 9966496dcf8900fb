"""The query strings of the marketplace, the bridge and the code pages as models
(``_form_models.read_query``, fields of ``_query_fields``): a value that breaks one is the
page's 400 (the bridge's token, the JSON envelope's), naming the parameter and saying why,
never a default read in its place."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field
from pydantic_core import PydanticCustomError

from ledgerport import apps, catalog

from .._ids import ANY_RECORD_ID, APP, BUSINESS
from ._form_models import PageQuery
from ._query_fields import AnId, Choice, QueryValue, Text

SEARCH_MAX = 100
"""Characters of the marketplace's search."""
USER_CODE_MAX = 32
"""Characters of a user code as a link or a person gives it, dashes and spaces included."""
_CODE_LETTER = "".join(sorted({*catalog.USER_CODE_ALPHABET, *catalog.USER_CODE_ALPHABET.lower()}))
_CODE = f"[ -]*(?:[{_CODE_LETTER}][ -]*){{{catalog.USER_CODE_LENGTH}}}"
"""A user code as a person gives it: its letters in either case, dashes and spaces anywhere."""
_CODE_WORDS = (
    f"the code shown: {catalog.USER_CODE_LENGTH} letters, as"
    f" {catalog.USER_CODE_ALPHABET[:4]}-{catalog.USER_CODE_ALPHABET[4:8]}"
)


@dataclass(frozen=True)
class UserCode(QueryValue):
    """A user code as shown (``BCDF-GHJK``; case, dashes and spaces as a person types them),
    or nothing. The value is read as sent (its spaces are the code's), as the document
    states it."""

    def read(self, value: Any) -> Any:
        if value == "":
            return None
        if not isinstance(value, str) or len(value) > USER_CODE_MAX:
            raise PydanticCustomError("user_code", f"must be {_CODE_WORDS}")
        return self.check(value)

    def check(self, value: str) -> Any:
        if not re.fullmatch(_CODE, value):
            raise PydanticCustomError("user_code", f"must be {_CODE_WORDS}")
        return value

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "maxLength": USER_CODE_MAX, "pattern": f"^(?:{_CODE})?$"}


@dataclass(frozen=True)
class Scopes(QueryValue):
    """Scopes of the catalogue, one a value of a repeated parameter (none: an empty list)."""

    def read(self, value: Any) -> Any:
        values = value if isinstance(value, list) else [value]
        scopes = []
        for one in values:
            text = one.strip() if isinstance(one, str) else one
            if not text:
                continue
            if text not in catalog.SCOPES:
                raise PydanticCustomError("scope", "must be a scope, as invoices:read")
            scopes.append(text)
        return scopes

    def json_schema(self) -> dict[str, Any]:
        scope = {"type": "string", "enum": ["", *catalog.SCOPES]}
        return {"anyOf": [{"type": "array", "items": scope}, scope]}


class CatalogueQuery(PageQuery):
    """The marketplace's search and category."""

    search: Annotated[str | None, Text(SEARCH_MAX)] = Field(default=None, alias="q")
    """Words of the app's name"""
    category: Annotated[
        str | None, Choice(apps.LISTING_CATEGORIES, "a category of the marketplace")
    ] = None
    """Only apps of this category (empty: every category)"""


class InstallQuery(PageQuery):
    """The install form's choices: the business to preselect and the scopes to tick."""

    business_id: Annotated[str | None, AnId(BUSINESS)] = None
    """The business to preselect, when it is offered"""
    scope: Annotated[list[str], Scopes()] = Field(default_factory=list)
    """A scope to tick (repeated); with chosen=1, the others unticked"""
    chosen: Annotated[str | None, Choice(("1",), "1")] = None
    """1: tick only the scopes the query names"""


class EmbeddedQuery(PageQuery):
    """An app's page in a business: the business."""

    business_id: Annotated[str, AnId(BUSINESS, required=True)] = Field(
        default="", validate_default=True
    )
    """The business the app is viewed in"""


class ExtensionQuery(EmbeddedQuery):
    """An extension's page: the business and the record it is shown for."""

    record_id: Annotated[
        str | None, AnId(ANY_RECORD_ID, what="the id of a record, as inv_ and 24 hex digits")
    ] = None
    """The record the extension is shown for (record targets)"""


class SessionTokenQuery(PageQuery):
    """What the bridge asks a session token for: the app viewed and its business (in that
    order, as its problems are said)."""

    app_id: Annotated[str, AnId(APP, required=True)] = Field(default="", validate_default=True)
    """The app being viewed"""
    business_id: Annotated[str, AnId(BUSINESS, required=True)] = Field(
        default="", validate_default=True
    )
    """The business the app is viewed in"""


class UserCodeQuery(PageQuery):
    """A code page's query: the code to fill in (``verification_uri_complete``)."""

    user_code: Annotated[str | None, UserCode()] = None
    """Fills in the code the device or command shows (empty: nothing filled in)"""
