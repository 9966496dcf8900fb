"""Hosted-function runs: claimed from the run queue and run in the sandbox pool.

The dispatcher's fan-out (``queues.plan_fan_out``) queues one run per subscribed function of every
app an event reaches, in the transaction that creates the event's deliveries: exactly once, under
the same audience rules. The runner claims due runs, as many as the pool can take at once, with
a lease (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so several processes share the queue). Just
before a run starts it is checked (``queues.run_plan``: the function deleted, the app stopped, the
installation ended or the event's scope no longer held make it fail unrun) and gets its own
access token (``auth.mint_run_token``): the installation's scopes, its installing user, living
no longer than the run's wall limit (a run that rides in another's line, LINE_SECONDS more: it
starts within them). The token is revoked in the transaction that records how
the run ended.

The runner owns the claims, the workers' shares (``_run_book.py``) and the records of how runs
ended; a run's calls to the data API go through ``_run_calls.py`` (its token, the wait for a rate
limit's budget, the platform's notes in its log), and how it ended is worked out by
``_run_outcome.py``: a run the platform failed (its worker died) goes again after
RUN_RETRY_DELAYS; a handler that throws or breaks a limit fails its run for good.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from ledgerport import apps, auth, queues
from ledgerport.ids import new_id
from ledgerport.platform import Platform
from ledgerport.runtime import (
    ApiAnswer,
    ApiCall,
    DataApi,
    FetchAnswer,
    FetchCall,
    RunLimits,
    RunOutcome,
    RunRequest,
    SandboxPool,
)
from ledgerport.storage import StorageError, Transaction

from ._core import Refusal
from ._egress import Egress
from ._run_book import DueRuns, RunBook
from ._run_calls import MAX_NOTES as MAX_NOTES
from ._run_calls import RunCalls
from ._run_outcome import RUN_RETRY_DELAYS as RUN_RETRY_DELAYS
from ._run_outcome import given_back, run_ended, unrun
from ._shared import POLL, Wakeup, publish_fairness

log = logging.getLogger("ledgerport.engine.functions")

_Prepared = tuple[queues.ClaimedRun, queues.RunPlan | str, str | None]
"""A run claimed, its plan (or why it fails unrun) and its token's family."""
_Ended = tuple[queues.ClaimedRun, queues.RunEnded, str | None]
"""A run claimed, how it ended, and its token's family."""

LEASE_MARGIN = 60.0
"""Seconds a claim outlasts the run's wall limit (time to start it and to record it)."""
LINE_SECONDS = 0.2
"""Seconds of runs one worker may take in a line: a worker the fair choice gives to a tenant
also takes, one after another, due runs of the same app for other businesses (the riders), as
many as the app's recent runs say fill half this time (LINE_MAX at most); a rider not started
within it (the platform's clock) is given back unstarted. A tick of a schedule makes one tenant
per installation, and a claim a run would hold each run up by a whole claim transaction."""
LINE_MAX = 16
"""Runs a line holds at most."""
RUN_SECONDS_WEIGHT = 0.2
"""How much each run's time moves its app's recent run time (an exponential average)."""
APPS_TIMED = 10_000
"""Apps whose recent run time a runner keeps at most (forgotten all at once past it)."""
DUE_FRESH = 1.0
"""Seconds the runner's reading of the tenants with due runs serves its claims: reading them
costs one index step per tenant (about 4 ms for 1,000 on SQLite, 9 ms on PostgreSQL), and a
tick of a schedule makes one tenant per installation, each claimed in turn. New runs queued
(their channel's notice), and a run of its own that goes again, make it read them anew."""


