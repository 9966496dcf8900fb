"""The live streams (contract.md: Live streams for the console and the CLI), on both stores: each
delivery attempt and each run sends one event as it is recorded, its data the list item the
console API answers (with where it belongs), its id what ``Last-Event-ID`` resumes after, within
the last hour; a comment line when nothing was sent for 15 s; at most 10 streams open at once
for a developer (429 past it, in the envelope); a stream's end frees its place; the app must be
the developer's; on PostgreSQL a row recorded by a transaction that commits after a younger one
is not passed over."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from ledgerport import apps, queues
from ledgerport.clock import FrozenClock
from ledgerport.http import READ_INTERVAL, STREAMS_PER_DEVELOPER, Broadcaster
from ledgerport.platform import Platform
from ledgerport.storage import Store, Transaction

from .test_storage_quota import Tenant, attempted, ran, record_again, tenant
from .webhook_world import hooked

TIMEOUT = 60


@dataclass(frozen=True)
class Event:
    id: str
    name: str
    data: dict[str, Any]


@dataclass
class Stream:
    """An open stream, read as a client reads one: its status, headers, events and comments."""

    connection: Any
    buffer: str = ""
    comments: list[str] = field(default_factory=list)

    @property
    def status(self) -> int:
        return int(self.connection.status_code)

    async def block(self) -> str:
        """The next event or comment block (up to the blank line that ends it)."""
        while "\n\n" not in self.buffer:
            self.buffer += (await self.connection.receive()).decode()
        block, self.buffer = self.buffer.split("\n\n", 1)
        return block

    async def event(self) -> Event:
        """The next event; comments on the way are kept."""
        while True:
            fields: dict[str, str] = {}
            for line in (await self.block()).split("\n"):
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                    continue
                name, _, value = line.partition(": ")
                fields[name] = value
            if "data" in fields:
                return Event(fields["id"], fields["event"], json.loads(fields["data"]))

    async def events(self, count: int) -> list[Event]:
        return [await self.event() for _ in range(count)]


@asynccontextmanager
async def streaming(
    who: Tenant, kind: str, last_id: str | None = None, token: str | None = None
) -> AsyncIterator[Stream]:
    """A stream of ``kind`` of the tenant's app, past its opening block (sent at once)."""
    headers = {"Authorization": f"Bearer {token or who.hook.console.token}"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    client = who.hook.console.client
    async with client.request(
        f"/developer/apps/{who.app_id}/{kind}/stream", headers=headers
    ) as connection:
        await connection.send_complete()
        stream = Stream(connection)
        try:
            opening = await stream.block()
            assert opening.startswith("retry: "), opening
            yield stream
        except BaseException:
            connection._client_send.close()  # the test connection disconnects as it closes
            raise
        await leave(connection)


async def leave(connection: Any) -> None:
    """The client goes away. The server's answer then ends without a last part, which quart's
    test connection waits for as it closes: its channel is closed here instead."""
    with contextlib.suppress(trio.ClosedResourceError):
        await connection.disconnect()
    connection._client_send.close()


async def refused(client: Any, path: str, headers: dict[str, str]) -> tuple[int, Any, Any]:
    """A stream request refused before it streams: its status, headers and JSON body."""
    async with client.request(path, headers=headers) as connection:
        await connection.send_complete()
        response = await connection.as_response()
    return response.status_code, response.headers, await response.get_json()


def broadcaster(client: Any) -> Broadcaster:
    found = client.app.extensions["ledgerport.state.Broadcaster"]
    assert isinstance(found, Broadcaster)
    return found


def waiting(stream: Stream) -> int:
    """Parts of the answer sent and not read yet."""
    return int(stream.connection._client_receive.statistics().current_buffer_used)


async def test_delivery_attempts_stream_as_they_end_and_resume_after_the_last_id(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            await attempted(store, who, at=clock.now(), body=b"ok")  # before: not sent
            async with streaming(who, "deliveries") as stream:
                assert stream.status == 200
                assert stream.connection.headers["Content-Type"].startswith("text/event-stream")
                assert stream.connection.headers["Cache-Control"] == "no-store"
                first_id = await attempted(store, who, at=clock.now(), body=b"ok")
                first = await stream.event()
            listed = await who.hook.console.deliveries(who.webhook.id)
            assert first.name == "delivery"
            assert first.data == {
                **next(d for d in listed if d["id"] == first_id),
                "webhookId": who.webhook.id,
                "attempt": 1,
            }
            # While nobody listens, more end (one without an attempt made, which sends none):
            # a reconnection with the last id gets the others in order, and nothing it had.
            second = await attempted(store, who, at=clock.now(), body=b"ok")
            await attempted(store, who, at=clock.now(), body=None)
            third = await attempted(store, who, at=clock.now(), body=b"ok")
            async with streaming(who, "deliveries", last_id=first.id) as stream:
                got = await stream.events(2)
                # ... and then what ends next, live.
                fourth = await attempted(store, who, at=clock.now(), body=b"ok")
                got += await stream.events(1)
            assert [e.data["id"] for e in got] == [second, third, fourth]
            assert len({first.id, *(e.id for e in got)}) == 4
            # From the second's id: the third and the fourth.
            async with streaming(who, "deliveries", last_id=got[0].id) as stream:
                again = await stream.events(2)
            assert [e.id for e in again] == [got[1].id, got[2].id]
            assert [e.data for e in again] == [e.data for e in got[1:]]


async def test_runs_stream_as_they_end_and_resume_after_the_last_id(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            await ran(store, who, at=clock.now(), size=100)  # before: not sent
            async with streaming(who, "runs") as stream:
                first_id = await ran(store, who, at=clock.now(), size=100, status="retrying")
                first = await stream.event()
            listed = await who.hook.console.ok("GET", "/functions/f/runs")
            assert first.name == "run"
            assert first.data == {
                **next(r for r in listed["data"] if r["id"] == first_id),
                "functionId": who.function.id,
                "function": "f",
            }
            assert first.data["status"] == "retrying"
            second = await ran(store, who, at=clock.now(), size=100)
            third = await ran(store, who, at=clock.now(), size=100, status="failed")
            async with streaming(who, "runs", last_id=first.id) as stream:
                got = await stream.events(2)
            assert [(e.data["id"], e.data["status"]) for e in got] == [
                (second, "succeeded"),
                (third, "failed"),
            ]
            # The first run ends again (its retry): it comes again, after the others.
            await record_again_as(store, first_id, clock.now())
            async with streaming(who, "runs", last_id=got[-1].id) as stream:
                (again,) = await stream.events(1)
            assert (again.data["id"], again.data["status"]) == (first_id, "succeeded")


async def record_again_as(store: Store, run_id: str, at: float) -> None:
    await record_again(store, run_id, at=at, size=100, status="succeeded", lease="again")


async def test_a_resumed_stream_goes_back_an_hour_at_most(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            now = clock.now()
            await attempted(store, who, at=now - queues.RESUME_WINDOW - 60, body=b"old")
            recent = await attempted(store, who, at=now - queues.RESUME_WINDOW + 60, body=b"ok")
            await ran(store, who, at=now - queues.RESUME_WINDOW - 60, size=100)
            recent_run = await ran(store, who, at=now - 60, size=100)
            async with streaming(who, "deliveries", last_id="0-0") as stream:
                (event,) = await stream.events(1)
            assert event.data["id"] == recent
            async with streaming(who, "runs", last_id="0-0") as stream:
                (event,) = await stream.events(1)
            assert event.data["id"] == recent_run


@pytest.mark.parametrize("last_id", ["x", "12", "1-2-3", "-1-2", "1234567890123456789-1", "1 - 2"])
async def test_a_last_event_id_that_is_no_event_id_is_a_validation_400(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    last_id: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            for kind in ("deliveries", "runs"):
                status, _, body = await refused(
                    client,
                    f"/developer/apps/{who.app_id}/{kind}/stream",
                    {
                        "Authorization": f"Bearer {who.hook.console.token}",
                        "Last-Event-ID": last_id,
                    },
                )
                assert status == 400
                assert body["message"] == [
                    "Last-Event-ID must be the id of an event of this stream"
                ]


async def test_streams_are_the_apps_developers_only(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            tenant(client, admin_headers, store) as who,
            tenant(client, admin_headers, store) as other,
        ):
            for kind in ("deliveries", "runs"):
                path = f"/developer/apps/{who.app_id}/{kind}/stream"
                status, _, body = await refused(client.app.test_client(), path, {})
                assert (status, body["code"]) == (401, "NOT_SIGNED_IN")
                bearer = {"Authorization": f"Bearer {other.hook.console.token}"}
                status, _, body = await refused(client, path, bearer)
                assert (status, body["code"]) == (404, "APP_NOT_FOUND")


async def test_a_developer_opens_ten_streams_at_most_and_a_closed_one_frees_its_place(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    assert STREAMS_PER_DEVELOPER == 10
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            path = f"/developer/apps/{who.app_id}/deliveries/stream"
            bearer = {"Authorization": f"Bearer {who.hook.console.token}"}
            async with streaming(who, "runs") as kept, AsyncExitStack() as others:
                for _ in range(STREAMS_PER_DEVELOPER - 1):
                    await others.enter_async_context(streaming(who, "deliveries"))
                assert broadcaster(client).open_streams == STREAMS_PER_DEVELOPER
                status, headers, body = await refused(client, path, bearer)
                assert status == 429
                assert body["code"] == "APP_RATE_LIMITED"
                assert "at most 10" in body["message"]
                assert 0 < int(headers["Retry-After"]) <= 15
                # Every stream still works.
                ended = await ran(store, who, at=clock.now(), size=10)
                assert (await kept.event()).data["id"] == ended
            assert broadcaster(client).open_streams == 0
            async with streaming(who, "deliveries") as stream:
                assert stream.status == 200
                assert broadcaster(client).open_streams == 1
            assert broadcaster(client).open_streams == 0


async def test_the_streams_of_an_app_share_their_reads(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = queues.ended_after
    calls: list[str] = []

    async def counted(*args: Any, **kwargs: Any) -> queues.Ended:
        calls.append(args[2])
        return await read(*args, **kwargs)

    monkeypatch.setattr(queues, "ended_after", counted)
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who, AsyncExitStack() as stack:
            streams = [
                await stack.enter_async_context(streaming(who, "deliveries")) for _ in range(5)
            ]
            # Their first event brings them to the same cursor (on PostgreSQL each starts at
            # the oldest transaction running as it opened).
            first = await attempted(store, who, at=clock.now(), body=b"ok")
            for stream in streams:
                assert (await stream.event()).data["id"] == first
            calls.clear()
            ended = await attempted(store, who, at=clock.now(), body=b"ok")
            for stream in streams:
                assert (await stream.event()).data["id"] == ended
            assert 1 <= len(calls) <= 2, calls  # one each: 5


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_silent_stream_sends_a_comment_every_15_seconds(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
    autojump_clock: trio.abc.Clock,
) -> None:
    # A webhook only: a function's upload is compiled in a process of its own, whose wait a
    # clock that jumps would cut short (as it would asyncpg's timeouts: the heartbeat is the
    # same on both stores, this runs on SQLite).
    async with hooked(client, admin_headers, ["customer.created"]) as hook:
        async with store.transaction() as tx:
            webhook = await apps.get_webhook(tx, hook.api.world.app_id, hook.webhook["id"])
        who = Tenant(hook, None, webhook)  # type: ignore[arg-type]
        async with streaming(who, "deliveries") as stream:
            for _ in range(3):
                silent_since = trio.current_time()
                assert await stream.block() == ": heartbeat"
                assert trio.current_time() - silent_since == pytest.approx(15.0, abs=0.25)
            ended = await attempted(store, who, at=clock.now(), body=b"ok")
            silent_since = trio.current_time()
            assert (await stream.event()).data["id"] == ended
            assert trio.current_time() - silent_since <= READ_INTERVAL


async def attempted_in(tx: Transaction, who: Tenant, at: float) -> str:
    """As :func:`attempted`, in ``tx``."""
    delivery_id = await queues.create_test_delivery(
        tx, now=at, webhook=who.webhook, pinned_version=None
    )
    await tx.execute("UPDATE webhook_deliveries SET lease = 'lease' WHERE id = $1", delivery_id)
    made = queues.AttemptMade(at, 1.0, b"ok", False, {})
    outcome = queues.AttemptOutcome(
        delivery_id=delivery_id,
        lease="lease",
        status="delivered",
        attempts=1,
        response_code=200,
        error=None,
        finished_at=at,
        next_attempt_at=None,
        first_attempt_at=at,
        made=made,
    )
    await queues.record_outcomes(tx, [outcome])
    return delivery_id


@pytest.mark.parametrize(
    "backend", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
async def test_an_attempt_committed_after_a_younger_transactions_is_not_passed_over(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    """PostgreSQL commits transactions in another order than they began: a stream must not
    send what a younger one recorded while an older one may still record, or the older one's
    rows would land behind its cursor and never be sent."""
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            async with streaming(who, "deliveries") as stream:
                start = await _start(store, who.app_id)
                async with store.transaction() as older:
                    first = await attempted_in(older, who, clock.now())
                    second = await attempted(store, who, at=clock.now(), body=b"ok")
                    # Committed, and held back while the older transaction runs.
                    async with store.transaction(reads=True) as tx:
                        read = await queues.ended_after(
                            tx, "deliveries", who.app_id, start, since=0, postgresql=True
                        )
                    assert (read.rows, read.held) == ([], True)
                got = await stream.events(2)
            assert [e.data["id"] for e in got] == [first, second]


async def _start(store: Store, app_id: str) -> queues.Cursor:
    async with store.transaction(reads=True) as tx:
        return (await queues.stream_start(tx, "deliveries", app_id, postgresql=True)).cursor


@pytest.mark.parametrize(
    "backend", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
async def test_what_ended_before_a_stream_opened_is_not_sent_while_an_older_transaction_runs(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    """A stream starts below the oldest transaction still running: what younger ones recorded
    before it opened is past its cursor, and is not sent all the same."""
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            older_unit = store.transaction()
            older = await older_unit.__aenter__()
            open_ = True
            try:
                late = await attempted_in(older, who, clock.now())
                await attempted(store, who, at=clock.now(), body=b"ok")  # before: not sent
                async with streaming(who, "deliveries") as stream:
                    open_ = False
                    await older_unit.__aexit__(None, None, None)
                    assert (await stream.event()).data["id"] == late
                    after = await attempted(store, who, at=clock.now(), body=b"ok")
                    assert (await stream.event()).data["id"] == after
            finally:
                if open_:
                    await older_unit.__aexit__(None, None, None)
