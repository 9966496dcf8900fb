"""Apps by client_id, kept in the process between their changes.

Every client-authenticated OAuth request (token, revocation, introspection, device
authorization) starts by reading its app. Apps change rarely, and every change of an app's row
notifies ``APPS_CHANNEL`` when its transaction commits: this process's listeners hear their own
commits at once, the other processes' when PostgreSQL's notification arrives (milliseconds). A
notification forgets every app kept. So a suspended or deactivated app, a withdrawn review or a
new pin is seen by the next request here, and by the next request elsewhere once the
notification has arrived.

Two bounds hold when a notification goes missing (a lost listening connection hears nothing
more): an app is kept at most ``APP_KEPT_SECONDS`` from its read, and the directory keeps apps
only while it listens (:meth:`AppDirectory.listening`); otherwise every lookup reads the store.
Unknown client ids are never kept (each costs a read, as before), and at most ``APP_KEPT_MAX``
apps are, the oldest read going first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ledgerport.clock import Clock
from ledgerport.storage import Reader, Store

from ._apps import APPS_CHANNEL, App, find_app_by_client_id

APP_KEPT_SECONDS = 2.0
"""How long an app read is used at most, should the notification of its change go missing."""
APP_KEPT_MAX = 10_000
"""Apps kept at most; past it, the one read longest ago goes."""


class AppDirectory:
    """Apps by client_id: read from the store, kept until a change of any app is notified."""

    def __init__(self, clock: Clock, *, most: int = APP_KEPT_MAX) -> None:
        self._clock = clock
        self._most = most
        self._kept: dict[str, tuple[App, float]] = {}
        self._generation = 0
        self._listening = 0

    @property
    def kept(self) -> int:
        """How many apps are kept now."""
        return len(self._kept)

    def forget(self) -> None:
        """Forget every app kept, and the reads in flight (a change was committed)."""
        self._generation += 1
        self._kept.clear()

    @asynccontextmanager
    async def listening(self, store: Store) -> AsyncIterator[None]:
        """Keep apps for the context's length, forgetting them at each notified change."""
        async with store.listen(APPS_CHANNEL, self.forget):
            self._listening += 1
            try:
                yield
            finally:
                self._listening -= 1
                self.forget()

    async def find(self, reader: Reader, client_id: str) -> App | None:
        """The app of ``client_id`` (None when there is none), kept or read through ``reader``."""
        now = self._clock.now()
        kept = self._kept.get(client_id)
        if kept is not None:
            if now < kept[1]:
                return kept[0]
            del self._kept[client_id]
        generation = self._generation
        app = await find_app_by_client_id(reader, client_id)
        # Kept only when no change was notified while it was read: a read that began before a
        # change committed may hold the app as it was.
        if app is not None and self._listening and generation == self._generation:
            if len(self._kept) >= self._most:
                del self._kept[next(iter(self._kept))]
            self._kept[client_id] = (app, now + APP_KEPT_SECONDS)
        return app
