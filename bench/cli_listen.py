"""How fast ``ledgerport listen`` forwards, and what it adds to a delivery's time, against a push
endpoint to the same local receiver in the same run.

Usage::

    .venv/bin/python bench/cli_listen.py [--backend sqlite|postgres] [--burst N] [--single M]

One ``ledgerport serve`` starts on the store, with an app whose developer token the CLI uses,
and a local receiver (a threaded HTTP server on loopback answering 200 at once) that notes when
each delivery arrives. For each way of delivering, alone (the other endpoint switched off or not
made yet): a push webhook to the receiver, then ``ledgerport listen --forward-to`` the receiver
(one process):

- **latency**: ``--single`` customers made one at a time, each waiting for its delivery; a
  delivery's time is from the creating request's answer to its arrival at the receiver.
  Printed: the median and 90th percentile of each, and listen's added median;
- **burst**: ``--burst`` customers made at once (8 clients); the rate is deliveries a second
  from the first request to the last arrival (both bounded by how fast the server makes
  events, so alike when forwarding keeps up);
- **drain** (listen only): the listen process is paused (SIGSTOP), ``--burst`` customers are
  made, and it is let go (SIGCONT): the rate from then to the last arrival is what one listen
  process forwards when deliveries wait for it.

Targets (issue 48): listen forwards at >= 200 deliveries a second on one process, and adds under
50 ms to a delivery's time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.served import provision, served, store_env

ADMIN_TOKEN = "lp_admin_bench-cli-listen-0123456789"
TIMEOUT = 120.0


class Receiver:
    """Answers 200 at once; notes when each event's delivery arrived (by event id)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.changed = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with outer.changed:
                    outer.arrived[self.headers.get("X-Webhook-Event-Id", "")] = time.perf_counter()
                    outer.changed.notify_all()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int) -> float:
        """When the ``count``-th delivery since the last reset arrived."""
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.arrived) >= count, TIMEOUT):
                raise TimeoutError(f"{len(self.arrived)} of {count} deliveries arrived")
            return max(self.arrived.values())

    def reset(self) -> None:
        with self.changed:
            self.arrived.clear()


class Maker:
    """Makes customers (each one event, customer.created) as the app."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token
        self.local = threading.local()

    def one(self, name: str = "Bench") -> tuple[str, float]:
        client = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = httpx.Client(
                base_url=self.base,
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=30.0,
                trust_env=False,
            )
        response = client.post("/customers", json={"name": name})
        answered = time.perf_counter()
        assert response.status_code == 201, response.text
        return response.json()["id"], answered

    def many(self, count: int) -> None:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: self.one(f"Bench {i}"), range(count)))


def _latencies(maker: Maker, receiver: Receiver, count: int) -> list[float]:
    times = []
    for index in range(count):
        receiver.reset()
        _, answered = maker.one()
        times.append((receiver.wait_for(1) - answered) * 1000)
        del index
    return times


def _burst(maker: Maker, receiver: Receiver, count: int) -> float:
    receiver.reset()
    started = time.perf_counter()
    maker.many(count)
    return count / (receiver.wait_for(count) - started)


def _summary(name: str, times: list[float]) -> float:
    median = statistics.median(times)
    p90 = statistics.quantiles(times, n=10)[-1]
    print(f"{name}: delivery time median {median:.1f} ms, p90 {p90:.1f} ms")  # noqa: T201
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--single", type=int, default=50)
    args = parser.parse_args()
    receiver = Receiver()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        with (
            store_env(args.backend, work) as env,
            served(work, ADMIN_TOKEN, {**env, "LEDGERPORT_RATE_LIMIT_FACTOR": "1000"}) as server,
        ):
            made = provision(server.base, ADMIN_TOKEN, ["customers:read", "customers:write"])
            maker = Maker(server.base, made.access_token)
            console = httpx.Client(
                base_url=f"{server.base}/developer/apps/{made.app_id}",
                headers={"Authorization": f"Bearer {made.developer_token}"},
                timeout=30.0,
                trust_env=False,
            )
            push = console.post(
                "/webhooks", json={"url": receiver.url, "events": ["customer.created"]}
            ).json()
            maker.many(50)  # warm-up
            receiver.wait_for(50)
            push_times = _latencies(maker, receiver, args.single)
            push_rate = _burst(maker, receiver, args.burst)
            console.patch(f"/webhooks/{push['id']}", json={"enabled": False})

            credentials = work / "credentials.json"
            credentials.write_text(
                json.dumps(
                    {
                        "current": server.base,
                        "servers": {server.base: {"token": made.developer_token}},
                    }
                )
            )
            environment = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
            environment |= {"LEDGERPORT_CLI_CONFIG": str(credentials), "NO_COLOR": "1"}
            listen = subprocess.Popen(
                [sys.executable, "-m", "ledgerport", "listen", "--app", made.app_id,
                 "--forward-to", receiver.url, "--events", "customer.created", "--json"],
                env=environment, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            try:
                assert listen.stdout is not None
                json.loads(listen.stdout.readline())  # ready
                threading.Thread(target=listen.stdout.read, daemon=True).start()
                receiver.reset()
                maker.many(50)  # warm-up
                receiver.wait_for(50)
                listen_times = _latencies(maker, receiver, args.single)
                listen_rate = _burst(maker, receiver, args.burst)
                receiver.reset()
                listen.send_signal(signal.SIGSTOP)
                maker.many(args.burst)
                let_go = time.perf_counter()
                listen.send_signal(signal.SIGCONT)
                drain_rate = args.burst / (receiver.wait_for(args.burst) - let_go)
            finally:
                listen.send_signal(signal.SIGCONT)
                listen.send_signal(signal.SIGINT)
                listen.wait(30)
            console.close()
    load = os.getloadavg()[0]
    print(f"backend {args.backend}, load average {load:.1f}")  # noqa: T201
    push_median = _summary("push", push_times)
    listen_median = _summary("listen", listen_times)
    added = listen_median - push_median
    print(f"listen adds {added:.1f} ms to the median (target: under 50 ms)")  # noqa: T201
    print(  # noqa: T201
        f"burst of {args.burst}: push {push_rate:.0f}/s, listen {listen_rate:.0f}/s"
        f" ({listen_rate / push_rate:.2f}x)"
    )
    print(  # noqa: T201
        f"drain of {args.burst} waiting: listen {drain_rate:.0f}/s (target: >= 200/s)"
    )


if __name__ == "__main__":
    main()
