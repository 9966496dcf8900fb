"""The OpenAPI document's vocabulary: what each operation declares it accepts and answers.

A handler declares, with :func:`operation`, the answers it gives itself (status, media type,
schema, headers), the request bodies and parameters it reads, and the exceptions it can raise;
:func:`blueprint_raises` adds what every route of a blueprint can raise (the operator API's 401).
``_document`` writes the document from these declarations and the error table.

Everything here documents; nothing validates. Handlers keep parsing their own bodies, so their
error shapes and messages stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, NotRequired, TypeVar

from pydantic import ConfigDict, WithJsonSchema, with_config
from quart import Blueprint
from quart_schema import RequestSchemaValidationError
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import (
    BadRequest,
    NotFound,
    RequestedRangeNotSatisfiable,
    RequestEntityTooLarge,
)

from ledgerport import apps, auth, catalog, ops, storage

F = TypeVar("F", bound=Callable[..., Any])

OPERATION_ATTRIBUTE = "_ledgerport_operation"
BLUEPRINT_RAISES_ATTRIBUTE = "_ledgerport_raises"
SCHEMA_REF = "#/components/schemas/{model}"

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
HTML = "text/html"
TEXT = "text/plain"

NUL_FREE = "^[^\\u0000]*$"
"""The pattern of text without NUL, which every request's text is held to (``_input``)."""


# --- The envelopes -------------------------------------------------------------------------------


@with_config(ConfigDict(extra="forbid"))
class AppDataProblem(TypedDict):
    """One refused app data value (INVALID_APP_DATA_VALUE)."""

    resourceType: NotRequired[str]
    resourceId: NotRequired[str]
    key: str
    reason: str


@with_config(ConfigDict(extra="forbid"))
class ErrorEnvelope(TypedDict):
    """The standard error envelope of every route but the OAuth endpoints. ``message`` is an
    array of sentences for validation failures, which have no ``code``; ``params`` holds the
    values placed in ``message`` (``{0}`` is ``p0``)."""

    statusCode: int
    message: str | list[str]
    error: Annotated[str, WithJsonSchema({"type": "string", "description": "HTTP reason phrase"})]
    code: NotRequired[
        Annotated[str, WithJsonSchema({"type": "string", "enum": sorted(catalog.ERROR_CODES)})]
    ]
    params: NotRequired[
        Annotated[
            dict[str, Any],
            WithJsonSchema({"type": "object", "propertyNames": {"pattern": "^p[0-9]+$"}}),
        ]
    ]
    details: NotRequired[list[AppDataProblem]]


@with_config(ConfigDict(extra="forbid"))
class OAuthErrorEnvelope(TypedDict):
    """The OAuth endpoints' errors (RFC 6749 section 5.2); ``message`` repeats the description
    (or the error) for older clients and is deprecated."""

    error: Annotated[str, WithJsonSchema({"type": "string", "enum": list(catalog.OAUTH_ERRORS)})]
    error_description: NotRequired[str]
    message: str


ENVELOPE_TYPES: Mapping[str, type] = {"envelope": ErrorEnvelope, "oauth": OAuthErrorEnvelope}


# --- What an operation declares ------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """A response header: ``required`` when every answer of its status carries it."""

    name: str
    description: str
    required: bool = True
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "string"})

    def optional(self) -> Header:
        return replace(self, required=False)


RETRY_AFTER = Header(
    "Retry-After",
    "Seconds to wait before retrying",
    schema={"type": "string", "pattern": "^[0-9]+$"},
)
RATE_LIMIT_POLICY = Header(
    "RateLimit-Policy",
    'The budget that refused the request: "name";q=requests;w=seconds of its window'
    " (absent for a lockout)",
    required=False,
)
WWW_AUTHENTICATE = Header("WWW-Authenticate", "The authentication scheme and realm to use")
LOCATION = Header("Location", "Where the browser goes next")
SET_COOKIE = Header("Set-Cookie", "The browser session, CSRF or notice cookie")
NO_STORE = (
    Header("Cache-Control", "Never cached", schema={"type": "string", "enum": ["no-store"]}),
    Header("Pragma", "Never cached", schema={"type": "string", "enum": ["no-cache"]}),
)

RAISED_HEADERS: Mapping[type[BaseException], tuple[Header, ...]] = {
    auth.RateLimited: (RETRY_AFTER, RATE_LIMIT_POLICY),
    storage.StorageUnavailable: (RETRY_AFTER,),
    ops.NotReady: (RETRY_AFTER,),
    auth.InvalidAdminToken: (WWW_AUTHENTICATE,),
    auth.InvalidMetricsToken: (WWW_AUTHENTICATE,),
    auth.InvalidAccessToken: (WWW_AUTHENTICATE,),
    auth.InvalidRegistrationToken: (WWW_AUTHENTICATE,),
    auth.InvalidClient: (WWW_AUTHENTICATE.optional(),),
}
"""The headers ``ANSWERS`` adds to an exception's answer; invalid_client challenges Basic only
when the client used Basic."""

