"""The delivery engine's actors: one per webhook, started on demand and retired when idle.

The dispatcher and the claimer hand each delivery they claimed (room in the book was reserved
for it) to its webhook's actor (:meth:`Actors.hand_over`), with the send-time check made in the
transaction that claimed it (:class:`Planned`). The attempt starts there and then when the actor
has started, has a free slot, nothing waits in its inbox and the check stands (``_launch_now``);
else the delivery waits in the actor's bounded inbox. An actor takes from its inbox as many as it
has free slots (``in_flight``, on its own keep-alive client, so a slow or dead endpoint holds up
nothing but itself), checks again in one transaction those whose check no longer stands
(``_send_check.py``), and starts their attempts. Every attempt of a webhook starts in one
place, :meth:`Actors._start`.

An attempt started waits for the disk (a fan-out's first attempts start before its
transaction ends), for its endpoint's second when it has a ``rateLimit`` (``_rate.py``), takes
one of its developer's IN_FLIGHT_PER_DEVELOPER slots (all its apps together) and, when too many
outcomes are unwritten, waits for the recorder; then it is made (``_attempt.py``). Its outcome
goes to the recorder (``_recorder.py``) and its room in the book is let go, unless its fan-out
has not committed yet: then both wait for the commit (``DeliveryBook.attempt_ended``), and are
dropped if it fails. A draining engine starts no attempt: what waits in an inbox is given back.
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import trio

from ledgerport import apps, queues
from ledgerport.platform import Platform
from ledgerport.storage import StorageError

from ._attempt import attempt, refused, retry_later, webhook_client
from ._delivery_book import DeliveryBook, Verdict
from ._post import SENDING_AT_ONCE, take_slot
from ._rate import SendRate
from ._recorder import Recorder
from ._send_check import Planned, check_stands
from ._shared import DeliveryState
from ._transport import DeliveryClient, verifying_context

log = logging.getLogger("ledgerport.engine.delivery")

ACTOR_IDLE = 30.0
"""Seconds an actor with nothing to do lives on before it retires (and closes its client)."""


@dataclass
class Actor:
    """One webhook's actor: its inbox, its slots of attempts in flight and its client."""

    webhook_id: str
    send: trio.MemorySendChannel[queues.ClaimedDelivery]
    receive: trio.MemoryReceiveChannel[queues.ClaimedDelivery]
    slots: trio.Semaphore
    client: DeliveryClient | None = None
    attempts: trio.Nursery | None = None
    """Where the actor's attempts run, once it has started."""


@dataclass(frozen=True)
class Ended:
    """An attempt that ended before its fan-out's transaction did: its outcome waits."""

    actor: Actor
    delivery: queues.ClaimedDelivery
    outcome: queues.AttemptOutcome


class Send(Protocol):
    """How an attempt is made (``_attempt.attempt``)."""

    async def __call__(
        self,
        platform: Platform,
        client: Callable[[], DeliveryClient],
        plan: queues.SendPlan,
        delivery: queues.ClaimedDelivery,
        *,
        sending: trio.Semaphore,
        event_at: float | None,
    ) -> queues.AttemptOutcome: ...


