"""One data API call: bearer token and limits, API version, the two gates (scope and role
permission), the body, then in one transaction the Idempotency-Key of a write and the handler.
Each step refuses before the next looks at the request, so a call is refused for what it is
before it is refused for what it sends.

The handler runs inside the call's one unit of work with the transaction and the grant, so a
write, its events and its idempotency record commit together or not at all. Every answer of an
authenticated call says which version served it (``Service-Version``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import wraps
from typing import Any, TypeAlias

from pydantic import BaseModel, ValidationError
from quart import Response, g, jsonify, request

from ledgerport import apps, auth, books, catalog, storage
from ledgerport.errors import InvalidInput

from .._browser import SESSION_COOKIE
from .._context import CALLER_GRANT, platform, presented_token, unit_of_work
from .._errors import validation_messages
from .._input import parse_json
from .._openapi import JSON_BODY_ERRORS, Header, Param
from ._auth import authenticate_bearer

SERVICE_VERSION = "Service-Version"
IDEMPOTENCY_KEY = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"

VERSION_HEADER = Header(SERVICE_VERSION, "The API version that served the call")
REPLAYED_HEADER = Header(
    REPLAYED, "true when the answer is the stored one of an earlier request with this key", False
)
VERSION_PARAM = Param(
    SERVICE_VERSION,
    "header",
    "The API version; without the header the app's pin applies, else the current version. Sent"
    " empty it names no version: 400 UNSUPPORTED_API_VERSION, like a version that does not exist"
    " or is past its sunset",
    {
        "type": "string",
        # The versions supported today: the document is what a client may send now.
        "enum": [
            version.name
            for version in catalog.API_VERSIONS
            if catalog.resolve_version(version.name, date.today()) is not None
        ],
    },
)
IDEMPOTENCY_PARAM = Param(
    IDEMPOTENCY_KEY,
    "header",
    "Any unique value: the same key and request within 24 hours answers the first answer again"
    " and writes nothing twice",
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
)
READ_RAISES: tuple[type[BaseException], ...] = (apps.UnsupportedApiVersion, InvalidInput)
"""What any call can raise past the blueprint's own checks."""
WRITE_RAISES: tuple[type[BaseException], ...] = (
    *READ_RAISES,
    *JSON_BODY_ERRORS,
    apps.IdempotencyKeyReused,
    books.RecordNotFound,
    storage.BadValue,
)
"""What any write can raise."""

Handler: TypeAlias = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Call:
    """Who calls (the live grant: user, business, app, scopes), the call's "now" and the API
    version serving it."""

    grant: auth.AccessGrant
    now: float
    version: str

    @property
    def business_id(self) -> str:
        return self.grant.business_id


def _today() -> date:
    return datetime.fromtimestamp(platform().now(), UTC).date()


def _body(model: type[BaseModel], raw: str | bytes) -> BaseModel:
    """The request's JSON body validated by ``model`` (no body at all reads as ``{}``, so a body
    of optional fields may be left out); InvalidInput names what is wrong."""
    if not raw.strip():
        raw = "{}"
    try:
        parsed = parse_json(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(["request body must be a JSON object"]) from exc
    try:
        return model.model_validate(parsed)
    except ValidationError as exc:
        raise InvalidInput(validation_messages(exc)) from exc


async def _fingerprint() -> str:
    body = await request.get_data(as_text=False)
    digest = hashlib.sha256(f"{request.method} {request.path}\n".encode())
    digest.update(body if isinstance(body, bytes) else body.encode())
    return digest.hexdigest()


def _cookie_without_token() -> bool:
    return SESSION_COOKIE in request.cookies and presented_token() is None


def _answer(body: Any, status: int, *, replayed: bool = False) -> Response:
    response = jsonify(body) if status != 204 else Response("", status=204)
    response.status_code = status
    if replayed:
        response.headers[REPLAYED] = "true"
    return response


def data_route(
    scope: str,
    *,
    permission: str | None = None,
    body: type[BaseModel] | None = None,
    status: int = 200,
    connected_apps_only: Callable[[], Exception] | None = None,
) -> Callable[[Handler], Callable[..., Awaitable[Response]]]:
    """Serve a data API call with ``handler(tx, call, [data], **path)``, answering its result
    as JSON with ``status`` (204: no body).

    Deny by default: the token must hold ``scope`` and the user's role ``permission`` (the
    scope's name by default; ``auth.check_call``). ``body`` validates the JSON body (passed as
    ``data``). A write (any method but GET) with an Idempotency-Key is performed once: a retry
    replays the stored answer. ``connected_apps_only`` refuses a request that comes with the
    application host's session cookie and no bearer token with that error (the event log and
    app data answer connected apps only), before the token check would call it merely
    unauthenticated.
    """

    def decorate(handler: Handler) -> Callable[..., Awaitable[Response]]:
        @wraps(handler)
        async def call(**path: Any) -> Response:
            if connected_apps_only is not None and _cookie_without_token():
                raise connected_apps_only()
            # Read before the transaction: a slow upload must not hold the database.
            raw = await request.get_data(as_text=False)
            key = request.headers.get(IDEMPOTENCY_KEY) if request.method != "GET" else None
            p = platform()
            # A tool call of the MCP server comes with the grant its request authenticated.
            passed = request.scope.get(CALLER_GRANT)
            grant = passed if isinstance(passed, auth.AccessGrant) else await authenticate_bearer()
            requested = request.headers.get(SERVICE_VERSION)
            version = apps.resolve_api_version(requested, grant.pinned_version, today=_today())
            g.response_headers = {SERVICE_VERSION: version.name}
            # The gates before the body: a call its token may not make is refused as such,
            # whatever it sends.
            auth.check_call(grant, scope=scope, permission=permission)
            extra = {"data": _body(body, raw)} if body is not None else {}
            async with unit_of_work(reads=request.method == "GET") as tx:
                if key is not None:
                    stored = await apps.claim_idempotency_key(
                        tx,
                        now=p.now(),
                        app_id=grant.app_id,
                        business_id=grant.business_id,
                        key=key,
                        fingerprint=await _fingerprint(),
                    )
                    if stored is not None:
                        return _answer(stored.body, stored.status, replayed=True)
                result = await handler(tx, Call(grant, p.now(), version.name), **extra, **path)
                if key is not None:
                    await apps.store_idempotent_answer(
                        tx,
                        app_id=grant.app_id,
                        business_id=grant.business_id,
                        key=key,
                        status=status,
                        body=result,
                    )
            return _answer(result, status)

        return call

    return decorate
