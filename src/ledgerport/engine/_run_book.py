"""The runner's bookkeeping, with no ``await`` (as ``_core.py``'s, whose terms it shares):
the busy workers per developer, app and business, and the fair choice of which due runs to
claim. Its invariants are tested without a store (``tests/unit/test_engine_core.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ._core import Capped, Refusal


def half_share(workers: int) -> int:
    """The workers one developer (all its apps together), one app or one business may keep busy
    at once: half, rounded up, so one tenant's flood always leaves the rest to others (all of one
    worker when there is one)."""
    return max(1, (workers + 1) // 2)


@dataclass(frozen=True)
class DueRuns:
    """Due runs of one app for one business (``business`` '' when the event has none), and
    the app's developer (the app's own id when it has none: it is its own developer)."""

    developer: str
    app_id: str
    business: str


class RunBook:
    """The runner's busy workers per developer, app and business, and the fair choice of due
    runs.

    A worker counts against its run's developer, app and business from the run's claim to its
    end, whether the run computes or waits.

    A run waiting on the network (``context.fetch``, made by the engine: :meth:`wait`) keeps
    its worker process, whose isolate holds the handler's state, but not its share of the CPU:
    the book then has room for another run, on one of ``spare`` processes more than
    ``workers``, so as many runs compute at once as there are workers, and up to ``spare``
    more wait on the network beside them. A waiting run still counts against its developer,
    app and business, as one computing does: an app whose runs wait on a slow service fills
    its own share, not the others'. Every worker that ends is handed out again by
    :meth:`choose`, among everything due at that moment: to the developer running least, within
    it to the app running least, within that to the business running least, and between
    tenants running as much to the one whose oldest due run has waited longest. The runner
    takes no run outside it, so no tenant's backlog gets ahead of another's, and a developer's
    apps together keep at most what one app would."""

    def __init__(self, workers: int, *, share: int | None = None, spare: int = 0) -> None:
        cap = share if share is not None else half_share(workers)
        self.workers = workers
        self.spare = spare
        self.waiting = 0
        """Runs claimed whose every call under way is a fetch: they use no CPU."""
        self.developers: Capped[str] = Capped(cap)
        self.apps: Capped[str] = Capped(cap)
        self.businesses: Capped[str] = Capped(cap)
        """Per business, whatever apps its events run."""
        self.tenants: Capped[DueRuns] = Capped(cap)
        """Per business within its app: the order of an app's businesses."""
        self.busy = 0
        self.held_back: Counter[Refusal] = Counter()
        self._since: dict[tuple[str, ...], float] = {}
        """When the oldest due run of each developer, (developer,), and app, (developer, app),
        was due, in the choice under way."""

    @property
    def room(self) -> int:
        """Runs that may be claimed now: a worker's share of the CPU free, and a process."""
        computing = self.busy - self.waiting
        return min(self.workers - computing, self.workers + self.spare - self.busy)

    def wait(self, waiting: bool) -> None:
        """A run claimed begins (True) or ends (False) waiting on the network only."""
        self.waiting += 1 if waiting else -1

    def choose(self, due: Mapping[DueRuns, float]) -> list[tuple[DueRuns, int]]:
        """How many runs of each tenant of ``due`` (each with when its oldest run was due) to
        claim now, taking a worker for each, one worker at a time: to the developer running
        least, then within it the app running least, then within that the business running
        least; among those running as much, the one whose oldest due run has waited longest
        (a developer's or an app's oldest is that of its tenants in ``due``). Each developer,
        app and business stays within its share, and no more than the free workers are
        taken. Tenants left out are counted as held back. :meth:`ended` gives back a worker,
        also one whose claim found no run."""
        open_: dict[str, dict[str, list[DueRuns]]] = {}
        since: dict[tuple[str, ...], float] = {}
        self._since = since
        for pair, at in due.items():
            for key in ((pair.developer,), (pair.developer, pair.app_id)):
                if at < since.get(key, at + 1):
                    since[key] = at
            if not self.capped(pair):
                open_.setdefault(pair.developer, {}).setdefault(pair.app_id, []).append(pair)
        chosen: Counter[DueRuns] = Counter()
        while open_ and self.room > 0:
            developer = min(open_, key=self._developer_rank)
            apps = open_[developer]
            app_id = min(apps, key=lambda app: self._app_rank(developer, app))
            # Within the app, the business running least, then the one waiting longest.
            held = self.tenants.held
            pair = min(
                apps[app_id], key=lambda tenant: (held(tenant), due[tenant], tenant.business)
            )
            self._start(pair)
            chosen[pair] += 1
            self._close_capped(open_, pair)
        left_out = [pair for pair in due if pair not in chosen]
        if left_out:
            capped = sum(1 for pair in left_out if self.capped(pair))
            if capped:
                self.held_back[Refusal.OWN_CAP] += capped
            if len(left_out) > capped:
                self.held_back[Refusal.TOTAL] += len(left_out) - capped
        return list(chosen.items())

    def _developer_rank(self, developer: str) -> tuple[int, float, str]:
        return (self.developers.held(developer), self._since[(developer,)], developer)

    def _app_rank(self, developer: str, app_id: str) -> tuple[int, float, str]:
        return (self.apps.held(app_id), self._since[(developer, app_id)], app_id)

    def _close_capped(self, open_: dict[str, dict[str, list[DueRuns]]], pair: DueRuns) -> None:
        """Leave out of ``open_`` what ``pair``'s start brought to its share."""
        if self.developers.full(pair.developer):
            del open_[pair.developer]
        elif self.apps.full(pair.app_id):
            del open_[pair.developer][pair.app_id]
        if pair.business and self.businesses.full(pair.business):
            for developer, apps in list(open_.items()):
                for app_id, tenants in list(apps.items()):
                    apps[app_id] = [t for t in tenants if t.business != pair.business]
                    if not apps[app_id]:
                        del apps[app_id]
                if not apps:
                    del open_[developer]
        if pair.developer in open_ and not open_[pair.developer]:
            del open_[pair.developer]

    def capped(self, pair: DueRuns) -> bool:
        return (
            self.developers.full(pair.developer)
            or self.apps.full(pair.app_id)
            or bool(pair.business and self.businesses.full(pair.business))
        )

    def _start(self, pair: DueRuns) -> None:
        self.developers.add(pair.developer)
        self.apps.add(pair.app_id)
        self.tenants.add(pair)
        if pair.business:
            self.businesses.add(pair.business)
        self.busy += 1

    def ended(self, pair: DueRuns) -> None:
        """A run of ``pair`` ended (or its claim did not get it): its worker is free."""
        self.developers.remove(pair.developer)
        self.apps.remove(pair.app_id)
        self.tenants.remove(pair)
        if pair.business:
            self.businesses.remove(pair.business)
        self.busy -= 1

    def clear(self) -> None:
        self.developers.clear()
        self.apps.clear()
        self.tenants.clear()
        self.businesses.clear()
        self.busy = 0
        self.waiting = 0
