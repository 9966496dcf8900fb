"""``ledgerport serve`` as an operator runs it: a real process, real HTTP, real signals.

Each server is ``sys.executable -m ledgerport serve`` in development mode with tmp_path as its
working directory, so the default store ``sqlite:///./ledgerport.db`` lands there, on a free
loopback port, with every inherited ``LEDGERPORT_*`` variable removed so the developer's
environment cannot leak in. Output goes to files (a pipe that nobody reads can fill and block the
server). Every wait is bounded, and a fixture kills whatever is still running when the test ends,
pass or fail.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from .served import POSTGRES_ADMIN_URL

# --- running the server --------------------------------------------------------------------------

STARTUP_TIMEOUT = 90.0
"""As ``served.STARTUP_TIMEOUT``: about 2 s on a quiet machine, room for a busy one."""
SHUTDOWN_TIMEOUT = 15.0
PORT_ATTEMPTS = 3
TOKEN_LINE = re.compile(r"generated admin token.*:\s*(\S+)\s*$", re.MULTILINE)


def free_port() -> int:
    """A loopback port nobody listens on right now (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def server_env(extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The test process's environment without LEDGERPORT_*, in development mode, plus ``extra``.

    A value of None in ``extra`` removes the variable.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
    env["LEDGERPORT_ENV"] = "development"
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@dataclass
class Server:
    """One ``ledgerport serve`` process and the files its output goes to."""

    process: subprocess.Popen[bytes]
    port: int
    stdout_path: Path
    stderr_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def output(self) -> str:
        return self.stdout() + self.stderr()

    def generated_admin_tokens(self) -> list[str]:
        return TOKEN_LINE.findall(self.stdout())

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=10.0, trust_env=False)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = SHUTDOWN_TIMEOUT) -> int:
        """Send ``signum`` and answer the exit code; fails the test if it takes too long."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"ledgerport did not exit within {timeout} s of {signal.Signals(signum).name}\n"
                f"{self.output()}"
            )


def wait_until_healthy(server: Server, timeout: float = STARTUP_TIMEOUT) -> bool:
    """Poll /healthz until 200 (True) or until the process exits (False); bounded by timeout."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=server.base_url, timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                return False
            # The log line naming our address guards against a port race where another server
            # took the port and answers /healthz in its place.
            if f"127.0.0.1:{server.port}" in server.stderr():
                try:
                    if client.get("/healthz").status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
            time.sleep(0.1)
    pytest.fail(f"ledgerport did not become healthy within {timeout} s\n{server.output()}")


class Launch(Protocol):
    def __call__(
        self, env: Mapping[str, str | None] | None = ..., *, args: tuple[str, ...] = ...
    ) -> Server: ...


class Run(Protocol):
    def __call__(
        self,
        env: Mapping[str, str | None] | None = ...,
        *,
        args: tuple[str, ...] = ...,
        timeout: float = ...,
    ) -> Finished: ...


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str
    elapsed: float


