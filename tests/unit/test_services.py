"""The supervisor of a process's long-lived services: a service that stops on an error starts
again after a doubling backoff, is counted, and reads as not running meanwhile (``/readyz``); one
that cannot start the first time stops the process."""

from __future__ import annotations

import pytest
import trio

from ledgerport.ops import RESTART_FIRST, RESTART_MAX, RESTART_RESET, Metrics, Services, supervise


class Flaky:
    """A service that starts, then stops on an error after ``lives[i]`` seconds, run after run;
    past the list it runs until cancelled."""

    def __init__(self, *lives: float) -> None:
        self.lives = list(lives)
        self.starts: list[float] = []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.starts.append(trio.current_time())
        task_status.started()
        if len(self.starts) <= len(self.lives):
            await trio.sleep(self.lives[len(self.starts) - 1])
            raise RuntimeError("the loop broke")
        await trio.sleep_forever()


def _restarts(metrics: Metrics, name: str) -> float:
    return metrics.service_restarts.labels(name)._value.get()


async def test_a_service_that_stops_on_an_error_starts_again_after_a_doubling_backoff(
    autojump_clock: trio.abc.Clock,
) -> None:
    service, services, metrics = Flaky(0.5, 0.5, 0.5), Services(), Metrics()
    async with trio.open_nursery() as nursery:
        await nursery.start(supervise, "engine", service.run, services, metrics)
        assert services.stopped() == []
        await trio.sleep(0.6)  # the first run broke: waiting RESTART_FIRST
        assert services.stopped() == ["engine"]
        await trio.sleep(30)
        assert services.stopped() == []
        nursery.cancel_scope.cancel()
    gaps = [b - a for a, b in zip(service.starts, service.starts[1:], strict=False)]
    assert gaps == pytest.approx([0.5 + RESTART_FIRST, 0.5 + 2 * RESTART_FIRST, 0.5 + 4])
    assert _restarts(metrics, "engine") == 3


async def test_the_backoff_stops_growing_and_starts_over_after_a_long_run(
    autojump_clock: trio.abc.Clock,
) -> None:
    service = Flaky(*[0.0] * 8, RESTART_RESET, 0.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervise, "scheduler", service.run, Services(), Metrics())
        await trio.sleep(600)
        nursery.cancel_scope.cancel()
    gaps = [b - a for a, b in zip(service.starts, service.starts[1:], strict=False)]
    assert max(gaps[:8]) == RESTART_MAX
    assert gaps[8] == pytest.approx(RESTART_RESET + RESTART_FIRST)  # ran long: from the start


async def test_a_service_that_cannot_start_stops_the_process(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def broken(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raise RuntimeError("no database")

    with pytest.raises(ExceptionGroup) as raised:
        async with trio.open_nursery() as nursery:
            await nursery.start(supervise, "node", broken, Services(), Metrics())
    assert raised.group_contains(RuntimeError, match="no database", depth=None)
