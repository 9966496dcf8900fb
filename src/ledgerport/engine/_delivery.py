"""The delivery engine: committed events in, signed webhook deliveries out, nothing lost.

Four kinds of task under one nursery:

- the dispatcher (:meth:`DeliveryEngine.dispatch_once`) fans committed events out into
  deliveries (``queues.plan_fan_out``), woken by every commit that records events (in process on
  SQLite, LISTEN/NOTIFY on PostgreSQL) and by a slow poll as a safety net. It hands the first
  attempts to the actors before its transaction commits; their outcomes wait for the commit;
- the claimer (:meth:`DeliveryEngine.claim_once`) claims deliveries whose attempt is due
  (retries, redeliveries, test deliveries, what another process left), woken by commits that
  queue deliveries, by freed capacity and by the next due time;
- one actor per webhook, started on demand and retired when idle: a bounded inbox, at most
  ``in_flight`` attempts at once on its own keep-alive client, so a slow or dead endpoint holds
  up nothing but itself;
- the recorder writes attempt outcomes in batches, one transaction each, unless a fan-out's
  transaction took them along first.

Every app's webhooks share the engine, so what it holds is shared fairly (``_core.py``, whose
:class:`DeliveryBook` keeps all of the engine's bookkeeping and never awaits). The shares are
the developer's: all of one developer's apps together (an app with no developer is its own)
hold what one app would, so more apps buy no more of the engine. Each webhook holds at most
HELD_PER_WEBHOOK deliveries, each developer HELD_PER_DEVELOPER, the engine HELD_TOTAL; a claim
goes round the developers with due deliveries, those waiting for room first, then those holding
least, then the longest waiting, within a developer round its apps the same way, and within
an app round its businesses, each one's oldest due read through its own index range and
handed over in turns; and when the engine is full, a developer that found no room gets the
next delivery let go before anyone else. One developer's slow or dead endpoints fill its own
share and nothing more.

A delivery is claimed before it is attempted: the claim's lease (this engine's id) keeps other
processes off it and is renewed while the engine holds it. A process that dies holding claims
leaves them due again when their lease runs out, and the engine that takes them over attempts
them with the same delivery id; what was in flight may be sent twice, nothing is lost. An
engine that stops gives its claims back at once.
"""

from __future__ import annotations

import functools
import logging
import math
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

import httpcore
import trio

from ledgerport import apps, books, queues
from ledgerport.ids import new_id
from ledgerport.ops import Metrics
from ledgerport.platform import Platform
from ledgerport.storage import FIRST_PER_KEY_MAX, StorageError, Transaction

from ._core import Capped, DeliveryBook, FanOut, Refusal, Verdict
from ._retry import next_attempt_at
from ._signing import signature_header
from ._transport import DELIVERY_ERRORS, DeliveryClient, stop_reading, verifying_context

log = logging.getLogger("ledgerport.engine.delivery")

DISPATCH_BATCH = 200
"""Events fanned out per transaction at most."""
FAN_OUT_ROWS = 512
"""Deliveries and runs a fan-out's transaction creates at most (whole events: at least one):
on SQLite every transaction holds the one writer, and an event reaching many webhooks must
not hold it for long."""
CLAIM_BATCH = 64
"""Due deliveries claimed per transaction at most."""
RENEW_BATCH = 256
"""Claims renewed per transaction at most."""
RECORD_LINGER = 0.05
"""Seconds the recorder waits before it writes the outcomes it was woken for. Meanwhile a
fan-out's transaction takes them along (one commit for both); what is left is written in one
transaction for all, not one each. The recorder's transactions, fewer, get less often in the
way of a fan-out waiting for the database (on SQLite, the one writer). An engine asked to
settle, or stopping, writes at once."""
RECORD_BATCH = 128
"""Attempt outcomes written per transaction at most."""
RECORD_SOON = 16
"""Outcomes waiting that end the recorder's linger at once: a batch this big is worth its
transaction now."""
UNRECORDED_MAX = 32
"""Answered attempts whose outcome is not written yet, at most: beyond it, attempts wait for
the recorder before they send. What a crash can send twice is the attempts in flight and these;
a database slower than the receivers slows the sending instead of piling answers up in
memory."""
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
SENDING_AT_ONCE = 16
"""Attempts connecting and writing their request at once, across webhooks; an attempt waiting
for its answer holds no slot. Started all at once, hundreds of attempts (a flood's timeouts
end together) would each take a turn in every pass of the event loop until written, and every
request the process serves waits through those passes: measured, a loop task's ten steps took
60 to 130 ms during 160 unpaced starts and under 10 ms with 16 at a time, which also sent all
160 sooner. The slots are taken first come, first served."""
_REQUEST_WRITTEN = "http11.send_request_body.complete"
"""httpcore's trace event after which an attempt only waits for its answer."""
ACTOR_IDLE = 30.0
"""Seconds an actor with nothing to do lives on before it retires (and closes its client)."""
LEASE = 30.0
"""Seconds a claim holds a delivery; renewed every third of it while held."""
POLL = 5.0
"""The safety net: seconds between looks for work when nothing has woken the engine."""
STOP_TIMEOUT = 5.0
"""Seconds a stopping engine takes at most to write its outcomes and give its claims back."""
PLAN_FRESH = 30.0
"""Seconds at most the send-time check made in the transaction that claimed a delivery stands
for its attempt. Any entitlement change committed meanwhile (``apps.ENTITLEMENTS_CHANNEL``), in
this process or another, voids it at once: the delivery is checked again just before it is
sent."""
RESPONSE_READ_LIMIT = queues.RESPONSE_BODY_KEPT
"""Bytes of a receiver's answer read (and kept for the attempt log); beyond them nothing more
is read and the connection is closed, so an endless or huge answer costs the engine no more
than this (and httpcore's one read buffer) for as long as the attempt's timeout."""


