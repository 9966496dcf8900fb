"""The delivery client's connections: every address a webhook attempt connects to is checked.

A webhook's client (:class:`DeliveryClient`) keeps httpcore connections, without httpx on top:
httpx's requests, cookies, redirects and response wrapping cost a quarter of an attempt's CPU on
loopback, and an attempt needs none of them (one POST with its own headers, no redirect
followed, no cookie kept, the answer's first bytes read); nor without httpcore's pool on top
(see the class).

A webhook's host is resolved at connection time and each address is checked before it is
connected to, so the address actually used is the one checked: a name that resolved to a public
address at registration and resolves to a private one now (DNS rebinding) is refused. TLS still
verifies the certificate against the URL's host name (httpcore starts TLS with the origin's
host as the server name).

The client uses httpcore's connections without its pool, through methods the pool uses and
httpcore does not document: tests/unit/test_dependency_contracts.py pins what it relies on,
pyproject.toml bounds the release, and docs/upstream/httpcore.md is the report to its
maintainers.
"""

from __future__ import annotations

import ipaddress
import ssl
import typing
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpcore
import httpx
import trio

from ledgerport.apps import Resolver

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
KEEPALIVE_EXPIRY = 30.0
"""Seconds an idle connection to a receiver is kept for the next attempt."""


class TargetRefused(httpcore.ConnectError):
    """The webhook's host resolves only to addresses deliveries may not reach."""


class CuttableStream(httpcore.AsyncNetworkStream):
    """A delivery client's connection, which an attempt can stop reading from
    (:func:`stop_reading`): its reads fail from then on, and the pool never uses it again."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._cut = False

    def cut(self) -> None:
        self._cut = True

    async def read(
        self,
        max_bytes: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
    ) -> bytes:
        if self._cut:
            raise httpcore.ReadError("the answer was read as far as it is kept")
        return await self._inner.read(max_bytes, timeout)

    async def write(
        self,
        buffer: bytes,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
    ) -> None:
        if self._cut:
            raise httpcore.WriteError("the connection was cut")
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        return CuttableStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable" and self._cut:
            return True  # what the pool reads as "not reusable"
        return self._inner.get_extra_info(info)


def stop_reading(response: httpcore.Response) -> bool:
    """Read nothing more of ``response`` from its receiver: what httpcore already received is
    still answered, then the read fails with ``httpcore.ReadError`` and the connection is
    closed. An iteration of the body that ends this way closes every generator httpcore
    iterates it with, where leaving the loop early would leave them to the garbage collector.
    False when the response did not come over a delivery client's connection."""
    network = response.extensions.get("network_stream")
    if not isinstance(network, CuttableStream):
        return False
    network.cut()
    return True


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """trio connections to checked addresses only."""

    def __init__(self, *, allow: Callable[[_IPAddress], bool], resolver: Resolver) -> None:
        self._inner = httpcore.TrioBackend()
        self._allow = allow
        self._resolver = resolver

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                with trio.fail_after(timeout if timeout is not None else float("inf")):
                    addresses = await self._resolver(host, port)
            except (OSError, trio.TooSlowError) as exc:
                raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        allowed = [a for a in addresses if self._allow(ipaddress.ip_address(a.split("%", 1)[0]))]
        if not allowed:
            raise TargetRefused(
                f"{host} resolves only to addresses webhooks may not reach"
                " (private, loopback, link-local, multicast or reserved)"
            )
        failure: httpcore.ConnectError | None = None
        for address in allowed:
            try:
                stream = await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as exc:
                failure = exc
            else:
                return CuttableStream(stream)
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused("webhooks do not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


DELIVERY_ERRORS = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)
"""What an attempt's request can fail with, besides a timeout (``httpcore.TimeoutException``):
no connection, a connection lost or broken, an answer that is not HTTP."""


class DeliveryClient:
    """One webhook's client: its own keep-alive HTTP/1.1 connections to checked addresses, each
    carrying one attempt at a time.

    httpcore's connection pool is not used: on every request and every answer's end it goes
    over all its connections and asks each idle one whether the receiver closed it (a poll of
    the socket), and shields and locks its bookkeeping: a fifth of the served process's CPU
    with 8 connections a webhook under load (docs/performance.md, "The delivery client without
    httpcore's pool"). The engine bounds a webhook's attempts itself, so all this client does
    is hand an attempt the connection used last (the least likely to have been closed by the
    receiver's own keep-alive timeout), after the one check httpcore's pool makes too, and
    take it back when the answer ended cleanly.

    ``ssl_context`` (from :func:`verifying_context`) is shared: building one reads the CA
    bundle, tens of ms."""

    def __init__(
        self,
        *,
        max_connections: int,
        allow: Callable[[_IPAddress], bool],
        resolver: Resolver,
        ssl_context: ssl.SSLContext,
    ) -> None:
        self._max_idle = max_connections
        self._backend = GuardedBackend(allow=allow, resolver=resolver)
        self._ssl_context = ssl_context
        self._idle: list[httpcore.AsyncHTTPConnection] = []
        """Connections no attempt is using, the last used at the end."""
        self._closed = False

    async def _connection(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        """The last used idle connection to ``origin`` still open, else a new one (connected
        by its first request); the idle connections passed over are closed."""
        while self._idle:
            connection = self._idle.pop()
            if connection.can_handle_request(origin) and not connection.has_expired():
                return connection
            await _close(connection)
        return httpcore.AsyncHTTPConnection(
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=KEEPALIVE_EXPIRY,
            http1=True,
            http2=False,
            network_backend=self._backend,
        )

    @asynccontextmanager
    async def stream(
        self,
        method: bytes | str,
        url: httpcore.URL,
        *,
        headers: list[tuple[bytes, bytes]],
        content: bytes,
        extensions: dict[str, typing.Any],
    ) -> AsyncIterator[httpcore.Response]:
        """The answer to one request, on a connection of its own until the block is left."""
        if self._closed:
            raise RuntimeError("the delivery client is closed")
        connection = await self._connection(url.origin)
        request = httpcore.Request(
            method, url, headers=headers, content=content, extensions=extensions
        )
        try:
            response = await connection.handle_async_request(request)
        except BaseException:
            await _close(connection)
            raise
        try:
            yield response
        finally:
            with trio.CancelScope(shield=True):
                await response.aclose()
                if connection.is_idle() and not self._closed and len(self._idle) < self._max_idle:
                    self._idle.append(connection)
                else:
                    await connection.aclose()

    async def aclose(self) -> None:
        """Close the idle connections; one still in use is closed when its answer ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await _close(connection)


async def _close(connection: httpcore.AsyncHTTPConnection) -> None:
    with trio.CancelScope(shield=True):
        await connection.aclose()


def verifying_context() -> ssl.SSLContext:
    """The TLS context every delivery client uses: certificates verified against the CA
    bundle httpx uses, host names checked."""
    return httpx.create_ssl_context()
