"""What the OAuth endpoints read and answer, as the OpenAPI document states them: the grants'
and the other endpoints' parameters, the server's metadata, the key set, and each answer."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import ConfigDict, Field, WithJsonSchema, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import catalog

from ._ids import CLIENT
from ._openapi import one_of

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


class PushedAuthorizationRequest(_ClientInBody, _Resource):
    """RFC 9126: the authorization request's parameters, as ``/oauth/authorize`` takes them, with
    the client's authentication as at the token endpoint."""

    response_type: Annotated[str, _const("code")]
    redirect_uri: _Given
    scope: _Given
    state: NotRequired[str]
    code_challenge: NotRequired[str]
    code_challenge_method: NotRequired[
        Annotated[
            str, WithJsonSchema({"type": "string", "enum": list(catalog.CODE_CHALLENGE_METHODS)})
        ]
    ]


class PushedRequest(TypedDict):
    """RFC 9126: what stands for the pushed request at ``/oauth/authorize``, once, for
    ``expires_in`` seconds."""

    request_uri: Annotated[str, Field(pattern=r"^urn:ietf:params:oauth:request_uri:")]
    expires_in: int


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
    require_pushed_authorization_requests: NotRequired[
        Annotated[bool, Field(description="RFC 9126: start every authorization by /oauth/par")]
    ]
    dpop_bound_access_tokens: NotRequired[
        Annotated[bool, Field(description="RFC 9449: every token request carries a DPoP proof")]
    ]


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
    pushed_authorization_request_endpoint: str
    require_pushed_authorization_requests: bool
    dpop_signing_alg_values_supported: list[str]
    client_id_metadata_document_supported: NotRequired[bool]
    """True when a ``client_id`` may be the URL of a client ID metadata document
    (LEDGERPORT_CIMD, on by default); absent when such clients are refused."""


class ProtectedResourceMetadata(TypedDict):
    """RFC 9728 protected resource metadata: the resource's identifier (what a client names as
    ``resource``, RFC 8707), the authorization servers whose access tokens it accepts, the
    scopes it knows and how a token is presented."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str]
    bearer_methods_supported: list[str]
    dpop_signing_alg_values_supported: list[str]


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
    token_type: Literal["Bearer", "DPoP"]
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
    token_type: Literal["Bearer", "DPoP", "refresh_token"]
    cnf: NotRequired[
        Annotated[dict[str, str], Field(description="RFC 9449: {jkt} of a DPoP-bound token")]
    ]


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
class ClientUpdate(ClientMetadata):
    """RFC 7592 client update: the whole metadata, as at registration, with the client's own
    ``client_id`` (and its current ``client_secret``, if it sends one)."""

    client_id: Annotated[
        str,
        WithJsonSchema(
            CLIENT.looked_up("400 invalid_client_metadata unless it is the client's own")
        ),
    ]
    client_secret: NotRequired[str]


class ClientInformation(TypedDict):
    """RFC 7591 client information: the registered metadata and where to configure it
    (RFC 7592). A CONFIDENTIAL client's secret and the registration access token are shown
    at registration only."""

    client_id: str
    client_id_issued_at: int
    client_secret: NotRequired[str]
    client_secret_expires_at: NotRequired[int]
    registration_access_token: NotRequired[str]
    registration_client_uri: str
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
    require_pushed_authorization_requests: NotRequired[bool]
    dpop_bound_access_tokens: NotRequired[bool]
