"""An app's budget of function uploads, test runs and replays
(catalog.RATE_LIMIT_FUNCTION_UPLOADS), as the console's API and its pages count it: each upload
costs a worker process's compile, each test run or replay a sandbox worker's time."""

from __future__ import annotations

from ledgerport import apps, auth, catalog, queues

from ._context import platform, unit_of_work


async def count_function_upload(app_id: str) -> None:
    """Count an upload, a test run or a replay against the app's budget; RateLimited past it.
    Taken outside any transaction, as every limit is (a shared limiter uses a connection of its
    own), and only once the caller is known to develop the app, so no one else can spend its
    budget."""
    p = platform()
    verdict = await p.limiter.take(auth.Budget(catalog.RATE_LIMIT_FUNCTION_UPLOADS, (app_id,)))
    if verdict.refused_by is not None:
        p.metrics.rate_limited.labels(verdict.refused_by.name).inc()
        raise auth.RateLimited(verdict.retry_after, verdict.refused_by)


UPLOAD_ENDPOINTS = frozenset({"developer.put_function"})
"""The console API's endpoints whose body is an upload counted against the budget: an app with
no room left is refused (429) before the body is read, whatever it sends."""


async def refuse_spent_budget(app_id: str) -> None:
    """RateLimited when the app's budget has no room now, counting nothing (the upload is
    counted once its body is read): the spec's code for an app over its rate limit answers
    whatever form the body has."""
    p = platform()
    budget = auth.Budget(catalog.RATE_LIMIT_FUNCTION_UPLOADS, (app_id,))
    wait = await p.limiter.retry_after(budget)
    if wait is not None:
        p.metrics.rate_limited.labels(budget.limit.name).inc()
        raise auth.RateLimited(wait, budget.limit)


async def queue_test_run(app_id: str, name: str, developer_id: str) -> tuple[str, str]:
    """Queue one test run of the app's function ``name`` for the app's developer, as the
    console's API and its test button do: the developer and the function checked first, then
    the run counted against the budget (outside any transaction), then the run queued on the
    function's test event. Answers the run's id and the function's name."""
    p = platform()
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, developer_id)
        await apps.get_function(tx, app_id, name)
    await count_function_upload(app_id)
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, developer_id)
        function = await apps.get_function(tx, app_id, name)
        run_id = await queues.create_test_run(
            tx,
            now=p.now(),
            function_id=function.id,
            app_id=app.id,
            event_type=function.test_event_type,
            pinned_version=app.pinned_version,
        )
    return run_id, function.name
