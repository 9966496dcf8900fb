"""``ledgerport listen`` against a served instance, on both stores: deliveries forwarded to a real
local receiver that checks them with Stripe's own verifier and the secret listen printed; a
failing receiver's deliveries retried on the schedule and recorded as their attempts; the
connection to the server cut and restored with nothing lost; the stream endpoint listed while
listen runs and deleted when it is interrupted; refusals and usage errors with their exit
codes."""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import stripe

from .served import provision, served, store_env
from .test_cli_e2e import ADMIN_TOKEN, COMMAND_TIMEOUT, Cli

RETRY_DELAYS = "0,1,1,1,1,1"
"""The served instance retries after a second: a failed answer comes back within the test."""


class Receiver:
    """A local server that verifies each delivery with Stripe's library and answers 500 to the
    first attempt of every delivery, 200 to the next."""

    def __init__(self) -> None:
        self.secret = ""
        self.seen: Counter[str] = Counter()
        self.verified: list[bool] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    stripe.WebhookSignature.verify_header(
                        body.decode(), self.headers["X-Webhook-Signature"], outer.secret, 300
                    )
                    verified = True
                except stripe.SignatureVerificationError:
                    verified = False
                with outer.lock:
                    outer.verified.append(verified)
                    delivery = self.headers["X-Webhook-Id"]
                    outer.seen[delivery] += 1
                    first = outer.seen[delivery] == 1
                answer = b"try again" if first else b"thanks"
                self.send_response(500 if first else 200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhook"


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


class CuttingProxy:
    """A TCP proxy to the server that can cut every connection and refuse new ones, then let
    them through again."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open: set[socket.socket] = set()
        self.down = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down.is_set():
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.open |= {client, server}
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 1.0)
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    (b if source is a else a).sendall(data)
        except OSError:
            return
        finally:
            for sock in (a, b):
                sock.close()
                with self.lock:
                    self.open.discard(sock)

    def cut(self) -> None:
        self.down.set()
        with self.lock:
            for sock in list(self.open):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def restore(self) -> None:
        self.down.clear()

    def close(self) -> None:
        self.cut()
        self.listener.close()


def _lines(process: subprocess.Popen[str], count: int) -> list[dict[str, Any]]:
    assert process.stdout is not None
    lines = []
    for _ in range(count):
        line = process.stdout.readline()
        assert line, "listen ended early"
        lines.append(json.loads(line))
    return lines


def _customer(base: str, token: str, name: str) -> None:
    response = httpx.post(
        f"{base}/customers",
        json={"name": name},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10.0,
    )
    assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_listen_forwards_retries_resumes_and_cleans_up(tmp_path: Path, backend: str) -> None:
    cli = Cli(tmp_path)
    with (
        store_env(backend, tmp_path) as env,
        served(tmp_path, ADMIN_TOKEN, {**env, "LEDGERPORT_WEBHOOK_RETRY_DELAYS": RETRY_DELAYS})
        as server,
        receiving() as receiver,
    ):  # fmt: skip
        made = provision(server.base, ADMIN_TOKEN, ["customers:read", "customers:write"])
        port = int(server.base.rsplit(":", 1)[1])
        proxy = CuttingProxy(("127.0.0.1", port))
        cli.credentials.parent.mkdir(parents=True)
        cli.credentials.write_text(
            json.dumps(
                {"current": proxy.url, "servers": {proxy.url: {"token": made.developer_token}}}
            )
        )
        console = {"Authorization": f"Bearer {made.developer_token}"}
        webhooks = f"{server.base}/developer/apps/{made.app_id}/webhooks"
        listen = None
        try:
            listen = cli.start(
                "listen", "--app", made.app_id, "--forward-to", receiver.url,
                "--events", "customer.created", "--json",
            )  # fmt: skip
            (ready,) = _lines(listen, 1)
            receiver.secret = ready["secret"]
            listed = httpx.get(webhooks, headers=console, timeout=10.0).json()["data"]

            for name in ("A", "B"):
                _customer(server.base, made.access_token, name)
            forwarded = _lines(listen, 4)  # each answered 500, then 200
            deliveries = httpx.get(
                f"{webhooks}/{ready['webhookId']}/deliveries", headers=console, timeout=10.0
            ).json()["data"]

            proxy.cut()
            for name in ("C", "D"):
                _customer(server.base, made.access_token, name)
            proxy.restore()
            resumed = _lines(listen, 4)

            listen.send_signal(signal.SIGINT)
            _, stopped_err = listen.communicate(timeout=COMMAND_TIMEOUT)
            after = httpx.get(webhooks, headers=console, timeout=10.0).json()["data"]

            unknown_app = cli.run("listen", "--app", "app_nope", "--forward-to", receiver.url)
            no_target = cli.run("listen", "--app", made.app_id)
            bad_target = cli.run("listen", "--app", made.app_id, "--forward-to", "ftp://x")
            bad_events = cli.run(
                "listen", "--app", made.app_id, "--forward-to", receiver.url, "--events", "no.such"
            )
        finally:
            proxy.close()
            if listen is not None and listen.poll() is None:
                listen.kill()
                listen.communicate()

    assert ready["ready"] is True
    assert ready["secret"].startswith("whsec_")
    assert ready["events"] == ["customer.created"]
    assert [(w["id"], w["kind"], w["url"]) for w in listed] == [
        (ready["webhookId"], "stream", receiver.url)
    ]
    assert all(receiver.verified)
    assert len(receiver.verified) == 8
    assert sorted((line["attempt"], line["status"]) for line in forwarded) == [
        (1, 500), (1, 500), (2, 200), (2, 200),
    ]  # fmt: skip
    assert {line["type"] for line in forwarded} == {"customer.created"}
    assert all(line["durationMs"] < 5000 for line in forwarded)
    assert [(d["status"], d["attempts"], d["responseCode"]) for d in deliveries] == [
        ("delivered", 2, 200), ("delivered", 2, 200),
    ]  # fmt: skip
    assert sorted((line["attempt"], line["status"]) for line in resumed) == [
        (1, 500), (1, 500), (2, 200), (2, 200),
    ]  # fmt: skip
    # Four deliveries, none lost, each forwarded twice (once per attempt) and no more.
    assert len(receiver.seen) == 4
    assert set(receiver.seen.values()) == {2}
    assert listen.returncode == 0, stopped_err
    assert f"deleted the stream endpoint {ready['webhookId']}" in stopped_err
    assert after == []
    assert unknown_app.returncode == 1
    assert unknown_app.stderr.startswith("ledgerport: ")
    assert no_target.returncode == 2
    assert "--forward-to" in no_target.stderr
    assert bad_target.returncode == 2
    assert bad_events.returncode == 1
    assert "no.such" in bad_events.stderr
