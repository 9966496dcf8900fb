"""SQLite's one writer goes to requests' transactions before the engine's background ones,
and a background one still gets its turn within BACKGROUND_AGING (trio's MockClock: the
turns are pure trio logic)."""

from __future__ import annotations

import trio
import trio.testing

from ledgerport.storage import BACKGROUND_AGING, REQUESTS_PER_BACKGROUND, WriterTurns


async def _use(turns: WriterTurns, name: str, order: list[str], background: bool) -> None:
    async with turns.turn(background=background):
        order.append(name)
        await trio.sleep(0.001)


async def test_waiting_requests_go_before_waiting_background_transactions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turns = WriterTurns()
    order: list[str] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await turns.acquire(background=True)  # the engine holds the writer
            for index in range(3):
                nursery.start_soon(_use, turns, f"engine {index}", order, True)
                await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(_use, turns, "request", order, False)
            await trio.testing.wait_all_tasks_blocked()
            turns.release()
    assert order == ["request", "engine 0", "engine 1", "engine 2"]


async def test_a_background_transaction_goes_after_at_most_a_few_waiting_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Requests queued behind the engine: REQUESTS_PER_BACKGROUND of them go, then the waiting
    background transaction, then the rest."""
    turns = WriterTurns()
    order: list[str] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await turns.acquire(background=True)
            nursery.start_soon(_use, turns, "engine", order, True)
            await trio.testing.wait_all_tasks_blocked()
            for index in range(REQUESTS_PER_BACKGROUND + 2):
                nursery.start_soon(_use, turns, f"request {index}", order, False)
                await trio.testing.wait_all_tasks_blocked()
            turns.release()
    assert order.index("engine") == REQUESTS_PER_BACKGROUND
    assert order == [f"request {i}" for i in range(REQUESTS_PER_BACKGROUND)] + ["engine"] + [
        f"request {i}" for i in range(REQUESTS_PER_BACKGROUND, REQUESTS_PER_BACKGROUND + 2)
    ]


async def test_a_background_transaction_gets_its_turn_within_the_aging_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A steady stream of long requests, each holding the writer 30 ms (fewer than
    REQUESTS_PER_BACKGROUND of them fill BACKGROUND_AGING): the waiting background transaction
    goes first once it has waited BACKGROUND_AGING."""
    hold = 0.03
    assert hold * REQUESTS_PER_BACKGROUND > BACKGROUND_AGING
    turns = WriterTurns()
    order: list[tuple[str, float]] = []
    started = trio.current_time()

    async def requests() -> None:
        async with trio.open_nursery() as stream:
            for index in range(40):
                stream.start_soon(_timed, f"request {index}", False)
                await trio.sleep(hold / 2)

    async def _timed(name: str, background: bool) -> None:
        async with turns.turn(background=background):
            order.append((name, trio.current_time() - started))
            await trio.sleep(hold)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(requests)
            await trio.sleep(0.002)
            nursery.start_soon(_timed, "engine", True)
    (engine_at,) = [at for name, at in order if name == "engine"]
    assert engine_at <= 0.002 + BACKGROUND_AGING + hold
    requests_before = [name for name, at in order if at < engine_at]
    assert len(requests_before) < REQUESTS_PER_BACKGROUND + 1
    assert order[-1][0] != "engine", "requests were still waiting when it went"


async def test_a_cancelled_waiter_gives_up_its_place(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turns = WriterTurns()
    order: list[str] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await turns.acquire(background=False)
            waiting = trio.CancelScope()

            async def gives_up() -> None:
                with waiting:
                    await _use(turns, "gave up", order, False)

            nursery.start_soon(gives_up)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(_use, turns, "engine", order, True)
            await trio.testing.wait_all_tasks_blocked()
            waiting.cancel()
            await trio.testing.wait_all_tasks_blocked()
            turns.release()
        async with turns.turn():
            order.append("free again")
    assert order == ["engine", "free again"]
