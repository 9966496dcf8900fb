"""OAuth endpoints about clients rather than tokens, on the API host: open dynamic
registration (RFC 7591) and each registered client's configuration (RFC 7592), and pushed
authorization requests (RFC 9126). Errors use the OAuth shape, as ``oauth.py``'s do, and every
answer carries ``Cache-Control: no-store``.
"""

from __future__ import annotations

from quart import Blueprint, Response
from quart_schema import security_scheme
from werkzeug.datastructures import MultiDict

from ledgerport import auth, storage
from ledgerport.storage import Transaction

from ._client_documents import prepare_document_client
from ._context import bearer_token, client_ip, platform, unit_of_work
from ._envelopes import NO_STORE as NO_STORE_HEADERS
from ._envelopes import oauth_response
from ._ids import CLIENT
from ._oauth_client import (
    CLIENT_BASIC_OR_BODY,
    CLIENT_GUARDED,
    authenticated_client,
    read_form,
    read_json_object,
)
from ._oauth_guard import oauth_guard
from ._oauth_shapes import (
    ClientInformation,
    ClientMetadata,
    ClientUpdate,
    PushedAuthorizationRequest,
    PushedRequest,
)
from ._openapi import FORM, JSON, NO_STORE, Body, Param, Reply, json_reply, operation

blueprint = Blueprint("oauth_clients", __name__)


async def _document_client(form: MultiDict[str, str]) -> None:
    """A client named by its metadata document's URL is read (kept or fetched) before it
    authenticates, as ``/oauth/authorize`` reads it; a refusal is ``invalid_client``."""
    client_id = form.get("client_id")
    if client_id is None or not auth.is_document_client_id(client_id):
        return
    try:
        await prepare_document_client({"client_id": [client_id]})
    except auth.ClientDocumentRefused as refused:
        reason = refused.message.removeprefix("invalid_client: ")
        raise auth.InvalidClient(reason, basic=False) from refused


@blueprint.post("/oauth/par")
@security_scheme(CLIENT_BASIC_OR_BODY)
@operation(
    json_reply(201, PushedRequest, "The request_uri that stands for the request", *NO_STORE),
    raises=(auth.InvalidScope, auth.InvalidTarget, *CLIENT_GUARDED),
    bodies=(Body(FORM, PushedAuthorizationRequest),),
)
async def push_authorization_request() -> Response:
    """RFC 9126 pushed authorization request: the parameters of ``/oauth/authorize``, checked
    as it checks them, kept for 60 seconds; ``/oauth/authorize?client_id=..&request_uri=..``
    uses them once. A client authenticates as at the token endpoint (a PUBLIC one sends its
    ``client_id``)."""
    form = await read_form()
    await _document_client(form)
    _, app = await authenticated_client("par", form)
    args = {key: form.getlist(key) for key in form if key not in ("client_secret",)}
    p = platform()
    async with unit_of_work() as tx:
        pushed = await auth.push_request(
            tx, p.keyring, now=p.now(), app=app, args=args, api_base_url=p.config.base_url
        )
    return oauth_response({"request_uri": pushed.request_uri, "expires_in": pushed.expires_in}, 201)


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
    answer["registration_client_uri"] = _configuration_uri(answer["client_id"])
    return oauth_response(answer, 201)


_CONFIGURATION = "/oauth/register/<client_id>"
_CLIENT_PARAM = Param(
    "client_id",
    "path",
    "The registered client's id",
    CLIENT.looked_up("401 invalid_token (as a token that configures no client at the address)"),
)
_CONFIGURATION_RAISES = (
    auth.InvalidRegistrationToken,
    auth.RateLimited,
    storage.StorageUnavailable,
)


def _configuration_uri(client_id: str) -> str:
    return f"{platform().config.base_url}/oauth/register/{client_id}"


async def _configured(tx: Transaction, client_id: str) -> auth.ConfiguredClient | None:
    p = platform()
    return await auth.configured_client(tx, p.keyring, client_id=client_id, token=bearer_token())


def _refused() -> auth.InvalidRegistrationToken:
    return auth.InvalidRegistrationToken(
        "the registration access token does not configure this client"
    )


def _information(client: auth.ConfiguredClient) -> Response:
    answer = client.information()
    answer["registration_client_uri"] = _configuration_uri(client.app.client_id)
    return oauth_response(answer)


@blueprint.get(_CONFIGURATION)
@operation(
    json_reply(200, ClientInformation, "The client's registration", *NO_STORE),
    raises=_CONFIGURATION_RAISES,
    params=(_CLIENT_PARAM,),
)
async def read_registration(client_id: str) -> Response:
    """RFC 7592 client read, with the registration access token as a bearer token: the
    client's metadata as registered (never its secret nor the token)."""
    await oauth_guard().configuration(client_ip())
    async with unit_of_work() as tx:
        client = await _configured(tx, client_id)
    if client is None:
        raise _refused()
    return _information(client)


@blueprint.put(_CONFIGURATION)
@operation(
    json_reply(200, ClientInformation, "The client's registration as replaced", *NO_STORE),
    raises=(auth.InvalidRedirectUri, auth.InvalidClientMetadata, *_CONFIGURATION_RAISES),
    bodies=(Body(JSON, ClientUpdate),),
    params=(_CLIENT_PARAM,),
)
async def replace_registration(client_id: str) -> Response:
    """RFC 7592 client update: the metadata replaced as a whole (what is left out takes its
    default, as at registration), checked as a registration is. ``client_id`` is the
    client's; a ``client_secret``, if sent, its current one; a public client stays public."""
    await oauth_guard().configuration(client_ip())
    metadata = await read_json_object()
    p = platform()
    async with unit_of_work() as tx:
        client = await _configured(tx, client_id)
        if client is not None:
            client = await auth.replace_registration(tx, p.keyring, client, metadata)
    if client is None:
        raise _refused()
    return _information(client)


@blueprint.delete(_CONFIGURATION)
@operation(
    Reply(204, "The client is deleted", headers=NO_STORE),
    raises=_CONFIGURATION_RAISES,
    params=(_CLIENT_PARAM,),
)
async def delete_registration(client_id: str) -> Response:
    """RFC 7592 client delete: the client is gone. Its tokens stop working, its client id
    authenticates no more, and the registration access token is revoked."""
    await oauth_guard().configuration(client_ip())
    async with unit_of_work() as tx:
        client = await _configured(tx, client_id)
        if client is not None:
            await auth.delete_registration(tx, client)
    if client is None:
        raise _refused()
    return Response(b"", status=204, headers=NO_STORE_HEADERS)
