"""One attempt of a delivery: its request's headers, the request sent, and its outcome.

An actor (``_actors.py``) hands an attempt its delivery, the send-time check that stands for it
(``queues.SendPlan``: the URL, the secrets that sign) and its webhook's client; the attempt
answers with the outcome to record. Three parts, each its own function:

- :func:`request_headers`: what the request carries, signed for this attempt in its endpoint's
  scheme (``_schemes.py``), with the event's cursor and the endpoint's own headers, a pure
  function of the delivery, its plan and the time;
- ``_post.post``: the transport (``_post.py``): the request on the webhook's keep-alive
  client, the head of the answer, its ``Retry-After``, what went wrong in the log's words;
- :func:`attempt_outcome`: what becomes of the delivery, a pure function of the delivery, the
  answer's status code and ``Retry-After``, the error, what the attempt made, the time, the
  retry delays and the jitter: delivered, retrying when the schedule (``_retry.py``) has a
  next attempt, failed when it has none or the receiver answered 410. :func:`refused` and
  :func:`retry_later` are the outcomes of deliveries not sent. An outcome of a delivery
  ordered by record says so (``ordered``): its end lets the next one about its record go.

Nothing here keeps state between attempts: the engine's semaphores and its webhooks' clients
(:func:`webhook_client`) are handed in.
"""

from __future__ import annotations

import functools
import math
import ssl
from collections.abc import Callable, Sequence

import httpcore
import trio

from ledgerport import apps, queues
from ledgerport.config import Config
from ledgerport.platform import Platform

from ._post import Headers, post
from ._retry import Jitter, jitter, schedule
from ._schemes import signature_headers
from ._transport import DeliveryClient

USER_AGENT = b"ledgerport-webhooks/1"


def webhook_client(
    config: Config, *, max_connections: int, resolver: apps.Resolver, ssl_context: ssl.SSLContext
) -> DeliveryClient:
    """A webhook's keep-alive client, ``max_connections`` at most, that connects only to the
    addresses a webhook may reach (any, in development)."""
    return DeliveryClient(
        max_connections=max_connections,
        allow=(
            (lambda _address: True)
            if config.development
            else functools.partial(apps.address_allowed, loopback=config.loopback_webhooks)
        ),
        resolver=resolver,
        ssl_context=ssl_context,
    )


# --- the request -------------------------------------------------------------------------------

URLS_KEPT = 1024
"""Webhook URLs whose parsed form is kept (:func:`parsed_url`)."""


@functools.lru_cache(maxsize=URLS_KEPT)
def parsed_url(url: str) -> httpcore.URL:
    """``url`` parsed, kept for the next attempt to the same URL: parsing took as long as
    signing the request (urllib's split and IDNA checks). The URL is read, never changed."""
    return httpcore.URL(url)


def host_header(url: httpcore.URL) -> bytes:
    """The Host header of a request to ``url``: its host, and its port unless the scheme's."""
    default = 443 if url.scheme == b"https" else 80
    if url.port is None or url.port == default:
        return url.host
    return b"%b:%d" % (url.host, url.port)


def request_headers(
    delivery: queues.ClaimedDelivery, plan: queues.SendPlan, *, url: httpcore.URL, timestamp: int
) -> Headers:
    """The headers of an attempt of ``delivery`` to ``url``, signed at ``timestamp`` (unix
    seconds) with the keys of ``plan`` in its endpoint's scheme (``_schemes.py``), in the order
    they are sent: ours, the event's cursor (a delivery of an event: its id, the ``after`` of
    the Events API that lists the events after it), then the endpoint's own headers, which
    never replace one of ours (``apps.header_problems`` refuses their names)."""
    headers = [
        (b"Host", host_header(url)),
        (b"User-Agent", USER_AGENT),
        # An answer's first bytes are kept for the attempt log: asked for uncompressed.
        (b"Accept-Encoding", b"identity"),
        (b"Content-Type", b"application/json"),
        (b"Content-Length", str(len(delivery.body)).encode()),
        (b"X-Webhook-Id", delivery.id.encode()),
        (b"X-Webhook-Event", delivery.type.encode()),
        *signature_headers(
            plan.scheme,
            plan.secrets,
            delivery_id=delivery.id,
            timestamp=timestamp,
            body=delivery.body,
        ),
    ]
    if delivery.event_id is not None:
        event_id = delivery.event_id.encode()
        headers += [(b"X-Webhook-Event-Id", event_id), (b"X-Webhook-Event-Cursor", event_id)]
    headers += [(name.encode(), value.encode()) for name, value in plan.headers]
    return headers


