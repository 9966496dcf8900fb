"""The headers every answer of the service carries, whatever answers it (``_app``'s last step,
or the MCP server's answer made in front of the application, ``mcp/_front``)."""

from __future__ import annotations

from typing import Final

SECURITY_HEADERS: Final = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
API_CSP: Final = "default-src 'none'; frame-ancestors 'none'"
"""The Content-Security-Policy of an answer that is not a page."""
