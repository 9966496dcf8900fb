"""The routes of the MCP server: ``POST /mcp`` and its RFC 9728 protected resource metadata."""

from __future__ import annotations

from typing import Final

from pydantic import ConfigDict, with_config
from quart import Blueprint, Response
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import auth, catalog, storage

from .._context import platform
from .._envelopes import oauth_response
from .._oauth_shapes import ProtectedResourceMetadata
from .._openapi import JSON, NO_STORE, Body, Reply, json_reply, operation
from ..api._auth import RATE_LIMIT_HEADERS
from ._server import serve_mcp

MCP_PATH: Final = "/mcp"
METADATA_PATH: Final = f"{catalog.PROTECTED_RESOURCE_PATH}{MCP_PATH}"

blueprint = Blueprint("mcp", __name__)


@with_config(ConfigDict(extra="allow"))
class JsonRpcMessage(TypedDict):
    """A JSON-RPC 2.0 message of the Model Context Protocol (``initialize``,
    ``tools/list``, ``tools/call``, a notification): see docs/mcp.md."""

    jsonrpc: str


@blueprint.post(MCP_PATH)
@security_scheme([{"accessToken": []}])
@operation(
    json_reply(
        200, JsonRpcMessage, "The JSON-RPC answer: a result or an error", *RATE_LIMIT_HEADERS
    ),
    Reply(202, "A notification, accepted", None, None, RATE_LIMIT_HEADERS),
    json_reply(400, JsonRpcMessage, "Not a JSON-RPC message of the protocol"),
    json_reply(406, JsonRpcMessage, "The Accept header does not accept application/json"),
    json_reply(415, JsonRpcMessage, "The body is not sent as application/json"),
    raises=(
        auth.RateLimited,
        auth.InvalidAccessToken,
        auth.CrossSiteRequest,
        storage.StorageUnavailable,
    ),
    bodies=(Body(JSON, JsonRpcMessage),),
)
async def mcp() -> Response:
    """The Model Context Protocol over Streamable HTTP (stateless, JSON answers; no session
    and no GET stream): one JSON-RPC message a request. Its tools are the data API's list, get
    and create of every business area and the Events API (``list_customers``, ``get_invoice``,
    ``create_customer``, ``list_events``), each refused as the data API would refuse the same
    call; a 401 names ``/.well-known/oauth-protected-resource/mcp``. A browser page of another
    origin than the service's is refused (403, its ``Origin`` checked against DNS rebinding)."""
    return await serve_mcp()


@blueprint.get(METADATA_PATH)
@operation(json_reply(200, ProtectedResourceMetadata, "The MCP server's metadata", *NO_STORE))
async def protected_resource() -> Response:
    """RFC 9728 protected resource metadata of the MCP server: the resource ``{base}/mcp``,
    this server as its authorization server, the data API's scopes, the ``Authorization``
    header as the way to present a token, and the DPoP proofs' algorithms (a DPoP-bound token
    is presented as ``Authorization: DPoP`` with a proof, as to the data API)."""
    base = platform().config.base_url
    metadata: ProtectedResourceMetadata = {
        "resource": f"{base}{MCP_PATH}",
        "authorization_servers": [base],
        "scopes_supported": list(catalog.SCOPES),
        "bearer_methods_supported": ["header"],
        "dpop_signing_alg_values_supported": list(catalog.DPOP_SIGNING_ALGS),
    }
    return oauth_response(metadata)
