"""A run's ``context.api`` call refused for the app's rate limit: it waits for the budget when the
Retry-After ends within the run's wall limit; otherwise the handler gets the 429, and a run that
fails by throwing that refusal goes again after the Retry-After as a platform failure, while one
that fails for its own reason does not. The run's log says which, naming the budget."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import trio

from ledgerport import queues
from ledgerport.engine import FunctionRunner
from ledgerport.platform import Platform
from ledgerport.runtime import ApiAnswer, ApiCall, RunLimits, RunOutcome, RunRequest

# The runner's own logic, on trio's mock clock: no store round trip matters here, and asyncpg's
# timeouts would run on that clock too.
pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

WALL = 10.0
RUN = RunRequest("run_limited", "fn:1", "", "{}")
CALL = ApiCall("GET", "/customers", None, lines=1)
"""A call the handler made after logging its line (``_ended``)."""
REFUSAL = "Too many requests: retry after 30 seconds"
THROWN = f"ApiError: GET /customers: 429 {REFUSAL}"
"""What the harness makes of the refusal, as a handler that throws it ends its run."""


@dataclass
class LimitedApi:
    """The data API refusing the first ``refusals`` calls with ``retry_after``."""

    refusals: int
    retry_after: float
    calls: list[float] = field(default_factory=list)

    async def __call__(self, token: str, call: ApiCall) -> ApiAnswer:
        self.calls.append(trio.current_time())
        if len(self.calls) <= self.refusals:
            body = {"statusCode": 429, "code": "APP_RATE_LIMITED", "message": REFUSAL}
            return ApiAnswer(429, body, self.retry_after, "app-per-business")
        return ApiAnswer(200, {"data": []})


def _runner(platform: Platform, api: LimitedApi) -> FunctionRunner:
    runner = FunctionRunner(platform, workers=1, limits=RunLimits(wall=WALL), api=api)
    runner._tokens[RUN.run_id] = "lp_at_run"
    runner._deadlines[RUN.run_id] = trio.current_time() + WALL
    return runner


def _ended(runner: FunctionRunner, ok: bool, error: str = THROWN) -> queues.RunEnded:
    run = queues.ClaimedRun(RUN.run_id, "fn", "app", "evt", "biz", "customer.created", "{}", 0, "x")
    outcome = RunOutcome(
        ok=ok,
        result=None,
        logs=["handler line"],
        log_times=[0],
        error=None if ok else error,
        limit=None,
        platform_failure=False,
        seconds=0.1,
    )
    return runner._ended(run, 1, outcome, runner._platform.now())


@pytest.mark.parametrize("refusals", [1, 3])
async def test_a_call_waits_for_the_budget_within_the_wall_limit(
    platform: Platform, autojump_clock: trio.abc.Clock, refusals: int
) -> None:
    api = LimitedApi(refusals=refusals, retry_after=2)
    runner = _runner(platform, api)

    answer = await runner._call(RUN, CALL)

    assert answer.status == 200
    assert [round(b - a) for a, b in zip(api.calls, api.calls[1:], strict=False)] == [2] * refusals
    ended = _ended(runner, ok=True)
    assert ended.status == "succeeded"
    notes = [line for line in ended.logs if line.startswith("[ledgerport]")]
    assert len(notes) == refusals
    assert all("waited 2 s" in note for note in notes)
    assert all("refused by the rate limit app-per-business" in note for note in notes)
    # Each note is timed when it was written, among the handler's own lines.
    assert list(ended.log_times) == [0, *(2000 * n for n in range(refusals))]


async def test_a_wait_past_the_wall_limit_answers_the_429_and_the_run_goes_again_after_it(
    platform: Platform, autojump_clock: trio.abc.Clock
) -> None:
    api = LimitedApi(refusals=1, retry_after=WALL + 20)
    runner = _runner(platform, api)
    started = trio.current_time()

    answer = await runner._call(RUN, CALL)

    assert answer.status == 429
    assert trio.current_time() - started < 1  # answered at once
    ended = _ended(runner, ok=False)  # the handler threw on the 429
    assert ended.status == "retrying"
    assert ended.next_attempt_at is not None
    assert ended.next_attempt_at >= platform.now() + WALL + 20
    assert ended.logs[0] == "handler line"
    assert "Retry-After (30 s) ends past the run's wall limit" in ended.logs[-1]
    assert "refused by the rate limit app-per-business (300 calls a minute" in ended.logs[-1]


async def test_a_run_that_fails_for_its_own_reason_after_a_429_is_not_retried(
    platform: Platform, autojump_clock: trio.abc.Clock
) -> None:
    runner = _runner(platform, LimitedApi(refusals=1, retry_after=WALL + 20))

    assert (await runner._call(RUN, CALL)).status == 429
    ended = _ended(runner, ok=False, error="TypeError: x is not a function")

    assert ended.status == "failed"
    assert ended.next_attempt_at is None


async def test_a_handler_that_throws_without_a_rate_limit_still_fails_for_good(
    platform: Platform, autojump_clock: trio.abc.Clock
) -> None:
    runner = _runner(platform, LimitedApi(refusals=0, retry_after=1))

    assert (await runner._call(RUN, CALL)).status == 200
    ended = _ended(runner, ok=False)

    assert ended.status == "failed"
    assert ended.next_attempt_at is None
    assert ended.logs == ["handler line"]
