"""A hosted function's way to other services: ``context.fetch``, made by the engine, with the
app's secrets put on the request as it leaves (contract.md, third round: "Hosted functions:
secrets, outbound fetch, schedules").

The sandbox has no network. A guest's fetch comes out of its worker as a frame with the method,
URL, headers and body as the guest wrote them, and :class:`Egress` makes it here, for the run
going on, or refuses it with an error that names the host and nothing else:

- at most FUNCTION_FETCHES_PER_RUN_MAX a run (a refused one counts), FETCHES_AT_ONCE of a run
  at once, all within the run's wall limit (the answer not read by then is abandoned);
- to a host the function's ``allowedHosts`` lists (``apps.host_allowed``), over ``https``; in
  development a listed loopback host over ``http`` too. No user name or password in the URL;
  ``CONNECT`` and ``TRACE`` are refused (one tunnels, the other echoes the request's headers);
- the address a name resolves to is checked as the connection is made, by the webhook engine's
  ``GuardedBackend``: a name that resolves elsewhere since (DNS rebinding) gains nothing;
- redirects are not followed: a 3xx answer is the guest's, with its ``Location``, and a fetch
  there is a fetch of its own, checked as any other, so an injected header never follows a
  redirect to another host;
- the answer is read up to FUNCTION_FETCH_ANSWER_MAX_BYTES; a longer one is refused whole.

Secrets: each run gets a placeholder per secret of its app, drawn for it (:meth:`Egress.open`);
that is all the guest ever holds. Only once a fetch has passed every check above, and only in
its header values, is each of the run's placeholders replaced by the secret's value, opened
from its sealed form just then; the URL and the body go as written, placeholder and all, and so
does anything the guest logs, returns or sends to the data API. A refused fetch opens nothing,
so how long it takes says nothing of any secret. An exception's own text never reaches the
guest or the log (a protocol error may quote what was sent): the errors are this module's.

Each fetch, answered or refused, is told in the run's log by the platform: method, host,
status or refusal, time; never a header.

While a run has a fetch under way it is taken to wait on the network: ``waiting`` tells the
runner, whose book then lends the run's share of the CPU to another run, on a spare worker
(``engine/_run_book.py``).
"""

from __future__ import annotations

import functools
import re
import secrets
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpcore
import trio

from ledgerport import apps, catalog
from ledgerport.keys import Keyring
from ledgerport.ops import Metrics
from ledgerport.runtime import FetchAnswer, FetchCall, RunRequest

from ._post import read_head
from ._transport import DELIVERY_ERRORS, DeliveryClient, TargetRefused, verifying_context

ANSWER_MAX = catalog.FUNCTION_FETCH_ANSWER_MAX_BYTES
CLIENTS_KEPT = 64
"""Origins whose idle connections are kept for the next fetch there (the least recent go)."""
FETCHES_AT_ONCE = 8
"""Fetches of one run in flight at once: the next waits for one to end."""
REQUEST_BODY_MAX_BYTES = 1024 * 1024
"""Bytes of a fetch's body at most (UTF-8)."""
HEADERS_MAX = 50
"""Headers a fetch may send at most."""
HEADER_VALUE_MAX = 8192
"""Characters of one header's value at most, secrets put in."""
URL_MAX = 8192
"""Characters of a fetch's URL at most."""
USER_AGENT = "ledgerport-functions/1"
"""What a fetch says it is, unless the guest says otherwise."""
PLACEHOLDER_PREFIX = "lpsecret_"
_PLACEHOLDER = re.compile(PLACEHOLDER_PREFIX + r"[0-9a-f]{32}")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\t\x20-\x7e]*")
_URL_TEXT = re.compile(r"[\x21-\x7e]+")
_NOT_HOST = re.compile(r"[^a-z0-9.:\[\]_-]")
_REFUSED_METHODS = frozenset({"CONNECT", "TRACE"})
_REFUSED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "accept-encoding",
    }
)


class _Refused(Exception):
    """A fetch refused or failed: its message is what the guest and the log read."""


