"""``ledgerport listen --app APP --forward-to URL``: the app's deliveries forwarded to a local
server, with no tunnel and no inbound connection.

It makes a stream endpoint of the app (``POST .../webhooks`` with ``kind: "stream"``), whose
deliveries the engine signs, logs and retries as any other but does not post: this command pulls
them (``POST .../stream/pull``, a long poll), forwards each to the local URL with the headers it
came with (the signature, in the stripe scheme, by the secret printed at start), and reports the
answer (``POST .../stream/report``), which becomes the delivery's attempt: a failed one is
retried on the usual schedule and pulled again then. Pulling goes on while deliveries are
forwarded (at most IN_FLIGHT at once, each on a keep-alive connection of its own worker), and
reports go in batches. A dropped connection is resumed on the same endpoint: what was made
meanwhile waits for it on the server, and what was forwarded but not reported comes again
when its lease runs out (at least once). Interrupted, it deletes the endpoint.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from ._client import Session, server_message
from ._group import CONTEXT, app_option, common, session
from ._output import Refused, console, emit_json

if TYPE_CHECKING:
    import httpx

IN_FLIGHT = 32
"""Deliveries pulled and not reported yet, at most: forwarded by as many workers at once."""
REPORT_BATCH = 32
"""Reports sent in one request at most (the server takes no more)."""
REPORT_LINGER = 0.01
"""Seconds a report waits for others to go with it: under load, one request (and one
transaction of the server's) records many answers."""
BODY_KEPT = 4096
"""Bytes of the local answer's body reported (the attempt log keeps as many)."""
WAIT = 25
"""Seconds a pull waits on the server for a delivery to come due."""
FORWARD_TIMEOUT = 10.0
"""Seconds the local server has to answer (the engine gives a webhook as long by default)."""
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0)
"""Seconds before each reconnect in a row; the last one repeats."""
STOP_WAIT = 5.0
"""Seconds an interrupted listen waits for what it forwards to be reported."""


@dataclass(frozen=True)
class Forwarded:
    """A delivery forwarded and its local answer, as reported."""

    delivery: Mapping[str, Any]
    code: int | None
    duration_ms: float
    body: bytes
    truncated: bool
    error: str | None
    retry_after: str | None
    at: float

    def report(self) -> dict[str, Any]:
        return {
            "deliveryId": self.delivery["id"],
            "lease": self.delivery["lease"],
            "responseCode": self.code,
            "durationMs": round(min(self.duration_ms, 60_000.0), 3),
            "responseBody": self.body.decode("utf-8", "replace")[:BODY_KEPT],
            "responseBodyTruncated": self.truncated,
            "error": self.error,
            "retryAfter": self.retry_after,
        }


