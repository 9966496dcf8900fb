"""Shared pieces of the benches that load served ``ledgerport serve`` processes from outside.

- :class:`Sink`: a webhook receiver on loopback (trio and h11, keep-alive) that records every
  request (delivery id, event id, which served process sent it, what it answered), answers after
  an optional delay with a bounded number of requests being answered at once, and knows which
  deliveries arrived with a 2xx answer and how many times;
- :class:`Nodes`: served processes started from :func:`tests.e2e.served.start_server`, each in
  a directory of its own (its ``server.log``), stopped or killed, and always cleaned up;
- the operator, console and OAuth calls a load needs (:func:`provision_tenant` keeps the app's
  client credentials, which refresh and token exchange need);
- a look into a process through ``/proc``: resident memory, open files, TCP connections,
  children, and which process owns a local TCP port;
- :func:`start_prober`: ``bench/_prober.py`` in a process of its own, asking ``GET /healthz``
  every few milliseconds, read back one line a second.

Every wait here has a deadline and every loop a bound.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import functools
import json
import math
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import asyncpg
import h11
import httpx
import trio
from tests.e2e.served import Server, start_server, stop, wait_healthy

ADMIN_TOKEN = "lp_admin_bench-served-load-0123456789abcdef"
GRANT_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
TOKEN_TYPE_JWT = "urn:ietf:params:oauth:token-type:jwt"
HTTP_TIMEOUT = 30.0
READ_SIZE = 65536
PAGE_LIMIT = 100
MAX_PAGES = 100_000
"""A bound on the pages one catch-up of the Events API reads (10 million events)."""
LOG_PROBLEM = re.compile(r" (ERROR|CRITICAL) |Traceback \(most recent call last\)")
PROBER = Path(__file__).with_name("_prober.py")
START_ATTEMPTS = 3


def percentile(values: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of ``values`` lie (nearest rank); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def say(line: str = "") -> None:
    print(line, flush=True)  # noqa: T201 - a bench reports on standard output


CLIENT_ADDRESSES: Final = 256
"""The client addresses the served benches' requests come from, in turn (``forwarded_for``)."""


def forwarded_for(i: int) -> dict[str, str]:
    """The ``i``-th request's client address, one of ``CLIENT_ADDRESSES`` in turn, as a trusted
    proxy on loopback names it: each address's budget is counted apart."""
    n = i % CLIENT_ADDRESSES
    return {"X-Forwarded-For": f"198.18.{n // 250}.{n % 250 + 1}"}