RAISED_PARAMS: Mapping[type[BaseException], str] = {
    apps.FunctionSourceNoHandler: (
        "a syntax error's message reads 'syntax error at line {0}, column {1}: {2}': params p0"
        " is the line (from 1; a line ends at LF, CR, CR LF, U+2028 or U+2029), p1 the column"
        " (from 1, in UTF-16 code units, as a browser's text counts) and p2 the parser's words"
        " (V8's, such as 'missing ) after argument list'); otherwise p0 is the one reason"
    ),
}
"""What an exception's envelope ``params`` hold, where a client may read them."""


@dataclass(frozen=True)
class Reply:
    """An answer the handler gives itself: a status, its body (media type and, for JSON, a type
    pydantic describes; none for an empty answer) and its headers."""

    status: int
    description: str
    media_type: str | None = None
    schema: Any = None
    headers: tuple[Header, ...] = ()


def one_of(values: Iterable[str]) -> dict[str, Any]:
    """The schema of a string that is one of ``values``."""
    return {"type": "string", "enum": list(values)}


def json_reply(status: int, schema: Any, description: str, *headers: Header) -> Reply:
    """A JSON body described by ``schema`` (a model or typed dictionary)."""
    return Reply(status, description, JSON, schema, headers)


def page(status: int, description: str, *headers: Header) -> Reply:
    """An HTML page of the application host."""
    return Reply(status, description, HTML, None, headers)


def redirect_reply(description: str, *headers: Header, status: int = 303) -> Reply:
    """A redirect: the Location header, no body worth describing."""
    return Reply(status, description, None, None, (LOCATION, *headers))


@dataclass(frozen=True)
class Body:
    """A request body the handler reads: its media type and a type pydantic describes;
    ``required`` False when it may be left out (every field optional)."""

    media_type: str
    schema: Any
    required: bool = True


@dataclass(frozen=True)
class Param:
    """A query, header, cookie or path parameter (a path parameter's schema replaces the
    converter's)."""

    name: str
    location: Literal["query", "header", "cookie", "path"]
    description: str
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "string"})
    required: bool = False


@dataclass(frozen=True)
class Operation:
    """What :func:`operation` declares of a route."""

    replies: tuple[Reply, ...]
    raises: tuple[type[BaseException], ...]
    bodies: tuple[Body, ...]
    params: tuple[Param, ...]


def operation(
    *replies: Reply,
    raises: Iterable[type[BaseException]] = (),
    bodies: Iterable[Body] = (),
    params: Iterable[Param] = (),
) -> Callable[[F], F]:
    """Document the route: the ``replies`` it gives itself, the exceptions it ``raises`` (their
    answers come from the error table), the request ``bodies`` it reads and its ``params``."""
    documented = Operation(tuple(replies), tuple(raises), tuple(bodies), tuple(params))

    def decorate(handler: F) -> F:
        setattr(handler, OPERATION_ATTRIBUTE, documented)
        return handler

    return decorate


def blueprint_raises(blueprint: Blueprint, *raises: type[BaseException]) -> None:
    """Every route of ``blueprint`` can raise ``raises`` (a check before each request)."""
    setattr(blueprint, BLUEPRINT_RAISES_ATTRIBUTE, raises)


JSON_BODY_ERRORS: tuple[type[BaseException], ...] = (
    RequestSchemaValidationError,
    BadRequest,
    UnicodeDecodeError,
    RecursionError,
    RequestEntityTooLarge,
)
"""What reading a JSON body validated by a request model can raise."""

SIGNED_IN: list[dict[str, list[str]]] = [{"session": []}]
"""Security of the application host's routes that refuse an anonymous browser."""
SIGNED_IN_OR_SENT_TO_SIGN_IN: list[dict[str, list[str]]] = [{"session": []}, {}]
"""Security of the pages that send an anonymous browser to the sign-in page (303)."""

STATIC_FILE = Operation(
    replies=(
        Reply(200, "The file", "text/javascript"),
        Reply(206, "The requested range of the file", "text/javascript"),
        Reply(304, "Not modified since the version the client holds"),
        json_reply(404, ErrorEnvelope, "A name with a line break matches no route at all"),
    ),
    raises=(NotFound, RequestedRangeNotSatisfiable),
    bodies=(),
    params=(),
)
"""A blueprint's static files (Quart's own view, which honours conditional and range requests)."""
