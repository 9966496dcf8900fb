"""The delivery engine's bookkeeping, with no ``await`` (on ``_core.py``'s terms, whose
:class:`Shares` and :class:`Capped` it holds): what the engine holds and for whom, the room a
claiming transaction reserves, the fan-outs whose first attempts start before their
transaction ends, and the outcomes waiting to be written.

The delivery engine's components (``_dispatcher.py``, ``_claimer.py``, ``_actors.py``,
``_recorder.py``) share one :class:`DeliveryBook`, which their supervisor (``_delivery.py``)
owns; they ask it before they act and tell it what happened, and it answers what they must do
next. Its invariants are tested without a store (``tests/unit/test_engine_core.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar

from ._core import Capped, Refusal, Shares, level

Ended = TypeVar("Ended")
"""What the engine keeps of an attempt that ended before its fan-out did."""
Outcome = TypeVar("Outcome")
"""An outcome to write."""


class Verdict(Enum):
    """What becomes of an attempt's outcome."""

    RECORD = "record"
    """Write it."""
    WAIT = "wait"
    """Its fan-out has not ended: keep it (and the delivery's room) until it does."""
    DROP = "drop"
    """Its fan-out did not commit: the delivery does not exist; forget the outcome."""


@dataclass(eq=False)
class FanOut(Generic[Ended]):
    """A fan-out whose first attempts start before its transaction ends."""

    ended: bool = False
    committed: bool = False
    waiting: list[tuple[str, Ended]] = field(default_factory=list)
    """Its attempts that ended before it did: (delivery id, what the engine keeps)."""


@dataclass
class Reservation:
    """Room taken for deliveries a transaction claims (:meth:`DeliveryBook.reserving`)."""

    book: DeliveryBook[Any, Any]
    taken: list[tuple[str, str, str]] = field(default_factory=list)
    """(app id, business, webhook id) of each unit taken and not handed over yet."""

    def take(self, app_id: str, business: str, webhook_id: str) -> bool:
        if self.book.take(app_id, business, webhook_id) is None:
            self.taken.append((app_id, business, webhook_id))
            return True
        return False

    def handed_over(self) -> None:
        """What was taken is in the actors' hands now: they let it go."""
        self.taken.clear()