async def until_signalled(work: Callable[[], Awaitable[int]]) -> int:
    """``work()``'s answer; SIGTERM or SIGHUP cancels it instead (answer 143), so that its
    cleanup still runs: the served processes stopped, the scratch database dropped."""
    status = 143

    async def watch(scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
            async for number in signals:
                say(f"stopped by signal {number}: cleaning up")
                scope.cancel()
                return

    async def do(scope: trio.CancelScope) -> None:
        nonlocal status
        status = await work()
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        nursery.start_soon(do, nursery.cancel_scope)
    return status


# -- /proc ------------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (VmRSS), NaN when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


def cpu_seconds(pid: int) -> float:
    """CPU time ``pid`` has used (user and system, all its threads), NaN when it is gone: to
    the nanosecond from the process's CPU clock, or in clock ticks (10 ms) from /proc where
    that clock cannot be read."""
    clock = ctypes.c_int()
    if _libc is not None and _libc.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
        try:
            return time.clock_gettime(clock.value)
        except OSError:
            pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:
    _libc = None


def load_average() -> float:
    """The machine's load average over the last minute."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def _fd_links(pid: int) -> list[str]:
    links = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    for name in names:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{name}"))
        except OSError:
            continue
    return links


def open_files(pid: int) -> int:
    return len(_fd_links(pid))


def _socket_inodes(pid: int) -> set[int]:
    return {int(link[8:-1]) for link in _fd_links(pid) if link.startswith("socket:[")}


@dataclass(frozen=True)
class TcpSocket:
    local_port: int
    remote_port: int
    state: int
    """The kernel's state number: 1 established, 10 listening."""
    inode: int


def tcp_sockets() -> list[TcpSocket]:
    """Every TCP socket of this network namespace (IPv4 and IPv6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, remote = parts[1], parts[2]
            found.append(
                TcpSocket(
                    int(local.rsplit(":", 1)[1], 16),
                    int(remote.rsplit(":", 1)[1], 16),
                    int(parts[3], 16),
                    int(parts[9]),
                )
            )
    return found


def tcp_connections(pid: int) -> int:
    """TCP sockets ``pid`` holds open, listening ones excluded."""
    inodes = _socket_inodes(pid)
    return sum(1 for sock in tcp_sockets() if sock.inode in inodes and sock.state != 10)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


@dataclass
class PortOwners:
    """Which of the served processes a connection to ``port`` comes from, by the peer's port:
    the kernel's socket table gives the connecting socket's inode, each process's open files
    whether it holds it."""

    port: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    """Name of a served process to its pid."""

    def owner(self, peer_port: int) -> str:
        inodes = {
            sock.inode
            for sock in tcp_sockets()
            if sock.local_port == peer_port and sock.remote_port == self.port
        }
        for name, pid in self.pids.items():
            if inodes & _socket_inodes(pid):
                return name
        return "?"


# -- the receiver -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    at: float
    """time.monotonic() when the request had been read."""
    path: str
    delivery_id: str
    event_id: str
    status: int
    """What the sink answered (or was about to answer)."""
    node: str
    """The served process that sent it ("?" when not known)."""


Policy = Callable[[str, str], int]
"""(path, delivery id) to the status to answer."""


def always_ok(path: str, delivery_id: str) -> int:
    return 200


@dataclass
class Sink:
    """A webhook receiver on loopback. ``delay`` seconds pass before each answer, at most
    ``concurrency`` requests are being answered at once (the others wait their turn, read but
    unanswered), and ``policy`` chooses each answer's status. A request counts as arrived when
    the receiver takes it up: once read and the gate open."""

    delay: float = 0.0
    concurrency: int = 256
    policy: Policy = always_ok
    owners: PortOwners = field(default_factory=PortOwners)
    arrivals: list[Arrival] = field(default_factory=list)
    first_ok: dict[str, float] = field(default_factory=dict)
    """Delivery id to when it first arrived with a 2xx answer."""
    ok_count: Counter[str] = field(default_factory=Counter)
    ok_pairs: set[tuple[str, str]] = field(default_factory=set)
    """(path, event id) of every delivery answered 2xx at least once."""
    connections: int = 0
    gate: trio.Event = field(default_factory=trio.Event)
    """Requests are held, unrecorded, until it is set."""
    _changed: trio.Event = field(default_factory=trio.Event)
    _turns: trio.Semaphore | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.owners.port}"

    def duplicates(self) -> int:
        """Deliveries answered 2xx again after a first 2xx (same delivery id)."""
        return sum(count - 1 for count in self.ok_count.values() if count > 1)

    async def wait(self, done: Callable[[], bool], within: float) -> bool:
        """Wait until ``done()`` (checked at each arrival) or ``within`` seconds passed."""
        with trio.move_on_after(within):
            while not done():
                self._changed = trio.Event()
                with trio.move_on_after(1.0):
                    await self._changed.wait()
        return done()

    async def _serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        node = "?"
        if len(self.owners.pids) > 1:
            node = self.owners.owner(stream.socket.getpeername()[1])
        elif self.owners.pids:
            node = next(iter(self.owners.pids))
        conn = h11.Connection(h11.SERVER)
        assert self._turns is not None
        try:
            for _ in range(1_000_000):
                head = await _read_request(conn, stream)
                if head is None:
                    return
                path, headers = head
                await self.gate.wait()
                delivery_id = headers.get("x-webhook-id", "")
                status = self.policy(path, delivery_id)
                arrived = time.monotonic()
                self.arrivals.append(
                    Arrival(
                        arrived,
                        path,
                        delivery_id,
                        headers.get("x-webhook-event-id", ""),
                        status,
                        node,
                    )
                )
                if 200 <= status < 300:
                    self.ok_count[delivery_id] += 1
                    self.first_ok.setdefault(delivery_id, arrived)
                    self.ok_pairs.add((path, headers.get("x-webhook-event-id", "")))
                self._changed.set()
                async with self._turns:
                    if self.delay:
                        await trio.sleep(self.delay)
                    body = b'{"ok":true}'
                    await stream.send_all(
                        b"".join(
                            conn.send(event) or b""
                            for event in (
                                h11.Response(
                                    status_code=status,
                                    headers=[("content-length", str(len(body)))],
                                ),
                                h11.Data(data=body),
                                h11.EndOfMessage(),
                            )
                        )
                    )
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return
        finally:
            await stream.aclose()


async def _read_request(
    conn: h11.Connection, stream: trio.SocketStream
) -> tuple[str, dict[str, str]] | None:
    head: h11.Request | None = None
    for _ in range(100_000):
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(READ_SIZE)
            conn.receive_data(data)
            if not data and head is None:
                return None
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            headers = {k.decode().lower(): v.decode() for k, v in head.headers}
            return head.target.decode(), headers
        elif isinstance(event, h11.ConnectionClosed):
            return None
    return None


@asynccontextmanager
async def sink(
    *, delay: float = 0.0, concurrency: int = 256, policy: Policy = always_ok, gated: bool = False
) -> AsyncIterator[Sink]:
    """A :class:`Sink` listening on a free loopback port for the block's length; with
    ``gated``, requests wait until ``gate`` is set."""
    receiver = Sink(delay=delay, concurrency=concurrency, policy=policy)
    receiver._turns = trio.Semaphore(concurrency)
    if not gated:
        receiver.gate.set()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, receiver._serve, 0, host="127.0.0.1")
        )
        receiver.owners.port = listeners[0].socket.getsockname()[1]
        yield receiver
        nursery.cancel_scope.cancel()


# -- served processes -------------------------------------------------------------------------


@dataclass
class Node:
    name: str
    server: Server
    ended_by_bench: bool = False

    @property
    def pid(self) -> int:
        return self.server.process.pid

    @property
    def base(self) -> str:
        return self.server.base

    def alive(self) -> bool:
        return self.server.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would end it."""
        self.ended_by_bench = True
        self.server.process.kill()
        self.server.process.wait(timeout=10)

    def problems(self) -> list[str]:
        """Lines of its log that report an error or a traceback."""
        try:
            text = self.server.output()
        except OSError:
            return []
        return [line for line in text.splitlines() if LOG_PROBLEM.search(line)]


async def _listens(node: Node) -> bool:
    """Whether ``node``'s process holds the socket listening on its port."""
    port = int(node.base.rsplit(":", 1)[1])
    for _ in range(50):
        inodes = _socket_inodes(node.pid)
        if any(s.inode in inodes for s in tcp_sockets() if s.local_port == port and s.state == 10):
            return True
        if not node.alive():
            return False
        await trio.sleep(0.1)
    return False


@dataclass
class Nodes:
    """Served processes, each in ``workdir/<name>`` (its ``server.log``), with ``env``."""

    workdir: Path
    env: dict[str, str]
    started: list[Node] = field(default_factory=list)

    async def start(self, name: str) -> Node:
        """A healthy process listening on its own port. The port is free when chosen, but
        another program on the machine may take it before the server binds it (the server then
        exits, and /healthz may even be answered by that other program): such a start is
        tried again on another port."""
        failures = []
        for attempt in range(START_ATTEMPTS):
            directory = self.workdir / (name if not attempt else f"{name}-{attempt}")
            directory.mkdir(parents=True, exist_ok=True)
            node = Node(name, start_server(directory, ADMIN_TOKEN, self.env))
            self.started.append(node)
            try:
                await trio.to_thread.run_sync(wait_healthy, node.server)
            except AssertionError as error:
                failures.append(str(error)[-500:])
                node.ended_by_bench = True
                stop(node.server.process)
                continue
            if await _listens(node):
                return node
            failures.append(f"{node.base} is not served by process {node.pid}")
            node.ended_by_bench = True
            stop(node.server.process)
        raise RuntimeError(f"{name} did not start: " + " | ".join(failures))

    def problems(self) -> list[str]:
        return [f"{node.name}: {line}" for node in self.started for line in node.problems()]

    def report_deaths(self) -> None:
        """Tell of each process that ended without the bench ending it, with its log's end."""
        for node in self.started:
            if not node.alive() and not node.ended_by_bench:
                say(f"!! {node.name} (pid {node.pid}) exited {node.server.process.returncode}:")
                for line in node.server.output().splitlines()[-20:]:
                    say(f"!!    {line[:300]}")

    def stop_all(self) -> None:
        for node in self.started:
            stop(node.server.process)
            # A killed server's sandbox workers notice the closed pipe and leave on their own.


@contextmanager
def nodes(workdir: Path, env: dict[str, str]) -> Iterator[Nodes]:
    """:class:`Nodes` whose processes are all stopped when the block ends, whatever happens."""
    made = Nodes(workdir, env)
    try:
        yield made
    finally:
        made.report_deaths()
        made.stop_all()


# -- operator, console and OAuth calls ---------------------------------------------------------


def answer(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path}:"
            f" {response.status_code} {response.text[:300]}"
        )
    return response.json() if response.content else None