@dataclass
class _Actor:
    webhook_id: str
    send: trio.MemorySendChannel[queues.ClaimedDelivery]
    receive: trio.MemoryReceiveChannel[queues.ClaimedDelivery]
    slots: trio.Semaphore
    client: DeliveryClient | None = None
    attempts: trio.Nursery | None = None
    """Where the actor's attempts run, once it has started."""


@dataclass(frozen=True)
class _Planned:
    plan: queues.SendPlan
    at: float
    """trio.current_time() of the check."""
    generation: int
    """The engine's count of entitlement changes when the check was made."""


@dataclass
class _Wakeup:
    """A flag a waiter sleeps on until something sets it."""

    _event: trio.Event = field(default_factory=trio.Event)

    def set(self) -> None:
        self._event.set()

    async def wait(self, at_most: float) -> None:
        with trio.move_on_after(max(at_most, 0.0)):
            await self._event.wait()
        self._event = trio.Event()


class _SendSlot:
    """One of the engine's SENDING_AT_ONCE slots, held by an attempt from before it connects
    until its request is written (httpcore's trace, which this is) or the attempt ends."""

    def __init__(self, slots: trio.Semaphore) -> None:
        self._slots = slots
        self._held = False

    async def __aenter__(self) -> _SendSlot:
        await _take_slot(self._slots)
        self._held = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._let_go()

    def _let_go(self) -> None:
        if self._held:
            self._held = False
            self._slots.release()

    async def __call__(self, event: str, info: dict[str, object]) -> None:
        if event == _REQUEST_WRITTEN:
            self._let_go()


def publish_fairness(
    metrics: Metrics,
    kind: Literal["delivery", "run"],
    held_back: Counter[Refusal],
    published: dict[Refusal, int],
    developers: Capped[str],
    *,
    waiting: int | None = None,
) -> None:
    """An engine's fairness figures to the metrics: what its book held back since ``published``
    (updated), the busiest developer's share, the developers holding some and, for the
    delivery engine, the developers waiting for room."""
    for refusal, count in held_back.items():
        added = count - published.get(refusal, 0)
        if added:
            metrics.fairness_held_back.labels(kind, refusal.value).inc(added)
            published[refusal] = count
    metrics.fairness_busiest_share.labels(kind).set(developers.busiest() / developers.cap)
    metrics.fairness_tenants_holding.labels(kind).set(developers.holders())
    if waiting is not None:
        metrics.fairness_tenants_waiting.labels(kind).set(waiting)


async def _take_slot(slots: trio.Semaphore) -> None:
    """A slot of ``slots``, without a pass through the scheduler when one is free (``acquire``
    always yields: twice per attempt, each a wait for a whole pass of a busy loop)."""
    try:
        slots.acquire_nowait()
    except trio.WouldBlock:
        await slots.acquire()


USER_AGENT = b"ledgerport-webhooks/1"


def _host_header(url: httpcore.URL) -> bytes:
    """The Host header of a request to ``url``: its host, and its port unless the scheme's."""
    default = 443 if url.scheme == b"https" else 80
    if url.port is None or url.port == default:
        return url.host
    return b"%b:%d" % (url.host, url.port)


async def _read_head(response: httpcore.Response, kept: bytearray) -> bool:
    """Read the answer's body into ``kept``, RESPONSE_READ_LIMIT bytes at most, and nothing more
    from the receiver (``stop_reading``); answers whether the body may go on past what was
    kept (more arrived, or it was not read to its end)."""
    stopped = False
    more = False
    try:
        async for chunk in response.aiter_stream():
            room = RESPONSE_READ_LIMIT - len(kept)
            kept += chunk[:room]
            more = more or len(chunk) > room
            if len(kept) == RESPONSE_READ_LIMIT and not stopped:
                stopped = True
                if not stop_reading(response):
                    return True
    except httpcore.ReadError:
        if not stopped:
            raise
        return True
    return more


