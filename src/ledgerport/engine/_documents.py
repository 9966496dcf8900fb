"""The fetch of a client ID metadata document (``auth.DocumentFetch``), made with a webhook's
client: the address each connection goes to is checked as it connects, as a webhook attempt's
is (``webhook_client``: in production only public addresses, and loopback ones for a service
reached on a loopback address; any in development), so a name that resolves elsewhere since it
was written (DNS rebinding) gains nothing. One GET, ``Accept: application/json``, no redirect
followed, the answer read up to ``auth.DOCUMENT_MAX_BYTES`` plus one byte (a longer one is
refused whole by the document's check), all within ``auth.DOCUMENT_FETCH_TIMEOUT`` seconds."""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import httpcore
import trio

from ledgerport import apps, auth
from ledgerport.config import Config

from ._attempt import webhook_client
from ._post import read_head
from ._transport import DELIVERY_ERRORS, TargetRefused, verifying_context

USER_AGENT = b"ledgerport-oauth/1"

_TLS: list[ssl.SSLContext] = []
"""The TLS context document fetches share, made at the first (it reads the CA bundle)."""


def _tls() -> ssl.SSLContext:
    if not _TLS:
        _TLS.append(verifying_context())
    return _TLS[0]


async def fetch_client_document(
    url: str,
    *,
    config: Config,
    resolver: apps.Resolver = apps.resolve,
    ssl_context: ssl.SSLContext | None = None,
    seconds: float = auth.DOCUMENT_FETCH_TIMEOUT,
) -> auth.FetchedDocument:
    """GET the document at ``url`` (already checked by ``auth.client_id_url_problem``);
    ``auth.DocumentUnavailable`` when no answer comes."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    name = apps.normal_host(host) or host
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    port = parts.port
    default = 443 if parts.scheme == "https" else 80
    literal = f"[{name}]" if ":" in name else name
    headers = [
        (b"Host", (literal if port in (None, default) else f"{literal}:{port}").encode("ascii")),
        (b"User-Agent", USER_AGENT),
        (b"Accept", b"application/json"),
        (b"Accept-Encoding", b"identity"),
    ]
    request_url = httpcore.URL(
        scheme=parts.scheme.encode(),
        host=name.encode("ascii"),
        port=port,
        target=target.encode("ascii"),
    )
    client = webhook_client(
        config, max_connections=1, resolver=resolver, ssl_context=ssl_context or _tls()
    )
    try:
        with trio.move_on_after(seconds):
            try:
                async with client.stream(
                    request_url, headers=headers, content=b"", method=b"GET"
                ) as response:
                    body = bytearray()
                    await read_head(response, body, limit=auth.DOCUMENT_MAX_BYTES + 1)
                    cache_control = ", ".join(
                        value.decode("latin-1")
                        for key, value in response.headers
                        if key.lower() == b"cache-control"
                    )
                    return auth.FetchedDocument(
                        status=response.status,
                        body=bytes(body),
                        cache_control=cache_control or None,
                    )
            except TargetRefused:
                raise auth.DocumentUnavailable(
                    f"{host} resolves only to addresses the server may not reach"
                    " (private, loopback, link-local, multicast or reserved)"
                ) from None
            except DELIVERY_ERRORS:
                raise auth.DocumentUnavailable(
                    f"the connection to {host} failed or its answer is not HTTP"
                ) from None
        raise auth.DocumentUnavailable(f"{host} did not answer within {seconds:g} s")
    finally:
        await client.aclose()
