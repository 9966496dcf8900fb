"""OAuth 2.0 endpoints on the API host: discovery, JWKS, token, revocation, introspection,
device authorization and dynamic registration.

Errors use the OAuth shape ``{error, error_description?, message}`` (``message`` is deprecated;
the blueprint's renderer in ``_errors``) and every answer carries ``Cache-Control: no-store`` and
``Pragma: no-cache``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, WithJsonSchema, with_config
from quart import Blueprint, Response, jsonify, request
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.datastructures import MultiDict

from ledgerport import apps, auth, catalog, storage
from ledgerport.ops import OTHER, closed_label

from ._context import client_ip, platform, unit_of_work
from ._errors import oauth_error_of, oauth_response
from ._ids import CLIENT
from ._input import parse_json
from ._oauth_guard import oauth_guard
from ._openapi import FORM, JSON, NO_STORE, Body, Header, json_reply, one_of, operation

blueprint = Blueprint("oauth", __name__)

GRANTS_AVAILABLE = catalog.GRANT_TYPES


# --- What the endpoints read and answer, for the OpenAPI document -------------------------------


def _const(value: str) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "const": value})


_Given = Annotated[str, Field(min_length=1)]
"""A parameter the endpoint requires: sent empty, it is missing."""


class _ClientInBody(TypedDict):
    """Client authentication in the body (client_secret_post), or a PUBLIC client's id alone;
    HTTP Basic is the other way, never both."""

    client_id: NotRequired[
        Annotated[str, WithJsonSchema(CLIENT.looked_up("401 invalid_client, an empty one too"))]
    ]
    client_secret: NotRequired[str]


class _Resource(TypedDict):
    resource: NotRequired[
        Annotated[str, Field(min_length=1, description="RFC 8707: one URI on the API origin")]
    ]


class AuthorizationCodeGrant(_ClientInBody, _Resource):
    grant_type: Annotated[str, _const(catalog.GRANT_AUTHORIZATION_CODE)]
    code: _Given
    redirect_uri: _Given
    code_verifier: NotRequired[str]


class RefreshTokenGrant(_ClientInBody, _Resource):
    grant_type: Annotated[str, _const(catalog.GRANT_REFRESH_TOKEN)]
    refresh_token: _Given


class DeviceCodeGrant(_ClientInBody, _Resource):
    grant_type: Annotated[str, _const(catalog.GRANT_DEVICE_CODE)]
    device_code: _Given


class TokenExchangeGrant(_ClientInBody, _Resource):
    """RFC 8693: a session token for an access token; CONFIDENTIAL clients only."""

    grant_type: Annotated[str, _const(catalog.GRANT_TOKEN_EXCHANGE)]
    subject_token: _Given
    subject_token_type: Annotated[str, WithJsonSchema(one_of(catalog.SUBJECT_TOKEN_TYPES))]
    requested_token_type: NotRequired[Annotated[str, _const(catalog.TOKEN_TYPE_ACCESS)]]
    scope: NotRequired[str]


class TokenRevocation(_ClientInBody):
    token: _Given
    token_type_hint: NotRequired[
        Annotated[str, Field(description="access_token or refresh_token; others are ignored")]
    ]


class TokenIntrospection(TypedDict):
    """Client credentials go in the Authorization header only."""

    token: _Given
    token_type_hint: NotRequired[
        Annotated[str, Field(description="access_token or refresh_token; others are ignored")]
    ]


class DeviceAuthorizationRequest(_ClientInBody, _Resource):
    scope: Annotated[str, Field(min_length=1, description="Space-separated registered scopes")]


_WebPage = Annotated[str | None, Field(max_length=catalog.URI_MAX_LENGTH)]


class ClientMetadata(TypedDict):
    """RFC 7591 client metadata; other members are ignored."""

    redirect_uris: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=catalog.URI_MAX_LENGTH)]],
        Field(min_length=catalog.REDIRECT_URIS_MIN, max_length=catalog.REDIRECT_URIS_MAX),
    ]
    client_name: NotRequired[
        Annotated[str, Field(min_length=1, max_length=catalog.CLIENT_NAME_MAX_LENGTH)]
    ]
    token_endpoint_auth_method: NotRequired[
        Annotated[str, WithJsonSchema(one_of(catalog.TOKEN_ENDPOINT_AUTH_METHODS))]
    ]
    grant_types: NotRequired[list[Annotated[str, WithJsonSchema(one_of(catalog.GRANT_TYPES))]]]
    response_types: NotRequired[
        list[Annotated[str, WithJsonSchema(one_of(catalog.RESPONSE_TYPES))]]
    ]
    scope: NotRequired[Annotated[str, Field(description="Space-separated scopes")]]
    contacts: NotRequired[
        Annotated[
            list[Annotated[str, Field(min_length=1, max_length=catalog.CONTACT_MAX_LENGTH)]],
            Field(max_length=catalog.REGISTRATION_CONTACTS_MAX),
        ]
    ]
    client_uri: NotRequired[_WebPage]
    logo_uri: NotRequired[_WebPage]
    tos_uri: NotRequired[_WebPage]
    policy_uri: NotRequired[_WebPage]


@with_config(ConfigDict(extra="forbid"))
class ServerMetadata(TypedDict):
    """RFC 8414 authorization server metadata; api_base_url is the REST API's root."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    revocation_endpoint: str
    introspection_endpoint: str
    device_authorization_endpoint: str
    registration_endpoint: str
    jwks_uri: str
    api_base_url: str
    scopes_supported: list[str]
    response_types_supported: list[str]
    grant_types_supported: list[str]
    code_challenge_methods_supported: list[str]
    token_endpoint_auth_methods_supported: list[str]
    revocation_endpoint_auth_methods_supported: list[str]
    introspection_endpoint_auth_methods_supported: list[str]
    authorization_response_iss_parameter_supported: bool