async def attempt(
    platform: Platform,
    client: Callable[[], DeliveryClient],
    plan: queues.SendPlan,
    delivery: queues.ClaimedDelivery,
    *,
    sending: trio.Semaphore,
    event_at: float | None,
    spread: Jitter | None = jitter,
) -> queues.AttemptOutcome:
    """Attempt ``delivery`` as ``plan`` says, on its webhook's ``client`` (made at the first
    attempt, which counts making it in its time); answers its outcome. ``event_at``: when the
    delivery's event was recorded, for its first attempt (the metrics' event lag); ``spread``:
    the retry delays' jitter (None: the schedule exactly)."""
    p = platform
    timeout = p.config.webhook_timeout
    url = parsed_url(plan.url)
    headers = request_headers(delivery, plan, url=url, timestamp=math.floor(p.now()))
    started_at = p.now()
    started = trio.current_time()
    if event_at is not None:
        p.metrics.delivery_event_lag.observe(max(started_at - event_at, 0.0))
    answer = await post(client(), url, headers, delivery.body, within=timeout, sending=sending)
    seconds = trio.current_time() - started
    p.metrics.delivery_attempt_seconds.observe(seconds)
    made = queues.AttemptMade(
        started_at=started_at,
        duration_ms=round(seconds * 1000, 3),
        response_body=answer.body,
        response_truncated=answer.truncated,
        request_headers=logged_headers(headers, plan),
    )
    return attempt_outcome(
        delivery,
        answer.code,
        answer.error,
        made,
        now=p.now(),
        delays=p.config.webhook_retry_delays,
        retry_after=answer.retry_after,
        spread=spread,
    )


ENDPOINT_VALUE = "[the endpoint's value]"
"""What the attempt log keeps of the value of a header the endpoint set (``headers``): an API
gateway's key is the receiver's secret, so the log names the header only."""


def logged_headers(headers: Headers, plan: queues.SendPlan) -> dict[str, str]:
    """The request's headers as the attempt log keeps them: ours as sent (the signature among
    them), the endpoint's own with their values left out."""
    own = {name.lower() for name, _ in plan.headers}
    return {
        name.decode("latin-1"): (
            ENDPOINT_VALUE if name.decode("latin-1").lower() in own else value.decode("latin-1")
        )
        for name, value in headers
    }


# --- the outcome -------------------------------------------------------------------------------


def attempt_outcome(
    delivery: queues.ClaimedDelivery,
    code: int | None,
    error: str | None,
    made: queues.AttemptMade,
    *,
    now: float,
    delays: Sequence[float],
    retry_after: str | None = None,
    spread: Jitter | None = jitter,
) -> queues.AttemptOutcome:
    """The outcome of an attempt of ``delivery`` that ended at ``now`` with the answer's status
    ``code`` (None: no answer) and ``error`` (None: it succeeded): delivered; else retrying at
    the next time the retry ``delays`` give, lengthened by ``spread`` (the jitter) and moved
    later by a 429 or 503's ``retry_after``; else, past the last of them or on a 410, failed
    for good (``_retry.schedule``)."""
    attempts = delivery.attempts + 1
    if error is None:
        status: queues.DeliveryStatus = "delivered"
        due = None
    else:
        due = schedule(
            attempts_made=attempts,
            failed_at=now,
            delays=delays,
            status=code,
            retry_after=retry_after,
            spread=spread,
        )
        status = "retrying" if due is not None else "failed"
    return queues.AttemptOutcome(
        delivery_id=delivery.id,
        lease=delivery.lease,
        status=status,
        attempts=attempts,
        response_code=code,
        error=error,
        finished_at=now,
        next_attempt_at=due,
        first_attempt_at=made.started_at,
        made=made,
        ordered=delivery.order_key is not None,
    )


def refused(delivery: queues.ClaimedDelivery, why: str, *, now: float) -> queues.AttemptOutcome:
    """The outcome of a delivery its send-time check refused (``why``): failed, not sent."""
    return queues.AttemptOutcome(
        delivery_id=delivery.id,
        lease=delivery.lease,
        status="failed",
        attempts=delivery.attempts,
        response_code=None,
        error=f"not sent: {why}",
        finished_at=now,
        next_attempt_at=None,
        first_attempt_at=None,
        ordered=delivery.order_key is not None,
    )


def retry_later(
    delivery: queues.ClaimedDelivery, why: str, *, now: float, after: float
) -> queues.AttemptOutcome:
    """The claim given back unattempted (``why``), due again ``after`` seconds from ``now``;
    the attempts made so far stand."""
    return queues.AttemptOutcome(
        delivery_id=delivery.id,
        lease=delivery.lease,
        status="retrying" if delivery.attempts else "queued",
        attempts=delivery.attempts,
        response_code=None,
        error=why,
        finished_at=now,
        next_attempt_at=now + after,
        first_attempt_at=None,
    )