class FunctionRunner:
    """Runs queued hosted-function runs in a sandbox pool of its own (see the module
    docstring): ``workers`` warm workers, each run held to ``limits``. The pool makes a run's
    API calls through the runner, which answers them with ``api`` and the run's token while
    the run goes on; without ``api`` they answer 503. While runs wait on the network (a fetch
    under way), up to ``spare`` more run beside them on workers started as they are needed
    (default: as many as ``workers``)."""

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
        resolver: apps.Resolver = apps.resolve,
        spare: int | None = None,
    ) -> None:
        self._platform = platform
        spare = workers if spare is None else spare
        self.pool = SandboxPool(
            size=workers,
            spare=spare,
            limits=limits,
            api=self._call,
            fetch=self._fetch,
            metrics=platform.metrics,
            runs_per_worker=runs_per_worker,
        )
        self._poll = poll
        self.lease = holder or new_id("runner")
        """What this runner's claims hold their lease by: its node's id (``Node``)."""
        self._tokens: dict[str, str] = {}
        """The token of each run going on, by run id."""
        self._deadlines: dict[str, float] = {}
        """When each run going on reaches its wall limit (trio's clock), by run id."""
        self._calls = RunCalls(
            api, self.pool.limits, tokens=self._tokens, deadlines=self._deadlines
        )
        """The runs' data API calls, and what the platform tells their logs."""
        self._egress = Egress(
            keyring=platform.keyring,
            note=lambda run_id, note, at, after: self._calls.note(run_id, note, at=at, after=after),
            deadlines=self._deadlines,
            development=platform.config.development,
            loopback=platform.config.loopback_webhooks,
            resolver=resolver,
            metrics=platform.metrics,
            waiting=self._waiting,
        )
        """The runs' fetches, and their secrets (``_egress.py``)."""
        self._book = RunBook(workers, spare=spare)
        """The busy workers per app and per business, and the fair choice of due runs."""
        self._published: dict[Refusal, int] = {}
        self._next_due: float | None = None
        """When the earliest run not claimed yet is due (None: none known)."""
        self._due: dict[DueRuns, float] | None = None
        """The tenants with due runs as last read, each with when its oldest is due, less
        those found to have no more (None: read them again)."""
        self._due_read = -math.inf
        """When they were read (trio's clock)."""
        self._due_changes = 0
        """Counts what makes them stale (:meth:`_forget_due`): a claim under way keeps what it
        read only if nothing did meanwhile."""
        self._wake = Wakeup()
        self._idle = trio.Event()
        self._idle.set()
        self._recording = 0
        """Runs ended whose worker is free again and whose end is being recorded."""
        self._nursery: trio.Nursery | None = None
        self._draining = False
        """Asked to stop (:meth:`drain`): no run is claimed any more."""
        self._claiming = trio.Lock()
        """Held by a claim under way (a drain waits for it)."""
        self._run_seconds: dict[str, float] = {}
        """Each app's recent run time (seconds, an exponential average): how long a line of
        its runs may be (:meth:`_line_length`)."""

    async def _call(self, request: RunRequest, call: ApiCall) -> ApiAnswer:
        """The pool's way to the data API (``_run_calls.py``): with the token of the run going
        on, which exists only until the run has ended."""
        return await self._calls.call(request, call)

    def _waiting(self, run_id: str, waiting: bool) -> None:
        """A run begins or ends waiting on the network (a fetch under way): its share of the
        CPU goes to another run meanwhile, on a spare worker (``RunBook``)."""
        self._book.wait(waiting)
        if waiting:
            self._wake.set()

    async def _fetch(self, request: RunRequest, call: FetchCall) -> FetchAnswer:
        """The pool's way out for a run's fetches (``_egress.py``)."""
        return await self._egress.fetch(request, call)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with (
            self._platform.store.listen(queues.FUNCTION_RUNS_CHANNEL, self._runs_queued),
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
            try:
                # The nursery stays the runs' until it has closed: the claim loop, a task in
                # it, may still be claiming when the body has left (a claim resumed after a
                # shielded checkpoint), and starts what it claimed there, to be given back.
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    yield nursery
            finally:
                self._nursery = None
                await self._egress.aclose()
            outer.cancel_scope.cancel()

    @property
    def busy(self) -> int:
        """Workers of this runner's pool busy with a run now."""
        return self._book.busy

    def wake(self) -> None:
        self._wake.set()

    def _runs_queued(self) -> None:
        """Runs were queued: maybe for tenants not among those read."""
        self._forget_due()
        self._wake.set()

    def _forget_due(self) -> None:
        self._due = None
        self._due_changes += 1

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
                    await self.claim_once(reuse=True)
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

    async def claim_once(self, *, reuse: bool = False) -> int:
        """Claim due runs for the pool's free workers and start them; answers how many.

        The workers go round the tenants with due runs (``RunBook.choose``): the developer
        running least first, then its app running least, then that app's business running
        least, each within its share, and among those running as much the one whose oldest run
        has waited longest. A worker given to one run also takes a line of riders: due runs of
        the same app for other businesses, as many as its recent runs say fill half of LINE_SECONDS
        (:meth:`_riders`), run one after another. Each run is checked, and gets its token, in
        the transaction that claims it. With ``reuse`` (the claim loop's, woken by every
        queueing commit), the tenants with due runs as read by an earlier claim serve, for
        DUE_FRESH seconds at most (:meth:`_due_tenants`); else they are read now."""
        assert self._nursery is not None
        if self._book.room <= 0:
            return 0
        prepared: list[_Prepared] = []
        chosen: list[tuple[DueRuns, int]] = []
        riders: dict[DueRuns, DueRuns] = {}
        try:
            await self._claim(prepared, chosen, riders, reuse=reuse)
        except BaseException:
            self._forget_due()  # what the claim saw may not have held
            for run, _, _ in prepared:
                self._tokens.pop(run.id, None)  # minted in the transaction that failed
            for pair, count in chosen:
                for _ in range(count):
                    self._book.ended(pair)
            raise
        tenants = {(pair.app_id, pair.business): pair for pair, _ in chosen}
        tenants.update({(rider.app_id, rider.business): rider for rider in riders})
        got = Counter(tenants[_tenant(run)] for run, _, _ in prepared)
        lines: dict[DueRuns, list[_Prepared]] = {}
        stranded: list[_Prepared] = []
        for entry in prepared:
            pair = tenants[_tenant(entry[0])]
            slot = riders.get(pair)
            if slot is None:
                lines.setdefault(pair, []).append(entry)
            elif got[slot]:
                lines.setdefault(slot, []).append(entry)
            else:
                stranded.append(entry)  # its worker's own run was not there
        for pair, count in chosen:
            for _ in range(count - got[pair]):
                self._book.ended(pair)  # fewer were due than asked for
        for pair, line in lines.items():
            own = [entry for entry in line if tenants[_tenant(entry[0])] == pair]
            ride = [entry for entry in line if tenants[_tenant(entry[0])] != pair]
            for index, entry in enumerate(own):
                # A tenant given several workers runs one line; riders ride with the first.
                self._idle = trio.Event() if self._idle.is_set() else self._idle
                line_of = [entry, *ride] if index == 0 else [entry]
                self._nursery.start_soon(self._execute, line_of, pair)
        if stranded:
            self._recording += 1
            self._idle = trio.Event() if self._idle.is_set() else self._idle
            self._nursery.start_soon(self._unclaim, stranded)
        self._publish_fairness()
        return len(prepared) - len(stranded)

    async def _claim(
        self,
        prepared: list[_Prepared],
        chosen: list[tuple[DueRuns, int]],
        riders: dict[DueRuns, DueRuns],
        *,
        reuse: bool,
    ) -> None:
        p = self._platform
        changes = self._due_changes
        async with p.store.transaction(background=True) as tx:
            now = p.now()
            due = await self._due_tenants(tx, now, reuse=reuse)
            due_now = due
            if any(at > now for at in due.values()):
                due_now = {pair: at for pair, at in due.items() if at <= now}
            chosen += self._book.choose(due_now)
            riders.update(self._riders(chosen, due_now))
            asked = [*chosen, *((rider, 1) for rider in riders)]
            claimed = await queues.claim_runs(
                tx,
                now=now,
                lease=self.lease,
                lease_until=now + self.pool.limits.wall + LEASE_MARGIN,
                quotas=[((pair.app_id, pair.business), count) for pair, count in asked],
            )
            got = Counter(_tenant(run) for run in claimed)
            # A tenant that got all it asked for may have more due, claimable at once unless
            # its share is full (then a run of it ending wakes the loop): looking again would
            # read every tenant's due time to claim nothing, once per run.
            more_now = any(
                got[pair.app_id, pair.business] >= count and not self._book.capped(pair)
                for pair, count in chosen
            )
            self._next_due = (
                now if more_now else min((at for at in due.values() if at > now), default=None)
            )
            left = _after_claim(due, asked, got, now)
            # Kept for the next claim unless runs were queued meanwhile (not in ``due``).
            self._due = left if self._due_changes == changes else None
            if any(got[pair.app_id, pair.business] < count for pair, count in chosen) and any(
                at <= now for at in left.values()
            ):
                # Workers asked for came back unused (a tenant read had fewer due than
                # asked): other tenants read may have some.
                self._next_due = now
            riding = {(rider.app_id, rider.business) for rider in riders}
            plans = await queues.run_plans(tx, claimed)
            granted: list[tuple[queues.ClaimedRun, auth.RunGrant]] = []
            for run, plan in zip(claimed, plans, strict=True):
                if isinstance(plan, queues.RunPlan) and plan.installation_id and run.business_id:
                    assert plan.user_id is not None
                    granted.append(
                        (
                            run,
                            auth.RunGrant(
                                app_id=run.app_id,
                                installation_id=plan.installation_id,
                                business_id=run.business_id,
                                user_id=plan.user_id,
                                scopes=plan.scopes,
                                # A rider starts within its line's time, and lives as long
                                # after.
                                ttl=self.pool.limits.wall
                                + (LINE_SECONDS if _tenant(run) in riding else 0),
                            ),
                        )
                    )
            minted = await auth.mint_run_tokens(
                tx, p.keyring, now=now, grants=[grant for _, grant in granted]
            )
            families: dict[str, str] = {}
            for (run, _), (family_id, token) in zip(granted, minted, strict=True):
                families[run.id] = family_id
                self._tokens[run.id] = token
            for run, plan in zip(claimed, plans, strict=True):
                prepared.append((run, plan, families.get(run.id)))

    def _line_length(self, app_id: str) -> int:
        """Runs of ``app_id`` one worker takes in a line: as many as its recent runs say fill
        half of LINE_SECONDS (one until a run of it was timed), LINE_MAX at most."""
        recent = self._run_seconds.get(app_id)
        if recent is None:
            return 1
        return max(1, min(LINE_MAX, int(LINE_SECONDS / 2 / max(recent, 0.001))))

    def _riders(
        self, chosen: list[tuple[DueRuns, int]], due: dict[DueRuns, float]
    ) -> dict[DueRuns, DueRuns]:
        """For each tenant given a worker, the tenants of the same app (other businesses, not
        chosen themselves) whose oldest due run rides in its line, oldest first: rider to
        tenant. A business at its share in the book takes no rider."""
        slots = {pair.app_id: pair for pair, _ in chosen if self._line_length(pair.app_id) > 1}
        if not slots:
            return {}
        taken = {pair for pair, _ in chosen}
        waiting: dict[str, list[tuple[float, DueRuns]]] = {}
        for pair, at in due.items():
            if pair.app_id in slots and pair not in taken:
                waiting.setdefault(pair.app_id, []).append((at, pair))
        riders: dict[DueRuns, DueRuns] = {}
        businesses = self._book.businesses
        for app_id, pairs in waiting.items():
            room = self._line_length(app_id) - 1
            for _, pair in sorted(pairs, key=lambda item: (item[0], item[1].business)):
                if room <= 0:
                    break
                if pair.business and businesses.full(pair.business):
                    continue
                riders[pair] = slots[app_id]
                room -= 1
        return riders

    async def _due_tenants(
        self, tx: Transaction, now: float, *, reuse: bool
    ) -> dict[DueRuns, float]:
        """The tenants with due runs, each with when its oldest is due. With ``reuse``, as
        read within DUE_FRESH seconds (less those since found to have none) while some of them
        are due by ``now``; else read now. A tenant read that another process has emptied
        since costs a claim that gets nothing; one whose runs came due since, unannounced (a
        claim that ran out, a retry), is read within DUE_FRESH; runs queued are announced
        (:meth:`_runs_queued`) and read at once."""
        cached = self._due
        if (
            not reuse
            or cached is None
            or trio.current_time() - self._due_read >= DUE_FRESH
            or not any(at <= now for at in cached.values())
        ):
            cached = {
                DueRuns(tenant.developer, tenant.app_id, tenant.business): tenant.due
                for tenant in await queues.run_due_times(tx)
            }
            self._due = cached
            self._due_read = trio.current_time()
        return cached

    async def _execute(self, line: list[_Prepared], tenant: DueRuns) -> None:
        """Run ``line`` on the worker ``tenant`` was given: its own run, then its riders one
        after another while LINE_SECONDS last (the rest are given back unstarted). The worker
        is free for the next claim once the last run ended; the line's ends are recorded
        together then, in one transaction."""
        released = False
        ends_by = self._platform.now() + LINE_SECONDS

        def release() -> None:
            """The worker is free: the next claim may go while this run is recorded."""
            nonlocal released
            released = True
            self._recording += 1
            self._book.ended(tenant)
            self._wake.set()

        done: list[_Ended] = []
        try:
            for index, (run, plan, family_id) in enumerate(line):
                if index and self._platform.now() > ends_by:
                    release()
                    await self._record(done)
                    await self._unclaim(line[index:], counted=False)
                    return
                try:
                    ended = await self._run(run, plan, family_id)
                except BaseException:
                    # The runner stops (or a fault): what ran is recorded, the riders not run
                    # yet are given back.
                    with trio.CancelScope(shield=True):
                        await self._record(done)
                        await self._unclaim(line[index + 1 :], counted=False)
                    raise
                done.append((run, ended, family_id))
            release()
            await self._record(done)
        except StorageError as exc:
            # Unrecorded: the claim runs out and the run goes again.
            log.warning("function runner: a run of %s: %s", tenant.app_id, exc)
        finally:
            if released:
                self._recording -= 1
            else:
                self._book.ended(tenant)
            self._settled()
            if not released:
                self._wake.set()  # its worker is free (a released one woke the loop)

    async def _run(
        self, run: queues.ClaimedRun, plan: queues.RunPlan | str, family_id: str | None
    ) -> queues.RunEnded:
        """One run in the pool, as it ended (not recorded yet); given back if cancelled."""
        try:
            if isinstance(plan, str):
                return self._unrun(run, plan)
            self._deadlines[run.id] = trio.current_time() + self.pool.limits.wall
            started_at = self._platform.now()
            placeholders = self._egress.open(
                run.id, allowed_hosts=plan.allowed_hosts, secrets_by_name=plan.secrets
            )
            try:
                outcome = await self.pool.invoke(
                    RunRequest(
                        run.id,
                        f"{run.function_id}:{plan.version}",
                        plan.script,
                        run.body,
                        placeholders,
                    )
                )
            except BaseException:
                # The runner stops (or a fault): the run is given back, due again at once, its
                # attempt not counted.
                await self._record([(run, self._given_back(run), family_id)])
                raise
            finally:
                self._tokens.pop(run.id, None)
                self._deadlines.pop(run.id, None)
                self._egress.close(run.id)
            self._timed(run.app_id, outcome.seconds)
            return self._ended(run, plan.version, outcome, started_at)
        finally:
            self._calls.forget(run.id)

    def _timed(self, app_id: str, seconds: float) -> None:
        """A run of ``app_id`` took ``seconds``: its recent run time moves."""
        if len(self._run_seconds) >= APPS_TIMED and app_id not in self._run_seconds:
            self._run_seconds.clear()
        recent = self._run_seconds.get(app_id)
        self._run_seconds[app_id] = (
            seconds if recent is None else recent + RUN_SECONDS_WEIGHT * (seconds - recent)
        )

    async def _unclaim(self, entries: list[_Prepared], *, counted: bool = True) -> None:
        """Give claimed runs back unstarted (a line out of time, or riders whose worker's own
        run was not there): their tokens revoked, due again at once, no attempt counted.
        ``counted``: the caller counted this in ``_recording``."""
        p = self._platform
        try:
            if entries:
                for run, _, _ in entries:
                    self._tokens.pop(run.id, None)
                with trio.CancelScope(shield=True), trio.move_on_after(10):
                    async with p.store.transaction(background=True) as tx:
                        now = p.now()
                        families = [family for _, _, family in entries if family is not None]
                        await auth.revoke_families(
                            tx, now=now, family_ids=families, reason="run_ended"
                        )
                        await queues.unclaim_runs(tx, [run for run, _, _ in entries], now=now)
                self._forget_due()  # due again now: read the tenants anew
                self._wake.set()
        except StorageError as exc:
            log.warning("function runner: giving runs back: %s", exc)  # their claims run out
        finally:
            if counted:
                self._recording -= 1
                self._settled()

    def _settled(self) -> None:
        if not self._book.busy and not self._recording:
            self._idle.set()

    async def _record(self, ended: list[_Ended]) -> None:
        """Write how runs ended and revoke their tokens, in one transaction (shielded: a
        stopping runner still records what ran)."""
        if not ended:
            return
        p = self._platform
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            async with p.store.transaction(background=True) as tx:
                families = [family_id for _, _, family_id in ended if family_id is not None]
                await auth.revoke_families(tx, now=p.now(), family_ids=families, reason="run_ended")
                await queues.record_runs(tx, [end for _, end, _ in ended])
        if any(end.status in ("queued", "retrying") for _, end, _ in ended):
            self._forget_due()  # due again, maybe soon: read the tenants anew
            self._wake.set()
        for _, end, _ in ended:
            p.metrics.function_runs.labels(end.status).inc()

    def _given_back(self, run: queues.ClaimedRun) -> queues.RunEnded:
        return given_back(run, now=self._platform.now())

    def _unrun(self, run: queues.ClaimedRun, reason: str) -> queues.RunEnded:
        return unrun(run, reason, now=self._platform.now())

    def _ended(
        self, run: queues.ClaimedRun, version: int, outcome: RunOutcome, started_at: float
    ) -> queues.RunEnded:
        """How the run ended (``_run_outcome.py``), with the platform's notes of it."""
        p = self._platform
        now = p.now()
        p.metrics.function_run_seconds.observe(outcome.seconds)
        return run_ended(
            run,
            version,
            outcome,
            limits=self.pool.limits,
            started_at=started_at,
            now=now,
            held_back=self._calls.held_back(run.id),
            notes=self._calls.notes(run.id),
        )


def _after_claim(
    due: dict[DueRuns, float],
    chosen: list[tuple[DueRuns, int]],
    got: Counter[tuple[str, str]],
    now: float,
) -> dict[DueRuns, float]:
    """The tenants read, as a claim leaves them: those that had fewer due than asked have
    none left; those that got all they asked for may have more, and go behind the tenants
    waiting since before ``now`` (as if their oldest came due now: each tenant in turn)."""
    left = dict(due)
    for pair, count in chosen:
        if got[pair.app_id, pair.business] < count:
            del left[pair]
        else:
            left[pair] = max(left[pair], now)
    return left


def _tenant(run: queues.ClaimedRun) -> tuple[str, str]:
    """The (app, business or '') a claimed run was claimed for."""
    return run.app_id, run.business_id or ""
