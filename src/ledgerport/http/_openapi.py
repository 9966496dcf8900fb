"""The OpenAPI document: what each operation accepts and every answer it can give.

A handler declares, with :func:`operation`, the answers it gives itself (status, media type,
schema, headers), the request bodies and parameters it reads, and the exceptions it can raise;
:func:`blueprint_raises` adds what every route of a blueprint can raise (the operator API's 401).
The status, envelope and description of each raised exception come from ``_errors``
(:func:`~._errors.class_answer` over ``ANSWERS``, and the :class:`~._errors.ErrorShape` of the
blueprint: the OAuth endpoints answer 400 for most errors, the pages answer HTML), so the document
states what the error table answers rather than a second opinion of it. Every documented
operation can answer 500.

:class:`DocumentProvider` writes it into quart-schema's document. quart-schema alone writes every
response as inline ``application/json`` and puts response headers under ``content``; it can state
neither a page, a redirect, an empty answer nor a header, hence the provider. Schemas are named
components (``#/components/schemas/...``) built by pydantic, so every JSON error answer refers to
its envelope.

Everything here documents; nothing validates. Handlers keep parsing their own bodies, so their
error shapes and messages stay as they are. Two rules are stated for every operation without a
declaration of its own: a path parameter the route leaves undeclared takes the form of its id kind
by its name (``_ids.PATH_ID_KINDS``), and every text without a rule of its own, every member name of
an object that ignores unknown members, says it holds no NUL (``NUL_FREE``, ``NulFreeJson``).
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Annotated, Any, Literal, NotRequired, TypeVar

import orjson
import trio
from pydantic import ConfigDict, TypeAdapter, WithJsonSchema, with_config
from quart import Blueprint, Quart, Response
from quart_schema import OpenAPIProvider, RequestSchemaValidationError, hide
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import (
    BadRequest,
    NotFound,
    RequestedRangeNotSatisfiable,
    RequestEntityTooLarge,
)
from werkzeug.routing.rules import Rule

from ledgerport import auth, catalog, ops, storage
from ledgerport.errors import DomainError, InvalidInput

from ._errors import ENVELOPE, Answer, ErrorShape, class_answer, oauth_status
from ._ids import PATH_ID_KINDS
from ._input import NulInText

F = TypeVar("F", bound=Callable[..., Any])

_OPERATION = "_ledgerport_operation"
_BLUEPRINT_RAISES = "_ledgerport_raises"
_REF = "#/components/schemas/{model}"

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


_ENVELOPES: Mapping[str, type] = {"envelope": ErrorEnvelope, "oauth": OAuthErrorEnvelope}


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

_RAISED_HEADERS: Mapping[type[BaseException], tuple[Header, ...]] = {
    auth.RateLimited: (RETRY_AFTER, RATE_LIMIT_POLICY),
    storage.StorageUnavailable: (RETRY_AFTER,),
    ops.NotReady: (RETRY_AFTER,),
    auth.InvalidAdminToken: (WWW_AUTHENTICATE,),
    auth.InvalidMetricsToken: (WWW_AUTHENTICATE,),
    auth.InvalidAccessToken: (WWW_AUTHENTICATE,),
    auth.InvalidClient: (WWW_AUTHENTICATE.optional(),),
}
"""The headers ``ANSWERS`` adds to an exception's answer; invalid_client challenges Basic only
when the client used Basic."""


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
        setattr(handler, _OPERATION, documented)
        return handler

    return decorate


def blueprint_raises(blueprint: Blueprint, *raises: type[BaseException]) -> None:
    """Every route of ``blueprint`` can raise ``raises`` (a check before each request)."""
    setattr(blueprint, _BLUEPRINT_RAISES, raises)


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


# --- Writing the document ------------------------------------------------------------------------

_UNCODED: Mapping[type[BaseException], str] = {
    NulInText: "a text of the request (query, path, form field, JSON string) holds a NUL",
    InvalidInput: "validation failure: message is an array of sentences, no code",
    RequestSchemaValidationError: "the body does not match its schema: message is an array",
    BadRequest: "the body is not JSON",
    UnicodeDecodeError: "the body is not UTF-8",
    RecursionError: "the body is nested too deeply",
    RequestEntityTooLarge: f"the body is larger than {catalog.REQUEST_BODY_MAX_BYTES} bytes",
    storage.BadValue: "a value the database cannot store",
}


def _raised_description(cls: type[BaseException], answer: Answer, shape: ErrorShape) -> str:
    if shape.kind == "oauth":
        return f"{answer.oauth}: {catalog.OAUTH_ERRORS[answer.oauth].cause}"
    if answer.code is not None:
        return f"{answer.code}: {catalog.ERROR_CODES[answer.code].cause}"
    for klass in cls.__mro__:
        if klass in _UNCODED:
            return _UNCODED[klass]
    if issubclass(cls, DomainError) and cls.__doc__:
        return inspect.cleandoc(cls.__doc__).splitlines()[0]
    return HTTPStatus(answer.status).phrase


Media = tuple[str, dict[str, Any]]
"""A media type and its media type object."""


@dataclass
class _Status:
    """What the document says of one status: every way the operation comes to answer it."""

    descriptions: list[str] = field(default_factory=list)
    content: dict[str, dict[str, Any]] = field(default_factory=dict)
    header_groups: list[tuple[Header, ...]] = field(default_factory=list)

    def add(self, description: str, media: Media | None, headers: Iterable[Header]) -> None:
        if description not in self.descriptions:
            self.descriptions.append(description)
        if media is not None:
            self.content.setdefault(*media)
        self.header_groups.append(tuple(headers))

    def _always(self, name: str) -> bool:
        return all(any(h.name == name and h.required for h in g) for g in self.header_groups)

    def response(self, status: int) -> dict[str, Any]:
        phrase = HTTPStatus(status).phrase
        response: dict[str, Any] = {"description": f"{phrase}: {'; '.join(self.descriptions)}"}
        if self.content:
            response["content"] = self.content
        headers = {
            header.name: {
                "description": header.description,
                "required": self._always(header.name),
                "schema": dict(header.schema),
            }
            for group in self.header_groups
            for header in group
        }
        if headers:
            response["headers"] = headers
        return response


def _json_schema(schema_type: Any, mode: Literal["validation", "serialization"]) -> dict[str, Any]:
    """pydantic's JSON schema of ``schema_type``, made once per type and mode: a document names
    the same envelopes and records in hundreds of places, and each costs a ``TypeAdapter``. A
    type that cannot be a key (an annotation holding a dict) is made each time."""
    try:
        return _kept_json_schema(schema_type, mode)
    except TypeError:
        return _made_json_schema(schema_type, mode)


def _made_json_schema(
    schema_type: Any, mode: Literal["validation", "serialization"]
) -> dict[str, Any]:
    return TypeAdapter(schema_type).json_schema(ref_template=_REF, mode=mode)


_kept_json_schema = functools.cache(_made_json_schema)


def _schema(
    schema_type: Any, mode: Literal["validation", "serialization"], components: dict[str, Any]
) -> dict[str, Any]:
    """``schema_type`` as a reference to its named component (inline when it has no name, as a
    union has not), its definitions added to ``components``."""
    schema = copy.deepcopy(_json_schema(schema_type, mode))
    components.update(schema.pop("$defs", {}))
    if not isinstance(schema_type, type):
        return schema
    components[schema_type.__name__] = schema
    return {"$ref": _REF.format(model=schema_type.__name__)}


class DocumentProvider(OpenAPIProvider):
    """quart-schema's document, each operation's answers, bodies and parameters written from its
    :func:`operation` declaration and the error shape of its blueprint. It reads the routes
    through quart-schema's private ``_app``: tests/unit/test_dependency_contracts.py pins what it
    relies on, and docs/upstream/quart-schema.md is the report to quart-schema's maintainers."""

    error_shapes: Mapping[str, ErrorShape] = {}
    _built: tuple[int, bytes] | None = None

    def schema(self) -> dict[str, Any]:
        """The document, built once per set of routes (a fifth of a second of CPU, more on a
        loaded machine); a copy of its own for each caller."""
        document: dict[str, Any] = orjson.loads(self.document_bytes())
        return document

    def document_bytes(self) -> bytes:
        """The document as the JSON ``/openapi.json`` answers, kept as bytes only (one object
        for the collector to walk, not thousands). Blocking the first time: call it off the
        event loop (:func:`serve_document`)."""
        rules = sum(1 for _ in self._app.url_map.iter_rules())
        if self._built is None or self._built[0] != rules:
            document = super().schema()
            _state_nul_refusal(document)
            _state_cross_site_refusal(document)
            self._built = (rules, orjson.dumps(document))
        return self._built[1]

    def build_paths(self, rule: Rule) -> tuple[dict[str, Any], dict[str, Any]]:
        paths, components = super().build_paths(rule)
        # quart-schema names an operation by its handler, which several routes share (every
        # area's list, the console's and the marketplace's listing page): the endpoint is the
        # route's own name, so each operationId is unique, as OpenAPI requires and links need.
        for path_item in paths.values():
            for method, item in path_item.items():
                item["operationId"] = f"{method}_{rule.endpoint.replace('.', '_')}"
        blueprint_name, _, name = rule.endpoint.rpartition(".")
        handler = self._app.view_functions[rule.endpoint]
        documented: Operation | None = getattr(handler, _OPERATION, None)
        if documented is None and name == "static" and blueprint_name:
            documented = STATIC_FILE
        if documented is None:
            return paths, components
        blueprint = self._app.blueprints.get(blueprint_name)
        # Any request's text may hold a NUL, which every route refuses (``_input``).
        raises = (
            *getattr(blueprint, _BLUEPRINT_RAISES, ()),
            *documented.raises,
            NulInText,
            Exception,
        )
        shape = self.error_shapes.get(blueprint_name, ENVELOPE)
        for path_item in paths.values():
            for method, item in path_item.items():
                path_item[method] = {
                    **item,
                    "parameters": _parameters(item.get("parameters", []), documented.params),
                    "responses": _responses(documented.replies, raises, shape, components),
                    **_request_body(item.get("requestBody"), documented.bodies, components),
                }
        return paths, components


