"""The authorization endpoint's checks and the consent request held for five minutes.

Every failure here is an ``AuthorizeProblem`` shown on the consent page and never redirected
to the app (spec: Authentication, step 5), with the spec's message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ledgerport import catalog
from ledgerport.apps import App, find_app_by_client_id, get_app, ordered_scopes
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Transaction

from ._client_documents import ScopeBeyondPolicy
from ._errors import (
    InvalidTarget,
    MalformedAuthorizeRequest,
    PkceRequired,
    RedirectUriMismatch,
    RequestExpired,
    ScopesNotPermitted,
    TargetRefused,
    UnknownClient,
)
from ._grants import is_valid_pkce_value


def origin_of(url: str) -> tuple[str, str, int]:
    """``url``'s origin as (scheme, host, port), lower-case, the scheme's default port when
    none is written; ValueError for a malformed port or IPv6 literal."""
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


def check_resource(values: Sequence[str], api_base_url: str) -> str | None:
    """The one resource indicator, or None when absent; raises InvalidTarget otherwise."""
    if not values:
        return None
    if len(values) > 1:
        raise InvalidTarget("resource must be sent at most once")
    value = values[0]
    if len(value) > catalog.URI_MAX_LENGTH:
        raise InvalidTarget(f"resource must be at most {catalog.URI_MAX_LENGTH} characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError as exc:
        raise InvalidTarget("resource must be an absolute URI") from exc
    if not parts.scheme or not parts.netloc or "#" in value:
        raise InvalidTarget("resource must be an absolute URI without a fragment")
    if origin_of(value) != origin_of(api_base_url):
        raise InvalidTarget("resource must be on the API's origin")
    return value


@dataclass(frozen=True)
class AuthorizeParams:
    app: App
    redirect_uri: str
    scopes: tuple[str, ...]
    state: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    resource: str | None


def _single(args: dict[str, list[str]], name: str) -> str | None:
    values = args.get(name) or []
    if len(values) > 1:
        raise MalformedAuthorizeRequest(f"invalid_request: {name} must be sent once")
    return values[0] if values else None


async def check_authorize_request(
    tx: Transaction, args: dict[str, list[str]], *, api_base_url: str
) -> AuthorizeParams:
    """Validate the query of ``GET /oauth/authorize`` in the spec's order of messages."""
    client_id = _single(args, "client_id")
    app = await find_app_by_client_id(tx, client_id) if client_id else None
    if app is None or not app.active:
        raise UnknownClient()
    redirect_uri = _single(args, "redirect_uri")
    if not redirect_uri or redirect_uri not in app.redirect_uris:
        raise RedirectUriMismatch()
    if _single(args, "response_type") != "code":
        raise MalformedAuthorizeRequest("unsupported_response_type: response_type must be code")
    scope_text = _single(args, "scope")
    scopes = tuple(dict.fromkeys((scope_text or "").split()))
    if not scopes:
        raise MalformedAuthorizeRequest("invalid_request: scope is required")
    if app.metadata_document:
        # The app's scopes are those the operator allows such clients (LEDGERPORT_CIMD_SCOPES).
        beyond = [s for s in scopes if s not in app.scopes]
        if beyond:
            raise ScopeBeyondPolicy(beyond[0])
    if any(s not in app.scopes for s in scopes):
        raise ScopesNotPermitted()
    challenge = _single(args, "code_challenge")
    method = _single(args, "code_challenge_method")
    if app.metadata_document and (challenge is None or method != "S256"):
        raise MalformedAuthorizeRequest(
            "invalid_request: a client ID metadata document client must use PKCE with S256"
        )
    if challenge is None:
        if app.type == "PUBLIC":
            raise PkceRequired()
        if method is not None:
            raise MalformedAuthorizeRequest(
                "invalid_request: code_challenge_method without code_challenge"
            )
    else:
        method = method or "plain"
        if method not in catalog.CODE_CHALLENGE_METHODS:
            raise MalformedAuthorizeRequest(
                "invalid_request: code_challenge_method must be S256 or plain"
            )
        if not is_valid_pkce_value(challenge):
            raise MalformedAuthorizeRequest("invalid_request: code_challenge is malformed")
    try:
        resource = check_resource(args.get("resource") or [], api_base_url)
    except InvalidTarget as exc:
        values = args.get("resource") or []
        long_form = len(values) > 1 or any(len(v) > catalog.URI_MAX_LENGTH for v in values)
        raise TargetRefused(exc.description if long_form else None) from exc
    return AuthorizeParams(
        app=app,
        redirect_uri=redirect_uri,
        scopes=ordered_scopes(scopes),
        state=_single(args, "state"),
        code_challenge=challenge,
        code_challenge_method=method if challenge is not None else None,
        resource=resource,
    )


async def hold_request(
    tx: Transaction, keyring: Keyring, *, now: float, user_id: str, params: AuthorizeParams
) -> str:
    """Keep the checked request for the consent decision; answers its id for the form."""
    request_id = new_token(catalog.AUTHORIZATION_REQUEST_PREFIX)
    await tx.execute(
        "INSERT INTO authorization_requests (id_hash, app_id, user_id, redirect_uri, scopes,"
        " state, code_challenge, code_challenge_method, resource, created_at, expires_at,"
        " consumed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, false)",
        keyring.hash_token(request_id),
        params.app.id,
        user_id,
        params.redirect_uri,
        json.dumps(list(params.scopes)),
        params.state,
        params.code_challenge,
        params.code_challenge_method,
        params.resource,
        now,
        now + catalog.AUTHORIZATION_REQUEST_TTL,
    )
    return request_id


async def take_request(
    tx: Transaction, keyring: Keyring, *, now: float, request_id: str, user_id: str
) -> AuthorizeParams:
    """Consume a held request once, within five minutes, by the user it was shown to."""
    id_hash = keyring.hash_token(request_id)
    row = await tx.fetchrow(
        "SELECT * FROM authorization_requests WHERE id_hash = $1 AND user_id = $2",
        id_hash,
        user_id,
    )
    if row is None or row["consumed"] or now >= row["expires_at"]:
        raise RequestExpired()
    claimed = await tx.execute(
        "UPDATE authorization_requests SET consumed = true WHERE id_hash = $1 AND NOT consumed",
        id_hash,
    )
    if not claimed:
        raise RequestExpired()
    app = await get_app(tx, row["app_id"])
    if not app.active:
        raise UnknownClient()
    return AuthorizeParams(
        app=app,
        redirect_uri=row["redirect_uri"],
        scopes=tuple(json.loads(row["scopes"])),
        state=row["state"],
        code_challenge=row["code_challenge"],
        code_challenge_method=row["code_challenge_method"],
        resource=row["resource"],
    )


async def purge_expired_requests(tx: Transaction, *, now: float) -> int:
    return await tx.execute("DELETE FROM authorization_requests WHERE expires_at <= $1", now)
