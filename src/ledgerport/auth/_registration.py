"""Open dynamic client registration (RFC 7591) and the client's configuration (RFC 7592).

A registered client is an unreviewed app (sandbox businesses only until reviewed) that no
developer owns. ``token_endpoint_auth_method: "none"`` makes a PUBLIC client, any other method
(default ``client_secret_basic``) a CONFIDENTIAL one with a secret shown once; ``scope`` sets the
registered scopes (default ``profile:read``). Redirect URI problems answer
``invalid_redirect_uri``, every other metadata problem ``invalid_client_metadata``.

Registration answers a registration access token (shown once, kept as its keyed hash) with
which the client reads, replaces and deletes its registration at its configuration address
(``/oauth/register/{client_id}``). A token presented at another client's address is revoked
there and then (RFC 7592 section 3: it has leaked or is being probed with), and a deleted
client's app is deactivated: its tokens stop working and its client id authenticates no more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ledgerport import catalog
from ledgerport.apps import (
    APPS_CHANNEL,
    App,
    create_app,
    get_app,
    ordered_scopes,
    redirect_uri_problems,
    set_app_status,
    web_url_problem,
)
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Transaction

from ._errors import InvalidClientMetadata, InvalidRedirectUri

DEFAULT_SCOPE = "profile:read"
DEFAULT_AUTH_METHOD = "client_secret_basic"
DEFAULT_CLIENT_NAME = "Unnamed app"
_URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri")
_RESPONSE_TYPES = ("code",)


def _unstorable(value: object) -> bool:
    """Text no database column can hold: lone surrogates (from JSON escapes). A NUL never gets
    this far: the HTTP layer refuses it in every request."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, list):
        return any(_unstorable(item) for item in value)
    if isinstance(value, dict):
        return any(_unstorable(k) or _unstorable(v) for k, v in value.items())
    return False


def _string_list(metadata: dict[str, Any], field: str, default: list[str]) -> list[str]:
    value = metadata.get(field, default)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidClientMetadata(f"{field} must be a list of strings")
    return list(dict.fromkeys(value))


def _optional_uri(metadata: dict[str, Any], field: str) -> str | None:
    """A page the client names (client_uri is also its App URL): the App URL rule."""
    value = metadata.get(field)
    if value is None:
        return None
    problem = web_url_problem(value)
    if problem is not None:
        raise InvalidClientMetadata(f"{field} {problem}")
    assert isinstance(value, str)
    return value


