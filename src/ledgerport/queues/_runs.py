"""Hosted-function runs: queued by the fan-out, the console's test run or a replay, claimed
with a lease, checked just before they start, recorded, listed and purged (contract.md: Hosted
functions, Developer console API and its second round). A run works like a delivery in the
queue: status queued or retrying in the hot queue, ``next_attempt_at`` and ``lease`` as for
deliveries (``_deliveries.py``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ledgerport import catalog
from ledgerport.apps import HostedFunction, SealedSecret, hour_of, sealed_secrets
from ledgerport.ids import new_id
from ledgerport.runtime import bounded_stack
from ledgerport.storage import Row, Transaction, first_per_key, placeholders

from ._bodies import SCHEDULE_TYPE, test_body
from ._errors import RunNotFound
from ._function_health import RunHealth, purge_function_health_hours, record_health
from ._quota import count_kept, text_bytes
from ._tenants import TENANT, DueTenant, due_tenants, tenant_key

RunStatus = Literal["queued", "retrying", "succeeded", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = ("queued", "retrying", "succeeded", "failed")
FUNCTION_RUNS_CHANNEL = "function_runs"
"""Notified by every commit that queues hosted-function runs."""
RUNS_ENDED_CHANNEL = "runs_ended"
"""Notified by every commit that records how runs ended: the live streams read then
(``_streams.py``)."""
INSERT_RUN = (
    "INSERT INTO function_runs (id, function_id, app_id, event_id, business_id, type,"
    " body, status, attempts, created_at, updated_at, next_attempt_at, replay_of)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 0, $8, $8, $8, $9)"
)
"""A queued run: (id, function, app, event, business, type, body, now, the run it replays)."""


@dataclass(frozen=True)
class FunctionRun:
    """A run as the console lists it: what it wrote, in an excerpt (RUN_EXCERPT_CHARS of
    log lines; the result when its JSON is no longer), the flags saying whether more exists."""

    id: str
    event_id: str | None
    type: str
    status: RunStatus
    attempts: int
    version: int | None
    duration_ms: float | None
    logs: list[str]
    error: str | None
    result: Any
    created_at: float
    logs_truncated: bool = False
    result_truncated: bool = False
    replay_of: str | None = None
    """The run this one replays (a replay)."""
    output_dropped_at: float | None = None
    """When its output (log lines, result, error, stack) was dropped to keep the app within
    its storage quota (None: it was not)."""

    @classmethod
    def from_row(cls, row: Row) -> FunctionRun:
        logs, logs_truncated = _log_excerpt(row["logs_head"], int(row["logs_size"] or 0))
        error = row["error"]
        if error is not None and int(row["error_size"]) > len(error):
            error += "\u2026"
        return cls(
            id=row["id"],
            event_id=row["event_id"],
            type=row["type"],
            status=row["status"],
            attempts=int(row["attempts"]),
            version=None if row["version"] is None else int(row["version"]),
            duration_ms=row["duration_ms"],
            logs=logs,
            error=error,
            result=json.loads(row["result"]) if row["result"] is not None else None,
            created_at=float(row["created_at"]),
            logs_truncated=logs_truncated,
            result_truncated=row["result"] is None and bool(row["result_size"]),
            replay_of=row["replay_of"],
            output_dropped_at=row["output_dropped_at"],
        )


@dataclass(frozen=True)
class RunDetail:
    """One run whole: what it ran on and everything it wrote."""

    run: FunctionRun
    event: Any
    """What the handler got (the webhook delivery body's shape)."""
    stack: str | None
    """The stack of what the handler threw, when it threw an Error, with positions into the
    uploaded source (``apps.source_stack``)."""
    started_at: float | None = None
    """When the handler was called (None: it was not, or the run ended before this was kept)."""
    log_times: Sequence[int] | None = None
    """When each log line was written, in milliseconds after ``started_at`` (None: not known)."""

    @property
    def log_lines(self) -> list[tuple[float | None, str]]:
        """Each log line with when it was written (None where that is not known)."""
        times = self.log_times
        start = self.started_at
        if start is None or times is None or len(times) != len(self.run.logs):
            return [(None, line) for line in self.run.logs]
        return [(start + ms / 1000, line) for ms, line in zip(times, self.run.logs, strict=True)]


RUN_EXCERPT_CHARS = 4096
"""Characters of a run's log lines, and of its result's JSON, a listing of runs answers at most
(a run may keep 64 KiB of each: a listing of 100 whole runs would weigh 12.8 MB)."""
_RUN_LIST_COLUMNS = (
    "id, event_id, type, status, attempts, version, duration_ms, created_at, replay_of,"
    " output_dropped_at, substr(error, 1, $2) AS error, length(error) AS error_size,"
    " substr(logs, 1, $2) AS logs_head, length(logs) AS logs_size,"
    " CASE WHEN length(result) <= $2 THEN result END AS result, length(result) AS result_size"
)
"""A run's columns as listed, ``$2`` characters of its log lines, error and result at most (its
error is never longer than RUN_EXCERPT_CHARS)."""


def _log_excerpt(head: str | None, size: int) -> tuple[list[str], bool]:
    """The log lines whole within ``head``, the first characters of a run's logs (a JSON
    array of strings), and whether the logs go on past them."""
    if head is None:
        return [], False
    if len(head) >= size:
        return list(json.loads(head)), False
    lines: list[str] = []
    decoder = json.JSONDecoder()
    at = 1  # past the "["
    while at < len(head):
        try:
            line, at = decoder.raw_decode(head, at)
        except ValueError:
            break
        lines.append(line)
        at += 1  # past the ","
    return lines, True


async def recent_runs(
    tx: Transaction,
    function: HostedFunction,
    *,
    statuses: Collection[RunStatus] = (),
    shown: int = catalog.CONSOLE_RUNS_SHOWN,
    excerpt: int = RUN_EXCERPT_CHARS,
) -> list[FunctionRun]:
    """The function's ``shown`` most recent runs, newest first, of those in one of
    ``statuses`` when given, each with an excerpt of what it wrote (see :class:`FunctionRun`;
    ``excerpt`` characters of its log lines, error and result at most, an error cut ending in an
    ellipsis): only the excerpts are read."""
    among = ""
    if statuses:
        among = f" AND status IN ({placeholders(len(statuses), start=4)})"
    rows = await tx.fetch(
        f"SELECT {_RUN_LIST_COLUMNS} FROM function_runs WHERE function_id = $1{among}"
        " ORDER BY created_at DESC, id DESC LIMIT $3",
        function.id,
        excerpt,
        shown,
        *sorted(statuses),
    )
    return [FunctionRun.from_row(row) for row in rows]


async def get_run(tx: Transaction, function: HostedFunction, run_id: str) -> RunDetail:
    """The function's run ``run_id`` whole; RunNotFound when the function has none of that id
    (or it aged out)."""
    row = await tx.fetchrow(
        f"SELECT {_RUN_LIST_COLUMNS}, logs, result AS whole_result, body, error_stack,"
        " started_at, log_times FROM function_runs WHERE function_id = $1 AND id = $3",
        function.id,
        RUN_EXCERPT_CHARS,
        run_id,
    )
    if row is None:
        raise RunNotFound(run_id)
    whole = {
        **row,
        "logs_head": row["logs"],
        "result": row["whole_result"],
        "result_size": 0,
    }
    times = row["log_times"]
    return RunDetail(
        FunctionRun.from_row(whole),
        json.loads(row["body"]),
        row["error_stack"],
        started_at=row["started_at"],
        log_times=None if times is None else json.loads(times),
    )


async def create_test_run(
    tx: Transaction,
    *,
    now: float,
    function_id: str,
    app_id: str,
    event_type: str,
    pinned_version: str | None,
) -> str:
    """Queue a test run of the function (the console's "test run"): ``event_type``'s sample
    with ``test: true``, businessId ``test``, eventId null, as a test delivery has it. It runs
    in no business, so its ``context.api`` calls answer 503; it is listed with the function's
    runs like any other. Answers its id."""
    run_id = new_id("run")
    kind, body = test_body(run_id, event_type, now, pinned_version)
    await tx.execute(INSERT_RUN, run_id, function_id, app_id, None, None, kind, body, now, None)
    await tx.notify(FUNCTION_RUNS_CHANNEL)
    return run_id


async def replay_run(tx: Transaction, *, now: float, function: HostedFunction, run_id: str) -> str:
    """Queue a new run of the function on the event its run ``run_id`` ran on (a replay): the
    same event, business and app as that run, taken from it, never from the caller; the body's
    ``id`` is the new run's. It goes through the queue as any run: claimed fairly, checked just
    before it starts (the function deleted, the app stopped, the installation ended or the
    event's scope no longer held make it fail unrun), run on the version active when it is
    claimed, with a token of its own. RunNotFound when the function has no run of that id.
    Answers the new run's id."""
    row = await tx.fetchrow(
        "SELECT event_id, business_id, type, body FROM function_runs"
        " WHERE function_id = $1 AND id = $2",
        function.id,
        run_id,
    )
    if row is None:
        raise RunNotFound(run_id)
    replay_id = new_id("run")
    body = {**json.loads(row["body"]), "id": replay_id}
    await tx.execute(
        INSERT_RUN,
        replay_id,
        function.id,
        function.app_id,
        row["event_id"],
        row["business_id"],
        row["type"],
        json.dumps(body, separators=(",", ":")),
        now,
        run_id,
    )
    await tx.notify(FUNCTION_RUNS_CHANNEL)
    return replay_id


# --- The queue -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimedRun:
    """A run an engine holds the lease of."""

    id: str
    function_id: str
    app_id: str
    event_id: str | None
    business_id: str | None
    type: str
    body: str
    attempts: int
    """Attempts made before this one."""
    lease: str


async def run_due_times(tx: Transaction) -> list[DueTenant]:
    """Each (app, business or '') with runs waiting, its app's developer, and when its earliest
    is due (a claimed run is due when its claim runs out)."""
    return await due_tenants(tx, "function_runs")


async def claim_runs(
    tx: Transaction,
    *,
    now: float,
    lease: str,
    lease_until: float,
    quotas: Sequence[tuple[tuple[str, str], int]],
) -> list[ClaimedRun]:
    """Claim due runs, for each ``((app_id, business), n)`` of ``quotas`` that tenant's ``n``
    oldest due at most (on PostgreSQL, those no other transaction holds): ``lease`` holds them
    until ``lease_until``, when they are due again."""
    if not quotas:
        return []
    sql, extra = first_per_key(
        tx,
        select=(
            "SELECT id, function_id, app_id, event_id, business_id, type, body, attempts"
            " FROM function_runs WHERE status IN ('queued', 'retrying') AND next_attempt_at <= $1"
        ),
        key=TENANT,
        order="next_attempt_at",
        quotas=[(tenant_key(app_id, business), n) for (app_id, business), n in quotas],
        start=2,
    )
    rows = await tx.fetch(sql, now, *extra)
    if rows:
        await tx.executemany(
            "UPDATE function_runs SET lease = $1, next_attempt_at = $2 WHERE id = $3",
            [(lease, lease_until, row["id"]) for row in rows],
        )
    return [
        ClaimedRun(
            id=row["id"],
            function_id=row["function_id"],
            app_id=row["app_id"],
            event_id=row["event_id"],
            business_id=row["business_id"],
            type=row["type"],
            body=row["body"],
            attempts=int(row["attempts"]),
            lease=lease,
        )
        for row in rows
    ]


async def unclaim_runs(tx: Transaction, runs: Sequence[ClaimedRun], *, now: float) -> None:
    """Give claimed runs back as they were, unstarted: their lease let go, due again at
    ``now`` (a run a runner claimed in a line and did not reach in time)."""
    if runs:
        await tx.executemany(
            "UPDATE function_runs SET lease = NULL, next_attempt_at = $1"
            " WHERE id = $2 AND lease = $3",
            [(now, run.id, run.lease) for run in runs],
        )


async def next_run_due_at(tx: Transaction) -> float | None:
    value = await tx.fetchval(
        "SELECT MIN(next_attempt_at) FROM function_runs WHERE status IN ('queued', 'retrying')"
    )
    return None if value is None else float(value)


async def run_queue_depth(tx: Transaction) -> int:
    return int(
        await tx.fetchval(
            "SELECT COUNT(*) FROM function_runs WHERE status IN ('queued', 'retrying')"
        )
    )


@dataclass(frozen=True)
class RunPlan:
    """What a run needs, read just before it starts: the script of the function's latest
    version, and the installation whose grant its token carries (None: the run gets no API
    access, as for an app event in a business the app is no longer installed in)."""

    version: int
    script: str
    installation_id: str | None
    user_id: str | None
    scopes: tuple[str, ...]
    allowed_hosts: tuple[str, ...] = ()
    """The hosts the run's ``context.fetch`` may reach."""
    secrets: Mapping[str, SealedSecret] = field(default_factory=dict)
    """The app's secrets, sealed, by name, as the run was claimed."""


async def run_plan(tx: Transaction, run: ClaimedRun) -> RunPlan | str:
    """The run's plan, or why it must fail unrun: the function deleted, the app stopped, for a
    business or privacy event the installation ended or the event's scope no longer held (the
    same rules as a webhook delivery's send-time check), for a scheduled run the installation
    ended."""
    (plan,) = await run_plans(tx, [run])
    return plan


INSTALLATIONS_READ = 100
"""Businesses whose installation of an app one statement of :func:`run_plans` reads at most."""


async def run_plans(tx: Transaction, runs: Sequence[ClaimedRun]) -> list[RunPlan | str]:
    """:func:`run_plan` of each of ``runs``, in order, reading each function, each app's
    secrets and each app's installations once for all of them (a line of a schedule's runs is
    one function's, in many businesses)."""
    functions: dict[str, Row | None] = {}
    for function_id in dict.fromkeys(run.function_id for run in runs):
        functions[function_id] = await tx.fetchrow(
            "SELECT f.deleted_at, f.version, f.allowed_hosts, v.script, a.status AS app_status,"
            " a.scopes AS app_scopes"
            " FROM functions f JOIN function_versions v ON v.function_id = f.id"
            " AND v.version = f.version JOIN apps a ON a.id = f.app_id WHERE f.id = $1",
            function_id,
        )
    businesses: dict[str, list[str]] = {}
    for run in runs:
        if run.business_id:
            businesses.setdefault(run.app_id, []).append(run.business_id)
    installations: dict[tuple[str, str], Row] = {}
    for app_id, wanted in businesses.items():
        unique = list(dict.fromkeys(wanted))
        for at in range(0, len(unique), INSTALLATIONS_READ):
            part = unique[at : at + INSTALLATIONS_READ]
            marks = placeholders(len(part), start=2)
            for found in await tx.fetch(
                "SELECT i.business_id, i.id, i.user_id, i.scopes, m.active AS member_active"
                " FROM installations i LEFT JOIN memberships m"
                " ON m.business_id = i.business_id AND m.user_id = i.user_id"
                f" WHERE i.app_id = $1 AND i.business_id IN ({marks}) AND i.state = 'ACTIVE'",
                app_id,
                *part,
            ):
                installations.setdefault((app_id, found["business_id"]), found)
    secrets: dict[str, dict[str, SealedSecret]] = {}
    plans: list[RunPlan | str] = []
    for run in runs:
        installation = installations.get((run.app_id, run.business_id or ""))
        plan = _plan(run, functions[run.function_id], installation)
        if isinstance(plan, RunPlan):
            if run.app_id not in secrets:
                secrets[run.app_id] = await sealed_secrets(tx, run.app_id)
            plan = replace(plan, secrets=secrets[run.app_id])
        plans.append(plan)
    return plans


def _plan(run: ClaimedRun, row: Row | None, installation: Row | None) -> RunPlan | str:
    """The rules of :func:`run_plan` on what was read: the function (``row``) and the
    installation of the run's app in its business."""
    if row is None or row["deleted_at"] is not None:
        return "function deleted"
    if row["app_status"] != "ACTIVE":
        return f"app {row['app_status'].lower()}"
    kind = catalog.event_type(run.type)
    # A test run (the console's, on a sample: no event) runs in no business, with no token.
    if kind is not None and kind.audience != "app" and run.event_id is not None:
        if installation is None:
            return "app not installed in the business"
        held = set(json.loads(installation["scopes"])) & set(json.loads(row["app_scopes"]))
        if kind.scope not in held:
            return f"scope {kind.scope} no longer held"
    if run.type == SCHEDULE_TYPE and run.business_id and installation is None:
        return "app not installed in the business"  # ended since the tick
    if installation is not None and not installation["member_active"]:
        # The installing user is no longer an active member: the run gets no token to act
        # with (its calls answer 503), as their own tokens are refused.
        installation = None
    return RunPlan(
        version=int(row["version"]),
        script=row["script"],
        installation_id=None if installation is None else installation["id"],
        user_id=None if installation is None else installation["user_id"],
        scopes=() if installation is None else tuple(json.loads(installation["scopes"])),
        allowed_hosts=tuple(json.loads(row["allowed_hosts"])),
    )


@dataclass(frozen=True)
class RunEnded:
    """What became of one claimed run: succeeded, failed, or retrying at ``next_attempt_at``
    (the platform failed it)."""

    run_id: str
    lease: str
    status: RunStatus
    attempts: int
    version: int | None
    duration_ms: float | None
    logs: Sequence[str]
    error: str | None
    result: str | None
    """JSON text."""
    finished_at: float
    next_attempt_at: float | None
    stack: str | None = None
    started_at: float | None = None
    """When the handler was called (None: it was not)."""
    log_times: Sequence[int] = ()
    """When each line of ``logs`` was written, in milliseconds after ``started_at`` (empty:
    not known)."""


async def record_runs(tx: Transaction, ended: Sequence[RunEnded]) -> None:
    """Record how runs ended; a run whose claim no longer holds the lease changes nothing. The
    stack is stored within its bounds (``runtime.bounded_stack``) whoever recorded it, and what
    the run wrote is counted to its app's storage (``_quota.py``): a run tried again replaces
    its earlier output. What the ends say of their functions' health is written in the same
    transaction (``_function_health.py``)."""
    if not ended:
        return
    await tx.notify(RUNS_ENDED_CHANNEL)
    held = await tx.fetch(
        "SELECT id, app_id, function_id, lease, output_bytes FROM function_runs"
        f" WHERE id IN ({placeholders(len(ended))}) ORDER BY id{tx.row_lock}",
        *[run.run_id for run in ended],
    )
    owned = {row["id"]: row for row in held}
    rows = []
    changes = []
    health = []
    for run in ended:
        logs = json.dumps(list(run.logs))
        stack = bounded_stack(run.stack)
        times = (
            json.dumps(list(run.log_times))
            if run.log_times and len(run.log_times) == len(run.logs)
            else None
        )
        size = text_bytes(logs, run.error, run.result, stack, times)
        before = owned.get(run.run_id)
        if before is not None and before["lease"] == run.lease:
            changes.append((before["app_id"], size - int(before["output_bytes"])))
            health.append(
                RunHealth(
                    function_id=before["function_id"],
                    run_id=run.run_id,
                    at=run.finished_at,
                    status=run.status,
                    error=run.error,
                    attempted=run.duration_ms is not None,
                )
            )
        rows.append(
            (
                run.status,
                run.attempts,
                run.version,
                run.duration_ms,
                logs,
                run.error,
                run.result,
                run.finished_at,
                run.next_attempt_at,
                run.run_id,
                run.lease,
                stack,
                run.started_at,
                times,
                size,
            )
        )
    await tx.executemany(
        "UPDATE function_runs SET status = $1, attempts = $2, version = $3, duration_ms = $4,"
        " logs = $5, error = $6, result = $7, updated_at = $8, next_attempt_at = $9,"
        " error_stack = $12, started_at = $13, log_times = $14, output_bytes = $15,"
        " lease = NULL WHERE id = $10 AND lease = $11",
        rows,
    )
    count_kept(tx, changes)
    await record_health(tx, health)


async def purge_runs(tx: Transaction, *, now: float) -> int:
    """Delete ended runs past the history kept (30 days, as for deliveries), taking what they
    wrote off their apps' storage, and the functions' hourly counts of runs past every health
    window; answers how many runs. ``apps.purge_deleted_functions`` then deletes the deleted
    functions they kept."""
    await purge_function_health_hours(tx, before_hour=hour_of(now - catalog.HEALTH_WINDOW))
    cutoff = now - catalog.DELIVERY_RETENTION
    where = "created_at < $1 AND status IN ('succeeded', 'failed')"
    if tx.kind == "postgresql":
        # What was deleted, as deleted: a run whose output a trimming dropped meanwhile counts
        # none.
        rows = await tx.fetch(
            f"WITH gone AS (DELETE FROM function_runs WHERE {where} RETURNING app_id,"
            " output_bytes) SELECT app_id, SUM(output_bytes) AS size, COUNT(*) AS n FROM gone"
            " GROUP BY app_id",
            cutoff,
        )
    else:
        # The one writer holds the database: nothing changes between the two statements.
        rows = await tx.fetch(
            "SELECT app_id, SUM(output_bytes) AS size, COUNT(*) AS n FROM function_runs"
            f" WHERE {where} GROUP BY app_id",
            cutoff,
        )
        await tx.execute(f"DELETE FROM function_runs WHERE {where}", cutoff)
    count_kept(tx, [(row["app_id"], -int(row["size"])) for row in rows])
    return sum(int(row["n"]) for row in rows)