def _responses(
    replies: Iterable[Reply],
    raises: Iterable[type[BaseException]],
    shape: ErrorShape,
    components: dict[str, Any],
) -> dict[str, Any]:
    statuses: dict[int, _Status] = {}
    for reply in replies:
        body: Media | None = None
        if reply.media_type is not None:
            schema = (
                {}
                if reply.schema is None
                else {"schema": _schema(reply.schema, "serialization", components)}
            )
            body = (reply.media_type, schema)
        statuses.setdefault(reply.status, _Status()).add(reply.description, body, reply.headers)
    for cls in raises:
        answer = class_answer(cls)
        status, headers = answer.status, _RAISED_HEADERS.get(cls, ())
        if shape.kind == "oauth":
            status, headers = oauth_status(status), (*NO_STORE, *headers)
        if shape.kind == "page":
            media: Media = (HTML, {})
        else:
            media = (JSON, {"schema": _schema(_ENVELOPES[shape.kind], "serialization", components)})
        description = _raised_description(cls, answer, shape)
        statuses.setdefault(status, _Status()).add(description, media, headers)
    return {str(status): statuses[status].response(status) for status in sorted(statuses)}


def _parameters(documented: list[dict[str, Any]], params: Iterable[Param]) -> list[dict[str, Any]]:
    """quart-schema's parameters (the path's converters) with ``params`` added or replacing; an
    undeclared path parameter with an id kind's conventional name takes that kind's form."""
    declared = {(p.name, p.location): p for p in params}
    kept = []
    for parameter in documented:
        if (parameter["name"], parameter["in"]) in declared:
            continue
        kind = PATH_ID_KINDS.get(parameter["name"]) if parameter["in"] == "path" else None
        if kind is not None:
            parameter = {**parameter, "description": kind.description, "schema": kind.schema}
        kept.append(parameter)
    return kept + [
        {
            "name": p.name,
            "in": p.location,
            "description": p.description,
            "required": p.required or p.location == "path",
            "schema": dict(p.schema),
        }
        for p in declared.values()
    ]


