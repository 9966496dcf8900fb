"""The access log of a real ``ledgerport serve``: one line per request, and no request forges one.

One server per module (``sys.executable -m ledgerport serve`` in development mode, a SQLite file
in a temporary directory, a free loopback port) with its stdout and stderr in one file, read
back as a line-based reader would (``str.splitlines``, which also breaks at NEL, U+2028 and
U+2029). Requests go out over the standard library's http.client, which sends a path's
percent-escapes and a header's bytes as they are and closes a connection the moment it is told
to, and each carries a marker of its own in its path or user agent to find its line by.
"""

from __future__ import annotations

import http.client
import time
import uuid
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

import pytest

from .served import Server, served

ADMIN_TOKEN = "lp_admin_e2e-access-log-token-0123456789abcdef"
LOG_TIMEOUT = 5.0
REPEATS = 30
FORGED_TIMESTAMP = "1999-12-31 23:59:59,999"
Headers = Mapping[str, str | bytes]
FORGERY = "%0a1999-12-31%2023:59:59,999%20CRITICAL%20ledgerport.supervisor:%20forged"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("access-log-e2e")
    with served(
        workdir, ADMIN_TOKEN, {"LEDGERPORT_DATABASE_URL": f"sqlite:///{workdir / 'log.db'}"}
    ) as running:
        yield running


def marker() -> str:
    return f"m{uuid.uuid4().hex}"


def connect(server: Server) -> http.client.HTTPConnection:
    address = urlsplit(server.base)
    assert address.hostname is not None
    return http.client.HTTPConnection(address.hostname, address.port, timeout=10.0)


def ask(connection: http.client.HTTPConnection, method: str, path: str, headers: Headers) -> int:
    """Sends one request on ``connection`` and reads its whole answer: the status."""
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    response.read()
    return response.status


def send_alone(server: Server, method: str, path: str, headers: Headers | None = None) -> int:
    """One request on a connection of its own, closed as soon as the answer is read."""
    connection = connect(server)
    try:
        return ask(connection, method, path, headers or {})
    finally:
        connection.close()


def settle(server: Server) -> None:
    """Returns once the server has logged a request sent now, after every earlier answer was
    read: a second line for an earlier request would be in the log by then."""
    settled = marker()
    deadline = time.monotonic() + LOG_TIMEOUT
    send_alone(server, "GET", f"/{settled}")
    while settled not in server.output():
        assert time.monotonic() < deadline, f"no access line for {settled}:\n{server.output()}"
        time.sleep(0.05)


def access_lines(server: Server, mark: str) -> list[str]:
    return [
        line
        for line in server.output().splitlines()
        if " INFO ledgerport.access: " in line and mark in line
    ]


def assert_nothing_forged(server: Server) -> None:
    forged = [line for line in server.output().splitlines() if line.startswith(FORGED_TIMESTAMP)]
    assert forged == [], server.output()


def test_a_newline_in_the_path_cannot_forge_a_log_line(server: Server) -> None:
    mark = marker()

    status = send_alone(server, "GET", f"/{mark}{FORGERY}")

    assert status == 404
    settle(server)
    lines = access_lines(server, mark)
    assert len(lines) == 1, lines
    assert f"/{mark}\\n{FORGED_TIMESTAMP} CRITICAL ledgerport.supervisor: forged 1.1" in lines[0]
    assert '" 404 ' in lines[0]
    assert_nothing_forged(server)


def test_nul_c1_and_unicode_separators_in_the_path_are_escaped(server: Server) -> None:
    mark = marker()

    status = send_alone(server, "GET", f"/{mark}%00a%0db%C2%85c%E2%80%A8d%E2%80%A9e%7Ff")

    assert status == 404
    settle(server)
    lines = access_lines(server, mark)
    assert len(lines) == 1, lines
    assert f"/{mark}\\x00a\\rb\\x85c\\u2028d\\u2029e\\x7ff 1.1" in lines[0]
    assert "\x00" not in server.output()


def test_header_values_are_escaped(server: Server) -> None:
    mark = marker()
    headers = {
        "User-Agent": f"agent-{mark}\tnext\x85after".encode("latin-1"),
        "Referer": b"http://127.0.0.1/\x9b31mred",
    }

    status = send_alone(server, "GET", "/healthz", headers)

    assert status == 200
    settle(server)
    lines = access_lines(server, mark)
    assert len(lines) == 1, lines
    assert f'" 200 16 "http://127.0.0.1/\\x9b31mred" "agent-{mark}\\tnext\\x85after"' in lines[0]


def test_tokens_in_the_path_stay_redacted_next_to_an_escape(server: Server) -> None:
    mark = marker()
    secret = "lp_at_" + "s3cr3t" * 6

    assert send_alone(server, "GET", f"/{mark}%0a{secret}") == 404

    settle(server)
    lines = access_lines(server, mark)
    assert len(lines) == 1, lines
    assert f"/{mark}\\nlp_at_[REDACTED] 1.1" in lines[0]
    assert secret not in server.output()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        pytest.param("GET", "/healthz", 200, id="ok"),
        pytest.param("GET", "/no-such-page", 404, id="not-found"),
        pytest.param("POST", "/healthz", 405, id="method-not-allowed"),
        pytest.param("POST", "/admin/businesses", 401, id="no-admin-token"),
    ],
)
def test_each_request_is_logged_once_with_its_status(
    server: Server, method: str, path: str, status: int
) -> None:
    """Each request on a connection the client closes at once: the case in which hypercorn's
    own access log wrote a second line, with status ``-``, for about one request in four."""
    marks = [marker() for _ in range(REPEATS)]
    for mark in marks:
        assert send_alone(server, method, path, {"User-Agent": mark}) == status

    settle(server)
    for mark in marks:
        lines = access_lines(server, mark)
        assert len(lines) == 1, lines
        assert f'"{method} {path} 1.1" {status} ' in lines[0]


def test_requests_on_one_connection_are_logged_once_each(server: Server) -> None:
    marks = [marker() for _ in range(5)]
    connection = connect(server)
    try:
        for mark in marks:
            assert ask(connection, "GET", "/healthz", {"User-Agent": mark}) == 200
    finally:
        connection.close()

    settle(server)
    assert [len(access_lines(server, mark)) for mark in marks] == [1] * len(marks)