class DeliveryBook(Generic[Ended, Outcome]):
    """The delivery engine's bookkeeping (see the module docstring).

    A developer's apps together hold at most ``per_developer`` deliveries (past it only by the
    free deliveries of quiet webhooks, below), what one app of its own would: the share is the
    developer's, so more apps buy no more of the engine. The engine learns each app's developer
    (:meth:`note_developers`) from what it reads before it takes room for the app; a developer
    never changes, so what was learned stays true."""

    def __init__(
        self, *, total: int, per_developer: int, per_webhook: int, per_webhook_free: int = 1
    ) -> None:
        self.developers: Shares[str] = Shares(total=total, per_tenant=per_developer)
        """Deliveries held per developer, within its share, and the developers waiting."""
        self.apps: Capped[str] = Capped(per_developer)
        """Deliveries held per app: the order of a developer's apps in a claim (its share
        bounds them)."""
        self.tenants: Capped[tuple[str, str]] = Capped(per_developer)
        """Deliveries held per app and business ('' for none): the order of an app's
        businesses in a claim."""
        self.webhooks: Capped[str] = Capped(per_webhook)
        self.per_webhook_free = per_webhook_free
        """Deliveries a webhook holds past its developer's share (up to twice the share)."""
        self.held_back: Counter[Refusal] = Counter()
        """Deliveries refused room so far, by why (a webhook at its own cap counts as
        OWN_CAP too: its own backlog)."""
        self._capped: set[str] = set()
        """Webhooks whose deliveries found no room for the webhook's own cap (a claim passed
        over them): the claimer looks again once one of them has let half its cap go."""
        self._short = False
        """Some delivery found no room for its developer's share, the engine's total or
        developers waiting first: the claimer looks again once any of those has room."""
        self._developer_of: dict[str, str] = {}
        """Each app's developer, as learned (:meth:`note_developers`)."""
        self._fan_outs: dict[str, FanOut[Ended]] = {}
        """The fan-out of each delivery handed over before that fan-out ended."""
        self._outcomes: list[tuple[str, str, Outcome]] = []
        """(app id, webhook id, outcome) waiting to be written, oldest first."""
        self._writing = 0
        """Outcomes taken by a transaction that has not ended yet."""

    # --- holds ---------------------------------------------------------------------------------

    @property
    def held(self) -> int:
        return self.developers.in_use

    def note_developers(self, developers: Iterable[tuple[str, str]]) -> None:
        """(app id, developer) pairs read from the store: the developer is the app's
        ``developer_user_id``, or the app's own id when it has none."""
        self._developer_of.update(developers)

    def developer(self, app_id: str) -> str:
        """The developer of ``app_id``, which must have been noted (room is never taken for an
        app whose developer is not known: its share would not be its developer's)."""
        try:
            return self._developer_of[app_id]
        except KeyError:
            raise KeyError(f"the developer of {app_id!r} was not noted") from None

    def take(self, app_id: str, business: str, webhook_id: str) -> Refusal | None:
        """Hold one more delivery of ``webhook_id`` (an app's, for ``business``: '' for none)
        when its webhook, its app's developer and the engine have room, no other developer
        waits for room first, and the outcomes waiting to be written are not too many (they
        hold claims back); else why not.

        A webhook holding fewer than ``per_webhook_free`` deliveries gets one more past its
        developer's share, while the developer holds less than twice its share (never past the
        engine's total, nor ahead of waiting developers): a webhook with no backlog is not held
        up by its siblings' backlog, and a developer with many webhooks still leaves the engine
        room for others."""
        developer = self.developer(app_id)
        shares = self.developers
        refusal: Refusal | None = None
        if self.webhooks.full(webhook_id):
            refusal = Refusal.OWN_CAP
        elif self.unwritten >= shares.total:
            refusal = Refusal.TOTAL
        else:
            free = (
                self.webhooks.held(webhook_id) < self.per_webhook_free
                and shares.held(developer) < 2 * shares.per_tenant
            )
            refusal = shares.take(developer, beyond_cap=free)
        if refusal is not None:
            if self.webhooks.full(webhook_id):
                self._capped.add(webhook_id)
            else:
                self._short = True
            self.held_back[refusal] += 1
            return refusal
        self.apps.add(app_id)
        self.tenants.add((app_id, business))
        self.webhooks.add(webhook_id)
        return None

    def let_go(self, app_id: str, business: str, webhook_id: str) -> bool:
        """Give back a delivery's room; answers whether the claimer should look for work (it
        was starved and enough is free again: refilled in batches, not a claim per delivery,
        or at once when a developer waits for room)."""
        developer = self.developer(app_id)
        shares = self.developers
        shares.let_go(developer)
        self.apps.remove(app_id)
        self.tenants.remove((app_id, business))
        self.webhooks.remove(webhook_id)
        half_free = self.webhooks.held(webhook_id) <= self.webhooks.cap // 2
        if webhook_id in self._capped and half_free:
            return True
        # Starved only for webhooks' own caps: room elsewhere claims none of their backlog
        # (a claim per few deliveries let go, each a transaction, when the engine had room).
        return self._short and (
            half_free
            or shares.held(developer) <= shares.per_tenant // 2
            or self.held <= shares.total // 2
            or bool(shares.waiting)
        )

    @property
    def starved(self) -> bool:
        """Some delivery found no room: the claimer looks again when room is let go
        (:meth:`let_go` says when)."""
        return self._short or bool(self._capped)

    @property
    def short(self) -> bool:
        """Starved for a developer's share or the engine's total (outcomes not written yet
        count in it), not only for webhooks' own caps: a recorder's write may make room."""
        return self._short

    def fed(self) -> None:
        """A claim begins: what it finds no room for starves the book again."""
        self._capped.clear()
        self._short = False

    def passed_over(self, webhook_ids: Iterable[str]) -> None:
        """A claim passed over the due deliveries of ``webhook_ids``, at their own caps."""
        self._capped.update(webhook_ids)

    @contextmanager
    def reserving(self) -> Iterator[Reservation]:
        """Room for a claiming transaction: what it took is given back when the transaction
        fails (nothing was claimed then), unless it was handed over already."""
        reservation = Reservation(self)
        try:
            yield reservation
        except BaseException:
            for app_id, business, webhook_id in reservation.taken:
                self.let_go(app_id, business, webhook_id)
            raise

    def full_webhooks(self) -> list[str]:
        """Webhooks holding their cap: a claim passes over them."""
        return sorted(self.webhooks.full_tenants())

    def claim_order(
        self, due: Mapping[tuple[str, str], float], budget: int
    ) -> list[tuple[tuple[str, str], int]]:
        """Which of the tenants with due deliveries, (app, business) each with when its oldest
        was due (their apps' developers noted), a claim takes from, and at most how many of
        each.

        Developers first: those waiting for room, then those holding least, then the one whose
        oldest due delivery has waited longest. A developer at its share, or that must let
        waiting developers go first, is held back (each of its tenants counted), as is every
        developer when the engine is full (they wait from now on). The claim's ``budget`` is
        shared out evenly among the rest, no developer's part past its room; a developer's part
        goes to its apps one at a time, each to the app holding least (then the longest
        waiting), and each app's part to its businesses the same way, so that a developer's
        apps, and an app's businesses, end up holding alike. The answer lists the developers in
        the order above, and each developer's tenants in the order they were first handed a
        unit."""
        by_developer: dict[str, dict[str, list[str]]] = {}
        for app_id, business in due:
            apps = by_developer.setdefault(self.developer(app_id), {})
            apps.setdefault(app_id, []).append(business)
        since = {
            app_id: min(due[app_id, business] for business in businesses)
            for apps in by_developer.values()
            for app_id, businesses in apps.items()
        }
        shares = self.developers
        shares.forget([developer for developer in shares.waiting if developer not in by_developer])
        oldest = {dev: min(since[app] for app in apps) for dev, apps in by_developer.items()}
        waiting = [developer for developer in shares.waiting if developer in by_developer]
        order = waiting + sorted(
            (developer for developer in by_developer if developer not in waiting),
            key=lambda developer: (shares.held(developer), oldest[developer], developer),
        )
        chosen: list[tuple[str, int]] = []
        for developer in order:
            refusal = shares.refusal(developer)
            if refusal is not None:
                self.held_back[refusal] += sum(map(len, by_developer[developer].values()))
                self._short = True
                if refusal is Refusal.TOTAL:
                    shares.wait(developer)
                continue
            chosen.append((developer, shares.per_tenant - shares.held(developer)))
        if not chosen:
            return []
        free = shares.total - shares.in_use
        part = max(1, min(budget, free) // len(chosen))
        quotas: list[tuple[tuple[str, str], int]] = []
        for developer, room in chosen:
            apps = by_developer[developer]
            held = {app_id: (self.apps.held(app_id), since[app_id]) for app_id in apps}
            for app_id, units in level(min(room, part), held):
                businesses = {
                    business: (self.tenants.held((app_id, business)), due[app_id, business])
                    for business in apps[app_id]
                }
                quotas += [((app_id, b), n) for b, n in level(units, businesses)]
        return quotas

    # --- fan-outs awaiting commit --------------------------------------------------------------

    def fan_out_began(self) -> FanOut[Ended]:
        return FanOut()

    def awaits_commit(self, delivery_id: str, fan_out: FanOut[Ended]) -> None:
        """``delivery_id`` was handed over before ``fan_out``'s transaction ended."""
        self._fan_outs[delivery_id] = fan_out

    def unmade(self, delivery_id: str) -> bool:
        """Whether ``delivery_id`` belongs to a fan-out that ended without committing (it does
        not exist: it must not be attempted)."""
        fan_out = self._fan_outs.get(delivery_id)
        return fan_out is not None and fan_out.ended and not fan_out.committed

    def forget_unmade(self, delivery_id: str) -> None:
        """``delivery_id`` will not be attempted here (its fan-out did not commit, or the
        engine gives it back unattempted)."""
        self._fan_outs.pop(delivery_id, None)

    def attempt_ended(self, delivery_id: str, ended: Ended) -> Verdict:
        """The verdict on an attempt's outcome; WAIT keeps ``ended`` until its fan-out ends
        (:meth:`fan_out_ended` gives it back)."""
        fan_out = self._fan_outs.get(delivery_id)
        if fan_out is None:
            return Verdict.RECORD
        if not fan_out.ended:
            fan_out.waiting.append((delivery_id, ended))
            return Verdict.WAIT
        del self._fan_outs[delivery_id]
        return Verdict.RECORD if fan_out.committed else Verdict.DROP

    def fan_out_ended(self, fan_out: FanOut[Ended], *, committed: bool) -> list[Ended]:
        """``fan_out``'s transaction ended (committed or not): the attempts that waited for
        it, whose verdict is now RECORD when it committed and DROP when it did not. A delivery
        fanned out again (its first fan-out failed while its attempt went on) waits here once
        for each attempt."""
        fan_out.ended, fan_out.committed = True, committed
        waiting, fan_out.waiting = fan_out.waiting, []
        for delivery_id, _ in waiting:
            if self._fan_outs.get(delivery_id) is fan_out:
                del self._fan_outs[delivery_id]
        return [ended for _, ended in waiting]

    # --- the outcome buffer --------------------------------------------------------------------

    def add_outcome(self, app_id: str, webhook_id: str, outcome: Outcome) -> None:
        self._outcomes.append((app_id, webhook_id, outcome))

    @property
    def outcomes_waiting(self) -> int:
        return len(self._outcomes)

    @property
    def unwritten(self) -> int:
        return len(self._outcomes) + self._writing

    def take_outcomes(self, limit: int) -> list[tuple[str, str, Outcome]]:
        """Outcomes for a transaction to write (at most ``limit``, oldest first); it answers
        with :meth:`outcomes_written` or :meth:`outcomes_not_written`."""
        batch = self._outcomes[:limit]
        del self._outcomes[: len(batch)]
        self._writing += len(batch)
        return batch

    def outcomes_not_written(self, batch: list[tuple[str, str, Outcome]]) -> None:
        """The transaction failed: the batch is written again, first."""
        self._writing -= len(batch)
        self._outcomes[:0] = batch

    def outcomes_written(self, batch: list[tuple[str, str, Outcome]]) -> None:
        self._writing -= len(batch)

    @property
    def settled(self) -> bool:
        """Nothing held and nothing waiting to be written."""
        return not self.held and not self.unwritten

    def clear(self) -> None:
        """The engine stopped: its claims were given back (the developers learned stay: they
        never change)."""
        self.developers.clear()
        self.apps.clear()
        self.tenants.clear()
        self.webhooks.clear()
        self.fed()
