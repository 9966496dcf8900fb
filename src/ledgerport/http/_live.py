"""The live streams' machinery in one process: one listener for what the engine records, fanned
out to the open streams, and each stream's Server-Sent Events (contract.md: Live streams for the
console and the CLI; the routes are ``developer/streams.py``).

- **One listener a process.** The :class:`Broadcaster` listens on the two channels a recording
  notifies (``queues.ATTEMPTS_ENDED_CHANNEL``, ``queues.RUNS_ENDED_CHANNEL``: PostgreSQL's
  NOTIFY, the in-process signal on SQLite) while any stream is open, in a task of its own. A
  notification only marks its kind as due: it never waits on a stream.
- **One clock a kind.** A kind that was notified ticks once, on the next moment of the grid of
  :data:`READ_INTERVAL`, and the tick wakes every open stream of the kind at once: a busy
  engine's notifications merge into one tick, and one timer serves every stream (not one a
  stream).
- **Each stream reads for itself.** Woken, a stream reads what ended after its cursor with one
  indexed query (``queues.ended_after``), the one a ``Last-Event-ID`` resumes with, and sends
  it. Nothing is queued for a stream: one whose client reads slowly reads later, from its own
  cursor, so it holds up neither the broadcaster nor the engine, and ticks that come meanwhile
  merge into one read. The streams of an app that a tick wakes at the same cursor share a read
  and its rendering (each row written once as its event's bytes, and the page's bytes joined
  once).
- **Bounded.** At most :data:`STREAMS_PER_DEVELOPER` streams are open at once for a developer
  in a process; one more is refused with 429 (:class:`TooManyStreams`).
- **Heartbeats.** A stream that sent nothing for ``heartbeat`` seconds (15) sends a comment
  line, which keeps proxies from closing it and lets the client see it is alive.
- **Its end.** A client that leaves cancels its stream (quart-trio cancels the response when
  the client disconnects); the server's stop ends every stream (:func:`end_live_streams`), so
  the drain is not held up by them.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio
from quart_trio import QuartTrio

from ledgerport import queues
from ledgerport.storage import Store

from ._context import APP_STATE_PREFIX
from ._developer_bounds import STREAMS_PER_DEVELOPER, TooManyStreams

log = logging.getLogger("ledgerport.http.live")

HEARTBEAT = 15.0
"""Seconds a stream stays silent at most: then it sends a comment line."""
READ_INTERVAL = 1.0
"""Seconds between the ticks a stream reads on (one read a tick at most): a busy engine's
notifications merge, and the streams of an app share their reads. An event reaches its streams
within this of its end. A tick costs each stream a wake-up and a write to its socket whatever
it carries (a loopback write of a tick's events costs about 17 us plus 0.4 ns a byte), so a
tick a second rather than two halves what the streams take from a busy process
(docs/performance.md, Live streams)."""
HELD_RETRY = 0.5
"""Seconds before a stream reads again when a read held rows back (PostgreSQL: recorded by a
transaction younger than one still running) though nothing notifies."""
RECONNECT_MS = 3000
"""The ``retry:`` a stream tells an EventSource to wait before it reconnects."""


@dataclass
class Slot:
    """One open stream counted to its developer until :meth:`release` (idempotent)."""

    release_once: Callable[[], None]
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.release_once()

    def guard(self, body: object) -> None:
        """Release the slot when ``body`` (the stream's generator) is dropped without having
        run: a response that was never sent (its generator's own ``finally`` releases it
        otherwise)."""
        weakref.finalize(body, self.release)


@dataclass
class Broadcaster:
    """The process's one listener for ended attempts and runs, and its open streams."""

    store: Store
    now: Callable[[], float]
    """The platform's clock: what ended within RESUME_WINDOW of it is sent."""
    per_developer: int = STREAMS_PER_DEVELOPER
    heartbeat: float = HEARTBEAT
    read_interval: float = READ_INTERVAL
    held_retry: float = HELD_RETRY
    _streams: Counter[str] = field(default_factory=Counter)
    """The open streams of each kind."""
    _open: Counter[str] = field(default_factory=Counter)
    _listening: bool = False
    _idle: trio.Event = field(default_factory=trio.Event)
    _ended: trio.Event = field(default_factory=trio.Event)
    """Set when the server stops: every stream ends."""
    _generations: Counter[str] = field(default_factory=Counter)
    """Notifications of each kind so far: a read is shared with the streams woken before it
    began."""
    _due: dict[queues.StreamKind, trio.Event] = field(
        default_factory=lambda: {kind: trio.Event() for kind in queues.STREAM_KINDS}
    )
    """Set by a notification of the kind; its clock ticks next, then clears it."""
    _ticks: dict[queues.StreamKind, trio.Event] = field(
        default_factory=lambda: {kind: trio.Event() for kind in queues.STREAM_KINDS}
    )
    """Set by the kind's next tick (and then replaced): what its streams wait on."""
    _ticked: Counter[str] = field(default_factory=Counter)
    """The notifications of each kind its last tick came after (a generation)."""
    _reads: dict[queues.StreamKind, dict[tuple[str, queues.Cursor], _Read]] = field(
        default_factory=lambda: {kind: {} for kind in queues.STREAM_KINDS}
    )
    """Each kind's latest read by app and cursor (those done dropped when they pile up)."""

    @property
    def open_streams(self) -> int:
        return sum(self._open.values())

    def admit(self, developer_id: str) -> Slot:
        """Count a stream to ``developer_id``; TooManyStreams past the bound."""
        if self._open[developer_id] >= self.per_developer:
            raise TooManyStreams(self.per_developer)
        self._open[developer_id] += 1

        def release() -> None:
            self._open[developer_id] -= 1
            if self._open[developer_id] <= 0:
                del self._open[developer_id]

        return Slot(release)

    @contextmanager
    def subscribed(self, kind: queues.StreamKind) -> Iterator[None]:
        """Count a stream of ``kind`` open for as long as the context lasts: the broadcaster
        listens, and the kind's clock ticks, while any is."""
        self._streams[kind] += 1
        if not self._listening:
            self._listening = True
            self._idle = trio.Event()
            trio.lowlevel.spawn_system_task(self._listen, name="live streams broadcaster")
        try:
            yield
        finally:
            self._streams[kind] -= 1
            if not any(self._streams.values()):
                self._idle.set()

    def end_all(self) -> None:
        """The server stops: every stream ends once its read in progress is sent (and a new
        one as soon as it starts)."""
        self._ended.set()
        for kind in queues.STREAM_KINDS:
            self._tick(kind)

    def _wake(self, kind: queues.StreamKind) -> None:
        """A notification of ``kind``: its clock ticks next."""
        self._generations[kind] += 1
        self._due[kind].set()

    def _tick(self, kind: queues.StreamKind) -> None:
        """Wake every stream of ``kind``: what was notified so far is theirs to read."""
        self._ticked[kind] = self._generations[kind]
        tick, self._ticks[kind] = self._ticks[kind], trio.Event()
        tick.set()

    async def _clock(self, kind: queues.StreamKind) -> None:
        """The kind's one timer: after a notification, a tick on the next moment of the grid
        of ``read_interval`` (the notifications that come meanwhile merge into it)."""
        while True:
            await self._due[kind].wait()
            await trio.sleep_until(_next_tick(trio.current_time(), self.read_interval))
            self._due[kind] = trio.Event()
            self._tick(kind)

    async def _ticked_after(self, kind: queues.StreamKind, generation: int) -> None:
        """Return at the first tick of ``kind`` that came after notifications beyond
        ``generation`` (or at once if one did already), or when the server stops."""
        while self._ticked[kind] <= generation and not self._ended.is_set():
            await self._ticks[kind].wait()

    async def _listen(self) -> None:
        """Listen, and run each kind's clock, while streams are open. A system task (not one of
        a request's nursery): it serves every stream, whichever opened first. A stream may read
        before the listening has begun, so every stream is woken once it has: what was recorded
        meanwhile is read then."""
        try:
            async with AsyncExitStack() as stack:
                for kind in queues.STREAM_KINDS:
                    await stack.enter_async_context(
                        self.store.listen(queues.STREAM_CHANNELS[kind], _waker(self, kind))
                    )
                async with trio.open_nursery() as clocks:
                    for kind in queues.STREAM_KINDS:
                        clocks.start_soon(self._clock, kind)
                    for kind in queues.STREAM_KINDS:
                        self._wake(kind)
                    while any(self._streams.values()):
                        await self._idle.wait()
                        self._idle = trio.Event()
                    clocks.cancel_scope.cancel()
        except Exception:  # a system task's exception would end the whole process
            log.exception("live streams: listening stopped")
        finally:
            self._listening = False
        if any(self._streams.values()) and not self._ended.is_set():
            # A stream came while listening ended: listen again for it.
            self._listening = True
            self._idle = trio.Event()
            trio.lowlevel.spawn_system_task(self._listen, name="live streams broadcaster")

    async def events(
        self,
        kind: queues.StreamKind,
        app_id: str,
        start: queues.StreamStart,
        *,
        slot: Slot,
        render: Callable[[Sequence[Any]], bytes],
    ) -> AsyncIterator[bytes]:
        """The stream's bytes: what ended after ``start`` (within RESUME_WINDOW; not what it
        had seen when it started), as it ends, each row of :attr:`queues.Ended.rows` as the
        event ``render`` writes (with the row's cursor as its id), and a comment line when
        nothing was sent for ``heartbeat`` seconds. Ends when the server stops; releases
        ``slot`` however it ends."""
        try:
            with self.subscribed(kind):
                # At once: the answer's head goes out with its first bytes.
                yield f"retry: {RECONNECT_MS}\n: live {kind}\n\n".encode()
                sent_at = trio.current_time()
                cursor, seen = start.cursor, start.seen
                needed = self._generations[kind]
                fresh_after = -math.inf
                while True:
                    held = False
                    while True:
                        page = await self._page(kind, app_id, cursor, needed, fresh_after, render)
                        if page.last is not None:  # it has events
                            cursor = page.last
                            if seen:
                                data = b"".join(
                                    event
                                    for row, event in zip(page.rows, page.events, strict=True)
                                    if queues.row_cursor(row) not in seen
                                )
                                if cursor >= max(seen):
                                    seen = frozenset()
                            else:
                                data = page.data  # joined once for every stream it serves
                            if data:
                                yield data
                                sent_at = trio.current_time()
                        held = page.held
                        if not page.full:
                            break
                    if self._ended.is_set():
                        return
                    beat_at = sent_at + self.heartbeat
                    retry_at = _next_tick(trio.current_time() + self.held_retry, self.read_interval)
                    with trio.move_on_at(min(beat_at, retry_at) if held else beat_at):
                        await self._ticked_after(kind, needed)
                    if self._ended.is_set():
                        return
                    # A read begun at this tick (or later) holds what its notifications
                    # announced: the streams it woke share the first one.
                    needed = self._ticked[kind]
                    # Rows held back are looked for again by a read begun after the retry's tick
                    # (shared with the streams retrying on it), though nothing notified.
                    retried = held and trio.current_time() >= retry_at
                    fresh_after = retry_at if retried else -math.inf
                    if trio.current_time() >= beat_at:
                        yield b": heartbeat\n\n"
                        sent_at = trio.current_time()
        finally:
            slot.release()

    async def _page(
        self,
        kind: queues.StreamKind,
        app_id: str,
        cursor: queues.Cursor,
        needed: int,
        fresh_after: float,
        render: Callable[[Sequence[Any]], bytes],
    ) -> _Page:
        """What ended after ``cursor``, as the stream sends it. Streams of an app that stand at
        the same cursor share a read and its rendering: one begun at generation ``needed`` or
        later (after the notifications the stream was woken by: it holds what they announced)
        and at ``fresh_after`` or later; a notification that comes after wakes the stream
        again."""
        reads = self._reads[kind]
        key = (app_id, cursor)
        shared = reads.get(key)
        if shared is not None and shared.generation >= needed and shared.begun >= fresh_after:
            await shared.done.wait()
            if shared.page is not None:
                return shared.page
        if len(reads) > 4 * self._streams[kind] + 16:
            for old in [old for old, read in reads.items() if read.done.is_set()]:
                del reads[old]
        read = _Read(self._generations[kind], trio.current_time())
        reads[key] = read
        try:
            async with self.store.transaction(reads=True, background=True) as tx:
                ended = await queues.ended_after(
                    tx,
                    kind,
                    app_id,
                    cursor,
                    since=self.now() - queues.RESUME_WINDOW,
                    postgresql=tx.kind == "postgresql",
                )
            read.page = _Page(ended.rows, [render(row) for row in ended.rows], ended)
            return read.page
        finally:
            read.done.set()


class _Page:
    """One read as sent: its rows and each one's event (bytes), in cursor order, where it
    leaves a stream, and whether to read again soon (rows held back) or at once (the page came
    full)."""

    __slots__ = ("data", "events", "full", "held", "last", "rows")

    def __init__(self, rows: Sequence[Sequence[Any]], events: list[bytes], ended: queues.Ended):
        self.rows = rows
        self.events = events
        self.held = ended.held
        self.full = ended.full
        self.last = ended.last
        """The cursor of the last row (None: the page is empty): only its own is made, as a
        stream's start past rows it had seen needs the others' (:attr:`StreamStart.seen`)."""
        self.data = b"".join(events)
        """Every event's bytes, joined: what each stream that has seen none of them sends."""


@dataclass
class _Read:
    """A read of one app's stream from one cursor, begun at a generation of notifications;
    ``page`` once it is done (None: it failed or was cancelled)."""

    generation: int
    begun: float
    done: trio.Event = field(default_factory=trio.Event)
    page: _Page | None = None


def _next_tick(after: float, interval: float) -> float:
    """The first moment past ``after`` on the grid of ``interval``: every stream reads on the
    same ticks, so the streams of an app that stand at the same cursor share their reads."""
    return (math.floor(after / interval) + 1) * interval


def _waker(broadcaster: Broadcaster, kind: queues.StreamKind) -> Callable[[], None]:
    return lambda: broadcaster._wake(kind)


_EVENT_NAMES: dict[queues.StreamKind, bytes] = {"deliveries": b"delivery", "runs": b"run"}


def live_event(kind: queues.StreamKind, cursor: queues.Cursor, data: bytes) -> bytes:
    """An event of a stream of ``kind``: its cursor as ``id:``, its name, ``data`` (one line),
    and the blank line that ends it."""
    return b"id: %d-%d\nevent: %s\ndata: %s\n\n" % (*cursor, _EVENT_NAMES[kind], data)


def event_data(item: object) -> bytes:
    """An event's ``data:``, one line of JSON in UTF-8 (compact, as written by ``json.dumps``
    with no spaces and ``ensure_ascii=False``: orjson writes it several times faster, once for
    all the streams a read serves)."""
    return orjson.dumps(item)


BROADCASTER_KEY = f"{APP_STATE_PREFIX}{Broadcaster.__qualname__}"


def end_live_streams(app: QuartTrio) -> None:
    """The server stops: end the application's open streams, so the drain does not wait for
    them (clients reconnect to another process, resuming with ``Last-Event-ID``)."""
    broadcaster = app.extensions.get(BROADCASTER_KEY)
    if isinstance(broadcaster, Broadcaster):
        broadcaster.end_all()
