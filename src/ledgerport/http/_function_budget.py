"""An app's budget of function uploads, test runs and replays
(catalog.RATE_LIMIT_FUNCTION_UPLOADS), as the console's API and its pages count it: each upload
costs a worker process's compile, each test run or replay a sandbox worker's time."""

from __future__ import annotations

from ledgerport import auth, catalog

from ._context import platform


async def count_function_upload(app_id: str) -> None:
    """Count an upload, a test run or a replay against the app's budget; RateLimited past it.
    Taken outside any transaction, as every limit is (a shared limiter uses a connection of its
    own), and only once the caller is known to develop the app, so no one else can spend its
    budget."""
    p = platform()
    verdict = await p.limiter.take(auth.Budget(catalog.RATE_LIMIT_FUNCTION_UPLOADS, (app_id,)))
    if verdict.refused_by is not None:
        p.metrics.rate_limited.labels(verdict.refused_by.name).inc()
        raise auth.RateLimited(verdict.retry_after)
