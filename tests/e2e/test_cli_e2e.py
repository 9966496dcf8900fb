"""The app author's commands against a served instance, on both stores: ``login`` by the device
flow, approved through the server's own routes as the signed-in developer; ``apps``;
``trigger`` while ``tail deliveries`` waits; ``deliveries recover``; ``runs replay``; refusals
and usage errors with their exit codes; ``logout`` revoking the token."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from .served import provision, served, store_env

ADMIN_TOKEN = "lp_admin_e2e-cli-token-0123456789abcdef"
PASSWORD = "pw-cli-123456789"
COMMAND_TIMEOUT = 60


@contextmanager
def receiver() -> Iterator[str]:
    """A local endpoint answering every delivery 200."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


class Cli:
    """``python -m ledgerport`` with a credentials file of the test's own."""

    def __init__(self, workdir: Path) -> None:
        self.credentials = workdir / "cli" / "credentials.json"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
        self.env |= {"LEDGERPORT_CLI_CONFIG": str(self.credentials), "NO_COLOR": "1"}

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "ledgerport", *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ledgerport", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )


def approve_in_console(base: str, email: str, user_code: str) -> None:
    """Sign in on the application host's page and approve the code, as the console does."""
    with httpx.Client(base_url=base, timeout=10.0, trust_env=False) as browser:
        page = browser.get("/login").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf is not None
        signed_in = browser.post(
            "/login",
            data={"email": email, "password": PASSWORD, "csrf_token": csrf[1], "next": "/"},
        )
        assert signed_in.status_code == 303, signed_in.text
        approved = browser.post(
            "/developer/cli-logins",
            json={"userCode": user_code},
            headers={"Sec-Fetch-Site": "same-origin"},
        )
        assert approved.status_code == 204, approved.text


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_app_authors_loop(tmp_path: Path, backend: str) -> None:
    cli = Cli(tmp_path)
    with (
        store_env(backend, tmp_path) as env,
        served(tmp_path, ADMIN_TOKEN, env) as server,
        receiver() as hook,
    ):
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        email = "author@example.com"
        user = httpx.post(
            f"{server.base}/admin/users",
            json={"email": email, "password": PASSWORD},
            headers=admin,
            timeout=10.0,
        ).json()
        made = provision(server.base, ADMIN_TOKEN, ["customers:read"], developer_id=user["id"])
        webhook = httpx.post(
            f"{server.base}/developer/apps/{made.app_id}/webhooks",
            json={"url": hook, "events": ["customer.created"]},
            headers={"Authorization": f"Bearer {made.developer_token}"},
            timeout=10.0,
        ).json()

        signed_out = cli.run("apps", "--server", server.base)
        login = cli.start("login", "--server", server.base, "--json")
        assert login.stdout is not None
        started = json.loads(login.stdout.readline())
        approve_in_console(server.base, email, started["user_code"])
        login_out, login_err = login.communicate(timeout=COMMAND_TIMEOUT)
        mode = stat.S_IMODE(cli.credentials.stat().st_mode)
        kept = json.loads(cli.credentials.read_text())

        listed = cli.run("apps", "--json")
        table = cli.run("apps")

        tail = cli.start("tail", "deliveries", "--app", made.app_id, "--json", "--max-events", "1")
        assert tail.stderr is not None
        assert "Waiting for" in tail.stderr.readline()
        triggered = cli.run("trigger", "customer.created", "--app", made.app_id, "--json")
        tail_out, _ = tail.communicate(timeout=COMMAND_TIMEOUT)

        since = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        recovered = cli.run(
            "deliveries", "recover", "--app", made.app_id, "--webhook", webhook["id"],
            "--since", since, "--json",
        )  # fmt: skip
        unknown_run = cli.run("runs", "replay", "run_nope", "--app", made.app_id, "--function", "f")
        unsubscribed = cli.run("trigger", "invoice.paid", "--app", made.app_id)
        usage = cli.run("trigger", "--app", made.app_id)

        logout = cli.run("logout")
        revoked = httpx.get(
            f"{server.base}/developer/apps",
            headers={"Authorization": f"Bearer {kept['servers'][server.base]['token']}"},
            timeout=10.0,
        )
        after = cli.run("apps", "--server", server.base)

    assert signed_out.returncode == 1
    assert signed_out.stderr.startswith("ledgerport: not signed in")
    assert login.returncode == 0, login_err
    assert started["verification_uri"].endswith("/console/cli-login")
    assert json.loads(login_out)["server"] == server.base
    assert mode == 0o600
    assert kept["current"] == server.base
    assert kept["servers"][server.base]["token"].startswith("lp_dev_")

    assert listed.returncode == 0, listed.stderr
    (app,) = json.loads(listed.stdout)["data"]
    assert (app["id"], app["webhooks"], app["functions"]) == (made.app_id, 1, 0)
    assert table.stdout.split()[:5] == ["ID", "NAME", "STATUS", "WEBHOOKS", "FUNCTIONS"]
    assert made.app_id in table.stdout

    assert triggered.returncode == 0, triggered.stderr
    queued = json.loads(triggered.stdout)
    assert queued["webhookId"] == webhook["id"]
    assert tail.returncode == 0
    event = json.loads(tail_out)
    assert event["event"] == "delivery"
    assert event["id"]
    assert event["data"]["id"] == queued["deliveryId"]
    assert (event["data"]["status"], event["data"]["test"]) == ("delivered", True)

    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout) == {"queued": 0, "skipped": 0}
    assert unknown_run.returncode == 1
    assert unknown_run.stderr.count("\n") == 1
    assert unknown_run.stderr.startswith("ledgerport: ")
    assert unsubscribed.returncode == 1
    assert "subscribes to invoice.paid" in unsubscribed.stderr
    assert usage.returncode == 2
    assert "Missing argument 'TYPE'" in usage.stderr

    assert logout.returncode == 0, logout.stderr
    assert revoked.status_code == 401
    assert after.returncode == 1
    assert json.loads(cli.credentials.read_text()) == {"current": None, "servers": {}}