class Actors:
    """The webhooks' actors of one engine (see the module docstring). ``in_flight``: attempts of
    one webhook at once; ``in_flight_per_developer``: of one developer's webhooks at once;
    ``held_per_webhook``: an inbox's size; ``idle``: seconds an idle actor lives on; ``tls``:
    the context receivers' certificates are verified with (by default the CA bundle's, made at
    the first attempt); ``send``: how an attempt is made."""

    def __init__(
        self,
        state: DeliveryState,
        book: DeliveryBook[Ended, queues.AttemptOutcome],
        recorder: Recorder,
        *,
        resolver: apps.Resolver,
        in_flight: int,
        in_flight_per_developer: int,
        held_per_webhook: int,
        idle: float = ACTOR_IDLE,
        tls: ssl.SSLContext | None = None,
        send: Send = attempt,
    ) -> None:
        self._state = state
        self._platform = state.platform
        self._book = book
        self._recorder = recorder
        self._resolver = resolver
        self._in_flight = in_flight
        self._in_flight_per_developer = in_flight_per_developer
        self._held_per_webhook = held_per_webhook
        self._idle = idle
        self._tls = tls
        self._send = send
        self._actors: dict[str, Actor] = {}
        self._sending = trio.Semaphore(SENDING_AT_ONCE)
        self._rate = SendRate(self._platform.store, self._platform.now, self._platform.metrics)
        self._developer_in_flight: dict[str, trio.Semaphore] = {}
        """Each developer's attempts in flight, while it has some."""
        self._planned: dict[str, Planned] = {}
        """The send-time check of each delivery handed over, until its attempt starts."""
        self._event_at: dict[str, float] = {}
        """When the event of a delivery fanned out here was recorded, until its first attempt."""
        self.nursery: trio.Nursery | None = None
        """Where the actors run: the engine's, while it runs."""

    def __len__(self) -> int:  # the actors alive now
        return len(self._actors)

    # --- handing over --------------------------------------------------------------------------

    def hand_over(
        self, delivery: queues.ClaimedDelivery, planned: Planned, event_at: float | None
    ) -> None:
        """Put a claimed delivery in its webhook's actor's inbox (room was reserved for it),
        with the send-time check made when it was claimed; ``event_at``: when its event was
        recorded, for a delivery fanned out here."""
        self._planned[delivery.id] = planned
        actor = self._actors.get(delivery.webhook_id)
        if actor is None:
            send, receive = trio.open_memory_channel[queues.ClaimedDelivery](self._held_per_webhook)
            actor = Actor(delivery.webhook_id, send, receive, trio.Semaphore(self._in_flight))
            self._actors[delivery.webhook_id] = actor
            assert self.nursery is not None
            self.nursery.start_soon(self._run_actor, actor)
        if event_at is not None:
            self._event_at[delivery.id] = event_at
        if self._state.draining:
            self._give_back(delivery)
            return
        if self._launch_now(actor, delivery, planned):
            return
        # Never blocks: the inbox holds as many as may be reserved for one webhook.
        actor.send.send_nowait(delivery)

    def give_back_inboxes(self) -> None:
        """Give back what waits in every inbox (the engine drains)."""
        for actor in list(self._actors.values()):
            self._give_back_inbox(actor)

    def clear(self) -> None:
        """The engine stopped: its actors with it."""
        self.nursery = None
        self._actors.clear()

    def _give_back(self, delivery: queues.ClaimedDelivery) -> None:
        """Let go of a delivery the engine will not attempt (it is draining): its room here;
        its claim is given back when the engine leaves ``running``."""
        self._book.forget_unmade(delivery.id)
        self._let_go(delivery)

    def _give_back_inbox(self, actor: Actor) -> None:
        while True:
            try:
                delivery = actor.receive.receive_nowait()
            except trio.WouldBlock:
                return
            self._give_back(delivery)

    # --- starting attempts ---------------------------------------------------------------------

    def _launch_now(self, actor: Actor, delivery: queues.ClaimedDelivery, planned: Planned) -> bool:
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
        self._start(actor, planned.plan, delivery)
        return True

    def _start(self, actor: Actor, plan: queues.SendPlan, delivery: queues.ClaimedDelivery) -> None:
        """The one place an attempt of a webhook starts: ``delivery`` holds one of ``actor``'s
        slots and its send-time check (``plan``) stands. Refused by the check, it fails unsent;
        else its attempt starts in the actor's nursery."""
        refusal = plan.refusals.get(delivery.id)
        if refusal is not None:
            self._finish(actor, delivery, refused(delivery, refusal, now=self._platform.now()))
            return
        assert actor.attempts is not None
        actor.attempts.start_soon(self._attempt, actor, plan, delivery)

    async def _run_actor(self, actor: Actor) -> None:
        try:
            async with trio.open_nursery() as attempts:
                actor.attempts = attempts
                while True:
                    first: queues.ClaimedDelivery | None = None
                    with trio.move_on_after(self._idle):
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
                    if self._state.draining:
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
                    await self._start_attempts(actor, batch)
        finally:
            if actor.client is not None:
                with trio.CancelScope(shield=True):
                    await actor.client.aclose()

    async def _start_attempts(self, actor: Actor, batch: list[queues.ClaimedDelivery]) -> None:
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
            generation = self._state.generation
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
                    plans[delivery.id] = Planned(fresh, now, generation)
        for delivery in batch:
            if self._state.draining:
                actor.slots.release()
                self._give_back(delivery)
                continue
            planned = plans[delivery.id]
            assert planned is not None
            self._start(actor, planned.plan, delivery)

    def _still_valid(self, planned: Planned | None, now: float) -> bool:
        return check_stands(
            planned, generation=self._state.generation, at=now, now=self._platform.now
        )

    # --- an attempt ----------------------------------------------------------------------------

    def _client(self, actor: Actor) -> DeliveryClient:
        if actor.client is None:
            if self._tls is None:
                self._tls = verifying_context()
            actor.client = webhook_client(
                self._platform.config,
                max_connections=self._in_flight,
                resolver=self._resolver,
                ssl_context=self._tls,
            )
        return actor.client

    async def _attempt(
        self, actor: Actor, plan: queues.SendPlan, delivery: queues.ClaimedDelivery
    ) -> None:
        try:
            # A fan-out's first attempts start before its block is left: the events it read
            # must be on disk before anything is sent about them.
            await self._platform.store.durable()
        except StorageError as exc:
            log.warning("delivery engine: attempt of %s: %s", delivery.id, exc)
            self._finish(actor, delivery, self._retry_later(delivery, "storage unavailable"))
            return
        limit, second = plan.rate_limit, 0
        if limit is not None:  # before it holds any of its developer's slots
            second = await self._rate.take(delivery.webhook_id, limit)
        developer = self._book.developer(delivery.app_id)
        slots = self._developer_in_flight.get(developer)
        if slots is None:
            slots = self._developer_in_flight[developer] = trio.Semaphore(
                self._in_flight_per_developer
            )
        try:
            await take_slot(slots)
            try:
                await self._recorder.caught_up()
                if limit is not None:  # its unit must be of the second it starts in
                    await self._rate.starting(delivery.webhook_id, limit, second)
                outcome = await self._send(
                    self._platform,
                    functools.partial(self._client, actor),
                    plan,
                    delivery,
                    sending=self._sending,
                    event_at=self._event_at.pop(delivery.id, None),
                )
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

    def _retry_later(self, delivery: queues.ClaimedDelivery, why: str) -> queues.AttemptOutcome:
        """Give the claim back unattempted, due again after a poll interval."""
        return retry_later(delivery, why, now=self._platform.now(), after=self._state.poll)

    # --- an attempt's end ----------------------------------------------------------------------

    def _finish(
        self, actor: Actor, delivery: queues.ClaimedDelivery, outcome: queues.AttemptOutcome
    ) -> None:
        """An attempt ended (or was refused): its outcome goes to the recorder and its slot and
        room are let go, unless its fan-out has not committed yet: then both wait for it
        (``DeliveryBook.attempt_ended``). The delivery stays claimed (its lease renewed) until
        the outcome is written, so no claim takes it meanwhile; outcomes waiting hold new
        claims back (``DeliveryBook.take``)."""
        ended = Ended(actor, delivery, outcome)
        verdict = self._book.attempt_ended(delivery.id, ended)
        if verdict is not Verdict.WAIT:
            self.settle(ended, record=verdict is Verdict.RECORD)

    def settle(self, ended: Ended, *, record: bool) -> None:
        """The outcome to the recorder (unless its fan-out did not commit: then the delivery
        does not exist), and the delivery's slot and room let go."""
        if record:
            self._recorder.add(ended.delivery, ended.outcome)
        self._drop(ended.actor, ended.delivery)

    def _drop(self, actor: Actor, delivery: queues.ClaimedDelivery) -> None:
        """Free a delivery's attempt slot and its room."""
        actor.slots.release()
        self._let_go(delivery)

    def _let_go(self, delivery: queues.ClaimedDelivery) -> None:
        """Free a delivery's room and what the engine kept for its attempt."""
        self._event_at.pop(delivery.id, None)
        self._planned.pop(delivery.id, None)
        if self._book.let_go(delivery.app_id, delivery.business_id or "", delivery.webhook_id):
            self._state.claim_wake.set()
        self._recorder.check_settled()