def check_client_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The registered metadata, normalized; raises InvalidRedirectUri or InvalidClientMetadata
    for what RFC 7591 refuses."""
    uris = metadata.get("redirect_uris")
    problems = redirect_uri_problems(uris)
    if problems:
        raise InvalidRedirectUri("; ".join(problems).replace("redirectUris", "redirect_uris"))
    assert isinstance(uris, list)
    bad_strings = [key for key, value in metadata.items() if _unstorable(value)]
    if bad_strings:
        raise InvalidClientMetadata(f"{bad_strings[0]} must not contain unpaired surrogates")

    method = metadata.get("token_endpoint_auth_method", DEFAULT_AUTH_METHOD)
    if method not in catalog.TOKEN_ENDPOINT_AUTH_METHODS:
        methods = ", ".join(catalog.TOKEN_ENDPOINT_AUTH_METHODS)
        raise InvalidClientMetadata(f"token_endpoint_auth_method must be one of {methods}")

    scope = metadata.get("scope", DEFAULT_SCOPE)
    if not isinstance(scope, str):
        raise InvalidClientMetadata("scope must be a space-separated string")
    scopes = list(dict.fromkeys(scope.split()))
    if not scopes:
        raise InvalidClientMetadata("scope must name at least one scope")
    unknown = [s for s in scopes if not catalog.is_scope(s)]
    if unknown:
        raise InvalidClientMetadata(f"scope names an unknown scope: {unknown[0]}")

    name = metadata.get("client_name", DEFAULT_CLIENT_NAME)
    if not isinstance(name, str) or not name.strip() or len(name) > catalog.CLIENT_NAME_MAX_LENGTH:
        raise InvalidClientMetadata(
            f"client_name must be a non-empty string of at most {catalog.CLIENT_NAME_MAX_LENGTH}"
        )

    grant_types = _string_list(
        metadata, "grant_types", [catalog.GRANT_AUTHORIZATION_CODE, catalog.GRANT_REFRESH_TOKEN]
    )
    unsupported = [g for g in grant_types if g not in catalog.GRANT_TYPES]
    if unsupported:
        raise InvalidClientMetadata(f"grant_types names an unsupported grant: {unsupported[0]}")
    if method == "none" and catalog.GRANT_TOKEN_EXCHANGE in grant_types:
        raise InvalidClientMetadata("token exchange is for confidential clients only")
    response_types = _string_list(metadata, "response_types", list(_RESPONSE_TYPES))
    if any(r not in _RESPONSE_TYPES for r in response_types):
        raise InvalidClientMetadata("response_types supports code only")

    contacts = _string_list(metadata, "contacts", [])
    if len(contacts) > catalog.REGISTRATION_CONTACTS_MAX:
        raise InvalidClientMetadata(
            f"contacts may hold at most {catalog.REGISTRATION_CONTACTS_MAX} addresses"
        )
    if any(len(contact) > catalog.CONTACT_MAX_LENGTH for contact in contacts):
        raise InvalidClientMetadata(
            f"contacts entries must be at most {catalog.CONTACT_MAX_LENGTH} characters"
        )

    registered: dict[str, Any] = {
        "redirect_uris": list(uris),
        "client_name": name.strip(),
        "token_endpoint_auth_method": method,
        "grant_types": grant_types,
        "response_types": response_types,
        "scope": " ".join(ordered_scopes(scopes)),
    }
    if contacts:
        registered["contacts"] = contacts
    require_par = metadata.get("require_pushed_authorization_requests", False)
    if not isinstance(require_par, bool):
        raise InvalidClientMetadata("require_pushed_authorization_requests must be true or false")
    if require_par:
        registered["require_pushed_authorization_requests"] = True
    require_dpop = metadata.get("dpop_bound_access_tokens", False)
    if not isinstance(require_dpop, bool):
        raise InvalidClientMetadata("dpop_bound_access_tokens must be true or false")
    if require_dpop:
        registered["dpop_bound_access_tokens"] = True
    for field in _URI_FIELDS:
        uri = _optional_uri(metadata, field)
        if uri is not None:
            registered[field] = uri
    return registered


def requires_dpop(app: App) -> bool:
    """Whether the client was registered with ``dpop_bound_access_tokens`` (RFC 9449 section
    5.2): every token request of its must carry a DPoP proof."""
    return bool((app.registration or {}).get("dpop_bound_access_tokens"))


async def register_client(
    tx: Transaction, keyring: Keyring, *, now: float, metadata: dict[str, Any]
) -> dict[str, Any]:
    """Register the client; answers RFC 7591's client information response."""
    registered = check_client_metadata(metadata)
    app, secret = await create_app(
        tx,
        keyring,
        now=now,
        name=registered["client_name"],
        type="PUBLIC" if registered["token_endpoint_auth_method"] == "none" else "CONFIDENTIAL",
        redirect_uris=registered["redirect_uris"],
        scopes=registered["scope"].split(),
        developer_user_id=None,
        reviewed=False,
        app_url=registered.get("client_uri"),
        registration=registered,
    )
    token = new_token(catalog.REGISTRATION_TOKEN_PREFIX)
    await tx.execute(
        "UPDATE apps SET registration_token_hash = $1 WHERE id = $2",
        keyring.hash_token(token),
        app.id,
    )
    response: dict[str, Any] = {"client_id": app.client_id, "client_id_issued_at": int(now)}
    if secret is not None:
        response["client_secret"] = secret
        response["client_secret_expires_at"] = 0
    response.update(registered)
    response["registration_access_token"] = token
    return response