HANDLER = """export async function handler(event, context) {
  console.log("saw", event.type);
  return { version: VERSION, customer: event.data.id, test: event.data.test };
}
"""


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_functions_push_versions_and_rollback(tmp_path: Path, backend: str) -> None:
    cli = Cli(tmp_path)
    source = tmp_path / "sync.js"
    with store_env(backend, tmp_path) as env, served(tmp_path, ADMIN_TOKEN, env) as server:
        made = provision(server.base, ADMIN_TOKEN, ["customers:read"])
        cli.credentials.parent.mkdir(parents=True)
        cli.credentials.write_text(
            json.dumps(
                {"current": server.base, "servers": {server.base: {"token": made.developer_token}}}
            )
        )
        app = ("--app", made.app_id)
        pushed = []
        for version in (1, 2):
            source.write_text(HANDLER.replace("VERSION", str(version)))
            push = ("functions", "push", "sync", str(source), *app)
            pushed.append(cli.run(*push, "--events", "customer.created", "--json"))
        listed = cli.run("functions", "versions", "sync", *app, "--json")
        table = cli.run("functions", "versions", "sync", *app)
        rolled = cli.run("functions", "rollback", "sync", "1", *app, "--json")
        missing = cli.run("functions", "rollback", "sync", "9", *app)
        bad_event = cli.run(
            "functions", "push", "other", str(source), *app, "--events", "no.such", "--json"
        )

    assert [p.returncode for p in pushed] == [0, 0], [p.stderr for p in pushed]
    assert [json.loads(p.stdout)["version"] for p in pushed] == [1, 2]
    assert listed.returncode == 0, listed.stderr
    versions = json.loads(listed.stdout)["data"]
    assert [(v["version"], v["active"]) for v in versions] == [(2, True), (1, False)]
    assert table.stdout.split()[:4] == ["VERSION", "CREATED", "ACTIVE", "BYTES"]
    assert rolled.returncode == 0, rolled.stderr
    assert (json.loads(rolled.stdout)["version"], json.loads(rolled.stdout)["latestVersion"]) == (
        1,
        2,
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("ledgerport: ")
    assert missing.stderr.count("\n") == 1
    assert bad_event.returncode == 1


def test_functions_run_locally_in_the_sandbox_with_its_limits(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    good, throws, spins = tmp_path / "good.js", tmp_path / "throws.js", tmp_path / "spins.js"
    good.write_text(HANDLER.replace("VERSION", "1"))
    throws.write_text('export async function handler() { throw new Error("boom"); }\n')
    spins.write_text("export async function handler() { for (;;) {} }\n")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"type": "mine", "data": {"id": "cus_1"}}))

    sample = cli.run("functions", "run", str(good), "--event", "customer.created", "--json")
    from_file = cli.run("functions", "run", str(good), "--event-file", str(event), "--json")
    thrown = cli.run("functions", "run", str(throws), "--json")
    spun = cli.run("functions", "run", str(spins), "--json")
    people = cli.run("functions", "run", str(throws))
    both = cli.run("functions", "run", str(good), "--event", "a", "--event-file", str(event))

    assert sample.returncode == 0, sample.stderr
    ran = json.loads(sample.stdout)
    assert ran["ok"] is True
    assert ran["logs"] == ["saw customer.created"]
    assert ran["result"]["test"] is True
    assert ran["result"]["customer"].startswith("cus_")
    assert json.loads(from_file.stdout)["result"] == {"version": 1, "customer": "cus_1"}
    assert thrown.returncode == 1
    failed = json.loads(thrown.stdout)
    assert (failed["ok"], failed["error"]) == (False, "Error: boom")
    assert "function.js:1" in failed["stack"]
    assert spun.returncode == 1
    assert json.loads(spun.stdout)["limit"] in ("cpu", "wall")
    assert "failed" in people.stdout
    assert "Error: boom" in people.stdout
    assert both.returncode == 2


