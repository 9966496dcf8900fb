"""The forms of what a request names by reference, stated once for the OpenAPI document: ids,
list cursors, the consent page's request id and a hosted function's name.

An id is its kind's prefix, an underscore and 24 lowercase hexadecimal digits (``ids.new_id``):
``app_3f9a...``. Each kind is an :class:`IdKind` here; a route declares an id through it:

- a path or query parameter: ``Param("webhook_id", "path", "The webhook's id", WEBHOOK.schema)``;
- a field of a request model: ``customerId: str = CUSTOMER.field()`` (pydantic checks the form,
  so a malformed id is a validation failure, 400), or ``Annotated[str, CUSTOMER.document]`` for a
  body its handler reads itself (a form);
- a path parameter the route leaves undeclared takes the form of its conventional name
  (:data:`PATH_ID_KINDS`: ``app_id`` is an app's id), so ``/developer/apps/<app_id>/...`` needs no
  declaration of its own.

A well-formed id that names nothing the caller may see is the route's 404, never a matter of
form. Where the spec gives a code to an id that names nothing (RECORD_NOT_FOUND for the record
app data is written on, EVENT_NOT_FOUND, APP_DATA_VALUE_NOT_FOUND, UNKNOWN_CURSOR), the route
looks the id up whatever its form and answers that code: :meth:`IdKind.looked_up` states the form
in words, with no pattern that would refuse one first (the spec's codes come before the
schema's rules). ``tests/integration/test_openapi_ids.py`` holds every other id-like parameter and
field of the document to a pattern, so a route added without one fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from pydantic import Field, WithJsonSchema

from ledgerport import catalog
from ledgerport.ids import RANDOM_BYTES, id_pattern


@dataclass(frozen=True)
class IdKind:
    """The ids of one kind of thing (several prefixes: a reference to any of several kinds)."""

    noun: str
    prefixes: tuple[str, ...]

    @property
    def pattern(self) -> str:
        """The anchored regular expression of the kind's ids."""
        return f"^{id_pattern(*self.prefixes)}$"

    @property
    def max_length(self) -> int:
        return max(len(prefix) for prefix in self.prefixes) + 1 + 2 * RANDOM_BYTES

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of one id of the kind."""
        return {
            "type": "string",
            "pattern": self.pattern,
            "maxLength": self.max_length,
            "description": self.description,
            "examples": [self.example],
        }

    @property
    def example(self) -> str:
        return f"{self.prefixes[0]}_{EXAMPLE_DIGITS}"

    @property
    def description(self) -> str:
        forms = " or ".join(f"{prefix}_" for prefix in self.prefixes)
        return f"The id of {self.noun}: {forms} and 24 lowercase hexadecimal digits"

    @property
    def document(self) -> WithJsonSchema:
        """The kind's schema for a field its handler checks itself (``Annotated[str, ...]``)."""
        return WithJsonSchema(self.schema)

    def field(self, *, default: Any = ..., description: str | None = None) -> Any:
        """A pydantic field holding one id of the kind: a malformed one fails validation."""
        return Field(
            default=default,
            pattern=self.pattern,
            max_length=self.max_length,
            description=description or self.description,
            examples=[self.example],
        )

    def looked_up(self, unknown: str, description: str | None = None) -> dict[str, Any]:
        """The schema of an id the route looks up whatever its form: one that names nothing,
        of this form or another, is answered ``unknown`` (the spec's code). The form is stated
        in words and by example, not by a pattern a client or a validator would refuse first."""
        return {
            "type": "string",
            "description": f"{description or self.description}. Looked up whatever its form:"
            f" one that names nothing is {unknown}",
            "examples": [self.example],
        }


EXAMPLE_DIGITS: Final = "0123456789abcdef01234567"
"""The random part of the ids the document shows as examples."""


def _kind(noun: str, *prefixes: str) -> IdKind:
    return IdKind(noun, prefixes)