def _request_body(
    validated: dict[str, Any] | None, bodies: Sequence[Body], components: dict[str, Any]
) -> dict[str, Any]:
    """The body ``bodies`` declare (required unless each may be left out), or the one
    quart-schema wrote for a request model (required)."""
    if bodies:
        content = {
            body.media_type: {"schema": _schema(body.schema, "validation", components)}
            for body in bodies
        }
        required = any(body.required for body in bodies)
        return {"requestBody": {"required": required, "content": content}}
    if validated is not None:
        return {"requestBody": {**validated, "required": True}}
    return {}


_RULED = frozenset({"pattern", "enum", "const"})
"""Keywords by which a string schema states its own rule (a pattern of its own states the NUL
there, as the operator API's e-mail does)."""


NUL_FREE_JSON = "NulFreeJson"
"""The component of any JSON value without NUL in its strings and member names: what an object
that ignores members it does not know takes beside its own."""
_NUL_FREE_JSON_REF = _REF.format(model=NUL_FREE_JSON)


def _nul_free_json() -> dict[str, Any]:
    any_value = {"$ref": _NUL_FREE_JSON_REF}
    return {
        "description": "Any JSON value whose strings and member names hold no NUL",
        "anyOf": [
            {"type": "null"},
            {"type": "boolean"},
            {"type": "number"},
            {"type": "string", "pattern": NUL_FREE},
            {"type": "array", "items": any_value},
            {
                "type": "object",
                "propertyNames": {"pattern": NUL_FREE},
                "additionalProperties": any_value,
            },
        ],
    }


