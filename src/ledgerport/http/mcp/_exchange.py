"""A ``tools/call`` answered in the request's own task, by the SDK's single-exchange driver.

The SDK's stateless Streamable HTTP transport serves a request of the handshake era (protocol
versions up to 2025-11-25) through a message loop of its own: a transport, memory streams, a
task for the server and one for the request, for every POST. In JSON mode, with no session and
no back channel, what that loop does for a request is what ``mcp.server.runner.serve_one``
does in the caller's task, the driver the SDK's own 2026-07-28 entry uses: the per-version
validation of the method's params, the server's middleware and handler, the result's wire
form. So a ``tools/call`` (the request an agent makes over and over) is answered that way,
and every other message (``initialize``, ``tools/list``, notifications, anything malformed,
the 2026-07-28 era) goes through the transport as the SDK serves it.

A successful tool result made here (``tool_result``) carries the data API's JSON as it was
written, by reference: it goes through the runner's result check as an empty object and an
empty text, and ``answer`` writes the body into both places of the checked result. The check
would otherwise read a page of records into models and dump them again, for a body the data
API has already checked against the same declaration the tool's output schema is made of.

What is relied on, with the SDK's version pinned in pyproject.toml, is named by
``tests/unit/test_dependency_contracts.py::test_mcp_*``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import orjson
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_one
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError, JSONRPCRequest, RequestId
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from werkzeug.datastructures import Headers

PROTOCOL_VERSION_HEADER: Final = "mcp-protocol-version"
_TRANSPORT: Final = TransportContext(kind="streamable-http", can_send_request=False)
_BODIES: ContextVar[list[bytes] | None] = ContextVar("ledgerport_mcp_bodies", default=None)
"""The bodies of the tool results made during ``answer``'s exchange, to be written in."""


@dataclass
class _OneExchange:
    """The dispatch context of one request answered in JSON: no back channel (a server's
    request to the client has nowhere to go), and notifications have no wire (the SDK's JSON
    mode answers a request's own response only)."""

    request_id: RequestId
    transport: TransportContext = _TRANSPORT
    message_metadata: None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        return None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


def tool_result(body: bytes) -> dict[str, Any]:
    """A successful tool result of the data API's JSON object ``body``: its structured content,
    and the same JSON as text for the clients that read only text, in the result's wire form.

    Within ``answer`` the body stands in by reference, written into the result once checked.
    The line end the data API ends its body with is left out."""
    body = body.removesuffix(b"\n")
    bodies = _BODIES.get()
    if bodies is None:
        structured, text = orjson.loads(body), body.decode()
    else:
        bodies.append(body)
        structured, text = {}, ""
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": False,
        "resultType": "complete",
    }


def _written_in(result: dict[str, Any], bodies: list[bytes]) -> dict[str, Any]:
    """``result`` as checked by the runner with the body of its ``tool_result`` written in: the
    text, and the structured content where the protocol version has it."""
    if not bodies:
        return result
    (body,) = bodies
    content = result["content"][0]
    if content != {"type": "text", "text": ""}:
        raise AssertionError(f"a tool result's text in an unexpected place: {content!r}")
    result["content"] = [{"type": "text", "text": body.decode()}, *result["content"][1:]]
    if "structuredContent" in result:
        result["structuredContent"] = orjson.Fragment(body)
    return result


def tool_call_of(raw: bytes, headers: Headers) -> tuple[JSONRPCRequest, str] | None:
    """The request and its protocol version when ``raw`` is a ``tools/call`` this module
    answers: JSON asked for and sent, a handshake-era version named, one JSON-RPC request;
    None for anything the SDK's transport is to answer."""
    version = headers.get(PROTOCOL_VERSION_HEADER)
    if version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    accept = headers.get("accept", "")
    if "application/json" not in accept and "*/*" not in accept:
        return None
    if headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return None
    try:
        message = JSONRPCRequest.model_validate_json(raw)
    except ValidationError:
        return None
    if message.method != "tools/call":
        return None
    return message, version


async def answer(server: Server[Any], message: JSONRPCRequest, version: str) -> bytes:
    """The JSON-RPC answer to ``message``, as the SDK's transport would write it."""
    connection = Connection.from_envelope(version, None, None)
    bodies: list[bytes] = []
    token = _BODIES.set(bodies)
    try:
        result = await serve_one(
            server,
            _OneExchange(message.id),
            message.method,
            message.params,
            connection=connection,
            lifespan_state={},
        )
    except Exception as exc:
        error = handler_exception_to_error_data(exc)
        if error is None:
            raise
        failed = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        return failed.model_dump_json(by_alias=True, exclude_unset=True).encode()
    finally:
        _BODIES.reset(token)
    # The result is already the wire form (the runner dumps it in pydantic's JSON mode): orjson
    # writes the response the SDK's ``JSONRPCResponse`` would, without walking it once more.
    result = _written_in(result, bodies)
    return orjson.dumps({"jsonrpc": "2.0", "id": message.id, "result": result})
