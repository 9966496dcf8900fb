"""Client authentication at the OAuth endpoints: HTTP Basic or body credentials.

Rules (spec: Client authentication rules): any secret presented must be correct whatever the
client type; a CONFIDENTIAL client must present its secret; a PUBLIC client names itself by
client_id alone; suspended and deactivated apps fail; one request uses one method only.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from ledgerport.apps import App, AppDirectory
from ledgerport.keys import Keyring
from ledgerport.storage import Reader

from ._errors import InvalidClient, InvalidRequest


@dataclass(frozen=True)
class ClientCredentials:
    client_id: str | None
    secret: str | None
    basic: bool  # presented through the Authorization header

    @property
    def has_secret(self) -> bool:
        return self.secret is not None


def parse_credentials(
    authorization: str | None, form: Mapping[str, str], *, allow_body: bool = True
) -> ClientCredentials:
    """Read the client's credentials from the Basic header or (if allowed) the body."""
    body_id = form.get("client_id") or None
    body_secret = form.get("client_secret")
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "basic":
            raise InvalidClient("client authentication must use HTTP Basic", basic=True)
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise InvalidClient("malformed HTTP Basic credentials", basic=True) from exc
        raw_id, sep, raw_secret = decoded.partition(":")
        if not sep or not raw_id:
            raise InvalidClient("malformed HTTP Basic credentials", basic=True)
        client_id, secret = unquote(raw_id), unquote(raw_secret)
        if body_secret is not None:
            raise InvalidRequest("use one client authentication method, not several")
        if body_id is not None and body_id != client_id:
            raise InvalidRequest("client_id differs from the authenticated client")
        return ClientCredentials(client_id, secret, True)
    if not allow_body:
        raise InvalidClient(
            "client credentials are required in the Authorization header", basic=False
        )
    return ClientCredentials(body_id, body_secret if body_secret is not None else None, False)


async def authenticate_client(
    reader: Reader,
    keyring: Keyring,
    credentials: ClientCredentials,
    *,
    allow_inactive: bool = False,
    directory: AppDirectory,
    documents: bool = True,
) -> App:
    """The app the credentials prove, or InvalidClient.

    A suspended or deactivated app fails unless ``allow_inactive`` (introspection answers such an
    app ``{"active": false}`` instead). The app is looked up in ``directory`` (read through
    ``reader`` unless kept there). A client named by its metadata document's URL fails unless
    ``documents`` (LEDGERPORT_CIMD).
    """
    basic = credentials.basic
    if not credentials.client_id:
        raise InvalidClient("client_id is missing", basic=basic)
    app = await directory.find(reader, credentials.client_id)
    if app is None:
        raise InvalidClient("unknown client", basic=basic)
    if app.metadata_document and not documents:
        raise InvalidClient("client ID metadata documents are not accepted here", basic=basic)
    if credentials.secret is not None:
        if app.client_secret_hash is None or not keyring.verify_token(
            credentials.secret, app.client_secret_hash
        ):
            raise InvalidClient("client authentication failed", basic=basic)
    elif app.type == "CONFIDENTIAL":
        raise InvalidClient("client secret is missing", basic=basic)
    if not app.active and not allow_inactive:
        raise InvalidClient("client is suspended or deactivated", basic=basic)
    return app