def _open_object(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is an object that takes members it does not name (ignored, or any)."""
    is_object = schema.get("type") == "object" or "properties" in schema
    return is_object and schema.get("additionalProperties", True) in (True, {})


def _nul_free(schema: Any, components: Mapping[str, Any], seen: set[str]) -> None:
    """Give every string of ``schema`` that has no rule of its own the NUL_FREE pattern, and
    every object that takes members it does not name NUL-free names and values, following
    references into ``components`` (each once, ``seen``)."""
    if not isinstance(schema, dict):
        return
    if _open_object(schema):
        schema["propertyNames"] = {"pattern": NUL_FREE}
        schema["additionalProperties"] = {"$ref": _NUL_FREE_JSON_REF}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            _nul_free(components.get(name), components, seen)
        return
    types = schema.get("type")
    is_text = types == "string" or (isinstance(types, list) and "string" in types)
    if is_text and not schema.keys() & _RULED and schema.get("format") != "binary":
        schema["pattern"] = NUL_FREE
    for key in ("items", "additionalProperties"):
        _nul_free(schema.get(key), components, seen)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for part in schema.get(key, ()):
            _nul_free(part, components, seen)
    for part in schema.get("properties", {}).values():
        _nul_free(part, components, seen)


def _state_nul_refusal(document: dict[str, Any]) -> None:
    """State the NUL rule (``_input``) where a client reads the rules of what it sends: on the
    text of every query and path parameter and of every request body."""
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components[NUL_FREE_JSON] = _nul_free_json()
    seen: set[str] = {NUL_FREE_JSON}
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", ()):
                if parameter.get("in") in ("query", "path"):
                    _nul_free(parameter.get("schema"), components, seen)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _nul_free(media.get("schema"), components, seen)


SESSION_SCHEME_DESCRIPTION = (
    "The application host's session cookie. On /developer/*, a request it authenticates with an"
    " unsafe method (POST, PUT, PATCH, DELETE) must come from the service's own origin"
    " (Sec-Fetch-Site: same-origin, or an Origin of the API or application host) or carry the"
    " CSRF token of one of its pages in X-CSRF-Token; otherwise it is refused, 403"
    " CROSS_SITE_REQUEST, before anything else is checked. A developer token is unaffected."
)


def _state_cross_site_refusal(document: dict[str, Any]) -> None:
    """The session cookie's security scheme says when a request it authenticates is refused as
    cross-site (quart-schema's scheme types take no description)."""
    schemes = document.get("components", {}).get("securitySchemes", {})
    if "session" in schemes:
        schemes["session"]["description"] = SESSION_SCHEME_DESCRIPTION


def provider_for(shapes: Mapping[str, ErrorShape]) -> type[OpenAPIProvider]:
    """The document provider of an application whose blueprints answer errors in ``shapes``."""
    return type("ApplicationDocumentProvider", (DocumentProvider,), {"error_shapes": shapes})


def serve_document(app: Quart) -> Callable[[], Awaitable[None]]:
    """Answer ``/openapi.json`` with the document's bytes, built in a worker thread the first
    time (one build at a time) so no request waits on the event loop for it; answers the
    coroutine function that builds it, for the server to run at start. A stop during that
    build leaves the thread to finish alone (a loaded machine takes seconds over it): the
    process does not wait for a document nobody will ask for."""
    extension = app.extensions["QUART_SCHEMA"]
    provider: DocumentProvider = extension.openapi_provider
    building = trio.Lock()

    async def prepare(*, abandon_on_cancel: bool = False) -> None:
        async with building:
            await trio.to_thread.run_sync(
                provider.document_bytes, abandon_on_cancel=abandon_on_cancel
            )

    @hide
    async def openapi() -> Response:
        await prepare()
        return Response(provider.document_bytes(), mimetype="application/json")

    async def prepare_at_start() -> None:
        await prepare(abandon_on_cancel=True)

    app.view_functions["openapi"] = openapi
    return prepare_at_start
