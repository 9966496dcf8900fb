"""A run waiting on the network holds no worker's share of the CPU (issue: functions that do real
work): while its fetch is under way, another app's run goes on a spare worker; a run of the same
app does not, since the waiting run still counts against its app's share, like CPU."""

from __future__ import annotations

from typing import Any

import trio

from ledgerport.engine import FunctionRunner
from ledgerport.platform import Platform
from ledgerport.runtime import RunLimits

from ..receiver import Answer, receiving
from .data_api import owner_api
from .webhook_world import Console, console_for

TIMEOUT = 60
SLOW = """
export async function handler(event, context) {
  const answer = await context.fetch("URL");
  return answer.status;
}
"""
QUICK = "export const handler = () => 'quick'"


async def _console(client: Any, admin_headers: dict[str, str]) -> Console:
    return await console_for(client, admin_headers, await owner_api(client, admin_headers))


async def _status(console: Console, name: str, run_id: str) -> str:
    run = await console.ok("GET", f"/functions/{name}/runs/{run_id}")
    return str(run["status"])


async def test_another_apps_run_goes_while_a_run_waits_on_its_fetch_and_the_same_apps_waits(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver:
            held = trio.Event()  # the slow run's fetch is answered once the checks are done
            receiver.default = Answer(until=held)
            slow_app = await _console(client, admin_headers)
            other_app = await _console(client, admin_headers)
            source = SLOW.replace("URL", f"http://127.0.0.1:{receiver.port}/slow")
            await slow_app.ok(
                "PUT",
                "/functions/slow",
                {"source": source, "events": [], "allowedHosts": ["127.0.0.1"]},
            )
            await slow_app.ok("PUT", "/functions/same", {"source": QUICK, "events": []})
            await other_app.ok("PUT", "/functions/quick", {"source": QUICK, "events": []})
            runner = FunctionRunner(platform, workers=1, limits=RunLimits(wall=20.0))
            async with runner.running():
                slow = (await slow_app.ok("POST", "/functions/slow/test", status=202))["runId"]
                assert await runner.claim_once() == 1
                await receiver.wait_for(1)  # the slow run's fetch is under way
                same = (await slow_app.ok("POST", "/functions/same/test", status=202))["runId"]
                quick = (await other_app.ok("POST", "/functions/quick/test", status=202))["runId"]
                assert await runner.claim_once() == 1  # the other app's, not the same app's
                for _ in range(600):  # the spare worker starts, then runs it
                    if await _status(other_app, "quick", quick) == "succeeded":
                        break
                    await trio.sleep(0.05)
                statuses = (
                    await _status(slow_app, "slow", slow),
                    await _status(slow_app, "same", same),
                )
                workers = runner.pool.workers
                held.set()
    assert statuses == ("queued", "queued")  # the slow run goes on; its app's next waits
    assert await _status(other_app, "quick", quick) == "succeeded"
    assert workers == 2  # the spare was started for the quick run
