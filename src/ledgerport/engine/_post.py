"""The transport of one attempt: the request sent on its webhook's keep-alive client
(``_transport.py``), holding one of the engine's SENDING_AT_ONCE slots until it is written
(:class:`SendSlot`), and the head of the answer read, at most RESPONSE_READ_LIMIT bytes
(:func:`read_head`), all within the webhook timeout; what went wrong said in the attempt log's
words (:func:`attempt_error`), and the answer's ``Retry-After`` kept for the schedule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpcore
import trio

from ledgerport import queues

from ._transport import DELIVERY_ERRORS, DeliveryClient, DeliveryResponse, stop_reading

SENDING_AT_ONCE = 16
"""Attempts connecting and writing their request at once, across webhooks; an attempt waiting
for its answer holds no slot. Started all at once, hundreds of attempts (a flood's timeouts
end together) would each take a turn in every pass of the event loop until written, and every
request the process serves waits through those passes: measured, a loop task's ten steps took
60 to 130 ms during 160 unpaced starts and under 10 ms with 16 at a time, which also sent all
160 sooner. The slots are taken first come, first served."""
RESPONSE_READ_LIMIT = queues.RESPONSE_BODY_KEPT
"""Bytes of a receiver's answer read (and kept for the attempt log); beyond them nothing more
is read and the connection is closed, so an endless or huge answer costs the engine no more
than this (and its connection's read buffer) for as long as the attempt's timeout."""

Headers = list[tuple[bytes, bytes]]


async def take_slot(slots: trio.Semaphore) -> None:
    """A slot of ``slots``, without a pass through the scheduler when one is free (``acquire``
    always yields: twice per attempt, each a wait for a whole pass of a busy loop)."""
    try:
        slots.acquire_nowait()
    except trio.WouldBlock:
        await slots.acquire()


class SendSlot:
    """One of the engine's SENDING_AT_ONCE slots, held by an attempt from before it connects
    until its request is written (:meth:`written`, which the client calls) or the attempt
    ends."""

    def __init__(self, slots: trio.Semaphore) -> None:
        self._slots = slots
        self._held = False

    async def __aenter__(self) -> SendSlot:
        await take_slot(self._slots)
        self._held = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.written()

    def written(self) -> None:
        """The request is written: the attempt only waits for its answer now."""
        if self._held:
            self._held = False
            self._slots.release()


@dataclass(frozen=True)
class Answer:
    """What an attempt got from its receiver."""

    code: int | None
    """The answer's status code (None: no answer)."""
    error: str | None
    """Why the attempt failed, in the attempt log's words (None: it did not)."""
    body: bytes
    """The answer's body, its first RESPONSE_READ_LIMIT bytes at most."""
    truncated: bool
    """Whether the body may go on past what was kept."""
    retry_after: str | None = None
    """The answer's Retry-After header, as sent (None: none)."""


async def read_head(
    response: DeliveryResponse, kept: bytearray, *, limit: int = RESPONSE_READ_LIMIT
) -> bool:
    """Read the answer's body into ``kept``, ``limit`` bytes at most, and nothing more from the
    receiver (``stop_reading``); answers whether the body may go on past what was kept (more
    arrived, or it was not read to its end)."""
    stopped = False
    more = False
    try:
        while chunk := await response.chunk():
            room = limit - len(kept)
            kept += chunk[:room]
            more = more or len(chunk) > room
            if len(kept) == limit and not stopped:
                stopped = True
                if not stop_reading(response):
                    return True
    except httpcore.ReadError:
        if not stopped:
            raise
        return True
    return more


def reason(exc: BaseException) -> str:
    """What an attempt's failure says, for the attempt log: its own words, else its causes'
    (a refused certificate reaches the engine as an httpcore error of no words, raised from
    trio's, raised from the ``ssl`` error that says what was wrong), else its type's name."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if str(cause):
            return str(cause)
        # As a traceback reads the chain: the cause, else the context unless suppressed.
        context = None if cause.__suppress_context__ else cause.__context__
        cause = cause.__cause__ or context
    return type(exc).__name__


def attempt_error(
    code: int | None, error: str | None, *, timed_out: bool, timeout: float
) -> str | None:
    """Why an attempt failed, as its log says it (None: it did not): the webhook timeout ran
    out (``timed_out``), before an answer or while its body was read; else an answer's status
    code other than 2xx; else ``error``, the connection's failure (None: there was none)."""
    if timed_out:
        if code is None:
            return f"timeout: no answer within {timeout:g} s"
        return f"timeout: the answer's body did not end within {timeout:g} s"
    if code is not None and not 200 <= code < 300:
        return f"HTTP {code}"
    return error


async def post(
    client: DeliveryClient,
    url: httpcore.URL,
    headers: Headers,
    body: bytes,
    *,
    within: float,
    sending: trio.Semaphore,
) -> Answer:
    """POST ``body`` to ``url`` on ``client`` and read the head of the answer, all within
    ``within`` seconds (the webhook timeout), holding a slot of ``sending`` until the request
    is written."""
    timeout = within
    code: int | None = None
    error: str | None = None
    kept = bytearray()
    truncated = False
    retry_after: str | None = None
    async with SendSlot(sending) as slot:
        with trio.move_on_after(timeout) as deadline:
            try:
                async with client.stream(
                    url, headers=headers, content=body, written=slot.written
                ) as response:
                    code = response.status
                    retry_after = _header(response.headers, b"retry-after")
                    truncated = await read_head(response, kept)
            except DELIVERY_ERRORS as exc:
                error = f"connection error: {reason(exc)}"[:500]
    timed_out = deadline.cancelled_caught
    if timed_out:
        truncated = code is not None  # its body was not read to its end
    error = attempt_error(code, error, timed_out=timed_out, timeout=timeout)
    return Answer(code, error, bytes(kept), truncated, retry_after)


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (lowercase) among ``headers``, if any."""
    for key, value in headers:
        if key.lower() == name:
            return value[:100].decode("latin-1")
    return None