@dataclass
class _Processes:
    workdir: Path
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)
    count: int = 0

    def popen(
        self,
        env: dict[str, str],
        args: tuple[str, ...],
        name: str,
        *,
        stdout_path: Path | None = None,
    ) -> tuple[subprocess.Popen[bytes], Path, Path]:
        """Start ``ledgerport <args>``; a given ``stdout_path`` is appended to, not replaced."""
        self.count += 1
        stdout_mode = "ab" if stdout_path is not None else "wb"
        stdout_path = stdout_path or self.workdir / f"{name}-{self.count}.stdout"
        stderr_path = self.workdir / f"{name}-{self.count}.stderr"
        with stdout_path.open(stdout_mode) as out, stderr_path.open("wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "ledgerport", *args],
                cwd=self.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        self.running.append(process)
        return process, stdout_path, stderr_path

    def kill_all(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.kill()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a stuck kernel, not our bug
                pass


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[_Processes]:
    procs = _Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.kill_all()


@pytest.fixture
def launch(processes: _Processes) -> Launch:
    """Start ``ledgerport serve`` in tmp_path and wait until /healthz answers 200.

    The port is picked free just before the start; should another process take it in between,
    the start is retried on a new port.
    """

    def start(
        env: Mapping[str, str | None] | None = None,
        *,
        args: tuple[str, ...] = (),
    ) -> Server:
        # One stdout file across attempts: a start that lost the port race has already
        # bootstrapped the database and printed the generated admin token, which counts.
        stdout_path: Path | None = None
        for _attempt in range(PORT_ATTEMPTS):
            port = free_port()
            full_env = server_env({"LEDGERPORT_BIND": f"127.0.0.1:{port}", **(env or {})})
            process, stdout_path, err = processes.popen(
                full_env, ("serve", *args), "serve", stdout_path=stdout_path
            )
            server = Server(process, port, stdout_path, err)
            if wait_until_healthy(server):
                return server
            process.wait(timeout=SHUTDOWN_TIMEOUT)
            if "Address already in use" not in server.stderr():
                pytest.fail(
                    f"ledgerport serve exited with {process.returncode} before it was healthy\n"
                    f"{server.output()}"
                )
        pytest.fail(f"no free port after {PORT_ATTEMPTS} attempts")

    return start


@pytest.fixture
def run(processes: _Processes) -> Run:
    """Run a ``ledgerport`` command in tmp_path that is expected to end on its own."""

    def execute(
        env: Mapping[str, str | None] | None = None,
        *,
        args: tuple[str, ...] = ("serve",),
        timeout: float = 30.0,
    ) -> Finished:
        started = time.monotonic()
        process, out, err = processes.popen(server_env(env), args, "run")
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
            pytest.fail(
                f"ledgerport {' '.join(args)} still running after {timeout} s\n"
                f"{out.read_text(errors='replace')}{err.read_text(errors='replace')}"
            )
        return Finished(
            returncode,
            out.read_text(encoding="utf-8", errors="replace"),
            err.read_text(encoding="utf-8", errors="replace"),
            time.monotonic() - started,
        )

    return execute


# --- assertions ----------------------------------------------------------------------------------

ADMIN_TOKEN = "lp_admin_e2e-operator-token-0123456789"


def assert_envelope(response: httpx.Response, status: int, code: str | None = None) -> Any:
    """The response is the standard error envelope with ``status`` (and ``code`` if given)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["statusCode"] == status
    assert isinstance(body["error"], str)
    assert body["error"]
    assert isinstance(body["message"], str | list)
    if code is not None:
        assert body["code"] == code
    return body


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text


# --- the default store and the generated admin token ---------------------------------------------


def test_first_start_generates_admin_token_once_and_it_survives_restart(
    launch: Launch, tmp_path: Path
) -> None:
    config_home = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    server = launch(
        {"LEDGERPORT_ADMIN_TOKEN": None, "LEDGERPORT_DATABASE_URL": None, **config_home}
    )

    assert (tmp_path / "ledgerport.db").is_file()
    # The generated root key lives in the user's configuration directory, out of the directory
    # the service was started in (a checkout, where `git add -A` would take it along) and apart
    # from the database, readable by its owner only.
    assert sorted(p.name for p in tmp_path.iterdir() if "key" in p.name) == []
    (key_file,) = (tmp_path / "config" / "ledgerport" / "keys").iterdir()
    assert key_file.name.startswith("sqlite-ledgerport.db-")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    assert len(key) >= 32
    with sqlite3.connect(tmp_path / "ledgerport.db") as db:
        values = [value for (value,) in db.execute("SELECT value FROM settings")]
    assert key not in values
    tokens = server.generated_admin_tokens()
    assert len(tokens) == 1, server.stdout()
    token = tokens[0]
    assert token.startswith("lp_admin_")
    assert token not in server.stderr(), "the admin token must not reach the log"
    with server.client(token) as client:
        created = client.post("/admin/businesses", json={"name": "Before restart"})
    assert created.status_code == 201, created.text
    assert server.stop(signal.SIGTERM) == 0

    restarted = launch(
        {"LEDGERPORT_ADMIN_TOKEN": None, "LEDGERPORT_DATABASE_URL": None, **config_home}
    )

    assert restarted.generated_admin_tokens() == []
    assert "generated admin token" not in restarted.output()
    assert token not in restarted.output()
    # Says where the token came from, and how to use another.
    assert "set LEDGERPORT_ADMIN_TOKEN" in restarted.output()
    with restarted.client(token) as client:
        again = client.post("/admin/businesses", json={"name": "After restart"})
    assert again.status_code == 201, again.text
    assert again.json()["id"] != created.json()["id"]
    with restarted.client(token + "x") as client:
        assert_envelope(client.post("/admin/businesses", json={"name": "No"}), 401)
    assert restarted.stop(signal.SIGTERM) == 0


# --- the operator API over HTTP ------------------------------------------------------------------


@pytest.fixture
def server(launch: Launch) -> Server:
    """A server whose admin token comes from LEDGERPORT_ADMIN_TOKEN."""
    return launch({"LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN})


@pytest.fixture
def admin(server: Server) -> Any:
    with server.client(ADMIN_TOKEN) as client:
        yield client


def test_configured_admin_token_is_used_and_nothing_is_generated(server: Server) -> None:
    assert server.generated_admin_tokens() == []
    assert ADMIN_TOKEN not in server.output()


def test_operator_provisions_a_tenant_and_an_installation(admin: httpx.Client) -> None:
    business = admin.post("/admin/businesses", json={"name": "Acme Ltd", "sandbox": True})
    assert business.status_code == 201, business.text
    business_body = business.json()
    assert business_body == {
        "id": business_body["id"],
        "name": "Acme Ltd",
        "sandbox": True,
        "plan": "paid",
        "invoiceLimit": None,
    }
    assert isinstance(business_body["id"], str)
    assert business_body["id"]
    business_id = business_body["id"]

    user = admin.post(
        "/admin/users",
        json={"email": "olive@example.com", "password": "correct horse battery", "name": "Olive"},
    )
    assert user.status_code == 201, user.text
    user_body = user.json()
    assert user_body["email"] == "olive@example.com"
    assert isinstance(user_body["id"], str)
    assert "password" not in json.dumps(user_body)
    user_id = user_body["id"]

    duplicate = admin.post(
        "/admin/users", json={"email": "olive@example.com", "password": "another password"}
    )
    assert_envelope(duplicate, 409)

    member = admin.put(f"/admin/businesses/{business_id}/members/{user_id}", json={"role": "owner"})
    assert member.status_code == 200, member.text
    assert member.json() == {
        "businessId": business_id,
        "userId": user_id,
        "role": "owner",
        "active": True,
    }

    app = admin.post(
        "/admin/apps",
        json={
            "name": "Ledger Sync",
            "type": "CONFIDENTIAL",
            "redirectUris": ["https://sync.example.com/oauth/callback"],
            "scopes": ["profile:read", "invoices:read"],
            "developerUserId": user_id,
        },
    )
    assert app.status_code == 201, app.text
    app_body = app.json()
    assert isinstance(app_body["id"], str)
    assert isinstance(app_body["clientId"], str)
    assert isinstance(app_body["clientSecret"], str)
    assert len(app_body["clientSecret"]) >= 32
    app_id = app_body["id"]

    installation = admin.post(
        "/admin/installations",
        json={
            "appId": app_id,
            "businessId": business_id,
            "userId": user_id,
            "scopes": ["invoices:read"],
        },
    )
    assert installation.status_code == 201, installation.text
    installation_body = installation.json()
    assert installation_body["state"] == "ACTIVE"
    assert installation_body["scopes"] == ["invoices:read"]
    assert isinstance(installation_body["id"], str)

    uninstalled = admin.delete(f"/admin/installations/{installation_body['id']}")
    assert uninstalled.status_code == 204, uninstalled.text
    assert uninstalled.content == b""
    assert_envelope(admin.delete(f"/admin/installations/{installation_body['id']}"), 404)


def test_public_app_has_no_client_secret(admin: httpx.Client) -> None:
    user = admin.post("/admin/users", json={"email": "dev@example.com", "password": "long enough"})
    assert user.status_code == 201, user.text
    app = admin.post(
        "/admin/apps",
        json={
            "name": "Pocket",
            "type": "PUBLIC",
            "redirectUris": ["http://127.0.0.1:7777/callback"],
            "scopes": ["profile:read"],
            "developerUserId": user.json()["id"],
        },
    )
    assert app.status_code == 201, app.text
    assert app.json().get("clientSecret") is None


def test_invalid_bodies_answer_400_with_an_array_message(admin: httpx.Client) -> None:
    body = assert_envelope(admin.post("/admin/businesses", json={}), 400)
    assert isinstance(body["message"], list)
    assert body["message"]
    assert "code" not in body

    user = admin.post("/admin/users", json={"email": "d@example.com", "password": "long enough"})
    app = admin.post(
        "/admin/apps",
        json={
            "name": "Plain http",
            "type": "CONFIDENTIAL",
            "redirectUris": ["http://sync.example.com/callback"],
            "scopes": ["profile:read"],
            "developerUserId": user.json()["id"],
        },
    )
    body = assert_envelope(app, 400)
    assert isinstance(body["message"], list)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer lp_admin_not-the-right-token-000000",
        f"Basic {ADMIN_TOKEN}",
        "Bearer",
    ],
    ids=["missing", "wrong-token", "wrong-scheme", "empty"],
)
def test_admin_api_refuses_without_the_admin_token(
    server: Server, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    with server.client() as client:
        response = client.post("/admin/businesses", json={"name": "Nope"}, headers=headers)
    body = assert_envelope(response, 401)
    assert body["error"] == "Unauthorized"
    assert response.headers["www-authenticate"].lower().startswith("bearer")


def test_health_metrics_and_openapi_are_served(server: Server) -> None:
    with server.client() as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        metrics = client.get("/metrics")
        # The document is built in a worker thread as the server starts: a fifth of a second
        # of CPU alone, seconds beside the whole suite on two cores, so its first answer is
        # given room.
        openapi = client.get("/openapi.json", timeout=120.0)
    assert (ready.status_code, ready.json()) == (200, {"status": "ok", "failing": []})
    assert metrics.status_code == 200
    assert "ledgerport_http_requests_total" in metrics.text
    assert 'ledgerport_build_info{version="' in metrics.text
    assert openapi.status_code == 200
    assert openapi.json()["openapi"].startswith("3.1")


# --- graceful shutdown ---------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shuts_down_cleanly(server: Server, signum: signal.Signals) -> None:
    with server.client(ADMIN_TOKEN) as client:
        assert client.post("/admin/businesses", json={"name": "Busy"}).status_code == 201

    started = time.monotonic()
    assert server.stop(signum) == 0
    assert time.monotonic() - started < SHUTDOWN_TIMEOUT
    output = server.output()
    assert_no_traceback(output)
    # One line says where it serves, one that it stopped.
    assert output.count("serving on http://") == 1, output
    assert "Running on" not in output
    assert re.search(r"stopped cleanly in \d+\.\d s$", output.strip()), output


def _in_flight_requests(server: Server) -> float:
    with server.client() as client:
        text = client.get("/metrics").text
    for line in text.splitlines():
        if line.startswith("ledgerport_http_requests_in_flight "):
            return float(line.split()[1])
    raise AssertionError(f"no in-flight gauge in /metrics:\n{text}")


def _start_partial_request(server: Server, name: str) -> tuple[socket.socket, bytes]:
    """Send a POST whose body is cut short; answers the socket and the rest of the body.

    Returns once the handler is running (waiting for the rest of the body): the in-flight gauge
    then counts it besides the /metrics request that reads the gauge.
    """
    body = json.dumps({"name": name}).encode()
    head = (
        "POST /admin/businesses HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {ADMIN_TOKEN}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        sock.sendall(head + body[:5])
        deadline = time.monotonic() + 10
        while _in_flight_requests(server) < 2:
            assert time.monotonic() < deadline, "the partial request never reached the handler"
            time.sleep(0.05)
    except BaseException:
        sock.close()
        raise
    return sock, body[5:]


def _read_response(sock: socket.socket, timeout: float = 10.0) -> tuple[bytes, bytes]:
    """One HTTP/1.1 response with a Content-Length: answers (head, body)."""
    sock.settimeout(timeout)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a full response head: {received!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a full response body: {received!r}"
        body += chunk
    return head, body


def _wait_until_refusing(server: Server, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                pass
        except OSError:
            return
        assert time.monotonic() < deadline, "the listener stayed open after the signal"
        time.sleep(0.05)


def test_request_in_flight_at_sigterm_completes_and_intake_stops(server: Server) -> None:
    sock, rest = _start_partial_request(server, "Finished after SIGTERM")
    with sock:
        server.process.send_signal(signal.SIGTERM)
        # Intake stops: new connections are refused while the old request drains.
        _wait_until_refusing(server)
        assert server.process.poll() is None, "the process exited with a request in flight"

        sock.sendall(rest)
        head, body = _read_response(sock)

    assert head.startswith(b"HTTP/1.1 201"), head
    assert json.loads(body)["name"] == "Finished after SIGTERM"
    assert server.process.wait(timeout=SHUTDOWN_TIMEOUT) == 0
    assert_no_traceback(server.output())


def test_connection_of_a_drained_request_is_closed_promptly(launch: Launch) -> None:
    grace = 4.0
    server = launch({"LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN, "LEDGERPORT_SHUTDOWN_GRACE": "4"})
    sock, rest = _start_partial_request(server, "Drained")
    with sock:
        server.process.send_signal(signal.SIGTERM)
        _wait_until_refusing(server)
        sock.sendall(rest)
        head, _ = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 201"), head
        answered = time.monotonic()
        sock.settimeout(grace + 5)
        assert sock.recv(65536) == b""
        closed_after = time.monotonic() - answered

    assert server.process.wait(timeout=SHUTDOWN_TIMEOUT) == 0
    assert closed_after < grace / 2, f"connection closed {closed_after:.1f} s after the answer"


# --- failures at start ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEDGERPORT_BIND", "nonsense"),
        ("LEDGERPORT_BIND", "127.0.0.1:99999"),
        ("LEDGERPORT_DATABASE_URL", "mysql://root@127.0.0.1/ledgerport"),
        ("LEDGERPORT_ENV", "staging"),
        ("LEDGERPORT_ADMIN_TOKEN", "short"),
        ("LEDGERPORT_WEBHOOK_TIMEOUT", "0"),
        ("LEDGERPORT_WEBHOOK_RETRY_DELAYS", "1,2,3"),
        ("LEDGERPORT_TRUSTED_PROXIES", "not-an-address"),
        ("LEDGERPORT_LOG_FORMAT", "xml"),
    ],
)
def test_bad_configuration_exits_2_with_one_line(
    run: Run, tmp_path: Path, variable: str, value: str
) -> None:
    result = run({variable: value})

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert variable in lines[0]
    assert_no_traceback(result.stderr + result.stdout)
    assert result.stdout == ""
    assert not (tmp_path / "ledgerport.db").exists()


UNREACHABLE_POSTGRES = "postgresql://postgres@127.0.0.1:1/x"


def test_unreachable_postgres_exits_nonzero_without_hanging(run: Run) -> None:
    result = run({"LEDGERPORT_DATABASE_URL": UNREACHABLE_POSTGRES}, timeout=60)

    assert result.returncode != 0
    assert result.elapsed < 60
    assert "127.0.0.1" in result.stderr
    assert "generated admin token" not in result.stdout


@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_unreachable_postgres_exits_2_in_one_line_naming_the_variable(
    run: Run, command: str
) -> None:
    result = run({"LEDGERPORT_DATABASE_URL": UNREACHABLE_POSTGRES}, args=(command,), timeout=60)

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ledgerport: configuration error: LEDGERPORT_DATABASE_URL: cannot")
    assert "postgresql://postgres@127.0.0.1:1/x" in lines[0]
    assert_no_traceback(result.stderr)


@pytest.mark.postgres
def test_a_refused_postgres_login_exits_2_in_one_line_naming_the_variable(run: Run) -> None:
    parts = urlsplit(POSTGRES_ADMIN_URL)
    url = urlunsplit(parts._replace(netloc=f"no_such_role:secret@{parts.hostname}:{parts.port}"))

    result = run({"LEDGERPORT_DATABASE_URL": url, "LEDGERPORT_SECRET_KEY": "k" * 43}, timeout=60)

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "LEDGERPORT_DATABASE_URL: cannot use postgresql://no_such_role:***@" in lines[0]
    assert "no_such_role" in lines[0]
    assert "secret" not in lines[0]
    assert_no_traceback(result.stderr)


def test_a_second_serve_on_one_sqlite_file_exits_2_in_one_line(
    launch: Launch, run: Run, tmp_path: Path
) -> None:
    server = launch({"LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN})

    second = run({"LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN}, timeout=30)

    assert second.returncode == 2, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, second.stderr
    assert "LEDGERPORT_DATABASE_URL: another process serves" in lines[0]
    assert "ledgerport.db" in lines[0]
    assert_no_traceback(second.stderr)
    assert server.stop(signal.SIGTERM) == 0


def test_an_unreachable_redis_stops_the_first_start_before_anything_is_written(
    launch: Launch, run: Run, tmp_path: Path
) -> None:
    config_home = tmp_path / "config"
    env = {
        "LEDGERPORT_ADMIN_TOKEN": None,
        "LEDGERPORT_DATABASE_URL": None,
        "XDG_CONFIG_HOME": str(config_home),
    }
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = closed.getsockname()[1]
        result = run({**env, "LEDGERPORT_REDIS_URL": f"redis://127.0.0.1:{port}/0"}, timeout=60)

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert f"LEDGERPORT_REDIS_URL: cannot reach redis://127.0.0.1:{port}/0" in lines[0]
    assert_no_traceback(result.stderr)
    # Nothing written: no database, no key file, no admin token generated and lost.
    assert "generated admin token" not in result.stdout
    assert not (tmp_path / "ledgerport.db").exists()
    assert not config_home.exists()
    # So the next start, with Redis fixed, is a first start that shows its token.
    server = launch(env)
    assert len(server.generated_admin_tokens()) == 1, server.output()
    assert server.stop(signal.SIGTERM) == 0


def test_a_port_in_use_stops_the_start_in_one_line_before_anything_is_made(
    run: Run, tmp_path: Path
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run({"LEDGERPORT_BIND": f"127.0.0.1:{port}"}, timeout=30)

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "Address already in use" in lines[0]
    assert "LEDGERPORT_BIND" in lines[0]
    assert_no_traceback(result.stderr + result.stdout)
    # Nothing made: no database, and no admin token generated (and so used up).
    assert "generated admin token" not in result.stdout
    assert not (tmp_path / "ledgerport.db").exists()


@pytest.mark.postgres
def test_a_missing_postgres_database_stops_the_start_in_one_line_naming_it(run: Run) -> None:
    name = f"ledgerport_missing_{os.getpid()}_{time.monotonic_ns()}"
    url = urlunsplit(urlsplit(POSTGRES_ADMIN_URL)._replace(path=f"/{name}"))

    result = run({"LEDGERPORT_DATABASE_URL": url, "LEDGERPORT_SECRET_KEY": "k" * 43}, timeout=60)

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "LEDGERPORT_DATABASE_URL" in lines[0]
    assert f"createdb {name}" in lines[0]
    assert_no_traceback(result.stderr)


def test_migrate_creates_the_default_database_and_exits(run: Run, tmp_path: Path) -> None:
    first = run(args=("migrate",))
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "ledgerport.db").is_file()
    second = run(args=("migrate",))
    assert second.returncode == 0, second.stderr
    assert_no_traceback(first.stderr + second.stderr)


# --- the root key ------------------------------------------------------------------------------


def test_another_root_key_on_the_same_database_stops_the_start(launch: Launch, run: Run) -> None:
    server = launch({"LEDGERPORT_SECRET_KEY": "a" * 32})
    assert server.stop(signal.SIGTERM) == 0

    result = run({"LEDGERPORT_SECRET_KEY": "b" * 32}, timeout=30)

    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "configuration error" in lines[0]
    assert "this database was set up with" in lines[0]
    assert_no_traceback(result.stderr)


# --- the management listener ---------------------------------------------------------------------


def _answering(
    url: str, process: subprocess.Popen[bytes], timeout: float = STARTUP_TIMEOUT
) -> bool:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if client.get(url).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    return False


def test_the_management_listener_alone_answers_health_readiness_and_metrics(
    processes: _Processes,
) -> None:
    main, management = free_port(), free_port()
    env = server_env(
        {
            "LEDGERPORT_BIND": f"127.0.0.1:{main}",
            "LEDGERPORT_MANAGEMENT_BIND": f"127.0.0.1:{management}",
            "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
        }
    )
    process, _, err = processes.popen(env, ("serve",), "serve")
    assert _answering(f"http://127.0.0.1:{management}/readyz", process), err.read_text()

    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(timeout=10.0, trust_env=False) as client:
        for path in ("/healthz", "/readyz", "/metrics"):
            assert client.get(f"http://127.0.0.1:{management}{path}").status_code == 200, path
            assert client.get(f"http://127.0.0.1:{main}{path}").status_code == 404, path
        created = client.post(
            f"http://127.0.0.1:{main}/admin/businesses", json={"name": "Main"}, headers=admin
        )
        elsewhere = client.post(
            f"http://127.0.0.1:{management}/admin/businesses", json={"name": "No"}, headers=admin
        )
    assert created.status_code == 201
    assert elsewhere.status_code == 404
    assert elsewhere.json()["statusCode"] == 404


def test_a_management_address_in_use_stops_the_start_in_one_line(run: Run, tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(
            {
                "LEDGERPORT_BIND": f"127.0.0.1:{free_port()}",
                "LEDGERPORT_MANAGEMENT_BIND": f"127.0.0.1:{port}",
            },
            timeout=30,
        )

    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "LEDGERPORT_MANAGEMENT_BIND" in lines[0]
    assert not (tmp_path / "ledgerport.db").exists()
