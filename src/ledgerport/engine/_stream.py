"""Stream endpoints' half of the delivery engine: a listener (``ledgerport listen``) pulls the
deliveries of its endpoint and reports each answer, which becomes the delivery's attempt.

A delivery of a stream endpoint is fanned out, checked, signed, logged, retried and counted to
its endpoint's health as any other; only its transport differs. Instead of an actor POSTing it,
a pull (:func:`pull_stream`) leases what is due (``queues.lease_stream``), makes the send-time
check (``queues.send_plans``: a delivery it refuses fails unsent, as an actor's would) and
answers each with the headers an attempt would send now (:func:`request_headers`), signed in
the endpoint's scheme. The listener forwards it and reports the answer (:func:`report_stream`):
the outcome is the one an attempt of the engine would have (:func:`attempt_outcome`: delivered,
retrying on the webhook retry schedule with its jitter and ``Retry-After``, failed after the
last attempt or on a 410), recorded with the endpoint's health in one transaction
(``_lifecycle.record_batch``); a retry is due for the listener at the time the schedule gives.

What a listener holds is bounded (``queues.STREAM_HELD`` leased at once) and takes nothing of the
engine's shares; a delivery waits for its listener without using attempts, for as long as the
endpoint lives (``apps.STREAM_ABANDONED`` without a pull ends it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from ledgerport import queues
from ledgerport.platform import Platform
from ledgerport.queues import Pulled, Reported, StreamReport
from ledgerport.storage import Transaction

from ._attempt import attempt_outcome, logged_headers, parsed_url, refused, request_headers
from ._lifecycle import count_switched_off, record_batch
from ._post import Headers, attempt_error
from ._retry import Jitter, jitter

NOT_FORWARDED = frozenset({b"host", b"content-length"})
"""Headers of an attempt a listener does not forward as they are: its own request has its
own."""


def _forwarded(headers: Headers) -> list[tuple[str, str]]:
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in headers
        if name.lower() not in NOT_FORWARDED
    ]


async def pull_stream(
    platform: Platform, tx: Transaction, *, webhook_id: str, limit: int
) -> list[Pulled]:
    """Lease what is due of the stream endpoint (at most ``limit``), in ``tx``: those the
    send-time check refuses fail unsent; the others are answered signed as at ``now``. The
    endpoint is seen (``apps.stream_pulled``) by the caller."""
    p = platform
    now = p.now()
    lease = queues.new_stream_lease()
    claimed = await queues.lease_stream(
        tx, webhook_id=webhook_id, now=now, limit=limit, lease=lease
    )
    if not claimed:
        return []
    plan = await queues.send_plan(tx, p.keyring, now=now, webhook_id=webhook_id, deliveries=claimed)
    outcomes = [refused(d, plan.refusals[d.id], now=now) for d in claimed if d.id in plan.refusals]
    if outcomes:
        await _record(p, tx, webhook_id, outcomes, [None] * len(outcomes))
    url = parsed_url(plan.url)
    timestamp = math.floor(now)
    until = now + queues.STREAM_LEASE
    return [
        Pulled(d, _forwarded(request_headers(d, plan, url=url, timestamp=timestamp)), until)
        for d in claimed
        if d.id not in plan.refusals
    ]


async def report_stream(
    platform: Platform,
    tx: Transaction,
    *,
    webhook_id: str,
    reports: Sequence[StreamReport],
    spread: Jitter | None = jitter,
) -> list[Reported]:
    """Record the answers ``reports`` give as the attempts of the deliveries they name, in
    ``tx``; a report whose lease no longer holds (reported already, or run out and leased
    again) records nothing."""
    p = platform
    now = p.now()
    held = await queues.leased(
        tx, webhook_id=webhook_id, reports=[(r.delivery_id, r.lease) for r in reports]
    )
    plan = None
    if held:
        plan = await queues.send_plan(
            tx, p.keyring, now=now, webhook_id=webhook_id, deliveries=[d for d, _ in held.values()]
        )
    outcomes: list[queues.AttemptOutcome] = []
    due: list[float | None] = []
    answers: list[Reported] = []
    for report in reports:
        found = held.pop(report.delivery_id, None)
        if found is None or plan is None:
            answers.append(Reported(report.delivery_id, recorded=False))
            continue
        delivery, leased_at = found
        # As the pull signed it (the listener forwards what it was given).
        headers = request_headers(
            delivery, plan, url=parsed_url(plan.url), timestamp=math.floor(leased_at)
        )
        started_at = max(now - report.duration_ms / 1000, leased_at)
        made = queues.AttemptMade(
            started_at=started_at,
            duration_ms=report.duration_ms,
            response_body=report.response_body,
            response_truncated=report.response_truncated,
            request_headers=logged_headers(headers, plan),
        )
        error = attempt_error(report.response_code, report.error, timed_out=False, timeout=0.0) or (
            None if report.response_code is not None else "connection error: no answer"
        )
        outcome = attempt_outcome(
            delivery,
            report.response_code,
            error,
            made,
            now=now,
            delays=p.config.webhook_retry_delays,
            retry_after=report.retry_after,
            spread=spread,
        )
        # Due for the listener, never for an engine's claim.
        outcomes.append(dataclasses.replace(outcome, next_attempt_at=None))
        due.append(outcome.next_attempt_at)
        answers.append(
            Reported(delivery.id, True, outcome.status, outcome.attempts, outcome.next_attempt_at)
        )
    await _record(p, tx, webhook_id, outcomes, due)
    return answers


async def _record(
    platform: Platform,
    tx: Transaction,
    webhook_id: str,
    outcomes: Sequence[queues.AttemptOutcome],
    due: Sequence[float | None],
) -> None:
    if not outcomes:
        return
    switched_off = await record_batch(
        tx,
        [("", webhook_id, outcome) for outcome in outcomes],
        now=platform.now(),
        disable_after=platform.config.webhook_disable_after,
    )
    await queues.set_stream_due(
        tx, [(o.delivery_id, at) for o, at in zip(outcomes, due, strict=True)]
    )
    count_switched_off(platform.metrics, switched_off)


class StreamDesk:
    """:func:`pull_stream` and :func:`report_stream` on ``platform``: what the console API's
    stream routes reach (``queues.StreamDesk``; ``Platform.stream_desk``)."""

    def __init__(self, platform: Platform, *, spread: Jitter | None = jitter) -> None:
        self._platform = platform
        self._spread = spread

    async def pull(self, tx: Transaction, *, webhook_id: str, limit: int) -> list[Pulled]:
        return await pull_stream(self._platform, tx, webhook_id=webhook_id, limit=limit)

    async def report(
        self, tx: Transaction, *, webhook_id: str, reports: Sequence[StreamReport]
    ) -> list[Reported]:
        return await report_stream(
            self._platform, tx, webhook_id=webhook_id, reports=reports, spread=self._spread
        )