def _line_within(stream: Any, seconds: float) -> str:
    """The next line of ``stream``, or a failure after ``seconds``: a watch that misses a save
    must fail the test, not hang it."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    if not lines:
        pytest.fail(f"no line within {seconds} s")
    return lines[0]


def test_functions_run_watch_runs_again_on_save(tmp_path: Path) -> None:
    """A save made as soon as the first run is printed is seen: the watch compares the file
    with how it was before the run read it, not after."""
    cli = Cli(tmp_path)
    source = tmp_path / "watched.js"
    source.write_text(HANDLER.replace("VERSION", "1"))
    watching = cli.start("functions", "run", str(source), "--watch", "--json")
    assert watching.stdout is not None
    try:
        first = json.loads(_line_within(watching.stdout, COMMAND_TIMEOUT))
        source.write_text(HANDLER.replace("VERSION", "2"))
        second = json.loads(_line_within(watching.stdout, COMMAND_TIMEOUT))
    finally:
        watching.terminate()
        watching.communicate(timeout=COMMAND_TIMEOUT)

    assert (first["result"]["version"], second["result"]["version"]) == (1, 2)


@contextmanager
def dropping_stream(seen: list[str | None]) -> Iterator[str]:
    """A stream that sends one event per connection and then drops it, the event after the
    ``Last-Event-ID`` it is sent (recorded in ``seen``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            last = self.headers.get("Last-Event-ID")
            seen.append(last)
            number = 1 if last is None else int(last.split("-")[1]) + 1
            event = json.dumps({"id": f"dlv_{number}", "type": "invoice.paid"})
            body = f": hello\n\nevent: delivery\nid: 1-{number}\ndata: {event}\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(body.encode())
            self.wfile.flush()
            self.close_connection = True  # dropped: the client must come back

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_tail_resumes_after_a_dropped_connection_from_the_last_event(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    seen: list[str | None] = []
    with dropping_stream(seen) as base:
        cli.credentials.parent.mkdir(parents=True)
        cli.credentials.write_text(
            json.dumps({"current": base, "servers": {base: {"token": "lp_dev_x"}}})
        )
        tailed = cli.run("tail", "deliveries", "--app", "app_1", "--json", "--max-events", "3")

    assert tailed.returncode == 0, tailed.stderr
    events = [json.loads(line) for line in tailed.stdout.splitlines()]
    assert [e["data"]["id"] for e in events] == ["dlv_1", "dlv_2", "dlv_3"]
    assert seen == [None, "1-1", "1-2"]
    assert "Reconnected: resuming" in tailed.stderr
