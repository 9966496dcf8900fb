"""An endpoint's rate limit in one process (``ledgerport.engine.SendRate``): units are spent only
in the second they were granted for, also when the store answers after that second ended."""

from __future__ import annotations

from typing import cast

import trio

from ledgerport.engine import SendRate
from ledgerport.ops import Metrics
from ledgerport.storage import Store


class SlowGrants(SendRate):
    """Grants what is asked for every second it is asked about, each grant answered
    ``answer_after`` seconds later on the test's clock."""

    def __init__(self, start: float, answer_after: float) -> None:
        self.clock = start
        self.answer_after = answer_after
        self.asked: list[int] = []
        super().__init__(cast(Store, None), lambda: self.clock, Metrics())

    async def _granted(self, webhook_id: str, second: int, want: int, limit: int) -> int:
        self.asked.append(second)
        self.clock += self.answer_after
        return min(want, limit)


async def test_units_granted_for_a_second_that_ended_meanwhile_are_not_spent() -> None:
    rate = SlowGrants(start=100.95, answer_after=0.1)
    with trio.fail_after(5):
        await rate.take("wh_1", 5)
    # Asked at 100.95 for second 100, answered at 101.05: that grant is dropped, the attempt
    # starts on one granted for second 101.
    assert rate.asked == [100, 101]


async def test_units_granted_within_their_second_are_spent_one_an_attempt() -> None:
    rate = SlowGrants(start=100.2, answer_after=0.1)
    with trio.fail_after(5):
        await rate.take("wh_1", 5)
    assert rate.asked == [100]


async def test_an_attempt_that_starts_after_its_units_second_takes_one_of_its_own() -> None:
    rate = SlowGrants(start=100.2, answer_after=0.0)
    with trio.fail_after(5):
        second = await rate.take("wh_1", 5)
        await rate.starting("wh_1", 5, second)  # still that second: nothing more
        rate.clock = 101.3  # it waited for its developer's room meanwhile
        await rate.starting("wh_1", 5, second)
    assert second == 100
    assert rate.asked == [100, 101]
