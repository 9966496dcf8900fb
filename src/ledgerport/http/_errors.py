"""Errors to HTTP answers, in one place: the standard envelope for every non-OAuth route.

``{statusCode, message, error, code?, params?}``; validation failures carry an array message and
no code. Nothing answered here ever holds a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
from quart import Quart, Response, jsonify, request
from quart_schema import RequestSchemaValidationError
from werkzeug.exceptions import HTTPException

from ledgerport.errors import DomainError, InvalidInput
from ledgerport.storage import BadValue, StorageUnavailable

log = logging.getLogger("ledgerport.http")


class ApiError(Exception):
    """An error raised by the HTTP layer itself (authentication, routing, parsing)."""

    def __init__(
        self,
        status: int,
        message: str | list[str],
        *,
        code: str | None = None,
        params: Sequence[object] = (),
        headers: dict[str, str] | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.params = tuple(params)
        self.headers = headers or {}
        self.details = details


def envelope(
    status: int,
    message: str | list[str],
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


def envelope_response(
    status: int,
    message: str | list[str],
    *,
    code: str | None = None,
    params: Sequence[object] = (),
    headers: dict[str, str] | None = None,
    details: list[dict[str, Any]] | None = None,
) -> Response:
    response = jsonify(envelope(status, message, code=code, params=params, details=details))
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _field_path(location: Iterable[object]) -> str:
    return ".".join(str(part) for part in location)


def validation_messages(error: ValidationError) -> list[str]:
    """Pydantic errors as the envelope's per-field sentences, e.g. ``name Field required``."""
    messages = []
    for item in error.errors():
        path = _field_path(item.get("loc", ()))
        text = item.get("msg", "is invalid")
        messages.append(f"{path} {text}" if path else text)
    return messages or ["request body is invalid"]


def register_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def _api_error(error: ApiError) -> Response:
        message = error.message
        if isinstance(message, str) and error.params:
            message = message.format(*error.params)
        return envelope_response(
            error.status,
            message,
            code=error.code,
            params=error.params,
            headers=error.headers,
            details=error.details,
        )

    @app.errorhandler(InvalidInput)
    async def _invalid(error: InvalidInput) -> Response:
        return envelope_response(400, error.messages)

    @app.errorhandler(DomainError)
    async def _domain(error: DomainError) -> Response:
        return envelope_response(error.status, error.rendered, code=error.code, params=error.params)

    @app.errorhandler(RequestSchemaValidationError)
    async def _schema(error: RequestSchemaValidationError) -> Response:
        cause = error.validation_error
        if isinstance(cause, ValidationError):
            return envelope_response(400, validation_messages(cause))
        return envelope_response(400, ["request body must be a JSON object"])

    @app.errorhandler(HTTPException)
    async def _http(error: HTTPException) -> Response:
        status = error.code or 500
        headers = {}
        if status == 405 and error.get_headers():
            headers = {k: v for k, v in error.get_headers() if k.lower() == "allow"}
        message = {
            404: "Cannot {0} {1}",
            405: "Method {0} not allowed on {1}",
            413: "Request body too large",
            400: "Bad request",
        }.get(status, HTTPStatus(status).phrase)

        params: tuple[object, ...] = ()
        if status in (404, 405):
            params = (request.method, request.path)
            message = message.format(*params)
        return envelope_response(status, message, params=params, headers=headers)

    @app.errorhandler(BadValue)
    async def _bad_value(error: BadValue) -> Response:
        return envelope_response(400, ["request holds a value that cannot be stored"])

    @app.errorhandler(UnicodeDecodeError)
    async def _not_utf8(error: UnicodeDecodeError) -> Response:
        return envelope_response(400, ["request body must be UTF-8 encoded JSON"])

    @app.errorhandler(RecursionError)
    async def _too_deep(error: RecursionError) -> Response:
        return envelope_response(400, ["request body is nested too deeply"])

    @app.errorhandler(StorageUnavailable)
    async def _storage(error: StorageUnavailable) -> Response:
        log.error("storage unavailable: %s", error)
        return envelope_response(
            503,
            "Service temporarily unavailable",
            code="SERVICE_UNAVAILABLE",
            headers={"Retry-After": "5"},
        )

    @app.errorhandler(Exception)
    async def _unexpected(error: Exception) -> Response:
        log.exception("unhandled error")
        return envelope_response(500, "Internal server error", code="INTERNAL_ERROR")
