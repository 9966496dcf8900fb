"""Pushed authorization requests (RFC 9126, contract.md: Agents as partner apps).

A client posts its authorization request's parameters to ``/oauth/par``, authenticated as at the
token endpoint, and gets a ``request_uri`` that stands for them for 60 seconds. The request is
checked as ``/oauth/authorize`` checks one (the same function, the same rules), so a refusal
comes back to the client in the OAuth envelope before any browser is involved, and the
parameters never pass through the browser's address bar. ``/oauth/authorize?client_id=..&
request_uri=..`` then uses the stored parameters, and nothing else of its query: once, within
the 60 seconds, by the client that pushed them.

The ``request_uri`` is kept as its keyed hash, as every token is. A client registered with
``require_pushed_authorization_requests`` may start an authorization in no other way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ledgerport import catalog
from ledgerport.apps import App
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Transaction

from ._authorize import check_authorize_request
from ._client_documents import ScopeBeyondPolicy
from ._errors import (
    AuthorizeProblem,
    InvalidRequest,
    InvalidScope,
    InvalidTarget,
    MalformedAuthorizeRequest,
    RequestExpired,
    ScopesNotPermitted,
    TargetRefused,
)

REQUEST_URI_PREFIX = "urn:ietf:params:oauth:request_uri:"
"""RFC 9126 section 2.2: what every ``request_uri`` begins with."""
_NOT_PUSHED = ("request_uri", "request")
"""Parameters a pushed request may not carry: a reference to another, or a request object
(not supported)."""


@dataclass(frozen=True)
class Pushed:
    """A pushed request's reference and how many seconds it lasts."""

    request_uri: str
    expires_in: int


def requires_pushed_requests(app: App) -> bool:
    """Whether the client was registered to start every authorization by PAR."""
    return bool((app.registration or {}).get("require_pushed_authorization_requests"))


async def push_request(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app: App,
    args: dict[str, list[str]],
    api_base_url: str,
) -> Pushed:
    """Check the authenticated client's authorization request as ``/oauth/authorize`` would,
    and keep it for 60 seconds; a refusal is the OAuth error the page would have shown."""
    carried = [name for name in _NOT_PUSHED if name in args]
    if carried:
        raise InvalidRequest(f"{carried[0]} must not be sent in a pushed request")
    if args.get("client_id", [app.client_id]) != [app.client_id]:
        raise InvalidRequest("client_id must be the authenticated client's")
    args = {**args, "client_id": [app.client_id]}
    try:
        await check_authorize_request(tx, args, api_base_url=api_base_url)
    except (ScopesNotPermitted, ScopeBeyondPolicy) as problem:
        raise InvalidScope(problem.message.removeprefix("invalid_scope: ")) from problem
    except TargetRefused as problem:
        reason = problem.message.removeprefix(catalog.CONSENT_INVALID_TARGET).lstrip(": ")
        raise InvalidTarget(reason or "resource is not one URI on the API origin") from problem
    except AuthorizeProblem as problem:
        raise InvalidRequest(problem.message.removeprefix("invalid_request: ")) from problem
    request_uri = new_token(REQUEST_URI_PREFIX)
    await tx.execute(
        "INSERT INTO pushed_requests (uri_hash, app_id, args, created_at, expires_at, used)"
        " VALUES ($1, $2, $3, $4, $5, false)",
        keyring.hash_token(request_uri),
        app.id,
        json.dumps(args),
        now,
        now + catalog.PUSHED_REQUEST_TTL,
    )
    return Pushed(request_uri, int(catalog.PUSHED_REQUEST_TTL))


async def pushed_request(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    client_id: str,
    request_uri: str,
    use: bool,
) -> dict[str, list[str]]:
    """The parameters pushed as ``request_uri`` by the client ``client_id``, used up when
    ``use`` (the signed-in user's visit; a visitor sent to sign in first comes back with the
    same address). RequestExpired when there is none: unknown, older than 60 seconds, used,
    or pushed by another client."""
    row = await tx.fetchrow(
        "SELECT p.*, a.client_id FROM pushed_requests p JOIN apps a ON a.id = p.app_id"
        " WHERE p.uri_hash = $1",
        keyring.hash_token(request_uri),
    )
    if row is None or row["used"] or now >= row["expires_at"] or row["client_id"] != client_id:
        raise RequestExpired()
    if use:
        claimed = await tx.execute(
            "UPDATE pushed_requests SET used = true WHERE uri_hash = $1 AND NOT used",
            row["uri_hash"],
        )
        if not claimed:
            raise RequestExpired()
    args: dict[str, list[str]] = json.loads(row["args"])
    return args


def refuse_unpushed(app: App) -> None:
    """A client registered to push its requests may not start one in the address bar."""
    if requires_pushed_requests(app):
        raise MalformedAuthorizeRequest(
            "invalid_request: this client must push its authorization request first (PAR)"
        )


async def purge_expired_pushed_requests(tx: Transaction, *, now: float) -> int:
    return await tx.execute("DELETE FROM pushed_requests WHERE expires_at <= $1", now)
