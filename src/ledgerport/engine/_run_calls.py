"""A hosted-function run's calls to the data API, made through the runner while the run goes on.

The sandbox pool hands each call of a run's ``context.api`` to the runner, which answers it
with the data API and the run's own access token (minted in the transaction that claimed the
run, revoked in the one that records its end; without one the call answers 503). A call refused
for a rate limit (429) waits for the budget when its Retry-After ends within the run's wall
limit, then goes again; otherwise the handler gets the 429, and should the run then fail by
throwing that very refusal, it goes again after the Retry-After (``_run_outcome.py``). Either
way the run's log says so, naming the budget: the platform's notes, MAX_NOTES at most a run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import trio

from ledgerport import catalog
from ledgerport.runtime import ApiAnswer, ApiCall, DataApi, RunLimits, RunRequest, bounded

from ._run_outcome import RunNote

MAX_NOTES = 80
"""What the platform adds to one run's log at most: room for a line per fetch a run may make
(``_egress.py``, 50 at most) beside the notes of its data API calls."""


class RunCalls:
    """The data API calls of the runs going on (see the module docstring). ``tokens`` and
    ``deadlines``, the runner's: each run's token, and when it reaches its wall limit (trio's
    clock), while it goes on."""

    def __init__(
        self,
        api: DataApi | None,
        limits: RunLimits,
        *,
        tokens: Mapping[str, str],
        deadlines: Mapping[str, float],
    ) -> None:
        self._api = api
        self._limits = limits
        self._tokens = tokens
        self._deadlines = deadlines
        self._notes: dict[str, list[RunNote]] = {}
        """What the platform tells a run's log (a rate-limited call), by run id."""
        self._held_back: dict[str, dict[str | None, float]] = {}
        """Runs whose call was refused for a rate limit they could not wait out: by the error
        the handler's throwing that refusal ends the run with, its Retry-After, after which
        such a failed run goes again."""

    def notes(self, run_id: str) -> list[RunNote]:
        """What the platform told the run's log so far."""
        return self._notes.get(run_id, [])

    def held_back(self, run_id: str) -> Mapping[str | None, float]:
        """The errors the run ends with by throwing a refusal it could not wait out, each with
        that refusal's Retry-After."""
        return self._held_back.get(run_id, {})

    def forget(self, run_id: str) -> None:
        """The run ended and was recorded."""
        self._notes.pop(run_id, None)
        self._held_back.pop(run_id, None)

    async def call(self, request: RunRequest, call: ApiCall) -> ApiAnswer:
        """Answer a call of the run ``request`` (see the module docstring). What the platform
        tells the run's log about it goes after the lines the handler had logged when it
        called, at the call's time on its clock plus the whole milliseconds since it was made
        (never later than a line it logs once answered)."""
        made = trio.current_time()

        def at() -> int:
            return call.at + int((trio.current_time() - made) * 1000)

        answer = await self._call_once(request, call)
        while answer.status == 429 and answer.retry_after is not None:
            deadline = self._deadlines.get(request.run_id, 0.0)
            refused = f"context.api {call.method} {call.path}: 429, {budget(answer)}"
            if trio.current_time() + answer.retry_after >= deadline:
                held = self._held_back.setdefault(request.run_id, {})
                held[self._thrown(call, answer)] = answer.retry_after
                self.note(
                    request.run_id,
                    f"{refused}; its Retry-After ({answer.retry_after:g} s) ends past the run's"
                    " wall limit: answered to the handler, and a run that fails by throwing it"
                    " goes again after it",
                    at=at(),
                    after=call.lines,
                )
                return answer
            self.note(
                request.run_id,
                f"{refused}; waited {answer.retry_after:g} s for its budget and called again",
                at=at(),
                after=call.lines,
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
        return bounded(self._limits, ok=False, result=None, logs=[], error=error, limit=None).error

    def note(self, run_id: str, note: str, *, at: int | None = None, after: int = 0) -> None:
        """Tell the run's log ``note``, as the platform (MAX_NOTES at most), written ``at``
        milliseconds after the run started (default: now), after the run's first ``after``
        lines."""
        notes = self._notes.setdefault(run_id, [])
        if len(notes) < MAX_NOTES:
            if at is None:
                started = self._deadlines.get(run_id, trio.current_time()) - self._limits.wall
                at = max(round((trio.current_time() - started) * 1000), 0)
            notes.append(RunNote(at, after, f"[ledgerport] {note}"))

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


def budget(answer: ApiAnswer) -> str:
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
