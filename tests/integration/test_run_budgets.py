"""A hosted function's ``context.api`` calls count against its app's budgets, never against an
address: every run's calls reach the data API from inside the process, so a per-IP budget would
be one budget shared by every tenant's functions and by any client connecting from the same
address. A run refused for a rate limit is told which budget refused it, and goes again only
when that refusal is what ended it."""

from __future__ import annotations

from typing import Any

import trio

from ledgerport import auth, catalog
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import ApiCall

from .data_api import owner_api
from .test_function_runs import functions_world, run_queued, runs

TIMEOUT = 120
SPENT = 700
"""Calls one tenant's function makes: past its own budget in the business (300) and past what
the API allows one address (600)."""
LIST = ApiCall("GET", "/customers", None)


async def test_a_runs_calls_count_against_its_app_never_an_address(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    noisy = await owner_api(client, admin_headers)
    victim = await owner_api(client, admin_headers)
    with trio.fail_after(TIMEOUT):
        async with in_process_api(app, "http://localhost") as call:
            answers = [await call(noisy.token, LIST) for _ in range(SPENT)]
            victims = await call(victim.token, LIST)
        # A network client connecting from the address the runs' calls seem to come from.
        network = await victim.call("GET", "/customers")
        noisy_network = await noisy.call("GET", "/customers")
        per_ip = await platform.limiter.retry_after(
            auth.Budget(catalog.RATE_LIMIT_API_PER_IP, ("127.0.0.1",))
        )

    limit = catalog.RATE_LIMIT_APP_PER_BUSINESS.limit
    assert [a.status for a in answers] == [200] * limit + [429] * (SPENT - limit)
    assert {a.refused_by for a in answers[limit:]} == {catalog.RATE_LIMIT_APP_PER_BUSINESS.name}
    assert all(0 < (a.retry_after or 0) <= 60 for a in answers[limit:])
    # Another tenant's run, and a network client at that address, have their budgets whole.
    assert victims.status == 200
    assert network.status_code == 200
    assert network.headers["RateLimit-Remaining"] == str(limit - 2)
    assert per_ip is None
    # The noisy app's budget in its business is its own, however its calls arrive.
    assert noisy_network.status_code == 429
    assert noisy_network.headers["RateLimit-Policy"] == '"app-per-business";q=300;w=60'


async def test_a_run_token_that_is_not_live_counts_against_nothing(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with in_process_api(app, "http://localhost") as call:
            refused = [await call(token, LIST) for token in ("", "lp_at_unknown") * 400]
        per_ip = await platform.limiter.retry_after(
            auth.Budget(catalog.RATE_LIMIT_API_PER_IP, ("127.0.0.1",))
        )

    assert {a.status for a in refused} == {401}
    assert per_ip is None


RETHROWS = """
export async function handler(event, context) {
  await context.api.get("/customers");
}
"""
THROWS_ITS_OWN = """
export async function handler(event, context) {
  try { await context.api.get("/customers"); } catch (refused) { context.log(refused.status); }
  throw new TypeError("the handler's own mistake");
}
"""


async def test_a_run_goes_again_for_a_429_only_when_the_429_ended_it(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            for name, source in (("rethrows", RETHROWS), ("own-error", THROWS_ITS_OWN)):
                await world.console.ok(
                    "PUT", f"/functions/{name}", {"source": source, "events": ["customer.created"]}
                )
            customer = await world.api.customer()
            # The rest of the app's budget in the business, spent by the app's own client.
            for _ in range(catalog.RATE_LIMIT_APP_PER_BUSINESS.limit - 1):
                await world.api.call("GET", f"/customers/{customer['id']}")
            await run_queued(platform, world)
            (rethrown,) = await runs(world, "rethrows")
            (own,) = await runs(world, "own-error")

    assert rethrown["status"] == "retrying", rethrown
    assert rethrown["error"].startswith("ApiError: GET /customers: 429 Too many requests")
    assert (
        "refused by the rate limit app-per-business (300 calls a minute of the app in"
        in (rethrown["logs"][-1])
    )
    assert own["status"] == "failed", own
    assert own["error"] == "TypeError: the handler's own mistake"
    # The handler's line and the platform's about the refusal, each at its time on the
    # handler's clock (milliseconds: the two may share one, in either order).
    assert sorted(own["logs"], key=lambda line: line.startswith("[ledgerport]")) == [
        "429",
        own["logs"][own["logs"].index("429") ^ 1],
    ]
    assert own["logs"][own["logs"].index("429") ^ 1].startswith(
        "[ledgerport] context.api GET /customers: 429"
    )
