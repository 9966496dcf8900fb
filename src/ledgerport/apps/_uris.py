"""URL rules of the client record: redirect URIs, and the web pages an app names (its App URL,
and at registration its client, logo, terms and policy pages)."""

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
        problem = _url_problem(uri, redirect=True)
        if problem:
            problems.append(f"redirectUris.{index} {problem}")
    return problems


def web_url_problem(url: object) -> str | None:
    """What is wrong with a web page URL an app names, or None: an absolute https URL (http
    only on a loopback host) of at most 512 characters, with a valid port, without spaces,
    control characters or credentials."""
    return _url_problem(url, redirect=False)


def _url_problem(uri: object, *, redirect: bool) -> str | None:
    if not isinstance(uri, str) or not uri:
        return "must be a non-empty string"
    if len(uri) > catalog.URI_MAX_LENGTH:
        return f"must be at most {catalog.URI_MAX_LENGTH} characters"
    if redirect and "*" in uri:
        return "must not contain a wildcard"
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a malformed or out-of-range port
    except ValueError:
        return "must be a valid absolute URI"
    if redirect and "#" in uri:
        return "must not have a fragment"
    if redirect and (parts.query or "?" in uri):
        return "must not have a query string"
    if not host or parts.scheme not in ("https", "http"):
        return "must be an absolute https URI"
    if parts.scheme == "http" and not is_loopback_host(host):
        return "must use https (http only on a loopback address)"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials"
    return None
