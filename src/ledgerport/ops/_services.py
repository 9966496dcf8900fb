"""The long-lived services of a process, kept running by a supervisor, and whether each runs now.

``serve`` runs each service (the node's mark, the scheduler, the delivery engine, the function
runner) under :func:`supervise`: a service whose run ends on an error is logged, counted
(``ledgerport_service_restarts_total{service}``) and started again after a backoff that doubles
from ``RESTART_FIRST`` up to ``RESTART_MAX`` seconds, and starts again from the first delay once
it has run ``RESTART_RESET`` seconds. A service that fails before it has started the first time
stops the process, as a start that cannot work should. :class:`Services` is what ``/readyz``
reads: ready while every service it expects runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ledgerport.errors import DomainError

from ._metrics import Metrics

log = logging.getLogger("ledgerport.supervisor")

RESTART_FIRST = 1.0
"""Seconds before a service that stopped on an error starts again, the first time."""
RESTART_MAX = 30.0
"""The longest wait before a start again."""
RESTART_RESET = 60.0
"""A service that ran this long before it stopped starts again after RESTART_FIRST."""

Service = Callable[..., Awaitable[Any]]
"""A service's ``run(*, task_status)``: started once it has set itself up, runs until cancelled."""


class NotReady(DomainError):
    """A part of the process does not run now: ``store`` when the database does not answer,
    and the services that are not running (starting again after an error, or not yet)."""

    def __init__(self, failing: list[str]) -> None:
        self.failing = failing
        super().__init__("Not ready: {0}", params=[", ".join(failing)])


class Services:
    """Which long-lived services this process expects, and which of them run now."""

    def __init__(self) -> None:
        self._running: dict[str, bool] = {}

    def expect(self, name: str) -> None:
        self._running.setdefault(name, False)

    def up(self, name: str) -> None:
        self._running[name] = True

    def down(self, name: str) -> None:
        self._running[name] = False

    def stopped(self) -> list[str]:
        """The services expected and not running now, by name."""
        return sorted(name for name, running in self._running.items() if not running)


async def supervise(
    name: str,
    run: Service,
    services: Services,
    metrics: Metrics,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``run`` as the service ``name`` until cancelled, starting it again after an error
    (see the module). Started once the service has started the first time."""
    services.expect(name)
    delay = RESTART_FIRST
    started = False
    while True:
        began = trio.current_time()
        error: Exception | None = None
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(run)
                services.up(name)
                if not started:
                    started = True
                    task_status.started()
        except Exception as exc:
            if not started:
                raise
            error = exc
        finally:
            services.down(name)
        if trio.current_time() - began >= RESTART_RESET:
            delay = RESTART_FIRST
        reason = "stopped on an error" if error is not None else "ended its run"
        log.error("%s %s; starting it again in %g s", name, reason, delay, exc_info=error)
        metrics.service_restarts.labels(name).inc()
        await trio.sleep(delay)
        delay = min(delay * 2, RESTART_MAX)
