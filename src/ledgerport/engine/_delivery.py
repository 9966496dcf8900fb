"""The delivery engine: committed events in, signed webhook deliveries out, nothing lost.

:class:`DeliveryEngine` is a supervisor: it owns what its components share (the book, the
engine's state, its nursery), wires them, and runs their tasks under one nursery. Each
component owns one thing; those with logic of their own have tests of their own
(``tests/unit/test_delivery_*.py``), and the whole is tested against real receivers on both
stores (``tests/integration/test_webhook_delivery.py`` and its neighbours):

- the dispatcher (``_dispatcher.py``, :meth:`DeliveryEngine.dispatch_once`) fans committed
  events out into deliveries (``queues.plan_fan_out``), woken by every commit that records
  events (in process on SQLite, LISTEN/NOTIFY on PostgreSQL) and by a slow poll as a safety
  net. It hands the first attempts to the actors before its transaction commits; their
  outcomes wait for the commit;
- the claimer (``_claimer.py``, :meth:`DeliveryEngine.claim_once`) claims deliveries whose
  attempt is due (retries, redeliveries, test deliveries, what another process left), woken by
  commits that queue deliveries, by freed capacity and by the next due time, and renews the
  leases of the claims held;
- the actors (``_actors.py``), one per webhook, started on demand and retired when idle: a
  bounded inbox, at most ``in_flight`` attempts at once on its own keep-alive client, so a slow
  or dead endpoint holds up nothing but itself; the send-time check made again when it no
  longer stands, and each developer's attempts in flight bounded;
- one attempt (``_attempt.py``): its headers, its request on the webhook's client
  (``_transport.py``), and its outcome, a pure function of what happened;
- the recorder (``_recorder.py``) writes attempt outcomes in batches, one transaction each,
  unless a fan-out's transaction took them along first.

Every app's webhooks share the engine, so what it holds is shared fairly
(``_delivery_book.py``, whose :class:`DeliveryBook` keeps all of the engine's bookkeeping and
never awaits). The shares are the developer's: all of one developer's apps together (an app
with no developer is its own) hold what one app would, so more apps buy no more of the engine.
Each webhook holds at most HELD_PER_WEBHOOK deliveries, each developer HELD_PER_DEVELOPER, the
engine HELD_TOTAL; a claim goes round the developers with due deliveries, those waiting for
room first, then those holding least, then the longest waiting, within a developer round its
apps the same way, and within an app round its businesses, each one's oldest due read through
its own index range and handed over in turns; and when the engine is full, a developer that
found no room gets the next delivery let go before anyone else. One developer's slow or dead
endpoints fill its own share and nothing more.

A delivery is claimed before it is attempted: the claim's lease (this engine's id) keeps other
processes off it and is renewed while the engine holds it. A process that dies holding claims
leaves them due again when their lease runs out, and the engine that takes them over attempts
them with the same delivery id; what was in flight may be sent twice, nothing is lost. An
engine that stops gives its claims back at once.

The components' constants are importable from here too, where the engine's callers have always
found them.
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from ledgerport import apps, books, queues
from ledgerport.ids import new_id
from ledgerport.platform import Platform
from ledgerport.storage import StorageError

from ._actors import ACTOR_IDLE as ACTOR_IDLE
from ._actors import Actors, Ended
from ._attempt import USER_AGENT as USER_AGENT
from ._attempt import attempt
from ._claimer import CLAIM_BATCH as CLAIM_BATCH
from ._claimer import RENEW_BATCH as RENEW_BATCH
from ._claimer import Claimer
from ._core import Refusal
from ._delivery_book import DeliveryBook
from ._dispatcher import DISPATCH_BATCH as DISPATCH_BATCH
from ._dispatcher import FAN_OUT_ROWS as FAN_OUT_ROWS
from ._dispatcher import Dispatcher
from ._post import RESPONSE_READ_LIMIT as RESPONSE_READ_LIMIT
from ._post import SENDING_AT_ONCE as SENDING_AT_ONCE
from ._recorder import RECORD_BATCH as RECORD_BATCH
from ._recorder import RECORD_LINGER as RECORD_LINGER
from ._recorder import RECORD_SOON as RECORD_SOON
from ._recorder import UNRECORDED_MAX as UNRECORDED_MAX
from ._recorder import Recorder
from ._retry import Jitter, jitter
from ._send_check import PLAN_FRESH as PLAN_FRESH
from ._shared import POLL as POLL
from ._shared import DeliveryState, publish_fairness

log = logging.getLogger("ledgerport.engine.delivery")

HELD_PER_WEBHOOK = 256
"""Deliveries of one webhook held by this engine at once (in its actor's inbox or in flight)."""
HELD_PER_DEVELOPER = 1024
"""Deliveries of one developer's webhooks, all its apps together, held by this engine at once:
a developer's share, a quarter of the whole, so that one developer's backlog always leaves room
for others (four developers must fill the engine before a fifth waits for room, and then for
one attempt to end), however many apps it creates."""
HELD_TOTAL = 4096
"""Deliveries held by this engine at once, across developers."""
IN_FLIGHT_PER_WEBHOOK = 8
"""Attempts of one webhook in flight at once."""
IN_FLIGHT_PER_DEVELOPER = 32
"""Attempts of one developer's webhooks, all its apps together, in flight at once in a
process: a developer whose endpoints hang ties up this many connections and their timeouts'
work, and no more, however many apps it creates."""
LEASE = 30.0
"""Seconds a claim holds a delivery; renewed every third of it while held."""
STOP_TIMEOUT = 5.0
"""Seconds a stopping engine takes at most to write its outcomes and give its claims back."""


class DeliveryEngine:
    """Fans events out into deliveries and attempts them (see the module docstring).

    ``run`` follows the start protocol. Tests drive the steps one at a time instead
    (:meth:`dispatch_once`, :meth:`claim_once`, :meth:`settle`) inside :meth:`running`.
    """

    def __init__(
        self,
        platform: Platform,
        *,
        resolver: apps.Resolver = apps.resolve,
        lease: float = LEASE,
        poll: float = POLL,
        actor_idle: float = ACTOR_IDLE,
        in_flight: int = IN_FLIGHT_PER_WEBHOOK,
        in_flight_per_developer: int = IN_FLIGHT_PER_DEVELOPER,
        held_per_webhook: int = HELD_PER_WEBHOOK,
        held_per_developer: int = HELD_PER_DEVELOPER,
        held_total: int = HELD_TOTAL,
        record_linger: float = RECORD_LINGER,
        holder: str | None = None,
        tls: ssl.SSLContext | None = None,
        spread: Jitter | None = jitter,
    ) -> None:
        """``tls``: the context receivers' certificates are verified with (by default the CA
        bundle httpx uses, :func:`verifying_context`, made at the first attempt); ``spread``:
        the retry delays' jitter (None: the schedule exactly, as tests that step through it
        ask)."""
        self._platform = platform
        self.lease = holder or new_id("engine")
        """What this engine's claims hold their lease by: its node's id (``Node``)."""
        self._state = DeliveryState(platform, self.lease, lease, poll)
        """What the components share: the lease, the claimer's wake-up, draining, the count of
        entitlement changes."""
        self._book: DeliveryBook[Ended, queues.AttemptOutcome] = DeliveryBook(
            total=held_total,
            per_developer=held_per_developer,
            per_webhook=held_per_webhook,
            per_webhook_free=1,
        )
        """What the engine holds, for whom, and the outcomes waiting to be written."""
        self._published: dict[Refusal, int] = {}
        """The book's held-back counts already added to the metrics."""
        self._recorder = Recorder(
            platform, self._book, self._state.claim_wake, linger=record_linger
        )
        self._actors = Actors(
            self._state,
            self._book,
            self._recorder,
            resolver=resolver,
            in_flight=in_flight,
            in_flight_per_developer=in_flight_per_developer,
            held_per_webhook=held_per_webhook,
            idle=actor_idle,
            tls=tls,
            send=functools.partial(attempt, spread=spread),
        )
        self._dispatcher = Dispatcher(
            self._state, self._book, self._actors, self._recorder, publish=self._publish_fairness
        )
        self._claimer = Claimer(
            self._state, self._book, self._actors, publish=self._publish_fairness
        )
        self._nursery: trio.Nursery | None = None
        self._intake_done: trio.Event | None = None
        """Set when the dispatch and claim loops have ended (None: they never ran)."""

    # --- capacity ------------------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Deliveries this engine holds now (waiting in an inbox or being attempted)."""
        return self._book.held

    def _publish_fairness(self) -> None:
        """The book's counts of deliveries held back, and its shares in use, to the metrics."""
        shares = self._book.developers
        publish_fairness(
            self._platform.metrics,
            "delivery",
            self._book.held_back,
            self._published,
            shares.tenants,
            waiting=len(shares.waiting),
        )

    # --- the loops -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        p = self._platform
        async with (
            p.store.listen(books.EVENTS_CHANNEL, self._dispatcher.wake.set),
            p.store.listen(queues.DELIVERIES_CHANNEL, self._state.claim_wake.set),
            p.store.listen(apps.ENTITLEMENTS_CHANNEL, self._entitlements_changed),
            self.running(),
        ):
            assert self._nursery is not None
            self._nursery.start_soon(self._intake)
            self._nursery.start_soon(self._claimer.renew)
            self._nursery.start_soon(self._gauge_loop)
            task_status.started()
            await trio.sleep_forever()

    def wake(self) -> None:
        """Look for events and due deliveries now (the clock moved, or a test asks)."""
        self._dispatcher.wake.set()
        self._state.claim_wake.set()

    def _entitlements_changed(self) -> None:
        self._state.generation += 1

    async def _intake(self) -> None:
        """The dispatch and claim loops, until the engine drains."""
        self._intake_done = done = trio.Event()
        try:
            async with trio.open_nursery() as loops:
                loops.start_soon(self._dispatcher.run)
                loops.start_soon(self._claimer.run)
        finally:
            done.set()

    async def drain(self) -> None:
        """Stop taking work and let what was started end: a fan-out or a claim under way
        finishes, no attempt starts any more (what waits in an inbox is given back), and this
        returns once every attempt in flight has ended and its outcome is written. Leaving
        :meth:`running` then gives back the claims still held. A graceful stop calls it,
        within its grace period."""
        self._state.draining = True
        self._dispatcher.wake.set()
        self._state.claim_wake.set()
        self._actors.give_back_inboxes()
        if self._intake_done is not None:
            await self._intake_done.wait()
        await self.settle()

    async def _gauge_loop(self) -> None:
        p = self._platform
        while True:
            try:
                async with p.store.transaction(background=True) as tx:
                    queued, retrying = await queues.queue_depth(tx)
                    backlog = await queues.dispatch_backlog(tx)
                    appended = await queues.event_log_length(tx)
            except StorageError:
                pass
            else:
                p.metrics.delivery_queue_depth.set(queued)
                p.metrics.delivery_retry_backlog.set(retrying)
                p.metrics.dispatcher_lag_events.set(backlog)
                p.metrics.event_log_length.set(appended)
            p.metrics.delivery_actors.set(len(self._actors))
            self._publish_fairness()
            await trio.sleep(self._state.poll)

    # --- the steps -----------------------------------------------------------------------------

    async def dispatch_once(self) -> int:
        """Fan out one batch of committed events; answers how many events it took.

        One statement reads the events and their audiences; the deliveries this engine has
        room for go to their actors at once, and their first attempts start while the
        transaction writes the deliveries and commits: their outcomes wait for that commit
        (``DeliveryBook.attempt_ended``), and are dropped if it fails (then nothing of the
        fan-out exists, and the events are fanned out again, under the same delivery ids)."""
        return await self._dispatcher.dispatch_once()

    async def claim_once(self) -> int:
        """Claim one batch of due deliveries and hand them to their actors; answers how many.

        The claim goes round the developers with due deliveries, their apps and the apps'
        businesses (``DeliveryBook.claim_order``): each tenant's oldest due, at most its part of
        the batch and of its developer's room, handed over in turns (``queues.claim_due``)."""
        return await self._claimer.claim_once()

    async def settle(self) -> None:
        """Wait until this engine holds nothing: every delivery it claimed was attempted (or
        refused) and its outcome written."""
        await self._recorder.settle()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[DeliveryEngine]:
        """The engine's nursery with its recorder: actors can be started and outcomes written.
        Leaving it stops the actors, writes the outcomes there are and gives back every claim
        still held (due again at once, for this or another process)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = self._actors.nursery = nursery
                nursery.start_soon(self._recorder.run)
                try:
                    yield self
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            self._actors.clear()
            with trio.move_on_after(STOP_TIMEOUT) as scope:
                scope.shield = True
                await self._stop()

    async def _stop(self) -> None:
        p = self._platform
        await self._recorder.write_all()
        try:
            async with p.store.transaction(background=True) as tx:
                await queues.release_claims(tx, lease=self.lease, now=p.now())
        except StorageError as exc:
            log.warning("delivery engine: giving claims back: %s", exc)
        self._book.clear()
