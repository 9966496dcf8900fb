"""Open dynamic client registration (RFC 7591).

A registered client is an unreviewed app (sandbox businesses only until reviewed) that no
developer owns. ``token_endpoint_auth_method: "none"`` makes a PUBLIC client, any other method
(default ``client_secret_basic``) a CONFIDENTIAL one with a secret shown once; ``scope`` sets the
registered scopes (default ``profile:read``). Redirect URI problems answer
``invalid_redirect_uri``, every other metadata problem ``invalid_client_metadata``.
"""

from __future__ import annotations

from typing import Any

from ledgerport import catalog
from ledgerport.apps import create_app, ordered_scopes, redirect_uri_problems, web_url_problem
from ledgerport.keys import Keyring
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
    for field in _URI_FIELDS:
        uri = _optional_uri(metadata, field)
        if uri is not None:
            registered[field] = uri
    return registered


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
    response: dict[str, Any] = {"client_id": app.client_id, "client_id_issued_at": int(now)}
    if secret is not None:
        response["client_secret"] = secret
        response["client_secret_expires_at"] = 0
    response.update(registered)
    return response