_SERVER_FIELDS = (
    "registration_access_token",
    "registration_client_uri",
    "client_id_issued_at",
    "client_secret_expires_at",
)
"""What the server sets and a client's replacement must not send (RFC 7592 section 2.2)."""


@dataclass(frozen=True)
class ConfiguredClient:
    """A registered client reached with its registration access token: its app, and when it
    was registered."""

    app: App
    issued_at: int

    def information(self) -> dict[str, Any]:
        """RFC 7592's client information response, without the secret (kept as a hash) and
        without the token (the client holds it)."""
        answer: dict[str, Any] = {
            "client_id": self.app.client_id,
            "client_id_issued_at": self.issued_at,
        }
        if self.app.type == "CONFIDENTIAL":
            answer["client_secret_expires_at"] = 0
        answer.update(self.app.registration or {})
        return answer


async def configured_client(
    tx: Transaction, keyring: Keyring, *, client_id: str, token: str | None
) -> ConfiguredClient | None:
    """The registered client ``client_id`` that ``token`` configures, or None: no token, one
    that configures no client, or one of another client, which is revoked here (commit before
    refusing: the revocation must stand)."""
    if not token:
        return None
    row = await tx.fetchrow(
        "SELECT * FROM apps WHERE registration_token_hash = $1", keyring.hash_token(token)
    )
    if row is None or row["registration"] is None:
        return None
    if row["client_id"] != client_id:
        await tx.execute("UPDATE apps SET registration_token_hash = NULL WHERE id = $1", row["id"])
        return None
    return ConfiguredClient(App.from_row(row), int(row["created_at"]))


async def replace_registration(
    tx: Transaction, keyring: Keyring, client: ConfiguredClient, metadata: dict[str, Any]
) -> ConfiguredClient:
    """RFC 7592 section 2.2: the client's metadata replaced by ``metadata`` as a whole (what it
    leaves out takes its default), checked as a registration is. ``client_id`` must be the
    client's; a ``client_secret``, if sent, its current one; the server's own fields are not
    sent; a public client stays public and a confidential one confidential."""
    app = client.app
    if metadata.get("client_id") != app.client_id:
        raise InvalidClientMetadata("client_id must be the client's own")
    sent = [field for field in _SERVER_FIELDS if field in metadata]
    if sent:
        raise InvalidClientMetadata(f"{sent[0]} is set by the server and must not be sent")
    secret = metadata.get("client_secret")
    if secret is not None and (
        app.client_secret_hash is None
        or not isinstance(secret, str)
        or not keyring.verify_token(secret, app.client_secret_hash)
    ):
        raise InvalidClientMetadata("client_secret must be the client's current secret")
    registered = check_client_metadata(
        {k: v for k, v in metadata.items() if k not in ("client_id", "client_secret")}
    )
    public = registered["token_endpoint_auth_method"] == "none"
    if public != (app.type == "PUBLIC"):
        raise InvalidClientMetadata(
            "token_endpoint_auth_method cannot turn a public client into a confidential one or"
            " the other way; register a new client instead"
        )
    await tx.execute(
        "UPDATE apps SET name = $1, redirect_uris = $2, scopes = $3, app_url = $4,"
        " registration = $5 WHERE id = $6",
        registered["client_name"],
        json.dumps(registered["redirect_uris"]),
        json.dumps(registered["scope"].split()),
        registered.get("client_uri"),
        json.dumps(registered),
        app.id,
    )
    await tx.notify(APPS_CHANNEL)
    return ConfiguredClient(await get_app(tx, app.id), client.issued_at)


async def delete_registration(tx: Transaction, client: ConfiguredClient) -> None:
    """RFC 7592 section 2.3: the client is gone. Its app is deactivated (its tokens stop
    working, its client id authenticates no more) and the registration access token
    revoked."""
    await set_app_status(tx, client.app.id, "DEACTIVATED")
    await tx.execute("UPDATE apps SET registration_token_hash = NULL WHERE id = $1", client.app.id)
