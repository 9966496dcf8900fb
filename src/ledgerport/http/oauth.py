"""OAuth 2.0 endpoints on the API host: discovery, token, revocation, introspection.

Errors use the OAuth shape ``{error, error_description?, message}`` (``message`` is deprecated)
and every answer carries ``Cache-Control: no-store`` and ``Pragma: no-cache``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any

from quart import Blueprint, Response, current_app, jsonify, request
from werkzeug.datastructures import MultiDict

from ledgerport import auth, catalog

from ._context import client_ip, platform, unit_of_work
from ._oauth_guard import OAuthGuard

blueprint = Blueprint("oauth", __name__)
GUARD_KEY = "ledgerport.oauth_guard"

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
GRANTS_AVAILABLE = (catalog.GRANT_AUTHORIZATION_CODE, catalog.GRANT_REFRESH_TOKEN)


def guard() -> OAuthGuard:
    existing = current_app.extensions.get(GUARD_KEY)
    if existing is None:
        p = platform()
        existing = current_app.extensions[GUARD_KEY] = OAuthGuard(p.clock, p.metrics)
    assert isinstance(existing, OAuthGuard)
    return existing


def oauth_response(
    body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    response = jsonify(body)
    response.status_code = status
    for name, value in {**NO_STORE, **(headers or {})}.items():
        response.headers[name] = value
    return response


def oauth_error_response(error: auth.OAuthError) -> Response:
    body: dict[str, Any] = {"error": error.error}
    if error.description:
        body["error_description"] = error.description
    body["message"] = error.description or error.error
    return oauth_response(body, error.status, error.headers)


def oauth_endpoint(
    handler: Callable[[], Awaitable[Response]],
) -> Callable[[], Awaitable[Response]]:
    @wraps(handler)
    async def wrapper() -> Response:
        try:
            return await handler()
        except auth.OAuthError as error:
            return oauth_error_response(error)

    return wrapper


async def read_form() -> MultiDict[str, str]:
    """The form body; a parameter sent twice is invalid (RFC 6749 section 3.2)."""
    mimetype = request.mimetype
    if mimetype != "application/x-www-form-urlencoded":
        raise auth.OAuthError(
            "invalid_request", "the body must be application/x-www-form-urlencoded"
        )
    form = await request.form
    for key in form:
        if len(form.getlist(key)) > 1 and key != "resource":
            raise auth.OAuthError("invalid_request", f"{key} must be sent once")
    return form


def _single_form(form: MultiDict[str, str]) -> dict[str, str]:
    return {key: form.get(key, "") for key in form}


async def authenticated_client(
    endpoint: str,
    form: MultiDict[str, str],
    *,
    allow_body: bool = True,
    allow_inactive: bool = False,
) -> tuple[auth.ClientCredentials, Any]:
    """Authenticate the caller with the lockout and the limits around it."""
    ip = client_ip()
    g = guard()
    try:
        credentials = auth.parse_credentials(
            request.headers.get("Authorization"), _single_form(form), allow_body=allow_body
        )
    except auth.InvalidClient:
        g.failed_authentication(endpoint, ip, None)
        raise
    except auth.OAuthError:
        g.unauthenticated(endpoint, ip)
        raise
    g.check_lock(endpoint, ip, credentials.client_id)
    p = platform()
    try:
        async with unit_of_work() as tx:
            app = await auth.authenticate_client(
                tx, p.keyring, credentials, allow_inactive=allow_inactive
            )
    except auth.InvalidClient:
        g.failed_authentication(endpoint, ip, credentials.client_id)
        raise
    g.authenticated(
        endpoint,
        ip,
        app.client_id,
        with_secret=credentials.has_secret,
        confidential=app.type == "CONFIDENTIAL",
    )
    return credentials, app


@blueprint.get("/.well-known/oauth-authorization-server")
async def discovery() -> Response:
    """RFC 8414 authorization server metadata."""
    config = platform().config
    base, auth_url = config.base_url, config.auth_url
    return oauth_response(
        {
            "issuer": base,
            "authorization_endpoint": f"{auth_url}/oauth/authorize",
            "token_endpoint": f"{base}/oauth/token",
            "revocation_endpoint": f"{base}/oauth/revoke",
            "introspection_endpoint": f"{base}/oauth/introspect",
            "api_base_url": base,
            "scopes_supported": list(catalog.SCOPES),
            "response_types_supported": ["code"],
            "grant_types_supported": list(GRANTS_AVAILABLE),
            "code_challenge_methods_supported": list(catalog.CODE_CHALLENGE_METHODS),
            "token_endpoint_auth_methods_supported": list(catalog.TOKEN_ENDPOINT_AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(catalog.TOKEN_ENDPOINT_AUTH_METHODS),
            "introspection_endpoint_auth_methods_supported": ["client_secret_basic"],
            "authorization_response_iss_parameter_supported": True,
        }
    )


def _required(form: MultiDict[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise auth.OAuthError("invalid_request", f"{name} is required")
    return str(value)


def _resource(form: MultiDict[str, str]) -> str | None:
    try:
        return auth.check_resource(form.getlist("resource"), platform().config.base_url)
    except auth.TargetProblem as exc:
        raise auth.OAuthError("invalid_target", str(exc)) from exc


@blueprint.post("/oauth/token")
@oauth_endpoint
async def token() -> Response:
    """Token endpoint: authorization_code and refresh_token grants."""
    grant_type = "unknown"
    metrics = platform().metrics
    try:
        form = await read_form()
        grant_type = form.get("grant_type") or "missing"
        if grant_type == "missing":
            raise auth.OAuthError("invalid_request", "grant_type is required")
        _, app = await authenticated_client("token", form)
        if grant_type not in GRANTS_AVAILABLE:
            grant_type = "unsupported"
            raise auth.OAuthError("unsupported_grant_type", "grant_type is not supported")
        resource = _resource(form)
        p = platform()
        async with unit_of_work() as tx:
            if grant_type == catalog.GRANT_AUTHORIZATION_CODE:
                outcome = await auth.redeem_code(
                    tx,
                    p.keyring,
                    now=p.now(),
                    app=app,
                    code=_required(form, "code"),
                    redirect_uri=_required(form, "redirect_uri"),
                    code_verifier=form.get("code_verifier") or None,
                    resource=resource,
                )
            else:
                outcome = await auth.rotate_refresh_token(
                    tx,
                    p.keyring,
                    now=p.now(),
                    app=app,
                    refresh_token=_required(form, "refresh_token"),
                    resource=resource,
                )
        pair = outcome.unwrap()
    except auth.OAuthError as error:
        metrics.oauth_grants.labels(grant_type[:64], error.error).inc()
        raise
    metrics.oauth_grants.labels(grant_type, "ok").inc()
    return oauth_response(pair.response())


@blueprint.post("/oauth/revoke")
@oauth_endpoint
async def revoke() -> Response:
    """RFC 7009: 200 whether or not the token was known."""
    form = await read_form()
    _, app = await authenticated_client("revoke", form)
    token_value = _required(form, "token")
    p = platform()
    async with unit_of_work() as tx:
        await auth.revoke_token(
            tx,
            p.keyring,
            now=p.now(),
            app=app,
            token=token_value,
            hint=form.get("token_type_hint"),
        )
    return oauth_response({})


@blueprint.post("/oauth/introspect")
@oauth_endpoint
async def introspect() -> Response:
    """RFC 7662; client credentials in the Authorization header only."""
    form = await read_form()
    _, app = await authenticated_client("introspect", form, allow_body=False, allow_inactive=True)
    token_value = _required(form, "token")
    if not app.active:
        return oauth_response({"active": False})
    p = platform()
    async with unit_of_work() as tx:
        answer = await auth.introspect(
            tx,
            p.keyring,
            now=p.now(),
            app=app,
            token=token_value,
            hint=form.get("token_type_hint"),
        )
    return oauth_response(answer)
