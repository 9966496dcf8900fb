"""Keep-alive connections of a real ``ledgerport serve``, driven over raw sockets.

A route may answer before the request's body has arrived (no admin token, a method the route
does not allow, OPTIONS). A client that then sends the body and its next request on the same
connection must get that next request answered, or see the connection closed, at once: never a
connection left open and unserved. Ordinary keep-alive still serves several requests on one
connection, and an idle one is closed after hypercorn's keep-alive timeout.

One server per module (``sys.executable -m ledgerport serve`` in development mode, a SQLite file in
a temporary directory, a free loopback port). Every socket operation has a timeout.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from .served import Server, served

ADMIN_TOKEN = "lp_admin_e2e-keepalive-token-0123456789abcdef"
ATTEMPTS = 20
READ_TIMEOUT = 5.0
NEXT_ANSWER_TIMEOUT = 1.0
KEEP_ALIVE_TIMEOUT = 5.0  # hypercorn's default, which serve.py keeps
BODY = json.dumps({"name": "Early answer"}).encode()
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("keepalive-e2e")
    with served(
        workdir, ADMIN_TOKEN, {"LEDGERPORT_DATABASE_URL": f"sqlite:///{workdir / 'ka.db'}"}
    ) as running:
        yield running


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def connect(server: Server) -> socket.socket:
    address = urlsplit(server.base)
    assert address.hostname is not None
    assert address.port is not None
    return socket.create_connection((address.hostname, address.port), timeout=READ_TIMEOUT)


def request_head(method: str, path: str, length: int, token: str | None = None) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    ]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(sock: socket.socket) -> Answer | None:
    """The next response on ``sock`` (framed by Content-Length), or None if the server closed
    the connection before sending any of it."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            assert not received, f"connection closed inside a response head: {received!r}"
            return None
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, value in (line.split(":", 1) for line in header_lines)
    }
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        body += chunk
    assert len(body) == length, "more bytes than the response announced"
    return Answer(int(status_line.split()[1]), headers, body)


def assert_served_or_closed(sock: socket.socket, early: Answer) -> None:
    """The request just sent on ``sock`` is answered within a second; or, if ``early`` said
    ``Connection: close``, the connection is closed within a second instead."""
    announced_close = early.headers.get("connection") == "close"
    sock.settimeout(NEXT_ANSWER_TIMEOUT)
    try:
        answer = read_answer(sock)
    except TimeoutError:
        pytest.fail(f"no answer and no close within {NEXT_ANSWER_TIMEOUT} s")
    except ConnectionResetError:
        # Bytes sent after the server closed its end reset the connection: the client was told.
        assert announced_close, "connection reset without Connection: close"
        return
    if answer is None:
        assert announced_close, "connection closed without Connection: close"
    else:
        assert answer.status == 200, answer


EARLY_ANSWERS = [
    pytest.param("POST", "/admin/businesses", 401, id="no-admin-token"),
    pytest.param("POST", "/healthz", 405, id="method-not-allowed"),
    pytest.param("OPTIONS", "/healthz", 200, id="options"),
]
# Pauses of a client between reading the early answer and sending the body: from at once
# (while the server may still be finishing the answer) to after the server is done with it.
ANSWER_PAUSES = (0.0, 0.005, 0.05)
# Pauses between a request's head and its body that land the body before, during and after
# the early answer.
BODY_DELAYS = (0.0, 0.0005, 0.001, 0.002, 0.004)


@pytest.mark.parametrize(("method", "path", "status"), EARLY_ANSWERS)
def test_answer_before_the_body_then_next_request_is_not_left_hanging(
    server: Server, method: str, path: str, status: int
) -> None:
    connection_headers = []
    for attempt in range(ATTEMPTS):
        with connect(server) as sock:
            sock.sendall(request_head(method, path, len(BODY)))
            early = read_answer(sock)
            assert early is not None
            assert early.status == status
            connection_headers.append(early.headers.get("connection"))
            time.sleep(ANSWER_PAUSES[attempt % len(ANSWER_PAUSES)])

            sock.sendall(BODY + HEALTHZ)

            assert_served_or_closed(sock, early)

    # The body had not arrived: each answer said the connection would serve no other request.
    assert connection_headers == ["close"] * ATTEMPTS


@pytest.mark.parametrize(("method", "path", "status"), EARLY_ANSWERS)
def test_body_racing_the_answer_never_leaves_the_connection_hanging(
    server: Server, method: str, path: str, status: int
) -> None:
    """A client that sends the body without waiting, as pooled clients do: whether it arrives
    before the answer goes out is a race, and neither outcome may hang the next request."""
    for attempt in range(ATTEMPTS):
        with connect(server) as sock:
            sock.sendall(request_head(method, path, len(BODY)))
            time.sleep(BODY_DELAYS[attempt % len(BODY_DELAYS)])
            sock.sendall(BODY)
            early = read_answer(sock)
            assert early is not None
            assert early.status == status

            if early.headers.get("connection") != "close":
                sock.sendall(HEALTHZ)
            assert_served_or_closed(sock, early)


def test_two_complete_requests_are_answered_on_one_connection(server: Server) -> None:
    with connect(server) as sock:
        sock.sendall(request_head("POST", "/admin/businesses", len(BODY), ADMIN_TOKEN) + BODY)
        created = read_answer(sock)
        assert created is not None
        assert created.status == 201, created
        assert created.headers.get("connection") != "close"

        sock.sendall(HEALTHZ)
        health = read_answer(sock)

    assert health is not None
    assert health.status == 200, health
    assert health.headers.get("connection") != "close"


def test_idle_connection_is_closed_after_the_keep_alive_timeout(server: Server) -> None:
    with connect(server) as sock:
        sock.sendall(HEALTHZ)
        answer = read_answer(sock)
        assert answer is not None
        assert answer.status == 200
        started = time.monotonic()
        sock.settimeout(KEEP_ALIVE_TIMEOUT + 5.0)
        try:
            assert sock.recv(1) == b""
        except TimeoutError:
            pytest.fail("an idle keep-alive connection was never closed")
        assert time.monotonic() - started >= KEEP_ALIVE_TIMEOUT - 0.5
