"""The frames between the pool and a sandbox worker, one definition for both ends of the pipe.

On the wire a frame is a 4-byte big-endian length, then that many bytes of msgpack encoding one
map whose ``op`` names the frame's type. Both sides refuse a frame over MAX_FRAME bytes, and
:func:`decode_frame` refuses a map that is not exactly one of the types below (an unknown op, a
field missing or of the wrong type): nothing else reaches either side's logic.

Pool to worker: :class:`Run`, :class:`ApiResult`, :class:`FetchResult`. Worker to pool:
:class:`Ready`, :class:`Api`, :class:`Fetch`, :class:`Done`. Every frame of a run names it
(``run``): the pool answers an :class:`Api` or :class:`Fetch` frame only when it names the run
going on, and refuses any other (see ``_pool.py``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeAlias

import msgpack
import trio

MAX_FRAME = 16 * 1024 * 1024
"""Bytes of one frame's msgpack at most (a run's event, script, logs and result fit in it)."""
_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size


class SandboxError(Exception):
    """Root of the hosted-function runtime's errors."""


class FrameError(SandboxError):
    """The other side sent something that is not a frame of this protocol (or closed in the
    middle of one)."""


class WorkerStartFailed(SandboxError):
    """A sandbox worker did not report that V8 was up."""


@dataclass(frozen=True)
class Ready:
    """Worker to pool, once: V8 is up."""

    op: ClassVar[str] = "ready"
    pid: int


@dataclass(frozen=True)
class Run:
    """Pool to worker: run ``script`` (a compiled module, ``apps.compile_module``) on
    ``event`` (JSON text)."""

    op: ClassVar[str] = "run"
    run: str
    key: str
    """The function version: runs of one key share an isolate, no two keys ever do."""
    script: str
    event: str
    cpu: float
    heap: int
    log: int
    result: int
    secrets: dict[str, str] = field(default_factory=dict)
    """The placeholder ``context.secret(name)`` answers, by name: drawn for this run, meaning
    nothing outside it (the values never enter a worker)."""


@dataclass(frozen=True)
class Api:
    """Worker to pool: the run ``run`` calls the data API (``context.api``) and waits for the
    :class:`ApiResult` of ``call``."""

    op: ClassVar[str] = "api"
    run: str
    call: int
    method: str
    path: str
    body: str | None
    """JSON text, or None."""
    at: int = 0
    """When the guest called, in milliseconds after its handler was called."""
    lines: int = 0
    """How many lines the guest had logged when it called."""


@dataclass(frozen=True)
class ApiResult:
    """Pool to worker: the answer to the :class:`Api` frame ``call`` of the run ``run``."""

    op: ClassVar[str] = "api_result"
    run: str
    call: int
    status: int
    body: Any


@dataclass(frozen=True)
class Fetch:
    """Worker to pool: the run ``run`` fetches ``url`` (``context.fetch``) and waits for the
    :class:`FetchResult` of ``call``. ``headers`` are [name, value] pairs as the guest wrote
    them (placeholders and all)."""

    op: ClassVar[str] = "fetch"
    run: str
    call: int
    method: str
    url: str
    headers: list[list[str]]
    body: str | None
    at: int = 0
    """When the guest called it, in milliseconds after its handler was called (its log's
    clock, so the platform's line about the fetch goes in its place among the guest's)."""
    lines: int = 0
    """How many lines the guest had logged when it called."""


@dataclass(frozen=True)
class FetchResult:
    """Pool to worker: the answer to the :class:`Fetch` frame ``call`` of the run ``run``:
    ``error`` when there is none (a refusal or a failure, naming the host only), else its
    status, headers ([name, value] pairs) and body as text."""

    op: ClassVar[str] = "fetch_result"
    run: str
    call: int
    status: int
    headers: list[list[str]]
    body: str
    error: str | None


@dataclass(frozen=True)
class Done:
    """Worker to pool: the run ``run`` is over, and nothing it started is pending."""

    op: ClassVar[str] = "done"
    run: str
    ok: bool
    result: str | None
    """The handler's answer as JSON text (None when it answered nothing)."""
    logs: list[str] = field(default_factory=list)
    error: str | None = None
    limit: str | None = None
    """The limit the run broke (cpu, wall, heap, log, result), if any."""
    stack: str | None = None
    """The stack of what the handler threw, when it threw an Error."""
    log_times: list[int] = field(default_factory=list)
    """When each log line was written, in milliseconds after the handler was called."""
    cpu_ms: float = 0.0
    clean: bool = True
    """False when the worker saw something outside the run try to act (a call of another run,
    work left behind): the pool recycles the worker before it serves anyone else."""