@dataclass
class _RunEgress:
    """What one run may fetch, and what it fetched."""

    allowed_hosts: tuple[str, ...]
    secrets: dict[str, apps.SealedSecret]
    """The run's secrets by placeholder."""
    fetches: int = 0
    in_flight: int = 0
    """Its fetches under way (made, not yet answered)."""
    at_once: trio.Semaphore = field(default_factory=lambda: trio.Semaphore(FETCHES_AT_ONCE))


@dataclass(frozen=True)
class _Target:
    method: bytes
    url: httpcore.URL
    host: str


class Egress:
    """The fetches of the runs going on (see the module docstring). ``note(run_id, text, at,
    after)`` tells a run's log as the platform, ``at`` milliseconds after its handler was called
    and after its first ``after`` lines; ``deadlines`` are the runs' wall deadlines (trio's
    clock), by run id."""

    def __init__(
        self,
        *,
        keyring: Keyring,
        note: Callable[[str, str, int, int], None],
        deadlines: Mapping[str, float],
        development: bool,
        loopback: bool,
        resolver: apps.Resolver = apps.resolve,
        metrics: Metrics | None = None,
        ssl_context: ssl.SSLContext | None = None,
        waiting: Callable[[str, bool], None] = lambda run_id, waiting: None,
    ) -> None:
        self._keyring = keyring
        self._waiting = waiting
        self._note_to = note
        self._deadlines = deadlines
        self._development = development
        self._metrics = metrics
        self._allow = (
            (lambda _address: True)
            if development
            else functools.partial(apps.address_allowed, loopback=loopback)
        )
        self._resolver = resolver
        self._ssl_context = ssl_context or verifying_context()
        self._clients: OrderedDict[tuple[bytes, bytes, int], DeliveryClient] = OrderedDict()
        """A keep-alive client per origin fetched from lately, the least recent first."""
        self._runs: dict[str, _RunEgress] = {}

    def open(
        self,
        run_id: str,
        *,
        allowed_hosts: tuple[str, ...],
        secrets_by_name: Mapping[str, apps.SealedSecret],
    ) -> dict[str, str]:
        """The run starts: answers the placeholder of each secret by name, drawn for it."""
        placeholders = {
            name: PLACEHOLDER_PREFIX + secrets.token_hex(16) for name in secrets_by_name
        }
        self._runs[run_id] = _RunEgress(
            allowed_hosts,
            {placeholders[name]: sealed for name, sealed in secrets_by_name.items()},
        )
        return placeholders

    def close(self, run_id: str) -> None:
        """The run ended: its placeholders mean nothing from now on."""
        self._runs.pop(run_id, None)

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            await client.aclose()

    async def _client(self, url: httpcore.URL) -> DeliveryClient:
        """The keep-alive client of ``url``'s origin: the webhook engine's, each of its
        connections to an address checked as it connects. CLIENTS_KEPT origins at most keep
        theirs."""
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == b"https" else 80))
        client = self._clients.get(origin)
        if client is not None:
            self._clients.move_to_end(origin)
            return client
        client = DeliveryClient(
            max_connections=FETCHES_AT_ONCE,
            allow=self._allow,
            resolver=self._resolver,
            ssl_context=self._ssl_context,
        )
        self._clients[origin] = client
        while len(self._clients) > CLIENTS_KEPT:
            _, oldest = self._clients.popitem(last=False)
            await oldest.aclose()
        return client

    async def fetch(self, request: RunRequest, call: FetchCall) -> FetchAnswer:
        """Make the fetch ``call`` of the run ``request``, or say why not."""
        run = self._runs.get(request.run_id)
        if run is None:
            return FetchAnswer(error="context.fetch: the run has ended")
        started = time.perf_counter()
        host = _host_of(call.url)
        method = _shown_method(call.method)
        run.fetches += 1
        if run.fetches > catalog.FUNCTION_FETCHES_PER_RUN_MAX:
            if run.fetches == catalog.FUNCTION_FETCHES_PER_RUN_MAX + 1:
                self._note(
                    request, call, started, f"fetch {method} {host}: refused, and every later fetch"
                )
            self._count("refused")
            return FetchAnswer(
                error=f"context.fetch: at most {catalog.FUNCTION_FETCHES_PER_RUN_MAX} fetches a run"
            )
        try:
            target = self._target(call, run)
            headers, content = self._request(call, target, run)
            async with run.at_once:
                answer = await self._waiting_for(request.run_id, run, target, headers, content)
        except _Refused as refused:
            message = str(refused)
            self._note(request, call, started, f"fetch {method} {host}: {message} ({_ms(started)})")
            self._count("refused" if "refused" in message else "failed")
            return FetchAnswer(error=f"context.fetch to {host}: {message}")
        self._note(
            request, call, started, f"fetch {method} {host}: {answer.status} ({_ms(started)})"
        )
        self._count("answered")
        return answer

    async def _waiting_for(
        self,
        run_id: str,
        run: _RunEgress,
        target: _Target,
        headers: list[tuple[bytes, bytes]],
        content: bytes,
    ) -> FetchAnswer:
        """The fetch's answer; while a run has one under way it is said to wait on the
        network (``waiting``), which gives its share of the CPU to another run."""
        run.in_flight += 1
        if run.in_flight == 1:
            self._waiting(run_id, True)
        try:
            return await self._send(run_id, target, headers, content)
        finally:
            run.in_flight -= 1
            if run.in_flight == 0:
                self._waiting(run_id, False)

    def _note(self, request: RunRequest, call: FetchCall, started: float, note: str) -> None:
        """Tell the run's log ``note`` as the fetch ends: after the lines the guest had logged
        when it called, and on its clock the time it called plus the whole milliseconds the
        fetch took (never later than a line it logs once answered)."""
        took = int((time.perf_counter() - started) * 1000)
        self._note_to(request.run_id, note, call.at + took, call.lines)

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.function_fetches.labels(outcome).inc()

    def _target(self, call: FetchCall, run: _RunEgress) -> _Target:
        """Where the fetch goes, once every rule about it holds."""
        method = call.method.upper()
        if not _TOKEN.fullmatch(method) or len(method) > 16:
            raise _Refused("refused: the method is not an HTTP method")
        if method in _REFUSED_METHODS:
            raise _Refused(f"refused: {method} is not allowed")
        if len(call.url) > URL_MAX:
            raise _Refused(f"refused: a URL longer than {URL_MAX} characters")
        if not _URL_TEXT.fullmatch(call.url):
            raise _Refused("refused: the URL is not a URL without spaces or control characters")
        try:
            parts = urlsplit(call.url)
            port = parts.port
        except ValueError:
            raise _Refused("refused: the URL cannot be read") from None
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("https", "http") or not host:
            raise _Refused("refused: only https:// URLs may be fetched")
        if parts.username is not None or parts.password is not None:
            raise _Refused("refused: a URL with a user name or password")
        if not apps.host_allowed(host, run.allowed_hosts):
            raise _Refused("refused: the host is not in the function's allowedHosts")
        if parts.scheme == "http" and not (self._development and apps.is_loopback_host(host)):
            raise _Refused(
                "refused: only https:// (http:// only to a loopback host, in development)"
            )
        name = apps.normal_host(host) or host
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        url = httpcore.URL(
            scheme=parts.scheme.encode(),
            host=name.encode("ascii"),
            port=port,
            target=target.encode("ascii"),
        )
        return _Target(method.encode("ascii"), url, name)

    def _request(
        self, call: FetchCall, target: _Target, run: _RunEgress
    ) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """The request's headers, the run's secrets put in their values, and its body."""
        if len(call.headers) > HEADERS_MAX:
            raise _Refused(f"refused: more than {HEADERS_MAX} headers")
        content = (call.body or "").encode("utf-8", "replace")
        if len(content) > REQUEST_BODY_MAX_BYTES:
            raise _Refused(f"refused: a body larger than {REQUEST_BODY_MAX_BYTES} bytes")
        port = target.url.port
        default = 443 if target.url.scheme == b"https" else 80
        literal = b"[%b]" % target.url.host if b":" in target.url.host else target.url.host
        host = literal if port in (None, default) else b"%b:%d" % (literal, port)
        headers = [(b"Host", host)]
        given: set[str] = set()
        # Every rule that needs no secret first: a refused fetch opens none.
        for name, _ in call.headers:
            lower = name.lower()
            if not _TOKEN.fullmatch(name) or len(name) > 256:
                raise _Refused("refused: a header name that is not an HTTP token")
            if lower in _REFUSED_HEADERS or lower.startswith("proxy-"):
                raise _Refused("refused: a header the engine sets itself or may not send")
            given.add(lower)
        for name, value in call.headers:
            sent = self._with_secrets(value, run)
            if len(sent) > HEADER_VALUE_MAX or not _VALUE.fullmatch(sent):
                raise _Refused(
                    "refused: a header value that cannot be sent (visible ASCII, spaces and tabs,"
                    f" at most {HEADER_VALUE_MAX} characters)"
                )
            headers.append((name.encode("ascii"), sent.encode("ascii")))
        if "user-agent" not in given:
            headers.append((b"User-Agent", USER_AGENT.encode()))
        headers.append((b"Accept-Encoding", b"identity"))
        if content or call.method.upper() in ("POST", "PUT", "PATCH"):
            headers.append((b"Content-Length", str(len(content)).encode()))
        return headers, content

    def _with_secrets(self, value: str, run: _RunEgress) -> str:
        """``value`` with each of the run's placeholders replaced by its secret's value (one
        that no longer opens under the root key stays the placeholder)."""
        if PLACEHOLDER_PREFIX not in value:
            return value

        def put(match: re.Match[str]) -> str:
            sealed = run.secrets.get(match[0])
            opened = None if sealed is None else sealed.open(self._keyring)
            return match[0] if opened is None else opened

        return _PLACEHOLDER.sub(put, value)

    async def _send(
        self,
        run_id: str,
        target: _Target,
        headers: list[tuple[bytes, bytes]],
        content: bytes,
    ) -> FetchAnswer:
        deadline = self._deadlines.get(run_id, trio.current_time())
        client = await self._client(target.url)
        with trio.move_on_at(deadline):
            try:
                async with client.stream(
                    target.url, headers=headers, content=content, method=target.method
                ) as response:
                    body = bytearray()
                    await read_head(response, body, limit=ANSWER_MAX + 1)
                    if len(body) > ANSWER_MAX:
                        raise _Refused(f"failed: the answer is larger than {ANSWER_MAX} bytes")
                    return FetchAnswer(
                        status=response.status,
                        headers=[
                            [name.decode("latin-1"), value.decode("latin-1")]
                            for name, value in response.headers
                        ],
                        body=body.decode("utf-8", "replace"),
                    )
            except TargetRefused:
                raise _Refused(
                    "refused: the host resolves only to addresses functions may not reach"
                    " (private, loopback, link-local, multicast or reserved)"
                ) from None
            except DELIVERY_ERRORS:
                raise _Refused("failed: the connection failed or the answer is not HTTP") from None
        raise _Refused("failed: no answer within the run's wall limit")


def _host_of(url: str) -> str:
    """The host a fetch's URL names, as its errors and the log name it: what a host may hold
    only (anything else becomes ``?``, so a guest writes no line of the platform's own)."""
    try:
        host = urlsplit(url[:URL_MAX]).hostname
    except ValueError:
        host = None
    return _NOT_HOST.sub("?", host[:255]) if host else "(no host)"


def _shown_method(method: str) -> str:
    """The method as the log names it: a method, or a word saying it is none."""
    upper = method.upper()
    return upper if _TOKEN.fullmatch(upper) and len(upper) <= 16 else "(not a method)"


def _ms(started: float) -> str:
    return f"{(time.perf_counter() - started) * 1000:.0f} ms"