@dataclass(frozen=True)
class Tenant:
    """A business, its owner, a confidential app the owner develops, installed there with
    ``scopes``, its client credentials, the owner's developer token and a first token pair."""

    business_id: str
    user_id: str
    app_id: str
    client_id: str
    client_secret: str
    developer_token: str
    access_token: str
    refresh_token: str

    @property
    def basic(self) -> str:
        pair = f"{self.client_id}:{self.client_secret}".encode()
        return "Basic " + base64.b64encode(pair).decode()

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token}"}

    @property
    def console(self) -> str:
        return f"/developer/apps/{self.app_id}"

    @property
    def developer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.developer_token}"}


def client(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base,
        timeout=HTTP_TIMEOUT,
        trust_env=False,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
    )


async def provision_tenant(http: httpx.AsyncClient, scopes: list[str], name: str) -> Tenant:
    """Set a :class:`Tenant` up through the operator API; its first tokens come from the
    exchange of a session token, as an embedded app gets them."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    business = answer(
        await http.post("/admin/businesses", json={"name": f"{name} Ltd"}, headers=admin)
    )
    user = answer(
        await http.post(
            "/admin/users",
            json={"email": f"{secrets.token_hex(6)}@example.com", "password": "pw-12345678"},
            headers=admin,
        )
    )
    answer(
        await http.put(
            f"/admin/businesses/{business['id']}/members/{user['id']}",
            json={"role": "owner"},
            headers=admin,
        )
    )
    app = answer(
        await http.post(
            "/admin/apps",
            json={
                "name": name,
                "type": "CONFIDENTIAL",
                "redirectUris": ["https://app.example/callback"],
                "scopes": scopes,
                "developerUserId": user["id"],
                "reviewed": True,
            },
            headers=admin,
        )
    )
    ids = {"appId": app["id"], "businessId": business["id"], "userId": user["id"]}
    answer(await http.post("/admin/installations", json={**ids, "scopes": scopes}, headers=admin))
    developer = answer(
        await http.post("/admin/developer-tokens", json={"userId": user["id"]}, headers=admin)
    )
    partial = Tenant(
        business["id"],
        user["id"],
        app["id"],
        app["clientId"],
        app["clientSecret"],
        developer["token"],
        "",
        "",
    )
    tokens = answer(await exchange(http, partial))
    return Tenant(
        partial.business_id,
        partial.user_id,
        partial.app_id,
        partial.client_id,
        partial.client_secret,
        partial.developer_token,
        tokens["access_token"],
        tokens["refresh_token"],
    )


async def session_token(http: httpx.AsyncClient, tenant: Tenant) -> httpx.Response:
    """The operator's ``POST /admin/session-tokens`` for the tenant's app, business and user."""
    return await http.post(
        "/admin/session-tokens",
        json={"appId": tenant.app_id, "businessId": tenant.business_id, "userId": tenant.user_id},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )


async def exchange(
    http: httpx.AsyncClient, tenant: Tenant, session: str | None = None
) -> httpx.Response:
    """The RFC 8693 exchange of ``session`` (a fresh session token when None)."""
    if session is None:
        session = answer(await session_token(http, tenant))["sessionToken"]
    return await http.post(
        "/oauth/token",
        data={
            "grant_type": GRANT_TOKEN_EXCHANGE,
            "subject_token": session,
            "subject_token_type": TOKEN_TYPE_JWT,
        },
        headers={"Authorization": tenant.basic},
    )


async def refresh(
    http: httpx.AsyncClient,
    tenant: Tenant,
    refresh_token: str,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """``grant_type=refresh_token``: answers a new pair, the presented token is spent.
    ``headers`` are sent too (a client address through a trusted proxy)."""
    return await http.post(
        "/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token},
        headers={"Authorization": tenant.basic, **(headers or {})},
    )


async def add_webhook(http: httpx.AsyncClient, tenant: Tenant, url: str, events: list[str]) -> str:
    made = answer(
        await http.post(
            f"{tenant.console}/webhooks",
            json={"url": url, "events": events},
            headers=tenant.developer,
        )
    )
    return str(made["id"])


async def put_function(
    http: httpx.AsyncClient, tenant: Tenant, name: str, source: str, events: list[str]
) -> None:
    answer(
        await http.put(
            f"{tenant.console}/functions/{name}",
            json={"source": source, "events": events},
            headers=tenant.developer,
        )
    )


async def create_customer(http: httpx.AsyncClient, tenant: Tenant, name: str) -> str:
    made = answer(await http.post("/customers", json={"name": name}, headers=tenant.bearer))
    return str(made["id"])


async def import_invoices(
    http: httpx.AsyncClient, tenant: Tenant, customer_id: str, count: int
) -> httpx.Response:
    """``POST /invoices/bulk-import`` of ``count`` (at most 200) one-line invoices: one
    transaction, ``count`` invoice.created events."""
    line = {"description": "Load", "quantity": "1", "unitPrice": "10.00"}
    return await http.post(
        "/invoices/bulk-import",
        json={"invoices": [{"customerId": customer_id, "lines": [line]}] * count},
        headers=tenant.bearer,
    )


@dataclass
class Feed:
    """A reader of the Events API that remembers where it stopped."""

    types: str
    after: str | None = None
    events: list[tuple[str, str]] = field(default_factory=list)
    """(event id, type) of every event read, in the feed's order."""

    async def read_page(self, http: httpx.AsyncClient, tenant: Tenant) -> httpx.Response:
        params = {"limit": str(PAGE_LIMIT), "types": self.types}
        if self.after is not None:
            params["after"] = self.after
        response = await http.get("/events", params=params, headers=tenant.bearer)
        if response.status_code == 200:
            page = response.json()
            self.events.extend((event["id"], event["type"]) for event in page["data"])
            if page["data"]:
                self.after = page["data"][-1]["id"]
        return response

    async def catch_up(self, http: httpx.AsyncClient, tenant: Tenant) -> None:
        """Read until a page comes back short."""
        for _ in range(MAX_PAGES):
            response = await self.read_page(http, tenant)
            answer(response)
            if len(response.json()["data"]) < PAGE_LIMIT:
                return
        raise RuntimeError(f"the feed did not end within {MAX_PAGES} pages")