def _reason(exc: BaseException) -> str:
    """What an attempt's failure says, for the attempt log: its own words, else its causes'
    (a refused certificate reaches the engine as an httpcore error of no words, raised from
    trio's, raised from the ``ssl`` error that says what was wrong), else its type's name."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if str(cause):
            return str(cause)
        # As a traceback reads the chain: the cause, else the context unless suppressed.
        context = None if cause.__suppress_context__ else cause.__context__
        cause = cause.__cause__ or context
    return type(exc).__name__


@dataclass(frozen=True)
class _Ended:
    """An attempt that ended before its fan-out's transaction did: its outcome waits."""

    actor: _Actor
    delivery: queues.ClaimedDelivery
    outcome: queues.AttemptOutcome


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
    ) -> None:
        """``tls``: the context receivers' certificates are verified with (by default the CA
        bundle httpx uses, :func:`verifying_context`, made at the first attempt)."""
        self._platform = platform
        self._resolver = resolver
        self._lease_seconds = lease
        self._poll = poll
        self._actor_idle = actor_idle
        self._in_flight = in_flight
        self._held_per_webhook = held_per_webhook
        self._record_linger = record_linger
        self.lease = holder or new_id("engine")
        """What this engine's claims hold their lease by: its node's id (``Node``)."""
        self._actors: dict[str, _Actor] = {}
        self._sending = trio.Semaphore(SENDING_AT_ONCE)
        self._in_flight_per_developer = in_flight_per_developer
        self._developer_in_flight: dict[str, trio.Semaphore] = {}
        """Each developer's attempts in flight, while it has some."""
        self._book: DeliveryBook[_Ended, queues.AttemptOutcome] = DeliveryBook(
            total=held_total,
            per_developer=held_per_developer,
            per_webhook=held_per_webhook,
            per_webhook_free=1,
        )
        """What the engine holds, for whom, and the outcomes waiting to be written."""
        self._published: dict[Refusal, int] = {}
        """The book's held-back counts already added to the metrics."""
        self._dispatch_more = False
        """The last fan-out left committed events for the next one (a batch's worth, or its
        rows' budget)."""
        self._next_due: float | None = None
        """When the earliest delivery the last claim could not take yet is due (None: none
        known)."""
        self._tls = tls
        self._generation = 0
        """Entitlement changes seen (``apps.ENTITLEMENTS_CHANNEL``): a check made before the
        latest one is made again."""
        self._planned: dict[str, _Planned] = {}
        """The send-time check of each delivery handed over, until its attempt starts."""
        self._event_at: dict[str, float] = {}
        """When the event of a delivery fanned out here was recorded, until its first attempt."""
        self._dispatch_wake = _Wakeup()
        self._claim_wake = _Wakeup()
        self._record_wake = _Wakeup()
        self._record_now = _Wakeup()
        self._recorded = trio.Event()
        """Set (and replaced) each time a recording transaction ends."""
        self._settled = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._draining = False
        """Asked to stop (:meth:`drain`): no new work is taken, no attempt starts."""
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
            p.store.listen(books.EVENTS_CHANNEL, self._dispatch_wake.set),
            p.store.listen(queues.DELIVERIES_CHANNEL, self._claim_wake.set),
            p.store.listen(apps.ENTITLEMENTS_CHANNEL, self._entitlements_changed),
            self.running(),
        ):
            assert self._nursery is not None
            self._nursery.start_soon(self._intake)
            self._nursery.start_soon(self._renew_loop)
            self._nursery.start_soon(self._gauge_loop)
            task_status.started()
            await trio.sleep_forever()

    def wake(self) -> None:
        """Look for events and due deliveries now (the clock moved, or a test asks)."""
        self._dispatch_wake.set()
        self._claim_wake.set()

    async def _intake(self) -> None:
        """The dispatch and claim loops, until the engine drains."""
        self._intake_done = done = trio.Event()
        try:
            async with trio.open_nursery() as loops:
                loops.start_soon(self._dispatch_loop)
                loops.start_soon(self._claim_loop)
        finally:
            done.set()

    async def drain(self) -> None:
        """Stop taking work and let what was started end: a fan-out or a claim under way
        finishes, no attempt starts any more (what waits in an inbox is given back), and this
        returns once every attempt in flight has ended and its outcome is written. Leaving
        :meth:`running` then gives back the claims still held. A graceful stop calls it,
        within its grace period."""
        self._draining = True
        self._dispatch_wake.set()
        self._claim_wake.set()
        for actor in list(self._actors.values()):
            self._give_back_inbox(actor)
        if self._intake_done is not None:
            await self._intake_done.wait()
        await self.settle()

    async def _dispatch_loop(self) -> None:
        while not self._draining:
            # First what was committed before the engine started (or while it slept).
            self._dispatch_more = True
            while self._dispatch_more and not self._draining:
                if not await self._guarded(self.dispatch_once):
                    break
            if not self._draining:
                await self._dispatch_wake.wait(self._poll)

    async def _claim_loop(self) -> None:
        while not self._draining:
            claimed = await self._guarded(self.claim_once)
            if claimed < CLAIM_BATCH and not self._draining:
                # Until the earliest delivery an app with room has due, or until room is let
                # go (which wakes the loop) for apps held back now.
                await self._claim_wake.wait(self._until_next_due())

    def _until_next_due(self) -> float:
        due = self._next_due
        if due is None:
            return self._poll
        return min(self._poll, max(due - self._platform.now(), 0.0) + 0.001)

    async def _guarded(self, step: Callable[[], Awaitable[int]]) -> int:
        """A step of a loop; a storage failure is logged and retried at the next wake-up."""
        try:
            count = await step()
        except StorageError as exc:
            log.warning("delivery engine: %s", exc)
            self._platform.metrics.task_crashes.labels("delivery_engine").inc()
            return 0
        return count

    async def _renew_loop(self) -> None:
        while True:
            await trio.sleep(self._lease_seconds / 3)
            if not self._book.settled:
                p = self._platform
                try:
                    until = p.now() + self._lease_seconds
                    renewed = RENEW_BATCH
                    while renewed == RENEW_BATCH:
                        async with p.store.transaction(background=True) as tx:
                            renewed = await queues.renew_claims(
                                tx, lease=self.lease, until=until, limit=RENEW_BATCH
                            )
                except StorageError as exc:
                    log.warning("delivery engine: renewing claims: %s", exc)

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
            await trio.sleep(self._poll)

    # --- the steps -----------------------------------------------------------------------------

    async def dispatch_once(self) -> int:
        """Fan out one batch of committed events; answers how many events it took.

        One statement reads the events and their audiences; the deliveries this engine has
        room for go to their actors at once, and their first attempts start while the
        transaction writes the deliveries and commits: their outcomes wait for that commit
        (``DeliveryBook.attempt_ended``), and are dropped if it fails (then nothing of the
        fan-out exists, and the events are fanned out again, under the same delivery ids)."""
        p = self._platform
        book = self._book
        fan_out = book.fan_out_began()
        outcomes: list[tuple[str, str, queues.AttemptOutcome]] = []
        with book.reserving() as reservation:
            try:
                async with p.store.transaction(background=True) as tx:
                    checked_at, generation = trio.current_time(), self._generation
                    pending = await queues.pending_events(tx, DISPATCH_BATCH)
                    book.note_developers(
                        (hook["app_id"], hook["developer"]) for hook in pending.webhooks
                    )
                    now = p.now()
                    fanned = queues.plan_fan_out(
                        pending,
                        keyring=p.keyring,
                        now=now,
                        lease=self.lease,
                        lease_until=now + self._lease_seconds,
                        take=reservation.take,
                        max_rows=FAN_OUT_ROWS,
                    )
                    event_times = {event.id: event.created for event in pending.events}
                    for delivery in fanned.claimed:
                        book.awaits_commit(delivery.id, fan_out)
                        plan = fanned.plans[delivery.webhook_id]
                        self._hand_over(
                            delivery,
                            _Planned(plan, checked_at, generation),
                            event_times[delivery.event_id or ""],
                        )
                    reservation.handed_over()
                    await queues.write_fan_out(tx, fanned)
                    if fanned.positions and book.outcomes_waiting:
                        # The outcomes waiting for the recorder ride along: one commit for both.
                        outcomes = book.take_outcomes(RECORD_BATCH)
                        await queues.record_outcomes(tx, [outcome for _, _, outcome in outcomes])
            except BaseException:
                self._outcomes_not_written(outcomes)
                self._fan_out_ended(fan_out, committed=False)
                raise
        self._outcomes_written(outcomes)
        self._fan_out_ended(fan_out, committed=True)
        self._dispatch_more = (
            len(fanned.positions) < len(pending.positions)
            or len(pending.positions) >= DISPATCH_BATCH
        )
        if fanned.queued:
            self._claim_wake.set()
        self._publish_fairness()
        return len(fanned.positions)

    def _fan_out_ended(self, fan_out: FanOut[_Ended], *, committed: bool) -> None:
        for ended in self._book.fan_out_ended(fan_out, committed=committed):
            self._settle_attempt(ended.actor, ended.delivery, ended.outcome, record=committed)

    async def claim_once(self) -> int:
        """Claim one batch of due deliveries and hand them to their actors; answers how many.

        The claim goes round the developers with due deliveries, their apps and the apps'
        businesses (``DeliveryBook.claim_order``): each tenant's oldest due, at most its part of
        the batch and of its developer's room, handed over in turns (``queues.claim_due``)."""
        p = self._platform
        book = self._book
        book.starved = False
        with book.reserving() as reservation:
            async with p.store.transaction(background=True) as tx:
                now = p.now()
                due = await queues.delivery_due_times(tx)
                book.note_developers((tenant.app_id, tenant.developer) for tenant in due)
                due_now = {
                    (tenant.app_id, tenant.business): tenant.due
                    for tenant in due
                    if tenant.due <= now
                }
                quotas = book.claim_order(due_now, CLAIM_BATCH)[:FIRST_PER_KEY_MAX]
                full = book.full_webhooks()
                if full and quotas:
                    # Their due deliveries are passed over, not refused: the room they let go
                    # must still wake this loop (else it sleeps until the poll).
                    book.starved = True
                claimed = await queues.claim_due(
                    tx,
                    now=now,
                    lease=self.lease,
                    lease_until=now + self._lease_seconds,
                    quotas=quotas,
                    take=reservation.take,
                    full=full,
                )
                plans = await self._plans_for(tx, claimed)
        # A tenant that got all it asked for may have more due: claim again at once; else when
        # the next delivery falls due (tenants held back now are woken by room let go).
        got = Counter((delivery.app_id, delivery.business_id or "") for delivery in claimed)
        more_now = any(got[tenant] >= n for tenant, n in quotas)
        later = (tenant.due for tenant in due if tenant.due > now)
        self._next_due = now if more_now else min(later, default=None)
        for delivery in claimed:
            self._hand_over(delivery, plans[delivery.webhook_id], None)
        self._publish_fairness()
        return len(claimed)

    async def _plans_for(
        self, tx: Transaction, claimed: list[queues.ClaimedDelivery]
    ) -> dict[str, _Planned]:
        """The send-time check of what a transaction just claimed, made in that transaction:
        an actor that attempts them at once needs no transaction of its own for it."""
        p = self._platform
        by_webhook: dict[str, list[queues.ClaimedDelivery]] = {}
        for delivery in claimed:
            by_webhook.setdefault(delivery.webhook_id, []).append(delivery)
        checked_at, generation = trio.current_time(), self._generation
        plans = await queues.send_plans(tx, p.keyring, now=p.now(), deliveries=by_webhook)
        return {
            webhook_id: _Planned(plan, checked_at, generation) for webhook_id, plan in plans.items()
        }

    # --- actors --------------------------------------------------------------------------------

    def _hand_over(
        self, delivery: queues.ClaimedDelivery, planned: _Planned, event_at: float | None
    ) -> None:
        """Put a claimed delivery in its webhook's actor's inbox (room was reserved for it),
        with the send-time check made when it was claimed."""
        self._planned[delivery.id] = planned
        actor = self._actors.get(delivery.webhook_id)
        if actor is None:
            send, receive = trio.open_memory_channel[queues.ClaimedDelivery](self._held_per_webhook)
            actor = _Actor(delivery.webhook_id, send, receive, trio.Semaphore(self._in_flight))
            self._actors[delivery.webhook_id] = actor
            assert self._nursery is not None
            self._nursery.start_soon(self._run_actor, actor)
        if event_at is not None:
            self._event_at[delivery.id] = event_at
        if self._draining:
            self._give_back(delivery)
            return
        if self._launch_now(actor, delivery, planned):
            return
        # Never blocks: the inbox holds as many as may be reserved for one webhook.
        actor.send.send_nowait(delivery)

    def _give_back(self, delivery: queues.ClaimedDelivery) -> None:
        """Let go of a delivery the engine will not attempt (it is draining): its room here;
        its claim is given back when the engine leaves ``running``."""
        self._book.forget_unmade(delivery.id)
        self._let_go(delivery)

    def _give_back_inbox(self, actor: _Actor) -> None:
        while True:
            try:
                delivery = actor.receive.receive_nowait()
            except trio.WouldBlock:
                return
            self._give_back(delivery)

    def _launch_now(
        self, actor: _Actor, delivery: queues.ClaimedDelivery, planned: _Planned
    ) -> bool:
        """Start the attempt of ``delivery`` here, without a pass through the inbox, when its
        actor has started, has a free slot and nothing waiting, and the check stands."""
        if (
            actor.attempts is None
            or actor.receive.statistics().current_buffer_used
            or not self._still_valid(planned, trio.current_time())
        ):
            return False
        try:
            actor.slots.acquire_nowait()
        except trio.WouldBlock:
            return False
        self._planned.pop(delivery.id, None)
        refusal = planned.plan.refusals.get(delivery.id)
        if refusal is not None:
            self._finish(actor, delivery, self._refused(delivery, refusal))
        else:
            actor.attempts.start_soon(self._attempt, actor, planned.plan, delivery)
        return True

    async def _run_actor(self, actor: _Actor) -> None:
        try:
            async with trio.open_nursery() as attempts:
                actor.attempts = attempts
                while True:
                    first: queues.ClaimedDelivery | None = None
                    with trio.move_on_after(self._actor_idle):
                        first = await actor.receive.receive()
                    if first is None:
                        # Idle: retire when nothing is running or waiting. Nothing awaits
                        # between this check and leaving the registry, so no delivery can be
                        # handed to a retired actor.
                        idle = actor.receive.statistics().current_buffer_used == 0
                        if idle and actor.slots.value == self._in_flight:
                            del self._actors[actor.webhook_id]
                            actor.attempts = None
                            break
                        continue
                    await actor.slots.acquire()
                    if self._draining:
                        actor.slots.release()
                        self._give_back(first)
                        self._give_back_inbox(actor)
                        continue
                    batch = [first]
                    while True:
                        try:
                            actor.slots.acquire_nowait()
                        except trio.WouldBlock:
                            break
                        try:
                            batch.append(actor.receive.receive_nowait())
                        except trio.WouldBlock:
                            actor.slots.release()
                            break
                    await self._start_attempts(actor, batch, attempts)
        finally:
            if actor.client is not None:
                with trio.CancelScope(shield=True):
                    await actor.client.aclose()

    async def _start_attempts(
        self, actor: _Actor, batch: list[queues.ClaimedDelivery], attempts: trio.Nursery
    ) -> None:
        """The send-time check of ``batch``, then its attempts; each holds one slot. The check
        made when a delivery was claimed stands if it is at most PLAN_FRESH old; the others are
        checked again now, in one transaction."""
        p = self._platform
        now = trio.current_time()
        for delivery in [d for d in batch if self._book.unmade(d.id)]:
            # Its fan-out did not commit: the delivery does not exist (yet).
            self._book.forget_unmade(delivery.id)
            self._drop(actor, delivery)
            batch.remove(delivery)
        plans = {d.id: self._planned.pop(d.id, None) for d in batch}
        stale = [d for d in batch if not self._still_valid(plans[d.id], now)]
        if stale:
            generation = self._generation
            try:
                async with p.store.transaction(background=True) as tx:
                    fresh = await queues.send_plan(
                        tx, p.keyring, now=p.now(), webhook_id=actor.webhook_id, deliveries=stale
                    )
            except StorageError as exc:
                log.warning("delivery engine: send-time check: %s", exc)
                for delivery in stale:
                    self._finish(
                        actor, delivery, self._retry_later(delivery, "storage unavailable")
                    )
                batch = [d for d in batch if d not in stale]
            else:
                for delivery in stale:
                    plans[delivery.id] = _Planned(fresh, now, generation)
        for delivery in batch:
            if self._draining:
                actor.slots.release()
                self._give_back(delivery)
                continue
            planned = plans[delivery.id]
            assert planned is not None
            plan = planned.plan
            refusal = plan.refusals.get(delivery.id)
            if refusal is not None:
                self._finish(actor, delivery, self._refused(delivery, refusal))
            else:
                attempts.start_soon(self._attempt, actor, plan, delivery)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = verifying_context()
        return self._tls

    def _still_valid(self, planned: _Planned | None, now: float) -> bool:
        """Whether a check still stands: nothing it read has changed since (no entitlement
        change was committed, the previous secret still signs) and it is at most PLAN_FRESH
        old (the safety net for a lost notification)."""
        if planned is None or planned.generation != self._generation:
            return False
        change_at = planned.plan.secrets_change_at
        if change_at is not None and self._platform.now() >= change_at:
            return False
        return now - planned.at <= PLAN_FRESH

    def _entitlements_changed(self) -> None:
        self._generation += 1

    def _client(self, actor: _Actor) -> DeliveryClient:
        if actor.client is None:
            config = self._platform.config
            actor.client = DeliveryClient(
                max_connections=self._in_flight,
                allow=(
                    (lambda _address: True)
                    if config.development
                    else functools.partial(apps.address_allowed, loopback=config.loopback_webhooks)
                ),
                resolver=self._resolver,
                ssl_context=self._ssl_context(),
            )
        return actor.client

    async def _attempt(
        self, actor: _Actor, plan: queues.SendPlan, delivery: queues.ClaimedDelivery
    ) -> None:
        try:
            # A fan-out's first attempts start before its block is left: the events it read
            # must be on disk before anything is sent about them.
            await self._platform.store.durable()
        except StorageError as exc:
            log.warning("delivery engine: attempt of %s: %s", delivery.id, exc)
            self._finish(actor, delivery, self._retry_later(delivery, "storage unavailable"))
            return
        developer = self._book.developer(delivery.app_id)
        slots = self._developer_in_flight.get(developer)
        if slots is None:
            slots = self._developer_in_flight[developer] = trio.Semaphore(
                self._in_flight_per_developer
            )
        try:
            await _take_slot(slots)
            try:
                while self._book.unwritten >= UNRECORDED_MAX:
                    self._record_now.set()
                    await self._recorded.wait()
                outcome = await self._send(actor, plan, delivery)
            finally:
                slots.release()
        except Exception:
            # A fault here must not take the engine down: the delivery is given back.
            log.exception("delivery engine: attempt of %s", delivery.id)
            outcome = self._retry_later(delivery, "attempt failed on the service side")
        finally:
            if (
                slots.value == self._in_flight_per_developer
                and not slots.statistics().tasks_waiting
            ):
                self._developer_in_flight.pop(developer, None)
        self._finish(actor, delivery, outcome)

    async def _send(
        self, actor: _Actor, plan: queues.SendPlan, delivery: queues.ClaimedDelivery
    ) -> queues.AttemptOutcome:
        p = self._platform
        timeout = p.config.webhook_timeout
        timestamp = math.floor(p.now())
        body = delivery.body
        url = httpcore.URL(plan.url)
        headers = [
            (b"Host", _host_header(url)),
            (b"User-Agent", USER_AGENT),
            # An answer's first bytes are kept for the attempt log: asked for uncompressed.
            (b"Accept-Encoding", b"identity"),
            (b"Content-Type", b"application/json"),
            (b"Content-Length", str(len(body)).encode()),
            (b"X-Webhook-Id", delivery.id.encode()),
            (b"X-Webhook-Event", delivery.type.encode()),
            (
                b"X-Webhook-Signature",
                signature_header(plan.secrets, timestamp, delivery.body).encode(),
            ),
        ]
        if delivery.event_id is not None:
            headers.append((b"X-Webhook-Event-Id", delivery.event_id.encode()))
        started_at = p.now()
        started = trio.current_time()
        event_at = self._event_at.pop(delivery.id, None)
        if event_at is not None:
            p.metrics.delivery_event_lag.observe(max(started_at - event_at, 0.0))
        client = self._client(actor)
        code: int | None = None
        error: str | None = None
        kept = bytearray()
        truncated = False
        async with _SendSlot(self._sending) as slot:
            extensions = {
                "trace": slot,
                "timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout),
            }
            with trio.move_on_after(timeout) as deadline:
                try:
                    async with client.stream(
                        "POST", url, headers=headers, content=body, extensions=extensions
                    ) as response:
                        code = response.status
                        truncated = await _read_head(response, kept)
                except httpcore.TimeoutException:
                    error = f"timeout: no answer within {timeout:g} s"
                except DELIVERY_ERRORS as exc:
                    error = f"connection error: {_reason(exc)}"[:500]
        seconds = trio.current_time() - started
        if deadline.cancelled_caught:
            truncated = code is not None  # its body was not read to its end
            error = (
                f"timeout: no answer within {timeout:g} s"
                if code is None
                else f"timeout: the answer's body did not end within {timeout:g} s"
            )
        elif code is not None and not 200 <= code < 300:
            error = f"HTTP {code}"
        p.metrics.delivery_attempt_seconds.observe(seconds)
        made = queues.AttemptMade(
            started_at=started_at,
            duration_ms=round(seconds * 1000, 3),
            response_body=bytes(kept),
            response_truncated=truncated,
            request_headers={
                name.decode("latin-1"): value.decode("latin-1") for name, value in headers
            },
        )
        return self._outcome(delivery, code, error, made)

    def _outcome(
        self,
        delivery: queues.ClaimedDelivery,
        code: int | None,
        error: str | None,
        made: queues.AttemptMade,
    ) -> queues.AttemptOutcome:
        p = self._platform
        now = p.now()
        attempts = delivery.attempts + 1
        if error is None:
            status: queues.DeliveryStatus = "delivered"
            due = None
        else:
            due = next_attempt_at(attempts, now, p.config.webhook_retry_delays)
            status = "retrying" if due is not None else "failed"
        return queues.AttemptOutcome(
            delivery_id=delivery.id,
            lease=delivery.lease,
            status=status,
            attempts=attempts,
            response_code=code,
            error=error,
            finished_at=now,
            next_attempt_at=due,
            first_attempt_at=made.started_at,
            made=made,
        )

    def _refused(self, delivery: queues.ClaimedDelivery, reason: str) -> queues.AttemptOutcome:
        return queues.AttemptOutcome(
            delivery_id=delivery.id,
            lease=delivery.lease,
            status="failed",
            attempts=delivery.attempts,
            response_code=None,
            error=f"not sent: {reason}",
            finished_at=self._platform.now(),
            next_attempt_at=None,
            first_attempt_at=None,
        )

    def _retry_later(self, delivery: queues.ClaimedDelivery, reason: str) -> queues.AttemptOutcome:
        """Give the claim back unattempted, due again after a poll interval."""
        now = self._platform.now()
        return queues.AttemptOutcome(
            delivery_id=delivery.id,
            lease=delivery.lease,
            status="retrying" if delivery.attempts else "queued",
            attempts=delivery.attempts,
            response_code=None,
            error=reason,
            finished_at=now,
            next_attempt_at=now + self._poll,
            first_attempt_at=None,
        )

    def _finish(
        self, actor: _Actor, delivery: queues.ClaimedDelivery, outcome: queues.AttemptOutcome
    ) -> None:
        """An attempt ended (or was refused): its outcome goes to the recorder and its slot and
        room are let go, unless its fan-out has not committed yet: then both wait for it
        (``DeliveryBook.attempt_ended``). The delivery stays claimed (its lease renewed) until
        the outcome is written, so no claim takes it meanwhile; outcomes waiting hold new
        claims back (``DeliveryBook.take``)."""
        verdict = self._book.attempt_ended(delivery.id, _Ended(actor, delivery, outcome))
        if verdict is not Verdict.WAIT:
            self._settle_attempt(actor, delivery, outcome, record=verdict is Verdict.RECORD)

    def _settle_attempt(
        self,
        actor: _Actor,
        delivery: queues.ClaimedDelivery,
        outcome: queues.AttemptOutcome,
        *,
        record: bool,
    ) -> None:
        """The outcome to the recorder (unless its fan-out did not commit: then the delivery
        does not exist), and the delivery's slot and room let go."""
        if record:
            self._platform.metrics.deliveries.labels(outcome.status, delivery.type).inc()
            self._book.add_outcome(delivery.app_id, delivery.webhook_id, outcome)
            self._record_wake.set()
            if self._book.outcomes_waiting >= RECORD_SOON:
                self._record_now.set()
        self._drop(actor, delivery)

    def _drop(self, actor: _Actor, delivery: queues.ClaimedDelivery) -> None:
        """Free a delivery's attempt slot and its room."""
        actor.slots.release()
        self._let_go(delivery)

    def _let_go(self, delivery: queues.ClaimedDelivery) -> None:
        """Free a delivery's room and what the engine kept for its attempt."""
        self._event_at.pop(delivery.id, None)
        self._planned.pop(delivery.id, None)
        if self._book.let_go(delivery.app_id, delivery.business_id or "", delivery.webhook_id):
            self._claim_wake.set()
        self._settle_check()

    # --- the recorder --------------------------------------------------------------------------

    async def _record_loop(self) -> None:
        while True:
            await self._record_wake.wait(math.inf)
            await self._record_now.wait(self._record_linger)
            while self._book.outcomes_waiting:
                if not await self._record_some():
                    await trio.sleep(1.0)

    async def _record_some(self) -> bool:
        """Write one batch of outcomes; False when the store failed (they stay to be written)."""
        batch = self._book.take_outcomes(RECORD_BATCH)
        try:
            async with self._platform.store.transaction(background=True) as tx:
                await queues.record_outcomes(tx, [outcome for _, _, outcome in batch])
        except BaseException as exc:
            self._outcomes_not_written(batch)
            if isinstance(exc, StorageError):
                log.warning("delivery engine: recording outcomes: %s", exc)
                return False
            raise
        self._outcomes_written(batch)
        return True

    def _outcomes_not_written(self, batch: list[tuple[str, str, queues.AttemptOutcome]]) -> None:
        self._book.outcomes_not_written(batch)
        if batch:
            self._record_wake.set()
        self._recording_ended()

    def _recording_ended(self) -> None:
        """Wake the attempts waiting for outcomes to be written (UNRECORDED_MAX)."""
        self._recorded.set()
        self._recorded = trio.Event()

    def _outcomes_written(self, batch: list[tuple[str, str, queues.AttemptOutcome]]) -> None:
        self._book.outcomes_written(batch)
        if self._book.starved or any(outcome.next_attempt_at is not None for *_, outcome in batch):
            self._claim_wake.set()  # room again, or a next due time that may be sooner
        self._recording_ended()
        self._settle_check()

    def _settle_check(self) -> None:
        if self._book.settled:
            self._settled.set()

    async def settle(self) -> None:
        """Wait until this engine holds nothing: every delivery it claimed was attempted (or
        refused) and its outcome written."""
        while not self._book.settled:
            self._record_now.set()
            self._settled = trio.Event()
            await self._settled.wait()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[DeliveryEngine]:
        """The engine's nursery with its recorder: actors can be started and outcomes written.
        Leaving it stops the actors, writes the outcomes there are and gives back every claim
        still held (due again at once, for this or another process)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._record_loop)
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
        while self._book.outcomes_waiting and await self._record_some():
            pass
        try:
            async with p.store.transaction(background=True) as tx:
                await queues.release_claims(tx, lease=self.lease, now=p.now())
        except StorageError as exc:
            log.warning("delivery engine: giving claims back: %s", exc)
        self._book.clear()
