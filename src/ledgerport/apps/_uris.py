"""Redirect URI rules of the client record and of dynamic registration."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from ledgerport import catalog


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problems(uris: object) -> list[str]:
    """Everything wrong with a list of redirect URIs; empty when it is acceptable.

    1 to 5 URIs, each at most 512 characters, absolute https (http only on a loopback host),
    no wildcard, no query string, no fragment.
    """
    if not isinstance(uris, Sequence) or isinstance(uris, str):
        return ["redirectUris must be a list of URIs"]
    if not catalog.REDIRECT_URIS_MIN <= len(uris) <= catalog.REDIRECT_URIS_MAX:
        return [
            f"redirectUris must hold {catalog.REDIRECT_URIS_MIN} to "
            f"{catalog.REDIRECT_URIS_MAX} URIs"
        ]
    problems: list[str] = []
    for index, uri in enumerate(uris):
        problem = _uri_problem(uri)
        if problem:
            problems.append(f"redirectUris.{index} {problem}")
    return problems


def _uri_problem(uri: object) -> str | None:
    if not isinstance(uri, str) or not uri:
        return "must be a non-empty string"
    if len(uri) > catalog.URI_MAX_LENGTH:
        return f"must be at most {catalog.URI_MAX_LENGTH} characters"
    if "*" in uri:
        return "must not contain a wildcard"
    if any(ch.isspace() or ord(ch) < 0x20 for ch in uri):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return "must be a valid absolute URI"
    if "#" in uri:
        return "must not have a fragment"
    if parts.query or "?" in uri:
        return "must not have a query string"
    if not host or parts.scheme not in ("https", "http"):
        return "must be an absolute https URI"
    if parts.scheme == "http" and not is_loopback_host(host):
        return "must use https (http only on a loopback address)"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials"
    return None
