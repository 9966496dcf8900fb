"""The delivery engine's claimer: due deliveries claimed, and the claims held renewed.

The claimer claims deliveries whose attempt is due (retries, redeliveries, test deliveries,
what another process left), woken by commits that queue deliveries, by room let go and by the
next due time (:meth:`Claimer.run`). A claim goes round the developers with due deliveries,
their apps and the apps' businesses (``DeliveryBook.claim_order``): each tenant's oldest due, at
most its part of the batch and of its developer's room, handed over in turns
(``queues.claim_due``), webhooks at their cap passed over. The send-time check of what it
claimed is made in the same transaction (:meth:`Claimer._plans_for`), so an actor that attempts
them at once needs no transaction of its own.

A claim's lease (the engine's id) keeps other processes off a delivery; :meth:`Claimer.renew`
renews every claim the engine holds every third of the lease.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import trio

from ledgerport import queues
from ledgerport.storage import FIRST_PER_KEY_MAX, StorageError, Transaction

from ._actors import Actors, Ended
from ._delivery_book import DeliveryBook
from ._send_check import Planned
from ._shared import DeliveryState, guarded

log = logging.getLogger("ledgerport.engine.delivery")

CLAIM_BATCH = 64
"""Due deliveries claimed per transaction at most."""
RENEW_BATCH = 256
"""Claims renewed per transaction at most."""


class Claimer:
    """Claims due deliveries and renews the claims held (see the module docstring);
    ``publish``: the engine's fairness figures to the metrics, after each claim."""

    def __init__(
        self,
        state: DeliveryState,
        book: DeliveryBook[Ended, queues.AttemptOutcome],
        actors: Actors,
        *,
        publish: Callable[[], None],
    ) -> None:
        self._state = state
        self._book = book
        self._actors = actors
        self._publish = publish
        self._next_due: float | None = None
        """When the earliest delivery the last claim could not take yet is due (None: none
        known)."""

    async def run(self) -> None:
        """The claim loop, until the engine drains."""
        state = self._state
        while not state.draining:
            claimed = await guarded(state.platform, self.claim_once)
            if claimed < CLAIM_BATCH and not state.draining:
                # Until the earliest delivery an app with room has due, or until room is let
                # go (which wakes the loop) for apps held back now.
                await state.claim_wake.wait(self._until_next_due())

    def _until_next_due(self) -> float:
        due = self._next_due
        if due is None:
            return self._state.poll
        return min(self._state.poll, max(due - self._state.platform.now(), 0.0) + 0.001)

    async def claim_once(self) -> int:
        """Claim one batch of due deliveries and hand them to their actors; answers how many."""
        state = self._state
        p = state.platform
        book = self._book
        book.fed()
        held_back: set[tuple[str, str]] = set()
        with book.reserving() as reservation:

            def take(app_id: str, business: str, webhook_id: str) -> bool:
                if reservation.take(app_id, business, webhook_id):
                    return True
                held_back.add((app_id, business))
                return False

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
                    book.passed_over(full)
                claimed = await queues.claim_due(
                    tx,
                    now=now,
                    lease=state.lease,
                    lease_until=now + state.lease_seconds,
                    quotas=quotas,
                    take=take,
                    full=full,
                )
                plans = await self._plans_for(tx, claimed)
        # A tenant that got all it asked for may have more due: claim again at once. So too
        # when one got some: the due time read of it was its earliest, which it just claimed,
        # and when its next falls due is known only to the next round. Else when the next
        # delivery falls due. A tenant the room held back (a webhook at its cap, a share) is
        # woken by room let go instead, in a batch (``DeliveryBook.let_go``): claimed again at
        # once, it got what a few attempts let go meanwhile, a transaction each time (8 to 16
        # deliveries a claim in the import-to-delivery pipeline, against 64 now).
        got = Counter((delivery.app_id, delivery.business_id or "") for delivery in claimed)
        next_unknown = any(got[tenant] > 0 and tenant not in held_back for tenant, _ in quotas)
        later = (tenant.due for tenant in due if tenant.due > now)
        self._next_due = now if next_unknown else min(later, default=None)
        for delivery in claimed:
            self._actors.hand_over(delivery, plans[delivery.webhook_id], None)
        self._publish()
        return len(claimed)

    async def _plans_for(
        self, tx: Transaction, claimed: list[queues.ClaimedDelivery]
    ) -> dict[str, Planned]:
        """The send-time check of what a transaction just claimed, made in that transaction:
        an actor that attempts them at once needs no transaction of its own for it."""
        p = self._state.platform
        by_webhook: dict[str, list[queues.ClaimedDelivery]] = {}
        for delivery in claimed:
            by_webhook.setdefault(delivery.webhook_id, []).append(delivery)
        checked_at, generation = trio.current_time(), self._state.generation
        plans = await queues.send_plans(tx, p.keyring, now=p.now(), deliveries=by_webhook)
        return {
            webhook_id: Planned(plan, checked_at, generation) for webhook_id, plan in plans.items()
        }

    async def renew(self) -> None:
        """Renew the engine's claims every third of their lease, while it holds some."""
        state = self._state
        while True:
            await trio.sleep(state.lease_seconds / 3)
            if not self._book.settled:
                p = state.platform
                try:
                    until = p.now() + state.lease_seconds
                    renewed = RENEW_BATCH
                    while renewed == RENEW_BATCH:
                        async with p.store.transaction(background=True) as tx:
                            renewed = await queues.renew_claims(
                                tx, lease=state.lease, until=until, limit=RENEW_BATCH
                            )
                except StorageError as exc:
                    log.warning("delivery engine: renewing claims: %s", exc)
