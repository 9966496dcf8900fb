"""The JSON shapes errors are answered in, and the error handlers that choose a shape.

- the standard envelope ``{statusCode, message, error, code?, params?, details?}`` (every
  non-OAuth API route; validation failures carry an array message and no code; ``details`` is a
  domain error's own list, as INVALID_APP_DATA_VALUE's);
- the OAuth envelope ``{error, error_description?, message}`` with ``Cache-Control: no-store``
  (the OAuth endpoints: 400 for every error but invalid_client 401, 429 and 5xx);
- a page blueprint's shape is the problem page, made in ``pages/_problems``.

A browser that reaches no route at all (an unknown path) and prefers HTML (``Accept``) gets the
problem page too; API clients keep the envelope. Nothing answered here ever holds a traceback;
5xx answers are logged. The OpenAPI document (``_document``) reads the same shapes
(:class:`ErrorShape`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal, TypeAlias

from quart import Quart, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from ledgerport import auth, storage

from ._error_answer import Answer, Message
from ._errors import answer_for

log = logging.getLogger("ledgerport.http")

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
_OAUTH_STATUSES = (401, 429)
"""Statuses an OAuth error keeps; every other below 500 is answered 400 (spec: OAuth errors)."""


def oauth_status(status: int) -> int:
    """The status an OAuth endpoint answers for an answer of ``status``: 401, 429 and 5xx
    stay, every other error is 400 (spec: OAuth errors)."""
    return status if status >= 500 or status in _OAUTH_STATUSES else 400


def envelope(
    status: int,
    message: Message,
    *,
    code: str | None = None,
    params: Sequence[object] = (),
    details: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "statusCode": status,
        "message": message,
        "error": HTTPStatus(status).phrase,
    }
    if code is not None:
        body["code"] = code
    if params:
        body["params"] = {f"p{i}": value for i, value in enumerate(params)}
    if details is not None:
        body["details"] = details
    return body


def _json_response(body: Mapping[str, Any], status: int, headers: Mapping[str, str]) -> Response:
    response = jsonify(body)
    response.status_code = status
    for name, value in headers.items():
        response.headers[name] = value
    return response


def oauth_response(
    body: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """An OAuth endpoint's JSON answer, never cached."""
    return _json_response(body, status, {**NO_STORE, **(headers or {})})


Renderer: TypeAlias = Callable[[BaseException, Answer], Awaitable[Response]]


async def render_envelope(error: BaseException, answer: Answer) -> Response:
    body = envelope(
        answer.status,
        answer.text(error),
        code=answer.code,
        params=answer.arguments(error),
        details=answer.details(error),
    )
    return _json_response(body, answer.status, answer.header_values(error))


async def render_oauth(error: BaseException, answer: Answer) -> Response:
    """RFC 6749 section 5.2, plus the deprecated ``message`` member."""
    status = oauth_status(answer.status)
    if isinstance(error, auth.OAuthError):
        description = error.description
    else:
        text = answer.text(error)
        description = "; ".join(text) if isinstance(text, list) else text
    body: dict[str, Any] = {"error": answer.oauth}
    if description:
        body["error_description"] = description
    body["message"] = description or answer.oauth
    return oauth_response(body, status, answer.header_values(error))


@dataclass(frozen=True)
class ErrorShape:
    """How a blueprint answers the exceptions its routes raise: the standard envelope, the OAuth
    envelope or an HTML page (``kind``, which the OpenAPI document states), and the renderer."""

    kind: Literal["envelope", "oauth", "page"]
    render: Renderer


ENVELOPE = ErrorShape("envelope", render_envelope)
OAUTH = ErrorShape("oauth", render_oauth)


def _prefers_html() -> bool:
    best = request.accept_mimetypes.best_match(["application/json", "text/html"])
    return best == "text/html"


def _log(error: BaseException, answer: Answer) -> None:
    if answer.status < 500:
        return
    if isinstance(error, storage.StorageUnavailable):
        log.error("storage unavailable: %s", error)
    else:
        log.error("unhandled error", exc_info=error)


def register_error_handlers(
    app: Quart, shapes: Mapping[str, ErrorShape], *, unrouted_page: ErrorShape
) -> None:
    """Answer every exception by ``_errors.ANSWERS``, in the shape of the blueprint that raised
    it (``shapes`` by blueprint name; the standard envelope for the rest, but ``unrouted_page``
    for a browser's request that no route took)."""

    async def handle(error: Exception) -> Response:
        answer = answer_for(error)
        _log(error, answer)
        shape = shapes.get(request.blueprint or "")
        if shape is None:
            # No route: a browser asking for a page gets one; API clients the envelope.
            unrouted = request.url_rule is None
            shape = unrouted_page if unrouted and _prefers_html() else ENVELOPE
        return await shape.render(error, answer)

    app.register_error_handler(HTTPException, handle)
    app.register_error_handler(Exception, handle)
