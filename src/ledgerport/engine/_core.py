"""The engine's bookkeeping, with no ``await``: what is held, for whom, and what to do next.

Every app's webhooks share one delivery engine and every app's functions share one pool of
sandbox workers, so the engine is a multi-tenant scheduler. Its state lives here and in the
books built on these terms, in plain objects that compute a transition and answer what the
caller must do; the components around them (the delivery engine's dispatcher, claimer, actors
and recorder, the function runner) only wait and do I/O, and restore what they took when the
I/O fails (httpcore's ``connection_pool.py`` habit). Because nothing here awaits, a
cancellation can never land between a check and the change it allows, and the invariants are
tested without a store (``tests/unit/test_engine_core.py``, with hypothesis).

Tenants nest: a developer, its apps, and each app's businesses. The shares are the
developer's first (what one app may hold, all of its developer's apps together hold: creating
apps buys no share; an app with no developer, a client registered dynamically, is its own
developer), then the app's within its developer, then the business's within its app. Among
tenants holding as much, the one whose oldest due work has waited longest goes first.

- :class:`Shares`: units of a budget (deliveries held, workers busy) held by tenants, each
  tenant within its cap and the whole within the total. When the total is full, tenants that
  found no room wait, and until each has had a unit nobody else gets one: one tenant's backlog
  delays another's work by at most one unit of work (one attempt, one run).
- :class:`Capped`: units held per tenant within a cap, and :func:`level`, units handed out
  one at a time to the tenant holding least.
- :class:`DeliveryBook` (``_delivery_book.py``, on these terms): the delivery engine's holds
  (per developer, app, business of an app and webhook, and in all), the reservations of a
  claiming transaction, the fan-outs whose first attempts started before their transaction
  committed, and the outcomes waiting to be written.
- :class:`RunBook` (``_run_book.py``, on the same terms): the runner's busy workers per
  developer, app and business, and the fair choice of which due runs to claim.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from enum import Enum
from typing import Generic, TypeVar

Tenant = TypeVar("Tenant", bound=Hashable)


class Refusal(Enum):
    """Why a unit was not granted."""

    OWN_CAP = "own_cap"
    """The tenant holds its cap (a webhook's, an app's or a business's share)."""
    TOTAL = "total"
    """The whole budget is held."""
    FAIRNESS = "fairness"
    """Others wait for room: they go first."""


class Capped(Generic[Tenant]):
    """Units held per tenant, at most ``cap`` each."""

    def __init__(self, cap: int) -> None:
        if cap < 0:
            raise ValueError("a cap is a count of units")
        self.cap = cap
        self._held: Counter[Tenant] = Counter()

    def held(self, tenant: Tenant) -> int:
        return self._held.get(tenant, 0)

    def full(self, tenant: Tenant) -> bool:
        # ``get``: a Counter's missing key costs a call of __missing__ (choices ask about
        # every tenant with due work, most of them holding nothing).
        return self._held.get(tenant, 0) >= self.cap

    def add(self, tenant: Tenant) -> None:
        self._held[tenant] += 1

    def remove(self, tenant: Tenant) -> None:
        held = self._held[tenant]
        if held <= 0:
            raise ValueError(f"{tenant!r} holds no unit to let go")
        if held == 1:
            del self._held[tenant]
        else:
            self._held[tenant] = held - 1

    def full_tenants(self) -> list[Tenant]:
        return [tenant for tenant, held in self._held.items() if held >= self.cap]

    def busiest(self) -> int:
        """The most units one tenant holds."""
        return max(self._held.values(), default=0)

    def holders(self) -> int:
        return len(self._held)

    def total(self) -> int:
        return sum(self._held.values())

    def clear(self) -> None:
        self._held.clear()


class Shares(Generic[Tenant]):
    """Units of a budget of ``total`` held by tenants, at most ``per_tenant`` each.

    When a tenant finds the total full it waits; while any tenant waits, a unit goes only to a
    waiting tenant, so the next unit let go reaches a waiter and no tenant gains a unit while
    another waits. :meth:`forget` drops waiters that have no work any more."""

    def __init__(self, *, total: int, per_tenant: int) -> None:
        if total < 0:
            raise ValueError("a budget is a count of units")
        self.total = total
        self.tenants: Capped[Tenant] = Capped(per_tenant)
        self._in_use = 0
        self._waiting: dict[Tenant, None] = {}
        """Tenants refused for want of room, oldest first."""

    @property
    def per_tenant(self) -> int:
        return self.tenants.cap

    @property
    def in_use(self) -> int:
        return self._in_use

    def held(self, tenant: Tenant) -> int:
        return self.tenants.held(tenant)

    @property
    def waiting(self) -> tuple[Tenant, ...]:
        return tuple(self._waiting)

    def refusal(self, tenant: Tenant, *, beyond_cap: bool = False) -> Refusal | None:
        """Why ``tenant`` may not take a unit now, or None when it may (``beyond_cap``: even
        past its own cap, where the caller allows it)."""
        if self.tenants.full(tenant) and not beyond_cap:
            return Refusal.OWN_CAP
        if self._in_use >= self.total:
            return Refusal.TOTAL
        if self._waiting and tenant not in self._waiting:
            return Refusal.FAIRNESS
        return None

    def take(self, tenant: Tenant, *, beyond_cap: bool = False) -> Refusal | None:
        """Take a unit for ``tenant``; answers why not when it may not (and when the total is
        full, ``tenant`` waits from now on)."""
        refusal = self.refusal(tenant, beyond_cap=beyond_cap)
        if refusal is Refusal.TOTAL:
            self._waiting.setdefault(tenant, None)
        if refusal is not None:
            return refusal
        self.tenants.add(tenant)
        self._in_use += 1
        self._waiting.pop(tenant, None)
        return None

    def let_go(self, tenant: Tenant) -> None:
        """Give back a unit of ``tenant``'s."""
        self.tenants.remove(tenant)
        self._in_use -= 1

    def wait(self, tenant: Tenant) -> None:
        """``tenant`` has work and found no room."""
        self._waiting.setdefault(tenant, None)

    def forget(self, tenants: Iterable[Tenant]) -> None:
        """``tenants`` wait no more (they have no work now)."""
        for tenant in tenants:
            self._waiting.pop(tenant, None)

    def clear(self) -> None:
        self.tenants.clear()
        self._in_use = 0
        self._waiting.clear()


def level(units: int, tenants: Mapping[str, tuple[int, float]]) -> list[tuple[str, int]]:
    """``units`` handed out one at a time among ``tenants`` (each with what it holds and when
    its oldest due work was due), each to the tenant holding least counting what it was handed,
    then to the one waiting longest: (tenant, units handed), in the order first handed, those
    handed none left out."""
    heap = [(held, since, tenant) for tenant, (held, since) in tenants.items()]
    heapq.heapify(heap)
    handed: dict[str, int] = {}
    for _ in range(units if heap else 0):
        held, since, tenant = heap[0]
        handed[tenant] = handed.get(tenant, 0) + 1
        heapq.heapreplace(heap, (held + 1, since, tenant))
    return list(handed.items())
