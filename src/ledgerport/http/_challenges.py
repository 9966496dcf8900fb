"""The ``WWW-Authenticate`` challenges of a refused access token: ``Bearer`` (RFC 6750) and
``DPoP`` (RFC 9449 section 7.1), each naming the protected resource's RFC 9728 metadata on the
data API and the MCP server."""

from __future__ import annotations

from collections.abc import Mapping

from quart import has_request_context

from ledgerport import auth, catalog

from ._context import platform, presented_request

_PROTECTED_RESOURCES: Mapping[str | None, str] = {
    "api": catalog.PROTECTED_RESOURCE_PATH,
    "mcp": f"{catalog.PROTECTED_RESOURCE_PATH}/mcp",
}
"""The RFC 9728 metadata of each blueprint that is a protected resource: the data API, and the
MCP server at ``/mcp``."""


def bearer_challenge(_: auth.InvalidAccessToken) -> dict[str, str]:
    """The data API's challenge names its RFC 9728 metadata (``resource_metadata``), so that a
    client that holds no token yet (an MCP client, say) finds the authorization server (the
    MCP server's own metadata names ``{base}/mcp``); the console API's developer tokens are no
    token of either resource, and its challenge names none."""
    return {"WWW-Authenticate": f'Bearer realm="ledgerport"{_resource_metadata()}'}


def _resource_metadata() -> str:
    """The challenge's ``resource_metadata`` auth-param on the data API and the MCP server,
    else nothing."""
    if not has_request_context():
        return ""
    blueprint = presented_request()[2]
    if blueprint in _PROTECTED_RESOURCES:
        base = platform().config.base_url
        return f', resource_metadata="{base}{_PROTECTED_RESOURCES[blueprint]}"'
    return ""


def dpop_challenge(error: auth.DpopRefused) -> dict[str, str]:
    """RFC 9449 section 7.1: a ``DPoP`` challenge naming the error and the accepted
    algorithms; with the nonce to use (``DPoP-Nonce``) when that is what was missing."""
    algs = " ".join(catalog.DPOP_SIGNING_ALGS)
    description = error.message.replace('"', "'")
    headers = {
        "WWW-Authenticate": f'DPoP error="{error.error}", error_description="{description}",'
        f' algs="{algs}"{_resource_metadata()}'
    }
    if error.nonce is not None:
        headers["DPoP-Nonce"] = error.nonce
    return headers