BUSINESS: Final = _kind("a business", "bus")
USER: Final = _kind("a user", "usr")
APP: Final = _kind("an app", "app")
CLIENT: Final = _kind("an app's OAuth client (its client_id)", "cid")
INSTALLATION: Final = _kind("an installation", "ins")
REVISION: Final = _kind("a listing revision", "rev")
ASSET: Final = _kind("an image asset", "ast")
WEBHOOK: Final = _kind("a webhook", "wh")
DELIVERY: Final = _kind("a webhook delivery", "dlv")
RUN: Final = _kind("a function run", "run")
APP_DATA_FIELD: Final = _kind("an app data field", "apf")
APP_DATA_VALUE: Final = _kind("an app data value", "apd")
EVENT: Final = _kind("an event", "evt")

RECORD_IDS: Final[Mapping[str, IdKind]] = MappingProxyType(
    {
        kind.name: _kind(f"a {kind.name.replace('_', ' ')}", kind.id_prefix)
        for kind in catalog.RECORD_KINDS.values()
    }
)
"""The ids of each kind of business record, by the kind's name (the app data resource type)."""
CUSTOMER: Final = RECORD_IDS["customer"]
SUPPLIER: Final = RECORD_IDS["supplier"]
INVOICE: Final = RECORD_IDS["invoice"]
PURCHASE: Final = RECORD_IDS["purchase"]
ACCOUNT: Final = RECORD_IDS["account"]
ANY_RECORD_ID: Final = _kind(
    "a business record of any kind", *(kind.id_prefix for kind in catalog.RECORD_KINDS.values())
)

ID_KINDS: Final[Mapping[str, IdKind]] = MappingProxyType(
    {
        kind.prefixes[0]: kind
        for kind in (
            BUSINESS,
            USER,
            APP,
            CLIENT,
            INSTALLATION,
            REVISION,
            ASSET,
            WEBHOOK,
            DELIVERY,
            RUN,
            APP_DATA_FIELD,
            APP_DATA_VALUE,
            EVENT,
            *RECORD_IDS.values(),
        )
    }
)
"""Every kind of id a request may carry, by its prefix."""

PATH_ID_KINDS: Final[Mapping[str, IdKind]] = MappingProxyType(
    {
        "business_id": BUSINESS,
        "user_id": USER,
        "app_id": APP,
        "installation_id": INSTALLATION,
        "revision_id": REVISION,
        "asset_id": ASSET,
        "webhook_id": WEBHOOK,
        "delivery_id": DELIVERY,
        "run_id": RUN,
        "field_id": APP_DATA_FIELD,
        "value_id": APP_DATA_VALUE,
        "event_id": EVENT,
        "customer_id": CUSTOMER,
        "supplier_id": SUPPLIER,
    }
)
"""The kind of a path parameter the route does not declare, by its name. ``record_id`` is not
here: each area declares the kind of its records."""

CURSOR_DIGITS: Final = 18
"""A record list's cursor is ``c`` and a row's sequence number (``books.decode_cursor``)."""
CURSOR_SCHEMA: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "type": "string",
        "pattern": f"^c[0-9]{{1,{CURSOR_DIGITS}}}$",
        "maxLength": 1 + CURSOR_DIGITS,
        "description": "Opaque: only a page's next is one (c and up to 18 digits today)",
        "examples": ["c42"],
    }
)

FUNCTION_NAME: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "type": "string",
        "pattern": catalog.FUNCTION_NAME_PATTERN,
        "not": {"enum": list(catalog.FUNCTION_NAMES_RESERVED)},
    }
)
"""A hosted function's name, as the developer API and the console's paths take it."""

TOKEN_CHARACTERS: Final = 43
"""The base64url digits of a token's 256 random bits (``keys.new_token``)."""


def token_schema(prefix: str, description: str) -> dict[str, Any]:
    """The schema of a token handed out with ``prefix`` (``catalog.TOKEN_PREFIXES``)."""
    return {
        "type": "string",
        "pattern": f"^{prefix}[A-Za-z0-9_-]{{{TOKEN_CHARACTERS}}}$",
        "maxLength": len(prefix) + TOKEN_CHARACTERS,
        "description": description,
    }