@with_config(ConfigDict(extra="forbid"))
class JsonWebKey(TypedDict):
    """A P-256 public key that verifies session tokens (RFC 7518)."""

    kty: Literal["EC"]
    crv: Literal["P-256"]
    x: str
    y: str
    kid: str
    alg: Literal["ES256"]
    use: Literal["sig"]


@with_config(ConfigDict(extra="forbid"))
class JsonWebKeySet(TypedDict):
    keys: list[JsonWebKey]


@with_config(ConfigDict(extra="forbid"))
class TokenResponse(TypedDict):
    access_token: str
    token_type: Literal["Bearer"]
    expires_in: int
    refresh_token: str
    scope: str
    issued_token_type: NotRequired[Annotated[str, _const(catalog.TOKEN_TYPE_ACCESS)]]


@with_config(ConfigDict(extra="forbid"))
class Revoked(TypedDict):
    """Nothing: the token is revoked, or was not one to revoke."""


@with_config(ConfigDict(extra="forbid"))
class ActiveToken(TypedDict):
    active: Literal[True]
    scope: str
    exp: int
    client_id: str
    sub: str
    token_type: Literal["Bearer", "refresh_token"]


@with_config(ConfigDict(extra="forbid"))
class InactiveToken(TypedDict):
    """Unknown, expired, revoked, another client's, or the caller is not active."""

    active: Literal[False]


@with_config(ConfigDict(extra="forbid"))
class DeviceAuthorization(TypedDict):
    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int


@with_config(ConfigDict(extra="forbid"))
class ClientInformation(TypedDict):
    """RFC 7591 client information: the registered metadata; a CONFIDENTIAL client's secret is
    shown here only."""

    client_id: str
    client_id_issued_at: int
    client_secret: NotRequired[str]
    client_secret_expires_at: NotRequired[int]
    redirect_uris: list[str]
    client_name: str
    token_endpoint_auth_method: Annotated[
        str, WithJsonSchema(one_of(catalog.TOKEN_ENDPOINT_AUTH_METHODS))
    ]
    grant_types: list[str]
    response_types: list[str]
    scope: str
    contacts: NotRequired[list[str]]
    client_uri: NotRequired[str]
    logo_uri: NotRequired[str]
    tos_uri: NotRequired[str]
    policy_uri: NotRequired[str]


_CLIENT: list[dict[str, list[str]]] = [{"clientBasic": []}]
"""HTTP Basic client authentication."""
_CLIENT_OR_BODY: list[dict[str, list[str]]] = [*_CLIENT, {}]
"""HTTP Basic, or credentials (or a PUBLIC client's id alone) in the body."""
_GUARDED = (auth.InvalidRequest, auth.InvalidClient, auth.RateLimited, storage.StorageUnavailable)
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


