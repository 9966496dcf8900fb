"""Client ID metadata documents: a ``client_id`` that is an ``https://`` URL names a public client
whose metadata the server fetches from that URL (contract.md, third round: "Agents as partner
apps"; draft-ietf-oauth-client-id-metadata-document).

- The URL: at most 512 characters, ``https://`` with a host and a path, no fragment, user name,
  password, or ``.`` and ``..`` path segments; with ``LEDGERPORT_ENV=development`` also
  ``http://`` on a loopback host.
- The fetch (``DocumentFetch``, the webhook engine's client: every address it connects to is
  checked as a webhook's is) answers at most ``DOCUMENT_MAX_BYTES`` within
  ``DOCUMENT_FETCH_TIMEOUT`` seconds, status 200, no redirect followed.
- The document: a JSON object whose ``client_id`` is the URL exactly, with ``redirect_uris`` (a
  non-empty list of redirect URIs as an app registers them), an optional ``client_name``, no
  ``client_secret``, and ``token_endpoint_auth_method`` ``none`` if given: such a client is public.
- Kept by its HTTP caching headers (``client_metadata_documents``): ``no-store`` or ``no-cache``
  keeps nothing (the next request fetches again); otherwise ``max-age`` seconds (``s-maxage``
  is for shared caches and not read), bounded to ``DOCUMENT_KEPT_MIN``..``DOCUMENT_KEPT_MAX``,
  ``DOCUMENT_KEPT_MIN`` when none is given. ``Expires`` is not read.
- The client is an app row (``apps``) whose ``client_id`` is the URL, type PUBLIC, not reviewed,
  no developer, its scopes those ``LEDGERPORT_CIMD_SCOPES`` allows; it is made at the first
  authorization request and brought up to date with each document fetched, so that the consent,
  code, token and data API paths read it as any app.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ledgerport import catalog
from ledgerport.apps import APPS_CHANNEL, App, find_app_by_client_id, is_loopback_host
from ledgerport.apps import redirect_uri_problems as _redirect_uri_problems
from ledgerport.ids import new_id
from ledgerport.storage import Reader, Transaction

from ._errors import AuthorizeProblem

DOCUMENT_MAX_BYTES = 5 * 1024
"""Bytes a metadata document may take at most."""
DOCUMENT_FETCH_TIMEOUT = 5.0
"""Seconds a document's fetch may take, connection and answer."""
DOCUMENT_KEPT_MIN = 60.0
"""Seconds a fetched document is kept at least (unless its answer says no-store or no-cache)."""
DOCUMENT_KEPT_MAX = 24 * 3600.0
"""Seconds a fetched document is kept at most, whatever its max-age."""
CLIENT_NAME_MAX = 100
"""Characters of ``client_name`` shown at most."""


@dataclass(frozen=True)
class FetchedDocument:
    """What a document's fetch answered."""

    status: int
    body: bytes
    cache_control: str | None


DocumentFetch = Callable[[str], Awaitable[FetchedDocument]]
"""Fetches the document at a URL; raises ``DocumentUnavailable`` when it cannot."""


class DocumentUnavailable(Exception):
    """The document could not be fetched; the message says why (the host, never a body)."""


class ClientDocumentRefused(AuthorizeProblem):
    """A metadata document client refused at the authorization endpoint."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"invalid_client: {reason}")


class ScopeBeyondPolicy(AuthorizeProblem):
    """A metadata document client asked for a scope the operator does not allow it."""

    def __init__(self, scope: str) -> None:
        super().__init__(
            f"invalid_scope: a client ID metadata document client may not ask for {scope}"
        )


def is_document_client_id(client_id: str) -> bool:
    """Whether ``client_id`` names a client by its metadata document's URL (any http(s) URL:
    whether it is an acceptable one is :func:`client_id_url_problem`'s)."""
    return client_id.startswith(("https://", "http://"))


def client_id_url_problem(client_id: str, *, development: bool) -> str | None:
    """What is wrong with ``client_id`` as a metadata document's URL, or None."""
    if len(client_id) > catalog.URI_MAX_LENGTH:
        return f"the client_id URL must be at most {catalog.URI_MAX_LENGTH} characters"
    try:
        parts = urlsplit(client_id)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return "the client_id URL cannot be read"
    host = parts.hostname or ""
    if parts.scheme == "http":
        if not (development and is_loopback_host(host)):
            return "the client_id URL must use https"
    elif parts.scheme != "https":
        return "the client_id URL must use https"
    if not host:
        return "the client_id URL has no host"
    if parts.username is not None or parts.password is not None:
        return "the client_id URL must not hold a user name or password"
    if "#" in client_id:
        return "the client_id URL must not hold a fragment"
    if not parts.path or parts.path == "/":
        return "the client_id URL must have a path"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "the client_id URL must not hold . or .. segments"
    if any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in client_id):
        return "the client_id URL must not hold spaces or control characters"
    return None


def kept_for(cache_control: str | None) -> float:
    """Seconds a document answered with ``cache_control`` is kept: 0 for no-store or
    no-cache, else its max-age bounded to DOCUMENT_KEPT_MIN..DOCUMENT_KEPT_MAX."""
    max_age: float | None = None
    for directive in (cache_control or "").split(","):
        name, _, value = directive.strip().partition("=")
        name = name.strip().lower()
        if name in ("no-store", "no-cache"):
            return 0.0
        if name == "max-age":
            try:
                max_age = float(int(value.strip().strip('"')))
            except ValueError:
                max_age = None
    if max_age is None:
        return DOCUMENT_KEPT_MIN
    return min(max(max_age, DOCUMENT_KEPT_MIN), DOCUMENT_KEPT_MAX)


