"""ASGI scopes of HTTP requests, as hypercorn makes them, for tests that call an application or a
wrapper directly."""

from __future__ import annotations

from typing import Any


def http_scope(method: str = "GET", path: str = "/", **fields: Any) -> dict[str, Any]:
    """The scope of an HTTP/1.1 request ``method path`` from a loopback client, with ``fields``
    (its headers, query string, addresses) in place of those given here."""
    return {
        "type": "http",
        "http_version": "1.1",
        "asgi": {"spec_version": "2.1"},
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "extensions": {},
        "state": {},
    } | fields