Frame: TypeAlias = Ready | Run | Api | ApiResult | Fetch | FetchResult | Done
_TYPES: dict[str, type[Frame]] = {
    kind.op: kind for kind in (Ready, Run, Api, ApiResult, Fetch, FetchResult, Done)
}
_NAMES: dict[type[Frame], frozenset[str]] = {
    kind: frozenset(f.name for f in fields(kind)) for kind in _TYPES.values()
}
_ANY = object()
"""A field that may hold any msgpack value (an API answer's body)."""
_FIELD_TYPES: dict[type[Frame], dict[str, Any]] = {
    Ready: {"pid": int},
    Run: {
        "run": str,
        "key": str,
        "script": str,
        "event": str,
        "cpu": (int, float),
        "heap": int,
        "log": int,
        "result": int,
        "secrets": dict,
    },
    Api: {
        "run": str,
        "call": int,
        "method": str,
        "path": str,
        "body": (str, type(None)),
        "at": int,
        "lines": int,
    },
    ApiResult: {"run": str, "call": int, "status": int, "body": _ANY},
    Fetch: {
        "run": str,
        "call": int,
        "method": str,
        "url": str,
        "headers": list,
        "body": (str, type(None)),
        "at": int,
        "lines": int,
    },
    FetchResult: {
        "run": str,
        "call": int,
        "status": int,
        "headers": list,
        "body": str,
        "error": (str, type(None)),
    },
    Done: {
        "run": str,
        "ok": bool,
        "result": (str, type(None)),
        "logs": list,
        "error": (str, type(None)),
        "limit": (str, type(None)),
        "stack": (str, type(None)),
        "log_times": list,
        "cpu_ms": (int, float),
        "clean": bool,
    },
}


def encode_frame(frame: Frame) -> bytes:
    """``frame`` on the wire: its length, then its msgpack."""
    message: dict[str, Any] = {"op": frame.op}
    for name in _NAMES[type(frame)]:
        message[name] = getattr(frame, name)
    payload: bytes = msgpack.packb(message, use_bin_type=True)
    if len(payload) > MAX_FRAME:
        raise FrameError(f"frame of {len(payload)} bytes is over {MAX_FRAME}")
    return _HEADER.pack(len(payload)) + payload


def decode_frame(payload: bytes) -> Frame:
    """The frame ``payload`` (a frame's msgpack) holds; FrameError unless it is exactly one of
    the protocol's types."""
    try:
        message = msgpack.unpackb(payload, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise FrameError(f"undecodable frame: {exc}") from exc
    if not isinstance(message, dict):
        raise FrameError("a frame must hold a map")
    op = message.pop("op", None)
    kind = _TYPES.get(op) if isinstance(op, str) else None
    if kind is None:
        raise FrameError("a frame must name a known op")
    expected = _FIELD_TYPES[kind]
    names = _NAMES[kind]
    if message.keys() != names:
        raise FrameError(f"a {kind.op} frame has the fields {sorted(names)}")
    for name, value in message.items():
        allowed = expected[name]
        if allowed is _ANY:
            continue
        # bool is an int to Python: an int field takes no bool.
        if isinstance(value, bool) and allowed is not bool and bool not in _as_tuple(allowed):
            raise FrameError(f"{kind.op}.{name} has the wrong type")
        if not isinstance(value, allowed):
            raise FrameError(f"{kind.op}.{name} has the wrong type")
    if kind is Done and not all(isinstance(line, str) for line in message["logs"]):
        raise FrameError("done.logs must hold strings")
    if kind is Done and not all(type(time) is int for time in message["log_times"]):
        raise FrameError("done.log_times must hold integers")
    if kind is Run and not all(
        isinstance(name, str) and isinstance(value, str)
        for name, value in message["secrets"].items()
    ):
        raise FrameError("run.secrets must map names to strings")
    if kind in (Fetch, FetchResult) and not all(
        is_header_pair(pair) for pair in message["headers"]
    ):
        raise FrameError(f"{kind.op}.headers must hold [name, value] pairs of strings")
    return kind(**message)


def is_header_pair(pair: Any) -> bool:
    """Whether ``pair`` is a header as frames carry it: ``[name, value]``, two strings."""
    return (
        isinstance(pair, list)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], str)
    )


def _as_tuple(allowed: Any) -> tuple[type, ...]:
    return allowed if isinstance(allowed, tuple) else (allowed,)


def frame_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise FrameError(f"frame of {length} bytes announced, over {MAX_FRAME}")
    return int(length)


class FrameReader:
    """Frames from a trio byte stream (a worker's stdout)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def _fill(self, size: int) -> bool:
        """Read until ``size`` bytes are buffered; False at a clean end of stream."""
        while len(self._buffer) < size:
            chunk = await self._stream.receive_some(max(65536, size - len(self._buffer)))
            if not chunk:
                if self._buffer:
                    raise FrameError("stream ended in the middle of a frame")
                return False
            self._buffer += chunk
        return True

    async def receive(self) -> Frame | None:
        """The next frame; None when the stream ended between frames."""
        if not await self._fill(HEADER_SIZE):
            return None
        length = frame_length(bytes(self._buffer[:HEADER_SIZE]))
        if not await self._fill(HEADER_SIZE + length):
            raise FrameError("stream ended in the middle of a frame")
        payload = bytes(self._buffer[HEADER_SIZE : HEADER_SIZE + length])
        del self._buffer[: HEADER_SIZE + length]
        return decode_frame(payload)