@dataclass(frozen=True)
class ClientDocument:
    """A metadata document, checked."""

    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]
    raw: dict[str, object]


def read_document(client_id: str, body: bytes) -> ClientDocument:
    """The document ``body`` fetched from ``client_id``, checked; ClientDocumentRefused
    otherwise."""
    if len(body) > DOCUMENT_MAX_BYTES:
        raise ClientDocumentRefused(
            f"the metadata document is larger than {DOCUMENT_MAX_BYTES} bytes"
        )
    try:
        raw = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ClientDocumentRefused("the metadata document is not JSON") from None
    if not isinstance(raw, dict):
        raise ClientDocumentRefused("the metadata document is not a JSON object")
    if raw.get("client_id") != client_id:
        raise ClientDocumentRefused("the metadata document's client_id is not its URL")
    uris = raw.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise ClientDocumentRefused("the metadata document must list redirect_uris")
    problems = _redirect_uri_problems(list(uris))
    if problems:
        raise ClientDocumentRefused(f"the metadata document's {problems[0]}")
    if "client_secret" in raw:
        raise ClientDocumentRefused("the metadata document must not hold a client_secret")
    method = raw.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise ClientDocumentRefused(
            "the metadata document's token_endpoint_auth_method must be none"
        )
    name = raw.get("client_name")
    host = urlsplit(client_id).hostname or client_id
    shown = name.strip()[:CLIENT_NAME_MAX] if isinstance(name, str) and name.strip() else host
    return ClientDocument(client_id, shown, tuple(dict.fromkeys(uris)), raw)


async def kept_document(reader: Reader, client_id: str, *, now: float) -> ClientDocument | None:
    """The document kept for ``client_id`` and still fresh at ``now``, if any."""
    row = await reader.fetchrow(
        "SELECT document, expires_at FROM client_metadata_documents WHERE client_id = $1",
        client_id,
    )
    if row is None or now >= row["expires_at"]:
        return None
    return read_document(client_id, row["document"].encode())


async def fetch_document(fetch: DocumentFetch, client_id: str) -> tuple[ClientDocument, float]:
    """Fetch and check the document at ``client_id``; answers it and the seconds to keep it."""
    try:
        answer = await fetch(client_id)
    except DocumentUnavailable as exc:
        raise ClientDocumentRefused(f"the metadata document cannot be fetched: {exc}") from None
    if answer.status != 200:
        raise ClientDocumentRefused(
            f"the metadata document's URL answered {answer.status}, not 200"
        )
    return read_document(client_id, answer.body), kept_for(answer.cache_control)


async def keep_document(
    tx: Transaction, document: ClientDocument, *, now: float, seconds: float
) -> None:
    """Keep ``document`` for ``seconds`` (none kept, and any older one dropped, for 0)."""
    if seconds <= 0:
        await tx.execute(
            "DELETE FROM client_metadata_documents WHERE client_id = $1", document.client_id
        )
        return
    await tx.execute(
        "INSERT INTO client_metadata_documents (client_id, document, fetched_at, expires_at)"
        " VALUES ($1, $2, $3, $4) ON CONFLICT (client_id) DO UPDATE SET"
        " document = excluded.document, fetched_at = excluded.fetched_at,"
        " expires_at = excluded.expires_at",
        document.client_id,
        json.dumps(document.raw, separators=(",", ":"), ensure_ascii=False),
        now,
        now + seconds,
    )


async def document_app(
    tx: Transaction, document: ClientDocument, *, now: float, scopes: Sequence[str]
) -> App:
    """The app row of ``document``'s client, made or brought up to date (name, redirect URIs,
    the scopes the operator allows)."""
    app = await find_app_by_client_id(tx, document.client_id)
    redirect_uris = json.dumps(list(document.redirect_uris))
    scope_list = json.dumps(list(scopes))
    if app is None:
        await tx.execute(
            "INSERT INTO apps (id, client_id, name, type, client_secret_hash, redirect_uris,"
            " scopes, developer_user_id, reviewed, status, app_url, created_at, registration)"
            " VALUES ($1, $2, $3, 'PUBLIC', NULL, $4, $5, NULL, false, 'ACTIVE', NULL, $6, NULL)"
            " ON CONFLICT (client_id) DO NOTHING",
            new_id("app"),
            document.client_id,
            document.client_name,
            redirect_uris,
            scope_list,
            now,
        )
    elif (
        app.name != document.client_name
        or app.redirect_uris != document.redirect_uris
        or app.scopes != tuple(scopes)
    ):
        await tx.execute(
            "UPDATE apps SET name = $1, redirect_uris = $2, scopes = $3 WHERE id = $4",
            document.client_name,
            redirect_uris,
            scope_list,
            app.id,
        )
    else:
        return app
    await tx.notify(APPS_CHANNEL)
    found = await find_app_by_client_id(tx, document.client_id)
    assert found is not None
    return found


async def purge_expired_documents(tx: Transaction, *, now: float) -> int:
    return await tx.execute("DELETE FROM client_metadata_documents WHERE expires_at <= $1", now)
