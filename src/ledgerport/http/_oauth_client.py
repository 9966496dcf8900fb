"""Reading an OAuth endpoint's request: its body (a form whose parameters are each sent once, or
for token exchange and registration a JSON object), and the client it authenticates, with the
lockout and the limits around it (``_oauth_guard``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quart import request
from werkzeug.datastructures import MultiDict

from ledgerport import apps, auth, catalog, storage

from ._context import client_ip, platform
from ._input import parse_json
from ._oauth_guard import oauth_guard

CLIENT_BASIC: list[dict[str, list[str]]] = [{"clientBasic": []}]
"""HTTP Basic client authentication."""
CLIENT_BASIC_OR_BODY: list[dict[str, list[str]]] = [*CLIENT_BASIC, {}]
"""HTTP Basic, or credentials (or a PUBLIC client's id alone) in the body."""
CLIENT_GUARDED = (
    auth.InvalidRequest,
    auth.InvalidClient,
    auth.RateLimited,
    storage.StorageUnavailable,
)
"""What every endpoint with client authentication can raise: the lockout and limits included."""


async def read_form() -> MultiDict[str, str]:
    """The form body; a parameter sent twice is invalid (RFC 6749 section 3.2)."""
    mimetype = request.mimetype
    if mimetype != "application/x-www-form-urlencoded":
        raise auth.InvalidRequest("the body must be application/x-www-form-urlencoded")
    form = await request.form
    for key in form:
        if len(form.getlist(key)) > 1 and key != "resource":
            raise auth.InvalidRequest(f"{key} must be sent once")
    return form


async def read_json_object() -> dict[str, Any]:
    """A JSON object body of at most OAUTH_JSON_MAX_BYTES; anything else is invalid_request."""
    limit = catalog.OAUTH_JSON_MAX_BYTES
    if request.mimetype != "application/json":
        raise auth.InvalidRequest("the body must be application/json")
    length = request.content_length
    if length is not None and length > limit:
        raise auth.InvalidRequest(f"the body exceeds {limit} bytes")
    raw = await request.get_data(as_text=False)
    if len(raw) > limit:
        raise auth.InvalidRequest(f"the body exceeds {limit} bytes")
    try:
        body = parse_json(raw)
    except (ValueError, RecursionError) as exc:
        raise auth.InvalidRequest("the body is not valid JSON") from exc
    if not isinstance(body, dict):
        raise auth.InvalidRequest("the body must be a JSON object")
    return body


async def read_token_request() -> MultiDict[str, str]:
    """The token endpoint's parameters: a form, or for token exchange also a JSON object."""
    if request.mimetype != "application/json":
        return await read_form()
    body = await read_json_object()
    if body.get("grant_type") != catalog.GRANT_TOKEN_EXCHANGE:
        raise auth.InvalidRequest("a JSON body is accepted for token exchange only; send a form")
    form: MultiDict[str, str] = MultiDict()
    for key, value in body.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise auth.InvalidRequest(f"{key} must be a string")
        form.add(key, value)
    return form


def _single_form(form: MultiDict[str, str]) -> dict[str, str]:
    return {key: form.get(key, "") for key in form}


async def authenticated_client(
    endpoint: str,
    form: MultiDict[str, str],
    *,
    allow_body: bool = True,
    allow_inactive: bool = False,
) -> tuple[auth.ClientCredentials, apps.App]:
    """Authenticate the caller with the lockout and the limits around it."""
    credentials, app, _ = await authenticated_client_reading(
        endpoint, form, None, allow_body=allow_body, allow_inactive=allow_inactive
    )
    return credentials, app


async def authenticated_client_reading(
    endpoint: str,
    form: MultiDict[str, str],
    lookup: Callable[[apps.App], auth.Lookup] | None,
    *,
    allow_body: bool = True,
    allow_inactive: bool = False,
) -> tuple[auth.ClientCredentials, apps.App, storage.Row | None]:
    """:func:`authenticated_client`, and the row of ``lookup(app)`` (for the authenticated
    app) read once the request is counted, its writes made only then (in the same round trip
    as the count on a limiter kept in the store; None without a lookup)."""
    ip = client_ip()
    g = oauth_guard()
    try:
        credentials = auth.parse_credentials(
            request.headers.get("Authorization"), _single_form(form), allow_body=allow_body
        )
    except auth.InvalidClient:
        await g.failed_authentication(endpoint, ip, None)
        raise
    except auth.OAuthError:
        await g.unauthenticated(endpoint, ip)
        raise
    p = platform()
    # The lock of the (IP, client) pair is looked at after the credentials: with the budgets
    # when they hold, before counting the failure when they fail. Either way a locked pair is
    # answered 429 whatever it presented, and nothing is counted for it.
    try:
        app = await auth.authenticate_client(
            p.store.autocommit,
            p.keyring,
            credentials,
            allow_inactive=allow_inactive,
            directory=p.app_directory,
            documents=p.config.cimd,
        )
    except auth.InvalidClient:
        await g.failed_authentication(endpoint, ip, credentials.client_id)
        raise
    row = await g.authenticated(
        endpoint,
        ip,
        app.client_id,
        with_secret=credentials.has_secret,
        confidential=app.type == "CONFIDENTIAL",
        reading=None if lookup is None else (p.store.autocommit, lookup(app)),
    )
    return credentials, app, row


def required_param(form: MultiDict[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise auth.InvalidRequest(f"{name} is required")
    return str(value)


def resource_param(form: MultiDict[str, str]) -> str | None:
    return auth.check_resource(form.getlist("resource"), platform().config.base_url)


def scopes_param(form: MultiDict[str, str]) -> tuple[str, ...] | None:
    value = form.get("scope")
    if value is None:
        return None
    scopes = tuple(dict.fromkeys(value.split()))
    if not scopes:
        raise auth.InvalidScope("scope must name at least one scope")
    return scopes
