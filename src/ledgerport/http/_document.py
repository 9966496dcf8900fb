"""The OpenAPI document: what each operation accepts and every answer it can give, written
from the declarations of ``_openapi``.

The status, envelope and description of each raised exception come from ``_errors``
(:func:`~._errors.class_answer` over ``ANSWERS``, and the :class:`~._envelopes.ErrorShape` of the
blueprint: the OAuth endpoints answer 400 for most errors, the pages answer HTML), so the document
states what the error table answers rather than a second opinion of it. Every documented
operation can answer 500.

:class:`DocumentProvider` writes it into quart-schema's document. quart-schema alone writes every
response as inline ``application/json`` and puts response headers under ``content``; it can state
neither a page, a redirect, an empty answer nor a header, hence the provider. Schemas are named
components (``#/components/schemas/...``) built by pydantic, so every JSON error answer refers to
its envelope.

Two rules are stated for every operation without a declaration of its own: a path parameter the
route leaves undeclared takes the form of its id kind by its name (``_ids.PATH_ID_KINDS``), and
every text without a rule of its own, every member name of an object that ignores unknown
members, says it holds no NUL (``NUL_FREE``, ``NulFreeJson``).
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

import orjson
import trio
from pydantic import TypeAdapter
from quart import Quart, Response
from quart_schema import OpenAPIProvider, RequestSchemaValidationError, hide
from werkzeug.exceptions import (
    BadRequest,
    RequestEntityTooLarge,
)
from werkzeug.routing.rules import Rule

from ledgerport import catalog, storage
from ledgerport.errors import DomainError, InvalidInput

from ._document_rules import state_cross_site_refusal, state_nul_refusal
from ._envelopes import ENVELOPE, ErrorShape, oauth_status
from ._error_answer import Answer
from ._errors import class_answer
from ._ids import PATH_ID_KINDS
from ._input import NulInText
from ._openapi import (
    BLUEPRINT_RAISES_ATTRIBUTE,
    ENVELOPE_TYPES,
    HTML,
    JSON,
    NO_STORE,
    OPERATION_ATTRIBUTE,
    RAISED_HEADERS,
    RAISED_PARAMS,
    SCHEMA_REF,
    STATIC_FILE,
    Body,
    Header,
    Operation,
    Param,
    Reply,
)

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
        cause = f"{answer.code}: {catalog.ERROR_CODES[answer.code].cause}"
        params = RAISED_PARAMS.get(cls)
        return cause if params is None or shape.kind != "envelope" else f"{cause} ({params})"
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
    return TypeAdapter(schema_type).json_schema(ref_template=SCHEMA_REF, mode=mode)


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
    return {"$ref": SCHEMA_REF.format(model=schema_type.__name__)}


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
            state_nul_refusal(document)
            state_cross_site_refusal(document)
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
        documented: Operation | None = getattr(handler, OPERATION_ATTRIBUTE, None)
        if documented is None and name == "static" and blueprint_name:
            documented = STATIC_FILE
        if documented is None:
            return paths, components
        blueprint = self._app.blueprints.get(blueprint_name)
        # Any request's text may hold a NUL, which every route refuses (``_input``).
        raises = (
            *getattr(blueprint, BLUEPRINT_RAISES_ATTRIBUTE, ()),
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
        status, headers = answer.status, RAISED_HEADERS.get(cls, ())
        if shape.kind == "oauth":
            status, headers = oauth_status(status), (*NO_STORE, *headers)
        if shape.kind == "page":
            media: Media = (HTML, {})
        else:
            media = (
                JSON,
                {"schema": _schema(ENVELOPE_TYPES[shape.kind], "serialization", components)},
            )
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