async def metric(http: httpx.AsyncClient, name: str, labels: str = "") -> float:
    """The sum of a Prometheus sample of ``/metrics`` over the series matching ``labels``
    (a substring of the label set, e.g. ``outcome="succeeded"``)."""
    text = answer_text(await http.get("/metrics"))
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in "{ ") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def answer_text(response: httpx.Response) -> str:
    if response.status_code != 200:
        raise RuntimeError(f"{response.request.url.path}: {response.status_code}")
    return response.text


# -- the prober -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeSecond:
    at: float
    """time.monotonic() at the end of the second."""
    answers: int
    longest_gap: float
    """Seconds between two consecutive answers, the longest ending in this second."""
    slowest: float
    """The slowest single answer of the second, in seconds."""
    errors: int


@dataclass
class Probe:
    seconds: list[ProbeSecond] = field(default_factory=list)

    def window(self, start: float, end: float) -> list[ProbeSecond]:
        return [second for second in self.seconds if start < second.at <= end]


@asynccontextmanager
async def start_prober(base: str, interval: float, limit: float) -> AsyncIterator[Probe]:
    """``bench/_prober.py`` asking ``base``/healthz every ``interval`` seconds, in a process of
    its own (so a pause of this process is not taken for one of the server's), for at most
    ``limit`` seconds; its reports gather in the :class:`Probe`."""
    probe = Probe()
    command = [sys.executable, str(PROBER), base, str(interval), str(limit)]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    assert process.stdout is not None
    output = process.stdout

    async def read() -> None:
        pending = b""
        for _ in range(int(limit) * 10 + 100):
            chunk = await output.receive_some(65536)
            if not chunk:
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                report = json.loads(line)
                probe.seconds.append(
                    ProbeSecond(
                        report["at"],
                        report["answers"],
                        report["gap"],
                        report["slowest"],
                        report["errors"],
                    )
                )

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            try:
                yield probe
            finally:
                nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.move_on_after(10):
            await process.wait()


# -- PostgreSQL -------------------------------------------------------------------------------


def query(url: str, sql: str, *args: object) -> list[dict[str, Any]]:
    """Rows of one statement on the database at ``url`` (blocking: run it in a thread)."""

    async def fetch() -> list[dict[str, Any]]:
        connection = await asyncpg.connect(url, timeout=5)
        try:
            return [dict(row) for row in await connection.fetch(sql, *args, timeout=10)]
        finally:
            await connection.close()

    return asyncio.run(fetch())