def _required(form: MultiDict[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise auth.InvalidRequest(f"{name} is required")
    return str(value)


def _resource(form: MultiDict[str, str]) -> str | None:
    return auth.check_resource(form.getlist("resource"), platform().config.base_url)


def _scopes(form: MultiDict[str, str]) -> tuple[str, ...] | None:
    value = form.get("scope")
    if value is None:
        return None
    scopes = tuple(dict.fromkeys(value.split()))
    if not scopes:
        raise auth.InvalidScope("scope must name at least one scope")
    return scopes


async def _token_exchange(
    form: MultiDict[str, str], app: apps.App, credentials: auth.ClientCredentials
) -> auth.Outcome:
    if app.type != "CONFIDENTIAL":
        raise auth.InvalidClient(
            "token exchange is for confidential clients only", basic=credentials.basic
        )
    subject_token = _required(form, "subject_token")
    try:
        subject_type = _required(form, "subject_token_type")
        if subject_type not in catalog.SUBJECT_TOKEN_TYPES:
            raise auth.InvalidRequest(f"subject_token_type must be {catalog.TOKEN_TYPE_JWT}")
        requested = form.get("requested_token_type")
        if requested is not None and requested != catalog.TOKEN_TYPE_ACCESS:
            raise auth.InvalidRequest(f"requested_token_type must be {catalog.TOKEN_TYPE_ACCESS}")
        resource, scopes = _resource(form), _scopes(form)
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
        )


def _rotation(form: MultiDict[str, str]) -> auth.RefreshRotation | None:
    """The rotation a refresh request asks for, made with its count where the store allows;
    None where it does not, or where the request is not well formed (the transaction answers
    that once the request is counted)."""
    refresh_token = form.get("refresh_token")
    if not refresh_token:
        return None
    try:
        resource = _resource(form)
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
@security_scheme(_CLIENT_OR_BODY)
@operation(
    json_reply(200, TokenResponse, "Tokens issued", *NO_STORE),
    raises=(
        *_GUARDED,
        auth.InvalidGrant,
        auth.UnsupportedGrantType,
        auth.InvalidScope,
        auth.InvalidTarget,
        auth.AuthorizationPending,
        auth.SlowDown,
        auth.AccessDenied,
        auth.ExpiredToken,
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
        # A refresh token that is good is rotated in the statement that counts the request,
        # where the store allows; anything else is decided by the transaction below.
        rotation = _rotation(form) if grant_type == catalog.GRANT_REFRESH_TOKEN else None
        # The client first: a locked-out pair is refused (429) whatever it asks for.
        credentials, app, rotated = await authenticated_client_reading(
            "token", form, None if rotation is None else rotation.lookup
        )
        if grant_type == "missing":
            raise auth.InvalidRequest("grant_type is required")
        if grant_type not in GRANTS_AVAILABLE:
            raise auth.UnsupportedGrantType("grant_type is not supported")
        outcome = None
        if grant_type == catalog.GRANT_TOKEN_EXCHANGE:
            outcome = await _token_exchange(form, app, credentials)
        else:
            resource = _resource(form)
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
                        code=_required(form, "code"),
                        redirect_uri=_required(form, "redirect_uri"),
                        code_verifier=form.get("code_verifier") or None,
                        resource=resource,
                    )
                elif grant_type == catalog.GRANT_REFRESH_TOKEN:
                    outcome = await auth.rotate_refresh_token(
                        tx,
                        p.keyring,
                        now=p.now(),
                        app=app,
                        refresh_token=_required(form, "refresh_token"),
                        resource=resource,
                    )
                else:
                    outcome = await auth.poll_device_code(
                        tx,
                        p.keyring,
                        now=p.now(),
                        app=app,
                        device_code=_required(form, "device_code"),
                        resource=resource,
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
@security_scheme(_CLIENT_OR_BODY)
@operation(
    json_reply(200, Revoked, "Revoked, or nothing to revoke", *NO_STORE),
    raises=_GUARDED,
    bodies=(Body(FORM, TokenRevocation),),
)
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
@security_scheme(_CLIENT)
@operation(
    json_reply(200, ActiveToken | InactiveToken, "What the token is", *NO_STORE),
    raises=_GUARDED,
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
    token_value = _required(form, "token")
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
@security_scheme(_CLIENT_OR_BODY)
@operation(
    json_reply(200, DeviceAuthorization, "A device code to poll, a user code to enter", *NO_STORE),
    raises=(*_GUARDED, auth.InvalidScope, auth.InvalidTarget),
    bodies=(Body(FORM, DeviceAuthorizationRequest),),
)
async def device_authorize() -> Response:
    """RFC 8628 device authorization: a device code to poll and a user code to enter."""
    form = await read_form()
    _, app = await authenticated_client("device", form)
    scopes = _scopes(form)
    if scopes is None:
        raise auth.InvalidRequest("scope is required")
    unregistered = [s for s in scopes if s not in app.scopes]
    if unregistered:
        raise auth.InvalidScope(f"scope not registered for this client: {unregistered[0]}")
    resource = _resource(form)
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


@blueprint.post("/oauth/register")
@operation(
    json_reply(201, ClientInformation, "The registered client", *NO_STORE),
    raises=(
        auth.InvalidRequest,
        auth.InvalidRedirectUri,
        auth.InvalidClientMetadata,
        auth.RateLimited,
        storage.StorageUnavailable,
    ),
    bodies=(Body(JSON, ClientMetadata),),
)
async def register() -> Response:
    """RFC 7591 open registration: an unreviewed app, limited to sandbox businesses."""
    await oauth_guard().registration(client_ip())
    metadata = await read_json_object()
    p = platform()
    async with unit_of_work() as tx:
        answer = await auth.register_client(tx, p.keyring, now=p.now(), metadata=metadata)
    p.metrics.client_registrations.labels(
        "PUBLIC" if answer["token_endpoint_auth_method"] == "none" else "CONFIDENTIAL"
    ).inc()
    return oauth_response(answer, 201)
