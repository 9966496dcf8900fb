"""OAuth 2.0 endpoints on the API host: discovery (with the data API's protected resource
metadata), JWKS, token, revocation, introspection and device authorization; registration,
client configuration and pushed requests are ``oauth_clients.py``.

Errors use the OAuth shape ``{error, error_description?, message}`` (``message`` is deprecated;
the blueprint's renderer in ``_envelopes``) and every answer carries ``Cache-Control: no-store`` and
``Pragma: no-cache``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from quart import Blueprint, Response, jsonify
from quart_schema import security_scheme
from werkzeug.datastructures import MultiDict

from ledgerport import apps, auth, catalog, storage
from ledgerport.ops import OTHER, closed_label

from ._context import platform, unit_of_work
from ._dpop import token_binding, token_request_proof
from ._envelopes import oauth_response
from ._errors import oauth_error_of
from ._oauth_client import (
    CLIENT_BASIC,
    CLIENT_BASIC_OR_BODY,
    CLIENT_GUARDED,
    authenticated_client,
    authenticated_client_reading,
    read_form,
    read_token_request,
    required_param,
    resource_param,
    scopes_param,
)
from ._oauth_shapes import (
    ActiveToken,
    AuthorizationCodeGrant,
    DeviceAuthorization,
    DeviceAuthorizationRequest,
    DeviceCodeGrant,
    InactiveToken,
    JsonWebKeySet,
    ProtectedResourceMetadata,
    RefreshTokenGrant,
    Revoked,
    ServerMetadata,
    TokenExchangeGrant,
    TokenIntrospection,
    TokenResponse,
    TokenRevocation,
)
from ._openapi import FORM, JSON, NO_STORE, Body, Header, json_reply, operation

blueprint = Blueprint("oauth", __name__)

GRANTS_AVAILABLE = catalog.GRANT_TYPES


@blueprint.get("/.well-known/oauth-authorization-server")
@operation(json_reply(200, ServerMetadata, "The server metadata", *NO_STORE))
async def discovery() -> Response:
    """RFC 8414 authorization server metadata."""
    config = platform().config
    base, auth_url = config.base_url, config.auth_url
    metadata: ServerMetadata = {
        "issuer": base,
        "authorization_endpoint": f"{auth_url}/oauth/authorize",
        "token_endpoint": f"{base}/oauth/token",
        "revocation_endpoint": f"{base}/oauth/revoke",
        "introspection_endpoint": f"{base}/oauth/introspect",
        "device_authorization_endpoint": f"{base}/oauth/device/authorize",
        "registration_endpoint": f"{base}/oauth/register",
        "jwks_uri": f"{base}/.well-known/jwks.json",
        "api_base_url": base,
        "scopes_supported": list(catalog.SCOPES),
        "response_types_supported": ["code"],
        "grant_types_supported": list(GRANTS_AVAILABLE),
        "code_challenge_methods_supported": list(catalog.CODE_CHALLENGE_METHODS),
        "token_endpoint_auth_methods_supported": list(catalog.TOKEN_ENDPOINT_AUTH_METHODS),
        "revocation_endpoint_auth_methods_supported": list(catalog.TOKEN_ENDPOINT_AUTH_METHODS),
        "introspection_endpoint_auth_methods_supported": ["client_secret_basic"],
        "authorization_response_iss_parameter_supported": True,
        "pushed_authorization_request_endpoint": f"{base}/oauth/par",
        "require_pushed_authorization_requests": False,
        "dpop_signing_alg_values_supported": list(catalog.DPOP_SIGNING_ALGS),
    }
    if config.cimd:
        metadata["client_id_metadata_document_supported"] = True
    return oauth_response(metadata)


@blueprint.get(catalog.PROTECTED_RESOURCE_PATH)
@operation(json_reply(200, ProtectedResourceMetadata, "The data API's metadata", *NO_STORE))
async def protected_resource() -> Response:
    """RFC 9728 protected resource metadata of the data API: its identifier (the base URL, what
    a client names as ``resource`` in an authorization or token request), this server as the
    one whose access tokens it accepts, its scopes, and the ``Authorization`` header as the way
    to present a token."""
    base = platform().config.base_url
    metadata: ProtectedResourceMetadata = {
        "resource": base,
        "authorization_servers": [base],
        "scopes_supported": list(catalog.SCOPES),
        "bearer_methods_supported": ["header"],
        "dpop_signing_alg_values_supported": list(catalog.DPOP_SIGNING_ALGS),
    }
    return oauth_response(metadata)


@blueprint.get("/.well-known/jwks.json")
@operation(
    json_reply(
        200,
        JsonWebKeySet,
        "The signing key, its successor and recently retired keys",
        Header(
            "Cache-Control",
            "Cacheable for a while",
            schema={"type": "string", "enum": [f"public, max-age={catalog.JWKS_MAX_AGE}"]},
        ),
    ),
    raises=(storage.StorageUnavailable,),
)
async def jwks() -> Response:
    """Public keys (RFC 7517) that verify session tokens, including the next and retired ones."""
    p = platform()
    async with unit_of_work() as tx:
        keys = await auth.published_keys(tx, now=p.now())
    response = jsonify(auth.jwks(keys))
    response.headers["Cache-Control"] = f"public, max-age={catalog.JWKS_MAX_AGE}"
    return response


async def _token_exchange(
    form: MultiDict[str, str], app: apps.App, credentials: auth.ClientCredentials, jkt: str | None
) -> auth.Outcome:
    if app.type != "CONFIDENTIAL":
        raise auth.InvalidClient(
            "token exchange is for confidential clients only", basic=credentials.basic
        )
    subject_token = required_param(form, "subject_token")
    try:
        subject_type = required_param(form, "subject_token_type")
        if subject_type not in catalog.SUBJECT_TOKEN_TYPES:
            raise auth.InvalidRequest(f"subject_token_type must be {catalog.TOKEN_TYPE_JWT}")
        requested = form.get("requested_token_type")
        if requested is not None and requested != catalog.TOKEN_TYPE_ACCESS:
            raise auth.InvalidRequest(f"requested_token_type must be {catalog.TOKEN_TYPE_ACCESS}")
        resource, scopes = resource_param(form), scopes_param(form)
        request_error = None
    except auth.OAuthError as error:
        # The session token is spent all the same: retrying one is never valid.
        resource, scopes, request_error = None, None, error
    p = platform()
    async with unit_of_work() as tx:
        return await auth.exchange_session_token(
            tx,
            p.keyring,
            now=p.now(),
            issuer=p.config.base_url,
            app=app,
            subject_token=subject_token,
            scopes=scopes,
            resource=resource,
            request_error=request_error,
            jkt=jkt,
        )


def _rotation(form: MultiDict[str, str]) -> auth.RefreshRotation | None:
    """The rotation a refresh request asks for, made with its count where the store allows;
    None where it does not, or where the request is not well formed (the transaction answers
    that once the request is counted)."""
    refresh_token = form.get("refresh_token")
    if not refresh_token:
        return None
    try:
        resource = resource_param(form)
    except auth.OAuthError:
        return None
    p = platform()
    return auth.RefreshRotation.of(
        p.store, p.keyring, now=p.now(), refresh_token=refresh_token, resource=resource
    )


def _grant_label(grant_type: str) -> str:
    """The metrics label of a requested grant type: a known one, missing or other."""
    return closed_label(grant_type, (*GRANTS_AVAILABLE, "missing"))


@blueprint.post("/oauth/token")
@security_scheme(CLIENT_BASIC_OR_BODY)
@operation(
    json_reply(200, TokenResponse, "Tokens issued", *NO_STORE),
    raises=(
        *CLIENT_GUARDED,
        auth.InvalidGrant,
        auth.UnsupportedGrantType,
        auth.InvalidScope,
        auth.InvalidTarget,
        auth.AuthorizationPending,
        auth.SlowDown,
        auth.AccessDenied,
        auth.ExpiredToken,
        auth.InvalidDpopProof,
        auth.UseDpopNonce,
    ),
    bodies=(
        Body(
            FORM,
            Annotated[
                AuthorizationCodeGrant | RefreshTokenGrant | DeviceCodeGrant | TokenExchangeGrant,
                Field(description="One grant's parameters"),
            ],
        ),
        Body(JSON, TokenExchangeGrant),
    ),
)
async def token() -> Response:
    """Token endpoint: authorization_code, refresh_token, device_code and token-exchange."""
    grant_type = OTHER  # until the form is read
    metrics = platform().metrics
    try:
        form = await read_token_request()
        grant_type = form.get("grant_type") or "missing"
        p = platform()
        proof, proof_error = token_request_proof()
        # A refresh token that is good is rotated in the statement that counts the request,
        # where the store allows and the request has no DPoP proof (recorded first, below);
        # anything else is decided by the transaction below.
        refreshing = grant_type == catalog.GRANT_REFRESH_TOKEN and proof is None
        rotation = _rotation(form) if refreshing and proof_error is None else None
        # The client first: a locked-out pair is refused (429) whatever it asks for.
        credentials, app, rotated = await authenticated_client_reading(
            "token", form, None if rotation is None else rotation.lookup
        )
        if grant_type == "missing":
            raise auth.InvalidRequest("grant_type is required")
        if grant_type not in GRANTS_AVAILABLE:
            raise auth.UnsupportedGrantType("grant_type is not supported")
        if proof_error is not None:
            raise proof_error
        jkt = await token_binding(app, proof)
        outcome = None
        if grant_type == catalog.GRANT_TOKEN_EXCHANGE:
            outcome = await _token_exchange(form, app, credentials, jkt)
        else:
            resource = resource_param(form)
            if rotation is not None and rotated is not None:
                outcome = rotation.outcome(rotated)
        if outcome is None:
            async with unit_of_work() as tx:
                if grant_type == catalog.GRANT_AUTHORIZATION_CODE:
                    outcome = await auth.redeem_code(
                        tx,
                        p.keyring,
                        now=p.now(),
                        app=app,
                        code=required_param(form, "code"),
                        redirect_uri=required_param(form, "redirect_uri"),
                        code_verifier=form.get("code_verifier") or None,
                        resource=resource,
                        jkt=jkt,
                    )
                elif grant_type == catalog.GRANT_REFRESH_TOKEN:
                    outcome = await auth.rotate_refresh_token(
                        tx,
                        p.keyring,
                        now=p.now(),
                        app=app,
                        refresh_token=required_param(form, "refresh_token"),
                        resource=resource,
                        jkt=jkt,
                    )
                else:
                    outcome = await auth.poll_device_code(
                        tx,
                        p.keyring,
                        now=p.now(),
                        app=app,
                        device_code=required_param(form, "device_code"),
                        resource=resource,
                        jkt=jkt,
                    )
        pair = outcome.unwrap()
    except Exception as error:
        metrics.oauth_grants.labels(_grant_label(grant_type), oauth_error_of(error)).inc()
        raise
    metrics.oauth_grants.labels(grant_type, "ok").inc()
    body = pair.response()
    if grant_type == catalog.GRANT_TOKEN_EXCHANGE:
        body["issued_token_type"] = catalog.TOKEN_TYPE_ACCESS
    return oauth_response(body)


@blueprint.post("/oauth/revoke")
@security_scheme(CLIENT_BASIC_OR_BODY)
@operation(
    json_reply(200, Revoked, "Revoked, or nothing to revoke", *NO_STORE),
    raises=CLIENT_GUARDED,
    bodies=(Body(FORM, TokenRevocation),),
)
async def revoke() -> Response:
    """RFC 7009: 200 whether or not the token was known."""
    form = await read_form()
    _, app = await authenticated_client("revoke", form)
    token_value = required_param(form, "token")
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
@security_scheme(CLIENT_BASIC)
@operation(
    json_reply(200, ActiveToken | InactiveToken, "What the token is", *NO_STORE),
    raises=CLIENT_GUARDED,
    bodies=(Body(FORM, TokenIntrospection),),
)
async def introspect() -> Response:
    """RFC 7662; client credentials in the Authorization header only."""
    form = await read_form()
    p = platform()
    token_value, hint = form.get("token"), form.get("token_type_hint")
    # The token's first lookup is made with the count of the request: one round trip.
    lookup = (
        auth.introspection_lookup(p.keyring, token=token_value, hint=hint) if token_value else None
    )
    _, app, first = await authenticated_client_reading(
        "introspect",
        form,
        None if lookup is None else lambda _: lookup,
        allow_body=False,
        allow_inactive=True,
    )
    token_value = required_param(form, "token")
    if not app.active:
        return oauth_response({"active": False})
    answer = await auth.introspect(
        p.store.autocommit,
        p.keyring,
        now=p.now(),
        app=app,
        token=token_value,
        hint=hint,
        first=first,
    )
    return oauth_response(answer)


@blueprint.post("/oauth/device/authorize")
@security_scheme(CLIENT_BASIC_OR_BODY)
@operation(
    json_reply(200, DeviceAuthorization, "A device code to poll, a user code to enter", *NO_STORE),
    raises=(*CLIENT_GUARDED, auth.InvalidScope, auth.InvalidTarget),
    bodies=(Body(FORM, DeviceAuthorizationRequest),),
)
async def device_authorize() -> Response:
    """RFC 8628 device authorization: a device code to poll and a user code to enter."""
    form = await read_form()
    _, app = await authenticated_client("device", form)
    scopes = scopes_param(form)
    if scopes is None:
        raise auth.InvalidRequest("scope is required")
    unregistered = [s for s in scopes if s not in app.scopes]
    if unregistered:
        raise auth.InvalidScope(f"scope not registered for this client: {unregistered[0]}")
    resource = resource_param(form)
    p = platform()
    async with unit_of_work() as tx:
        authorization = await auth.start_device_authorization(
            tx,
            p.keyring,
            now=p.now(),
            app=app,
            scopes=apps.ordered_scopes(scopes),
            resource=resource,
        )
    return oauth_response(authorization.response(f"{p.config.auth_url}/device"))
