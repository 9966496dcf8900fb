"""Frames between the engine and a sandbox worker: a 4-byte big-endian length, then that many
bytes of msgpack encoding one map. Both sides refuse a frame over MAX_FRAME bytes."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import trio

MAX_FRAME = 16 * 1024 * 1024
"""Bytes of one frame's msgpack at most (a run's event, script, logs and result fit in it)."""
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The other side sent something that is not a frame (or closed in the middle of one)."""


def encode_frame(message: dict[str, Any]) -> bytes:
    payload: bytes = msgpack.packb(message, use_bin_type=True)
    if len(payload) > MAX_FRAME:
        raise FrameError(f"frame of {len(payload)} bytes is over {MAX_FRAME}")
    return _HEADER.pack(len(payload)) + payload


def decode_frame(payload: bytes) -> dict[str, Any]:
    try:
        message = msgpack.unpackb(payload, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise FrameError(f"undecodable frame: {exc}") from exc
    if not isinstance(message, dict):
        raise FrameError("a frame must hold a map")
    return message


def frame_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise FrameError(f"frame of {length} bytes announced, over {MAX_FRAME}")
    return int(length)


HEADER_SIZE = _HEADER.size


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

    async def receive(self) -> dict[str, Any] | None:
        """The next frame's map; None when the stream ended between frames."""
        if not await self._fill(HEADER_SIZE):
            return None
        length = frame_length(bytes(self._buffer[:HEADER_SIZE]))
        if not await self._fill(HEADER_SIZE + length):
            raise FrameError("stream ended in the middle of a frame")
        payload = bytes(self._buffer[HEADER_SIZE : HEADER_SIZE + length])
        del self._buffer[: HEADER_SIZE + length]
        return decode_frame(payload)
