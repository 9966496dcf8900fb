"""Hosted-function runs: claimed from the run queue and run in the sandbox pool.

The dispatcher's fan-out (``queues.plan_fan_out``) queues one run per subscribed function of every
app an event reaches, in the transaction that creates the event's deliveries: exactly once, under
the same audience rules. The runner claims due runs, as many as the pool can take at once, with
a lease (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so several processes share the queue). Just
before a run starts it is checked (``queues.run_plan``: the function deleted, the app stopped, the
installation ended or the event's scope no longer held make it fail unrun) and gets its own
access token (``auth.mint_run_token``): the installation's scopes, its installing user, living
no longer than the run's wall limit. The token is revoked in the transaction that records how
the run ended. A run the platform failed (its worker died) goes again after RUN_RETRY_DELAYS; a
handler that throws or breaks a limit fails its run for good.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from ledgerport import apps, auth, catalog, queues
from ledgerport.ids import new_id
from ledgerport.platform import Platform
from ledgerport.runtime import (
    ApiAnswer,
    ApiCall,
    DataApi,
    RunLimits,
    RunOutcome,
    RunRequest,
    SandboxPool,
    bounded,
    recheck,
)
from ledgerport.storage import StorageError

from ._core import Refusal
from ._delivery import POLL, _Wakeup, publish_fairness
from ._retry import next_attempt_at
from ._run_book import DueRuns, RunBook

log = logging.getLogger("ledgerport.engine.functions")

RUN_RETRY_DELAYS = (0.0, 1.0, 10.0)
"""The schedule of a run the platform failed, read as the webhook retry delays are
(``next_attempt_at``): the first attempt at once, the second 1 s and the third 10 s after the
failure before it; the third failure is final."""
MAX_NOTES = 20
"""What the platform adds to one run's log at most."""
LEASE_MARGIN = 60.0
"""Seconds a claim outlasts the run's wall limit (time to start it and to record it)."""