class Slots:
    """Deliveries pulled and not reported, counted against IN_FLIGHT."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._changed = threading.Condition()

    def wait_free(self, timeout: float) -> int:
        """How many are free, once at least one is (0 after ``timeout`` seconds)."""
        with self._changed:
            self._changed.wait_for(lambda: self._free > 0, timeout)
            return self._free

    def take(self, count: int) -> None:
        with self._changed:
            self._free -= count

    def give(self, count: int = 1) -> None:
        with self._changed:
            self._free += count
            self._changed.notify_all()

    def wait_all(self, size: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._free >= size, timeout)


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def delivery_line(done: Forwarded) -> str:
    """One delivery as a line: when, type, the local answer, how long, attempt, id."""
    d = done.delivery
    answer = str(done.code) if done.code is not None else (done.error or "no answer")
    return (
        f"{_time(done.at)}  {d.get('type', '')}  {answer}  {done.duration_ms:.0f} ms"
        f"  attempt {d.get('attempt', '')}  {d.get('id', '')}"
    )


def delivery_json(done: Forwarded) -> dict[str, Any]:
    d = done.delivery
    return {
        "time": datetime.fromtimestamp(done.at, UTC).isoformat().replace("+00:00", "Z"),
        "deliveryId": d.get("id"),
        "eventId": d.get("eventId"),
        "type": d.get("type"),
        "attempt": d.get("attempt"),
        "status": done.code,
        "durationMs": round(done.duration_ms, 3),
        "error": done.error,
    }


class Listener:
    """One listen: pulls, forwards, reports and prints, until stopped."""

    def __init__(self, chosen: Session, app_id: str, webhook_id: str, forward_to: str) -> None:
        import httpx

        self.session = chosen
        self.path = f"/developer/apps/{app_id}/webhooks/{webhook_id}/stream"
        self.forward_to = forward_to
        self.slots = Slots(IN_FLIGHT)
        self.reports: queue.Queue[Forwarded | None] = queue.Queue()
        self.stopping = threading.Event()
        self.out, self.status = console(), console(sys.stderr)
        self.as_json = chosen.as_json
        self.local = threading.local()
        self.failure: Refused | None = None
        timeout = httpx.Timeout(10.0, read=WAIT + 15.0)
        self.pulls = chosen.client(timeout=timeout)
        self.reporting = chosen.client()
        self.printing = threading.Lock()

    # --- forwarding ------------------------------------------------------------------------

    def _local_client(self) -> httpx.Client:
        import httpx

        client: httpx.Client | None = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = httpx.Client(
                timeout=FORWARD_TIMEOUT, trust_env=False, follow_redirects=False
            )
        return client

    def forward(self, delivery: Mapping[str, Any]) -> None:
        """POST one delivery to the local URL as it came, and queue its report."""
        import httpx

        headers = [(name, value) for name, value in delivery["headers"]]
        headers.append(("Content-Type", "application/json"))
        body = delivery["body"].encode()
        code: int | None = None
        kept = b""
        truncated = False
        error: str | None = None
        retry_after: str | None = None
        started = time.perf_counter()
        try:
            with self._local_client().stream(
                "POST", self.forward_to, headers=_unique(headers), content=body
            ) as response:
                code = response.status_code
                retry_after = response.headers.get("retry-after")
                for chunk in response.iter_raw():
                    kept += chunk
                    if len(kept) >= BODY_KEPT:
                        truncated = len(kept) > BODY_KEPT
                        break
        except httpx.TimeoutException:
            error = f"timeout: no answer within {FORWARD_TIMEOUT:g} s"
        except httpx.HTTPError as exc:
            error = f"connection error: {exc or type(exc).__name__}"[:500]
        duration = (time.perf_counter() - started) * 1000
        self.reports.put(
            Forwarded(
                delivery,
                code,
                duration,
                kept[:BODY_KEPT],
                truncated,
                error,
                retry_after,
                time.time(),
            )
        )

    # --- reporting -------------------------------------------------------------------------

    def report_loop(self) -> None:
        """Send the reports in batches, each until the server takes it (a dropped connection
        is retried; a lease that ran out meanwhile is the server's to give again)."""
        while True:
            first = self.reports.get()
            if first is None:
                return
            batch = [first]
            linger_until = time.monotonic() + REPORT_LINGER
            while len(batch) < REPORT_BATCH:
                try:
                    more = self.reports.get(timeout=max(linger_until - time.monotonic(), 0.0))
                except queue.Empty:
                    break
                if more is None:
                    self.reports.put(None)
                    break
                batch.append(more)
            self._send_reports(batch)
            for done in batch:
                self._print(done)
            self.slots.give(len(batch))

    def _send_reports(self, batch: list[Forwarded]) -> None:
        import httpx

        failures = 0
        body = {"data": [done.report() for done in batch]}
        while True:
            try:
                response = self.reporting.post(f"{self.path}/report", json=body)
            except httpx.HTTPError:
                if self.stopping.is_set() and failures >= 2:
                    return
                _back_off(failures)
                failures += 1
                continue
            if response.status_code >= 500 or response.status_code == 429:
                _back_off(failures)
                failures += 1
                continue
            if response.status_code >= 400:
                self.failure = Refused(server_message(response))
                self.stopping.set()
            return

    def _print(self, done: Forwarded) -> None:
        with self.printing:
            if self.as_json:
                emit_json(delivery_json(done))
            else:
                self.out.print(delivery_line(done), markup=False)

    # --- pulling ---------------------------------------------------------------------------

    def pull_loop(self, workers: ThreadPoolExecutor) -> None:
        """Pull while not stopped: as many as there are free slots, each handed to a worker."""
        import httpx

        failures = 0
        while not self.stopping.is_set():
            free = self.slots.wait_free(timeout=1.0)
            if not free:
                continue
            try:
                response = self.pulls.post(
                    f"{self.path}/pull", params={"wait": WAIT, "limit": free}
                )
            except httpx.HTTPError:
                if failures == 0:
                    self.status.print("Connection lost: reconnecting", style="dim")
                _back_off(failures)
                failures += 1
                continue
            if response.status_code >= 500 or response.status_code == 429:
                _back_off(failures)
                failures += 1
                continue
            if response.status_code >= 400:
                raise Refused(server_message(response))
            if failures:
                self.status.print("Reconnected: resuming", style="dim")
                failures = 0
            pulled = response.json()["data"]
            self.slots.take(len(pulled))
            for delivery in pulled:
                workers.submit(self.forward, delivery)

    def close(self) -> None:
        self.pulls.close()
        self.reporting.close()


def _unique(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    kept = []
    for name, value in headers:
        if name.lower() not in seen:
            seen.add(name.lower())
            kept.append((name, value))
    return kept


@contextlib.contextmanager
def _interrupt_on_term() -> Iterator[None]:
    """SIGTERM ends a listen as Ctrl-C does (its endpoint deleted)."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _events(value: str | None) -> list[str] | None:
    if value is None:
        return None
    events = [part.strip() for part in value.split(",") if part.strip()]
    if not events:
        raise click.BadParameter("name at least one event type", param_hint="--events")
    return events


@click.command(context_settings=CONTEXT)
@app_option
@click.option(
    "--forward-to", "forward_to", required=True, metavar="URL",
    help="Where each delivery is POSTed, e.g. http://localhost:4242/webhook.",
)  # fmt: skip
@click.option(
    "--events", metavar="a,b",
    help="Event types to receive, comma-separated (default: every one the app may receive).",
)  # fmt: skip
@common
def listen(
    app_id: str, forward_to: str, events: str | None, server: str | None, as_json: bool
) -> None:
    """Forward the app's deliveries to a local URL, with no tunnel, until interrupted.

    A stream endpoint of the app is made for the session (listed among its webhooks with kind
    stream) and deleted when listen ends. Its deliveries are signed (stripe scheme, with the
    secret printed at start), logged and retried like any other: the local answer is the
    attempt. Nothing made while listen is away is lost, for up to an hour.

    \b
    Example:
      ledgerport listen --app app_123 --forward-to http://localhost:4242/webhook
      ledgerport listen --app app_123 --forward-to http://localhost:4242/webhook \\
          --events invoice.paid,customer.created --json
    """
    if not forward_to.startswith(("http://", "https://")):
        raise click.BadParameter("must be an http or https URL", param_hint="--forward-to")
    wanted = _events(events)
    chosen = session(server, as_json).signed_in()
    body: dict[str, Any] = {"url": forward_to, "kind": "stream"}
    if wanted is not None:
        body["events"] = wanted
    created = chosen.call("POST", f"/developer/apps/{app_id}/webhooks", json=body)
    webhook_id = created["id"]
    if as_json:
        emit_json(
            {"ready": True, "webhookId": webhook_id, "secret": created["secret"],
             "forwardTo": forward_to, "events": created["events"]}
        )  # fmt: skip
    else:
        err = console(sys.stderr)
        err.print(
            f"Ready: forwarding the deliveries of {app_id} to {forward_to}"
            f" (stream endpoint {webhook_id}; Ctrl-C to stop)",
            markup=False,
        )
        err.print(
            f"Your signing secret is {created['secret']} (stripe scheme, X-Webhook-Signature)",
            markup=False,
        )
    listener = Listener(chosen, app_id, webhook_id, forward_to)
    reporter = threading.Thread(target=listener.report_loop, name="reports", daemon=True)
    reporter.start()
    try:
        with _interrupt_on_term(), ThreadPoolExecutor(IN_FLIGHT, "forward") as workers:
            try:
                listener.pull_loop(workers)
            except KeyboardInterrupt:
                pass
            finally:
                listener.stopping.set()
        listener.slots.wait_all(IN_FLIGHT, STOP_WAIT)
    except KeyboardInterrupt:
        pass
    finally:
        listener.stopping.set()
        listener.reports.put(None)
        reporter.join(STOP_WAIT)
        listener.close()
        _delete(chosen, app_id, webhook_id)
    if listener.failure is not None:
        raise listener.failure


def _delete(chosen: Session, app_id: str, webhook_id: str) -> None:
    """Delete the session's endpoint; not reached, the server deletes it after an hour."""
    try:
        chosen.call("DELETE", f"/developer/apps/{app_id}/webhooks/{webhook_id}")
    except Refused as exc:
        console(sys.stderr).print(
            f"Could not delete the stream endpoint {webhook_id} ({exc.format_message()}):"
            " the server deletes it after an hour without a listener",
            markup=False,
        )
    else:
        console(sys.stderr).print(
            f"Stopped: deleted the stream endpoint {webhook_id}", markup=False
        )


def _back_off(failures: int) -> None:
    """Wait before trying again after ``failures`` failures in a row (RECONNECT_DELAYS, its last
    delay from then on)."""
    time.sleep(RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)])