class FunctionRunner:
    """Runs queued hosted-function runs in a sandbox pool of its own (see the module
    docstring): ``workers`` warm workers, each run held to ``limits``. The pool makes a run's
    API calls through the runner, which answers them with ``api`` and the run's token while
    the run goes on; without ``api`` they answer 503."""

    def __init__(
        self,
        platform: Platform,
        *,
        workers: int = 2,
        limits: RunLimits | None = None,
        api: DataApi | None = None,
        poll: float = POLL,
        runs_per_worker: int = 1000,
        holder: str | None = None,
    ) -> None:
        self._platform = platform
        self.pool = SandboxPool(
            size=workers,
            limits=limits,
            api=self._call,
            metrics=platform.metrics,
            runs_per_worker=runs_per_worker,
        )
        self._api = api
        self._poll = poll
        self.lease = holder or new_id("runner")
        """What this runner's claims hold their lease by: its node's id (``Node``)."""
        self._tokens: dict[str, str] = {}
        """The token of each run going on, by run id."""
        self._deadlines: dict[str, float] = {}
        """When each run going on reaches its wall limit (trio's clock), by run id."""
        self._notes: dict[str, list[tuple[int, str]]] = {}
        """What the platform tells a run's log (a rate-limited call), by run id, each with when
        it was told (milliseconds after the run started)."""
        self._held_back: dict[str, dict[str | None, float]] = {}
        """Runs whose call was refused for a rate limit they could not wait out: by the error
        the handler's throwing that refusal ends the run with, its Retry-After, after which
        such a failed run goes again."""
        self._book = RunBook(workers)
        """The busy workers per app and per business, and the fair choice of due runs."""
        self._published: dict[Refusal, int] = {}
        self._next_due: float | None = None
        """When the earliest run not claimed yet is due (None: none known)."""
        self._wake = _Wakeup()
        self._idle = trio.Event()
        self._idle.set()
        self._nursery: trio.Nursery | None = None
        self._draining = False
        """Asked to stop (:meth:`drain`): no run is claimed any more."""
        self._claiming = trio.Lock()
        """Held by a claim under way (a drain waits for it)."""

    async def _call(self, request: RunRequest, call: ApiCall) -> ApiAnswer:
        """The pool's way to the data API: with the token of the run going on, which exists
        only until the run has ended.

        A call refused for a rate limit (429) waits for the budget when its Retry-After ends
        within the run's wall limit, then goes again; otherwise the handler gets the 429, and
        should the run then fail by throwing that very refusal, it goes again after the
        Retry-After (:meth:`_ended`). Either way the run's log says so, naming the budget."""
        answer = await self._call_once(request, call)
        while answer.status == 429 and answer.retry_after is not None:
            deadline = self._deadlines.get(request.run_id, 0.0)
            refused = f"context.api {call.method} {call.path}: 429, {_budget(answer)}"
            if trio.current_time() + answer.retry_after >= deadline:
                held = self._held_back.setdefault(request.run_id, {})
                held[self._thrown(call, answer)] = answer.retry_after
                self._note(
                    request.run_id,
                    f"{refused}; its Retry-After ({answer.retry_after:g} s) ends past the run's"
                    " wall limit: answered to the handler, and a run that fails by throwing it"
                    " goes again after it",
                )
                return answer
            self._note(
                request.run_id,
                f"{refused}; waited {answer.retry_after:g} s for its budget and called again",
            )
            await trio.sleep(answer.retry_after)
            answer = await self._call_once(request, call)
        return answer

    def _thrown(self, call: ApiCall, answer: ApiAnswer) -> str | None:
        """The error a run ends with, as it is kept, when its handler throws the refusal of
        ``call`` that the harness made of ``answer`` (an ApiError)."""
        body = answer.body if isinstance(answer.body, dict) else {}
        message = body.get("message")
        shown = (
            f"HTTP {answer.status}"
            if message is None
            else message
            if isinstance(message, str)
            else json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        )
        error = f"ApiError: {call.method} {call.path}: {answer.status} {shown}"
        return bounded(
            self.pool.limits, ok=False, result=None, logs=[], error=error, limit=None
        ).error

    def _note(self, run_id: str, note: str) -> None:
        notes = self._notes.setdefault(run_id, [])
        if len(notes) < MAX_NOTES:
            started = self._deadlines.get(run_id, trio.current_time()) - self.pool.limits.wall
            at = max(round((trio.current_time() - started) * 1000), 0)
            notes.append((at, f"[ledgerport] {note}"))

    async def _call_once(self, request: RunRequest, call: ApiCall) -> ApiAnswer:
        token = self._tokens.get(request.run_id)
        if token is None or self._api is None:
            return ApiAnswer(
                503,
                {
                    "statusCode": 503,
                    "message": "this run has no access to the data API (the app is not"
                    " installed in the business)",
                    "error": "Service Unavailable",
                },
            )
        return await self._api(token, call)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with (
            self._platform.store.listen(queues.FUNCTION_RUNS_CHANNEL, self._wake.set),
            self.running() as nursery,
        ):
            nursery.start_soon(self._claim_loop)
            nursery.start_soon(self._gauge_loop)
            task_status.started()
            await trio.sleep_forever()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[trio.Nursery]:
        """The pool, warm, and the nursery runs go on in. Tests drive the steps inside it
        (:meth:`claim_once`, :meth:`settle`). Leaving it waits for the runs going on;
        cancelling it gives them back (due again at once, their attempt not counted)."""
        async with trio.open_nursery() as outer:
            await outer.start(self.pool.run)
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    yield nursery
                finally:
                    self._nursery = None
            outer.cancel_scope.cancel()

    @property
    def busy(self) -> int:
        """Workers of this runner's pool busy with a run now."""
        return self._book.busy

    def wake(self) -> None:
        self._wake.set()

    async def settle(self) -> None:
        """Wait until no run is going on here."""
        await self._idle.wait()

    async def drain(self) -> None:
        """Claim no more runs and wait for those going on to end and be recorded (a graceful
        stop calls it, within its grace period; a run still going on when that ends is
        cancelled and given back, its attempt not counted)."""
        self._draining = True
        self._wake.set()
        async with self._claiming:
            pass  # a claim under way has started its runs
        await self.settle()

    async def _claim_loop(self) -> None:
        while not self._draining:
            try:
                async with self._claiming:
                    if self._draining:
                        return
                    await self.claim_once()
                wait = self._until_next_due()
            except StorageError as exc:
                log.warning("function runner: %s", exc)
                self._platform.metrics.task_crashes.labels("function_runner").inc()
                wait = self._poll
            await self._wake.wait(wait)

    def _until_next_due(self) -> float:
        if self._book.room <= 0 or self._next_due is None:
            return self._poll  # a run that ends, or one queued, wakes the loop
        return min(self._poll, max(self._next_due - self._platform.now(), 0.0) + 0.001)

    def _publish_fairness(self) -> None:
        book = self._book
        publish_fairness(
            self._platform.metrics, "run", book.held_back, self._published, book.developers
        )

    async def _gauge_loop(self) -> None:
        while True:
            try:
                async with self._platform.store.transaction(background=True) as tx:
                    depth = await queues.run_queue_depth(tx)
            except StorageError:
                pass
            else:
                self._platform.metrics.function_queue_depth.set(depth)
            await trio.sleep(self._poll)

    async def claim_once(self) -> int:
        """Claim due runs for the pool's free workers and start them; answers how many.

        The workers go round the tenants with due runs (``RunBook.choose``): the developer
        running least first, then its app running least, then that app's business running
        least, each within its share, and among those running as much the one whose oldest run
        has waited longest. Each run is checked, and gets its token, in the transaction that
        claims it."""
        assert self._nursery is not None
        if self._book.room <= 0:
            return 0
        prepared: list[tuple[queues.ClaimedRun, queues.RunPlan | str, str | None]] = []
        chosen: list[tuple[DueRuns, int]] = []
        try:
            await self._claim(prepared, chosen)
        except BaseException:
            for run, _, _ in prepared:
                self._tokens.pop(run.id, None)  # minted in the transaction that failed
            for pair, count in chosen:
                for _ in range(count):
                    self._book.ended(pair)
            raise
        tenants = {(pair.app_id, pair.business): pair for pair, _ in chosen}
        got = Counter(tenants[_tenant(run)] for run, _, _ in prepared)
        for pair, count in chosen:
            for _ in range(count - got[pair]):
                self._book.ended(pair)  # fewer were due than asked for
        for run, plan, family_id in prepared:
            self._idle = trio.Event() if self._idle.is_set() else self._idle
            self._nursery.start_soon(self._execute, run, tenants[_tenant(run)], plan, family_id)
        self._publish_fairness()
        return len(prepared)

    async def _claim(
        self,
        prepared: list[tuple[queues.ClaimedRun, queues.RunPlan | str, str | None]],
        chosen: list[tuple[DueRuns, int]],
    ) -> None:
        p = self._platform
        async with p.store.transaction(background=True) as tx:
            now = p.now()
            due = await queues.run_due_times(tx)
            chosen += self._book.choose(
                {
                    DueRuns(tenant.developer, tenant.app_id, tenant.business): tenant.due
                    for tenant in due
                    if tenant.due <= now
                }
            )
            claimed = await queues.claim_runs(
                tx,
                now=now,
                lease=self.lease,
                lease_until=now + self.pool.limits.wall + LEASE_MARGIN,
                quotas=[((pair.app_id, pair.business), count) for pair, count in chosen],
            )
            got = Counter(_tenant(run) for run in claimed)
            more_now = any(got[pair.app_id, pair.business] >= count for pair, count in chosen)
            self._next_due = (
                now
                if more_now
                else min((tenant.due for tenant in due if tenant.due > now), default=None)
            )
            for run in claimed:
                plan = await queues.run_plan(tx, run)
                family_id: str | None = None
                if isinstance(plan, queues.RunPlan) and plan.installation_id and run.business_id:
                    assert plan.user_id is not None
                    family_id, token = await auth.mint_run_token(
                        tx,
                        p.keyring,
                        now=now,
                        app_id=run.app_id,
                        installation_id=plan.installation_id,
                        business_id=run.business_id,
                        user_id=plan.user_id,
                        scopes=plan.scopes,
                        ttl=self.pool.limits.wall,
                    )
                    self._tokens[run.id] = token
                prepared.append((run, plan, family_id))

    async def _execute(
        self,
        run: queues.ClaimedRun,
        tenant: DueRuns,
        plan: queues.RunPlan | str,
        family_id: str | None,
    ) -> None:
        try:
            if isinstance(plan, str):
                await self._record(run, self._unrun(run, plan), None)
                return
            self._deadlines[run.id] = trio.current_time() + self.pool.limits.wall
            started_at = self._platform.now()
            try:
                outcome = await self.pool.invoke(
                    RunRequest(run.id, f"{run.function_id}:{plan.version}", plan.script, run.body)
                )
            except BaseException:
                # The runner stops (or a fault): the run is given back, due again at once, its
                # attempt not counted.
                await self._record(run, self._given_back(run), family_id)
                raise
            finally:
                self._tokens.pop(run.id, None)
                self._deadlines.pop(run.id, None)
            await self._record(run, self._ended(run, plan.version, outcome, started_at), family_id)
        except StorageError as exc:
            # Unrecorded: the claim runs out and the run goes again.
            log.warning("function runner: run %s: %s", run.id, exc)
        finally:
            self._notes.pop(run.id, None)
            self._held_back.pop(run.id, None)
            self._book.ended(tenant)
            if not self._book.busy:
                self._idle.set()
            self._wake.set()

    async def _record(
        self, run: queues.ClaimedRun, ended: queues.RunEnded, family_id: str | None
    ) -> None:
        """Write how the run ended and revoke its token, in one transaction (shielded: a
        stopping runner still records what ran)."""
        p = self._platform
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            async with p.store.transaction(background=True) as tx:
                if family_id is not None:
                    await auth.revoke_family(
                        tx, now=p.now(), family_id=family_id, reason="run_ended"
                    )
                await queues.record_runs(tx, [ended])
        p.metrics.function_runs.labels(ended.status).inc()

    def _given_back(self, run: queues.ClaimedRun) -> queues.RunEnded:
        now = self._platform.now()
        return queues.RunEnded(
            run_id=run.id,
            lease=run.lease,
            status="retrying" if run.attempts else "queued",
            attempts=run.attempts,
            version=None,
            duration_ms=None,
            logs=(),
            error="the service stopped during the run" if run.attempts else None,
            result=None,
            finished_at=now,
            next_attempt_at=now,
        )

    def _unrun(self, run: queues.ClaimedRun, reason: str) -> queues.RunEnded:
        return queues.RunEnded(
            run_id=run.id,
            lease=run.lease,
            status="failed",
            attempts=run.attempts,
            version=None,
            duration_ms=None,
            logs=(),
            error=f"not run: {reason}",
            result=None,
            finished_at=self._platform.now(),
            next_attempt_at=None,
        )

    def _ended(
        self, run: queues.ClaimedRun, version: int, outcome: RunOutcome, started_at: float
    ) -> queues.RunEnded:
        p = self._platform
        now = p.now()
        attempts = run.attempts + 1
        p.metrics.function_run_seconds.observe(outcome.seconds)
        # Checked once more before anything is stored: nothing of the guest's is believed.
        kept = recheck(self.pool.limits, outcome)
        status: queues.RunStatus
        due: float | None = None
        # The Retry-After of the rate limit whose refusal the handler threw, when it did.
        held_back = self._held_back.get(run.id, {}).get(kept.error)
        if kept.ok:
            status = "succeeded"
        else:
            # A throwing handler is not tried again, unless it threw a rate limit's refusal
            # of its call: a run that failed for its own reason after a 429 is not retried.
            if outcome.platform_failure or held_back is not None:
                due = next_attempt_at(attempts, now, RUN_RETRY_DELAYS)
            if due is not None and held_back is not None:
                due = max(due, now + held_back)
            status = "retrying" if due is not None else "failed"
        logs, times = _with_notes(kept.logs, kept.log_times, self._notes.get(run.id, []))
        return queues.RunEnded(
            run_id=run.id,
            lease=run.lease,
            status=status,
            attempts=attempts,
            version=version,
            duration_ms=round(outcome.seconds * 1000, 3),
            logs=logs,
            error=kept.error,
            stack=None if kept.stack is None else apps.source_stack(kept.stack),
            result=kept.result,
            finished_at=now,
            next_attempt_at=due,
            started_at=started_at,
            log_times=times,
        )


def _with_notes(
    logs: list[str], times: list[int], notes: list[tuple[int, str]]
) -> tuple[list[str], list[int]]:
    """The run's log lines and the platform's notes in the order they were written, with their
    times; the notes after the lines, and no times, when the lines' times are not known."""
    if len(times) != len(logs):
        return [*logs, *(note for _, note in notes)], []
    merged = sorted([*zip(times, logs, strict=True), *notes], key=lambda line: line[0])
    return [line for _, line in merged], [at for at, _ in merged]


def _budget(answer: ApiAnswer) -> str:
    """The rate limit that refused a call, as a run's log names it."""
    limit = catalog.RATE_LIMITS.get(answer.refused_by or "")
    if limit is None:
        return "refused by a rate limit"
    per = {"app+business": " of the app in this business", "app": " of the app"}
    return (
        f"refused by the rate limit {limit.name} ({limit.limit} calls a"
        f" {'minute' if limit.window_seconds == 60 else f'{limit.window_seconds} s window'}"
        f"{per.get(limit.key, '')})"
    )


def _tenant(run: queues.ClaimedRun) -> tuple[str, str]:
    """The (app, business or '') a claimed run was claimed for."""
    return run.app_id, run.business_id or ""
