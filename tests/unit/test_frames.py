"""The frames between the engine and a sandbox worker: a 4-byte length, then msgpack of one map."""

from __future__ import annotations

import struct

import msgpack
import pytest
import trio
import trio.testing

from ledgerport.runtime import MAX_FRAME, FrameError, FrameReader, decode_frame, encode_frame

MESSAGE = {"op": "run", "run": "run_1", "event": {"data": {"n": 1}}, "limits": {"cpu": 2.0}}


def test_a_frame_is_its_length_then_its_msgpack() -> None:
    frame = encode_frame(MESSAGE)
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    assert decode_frame(frame[4:]) == MESSAGE


def test_a_frame_over_the_limit_is_refused() -> None:
    with pytest.raises(FrameError):
        encode_frame({"script": "x" * (MAX_FRAME + 1)})


@pytest.mark.parametrize(
    "payload", [b"\xc1", msgpack.packb([1, 2]), msgpack.packb("text")], ids=["junk", "list", "str"]
)
def test_a_payload_that_is_not_a_map_is_refused(payload: bytes) -> None:
    with pytest.raises(FrameError):
        decode_frame(payload)


async def _read_all(chunks: list[bytes]) -> list[object]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = FrameReader(receive)
    for chunk in chunks:
        await send.send_all(chunk)
    await send.aclose()
    frames: list[object] = []
    with trio.fail_after(5):
        while (frame := await reader.receive()) is not None:
            frames.append(frame)
    return frames


async def test_frames_arrive_whatever_the_chunks() -> None:
    data = encode_frame(MESSAGE) + encode_frame({"op": "done"})
    one_byte_at_a_time = [data[i : i + 1] for i in range(len(data))]
    assert await _read_all([data]) == [MESSAGE, {"op": "done"}]
    assert await _read_all(one_byte_at_a_time) == [MESSAGE, {"op": "done"}]


async def test_an_end_between_frames_is_clean_and_one_inside_a_frame_is_not() -> None:
    frame = encode_frame(MESSAGE)
    assert await _read_all([]) == []
    with pytest.raises(FrameError):
        await _read_all([frame[:-1]])
    with pytest.raises(FrameError):
        await _read_all([frame[:2]])


async def test_an_announced_length_over_the_limit_is_refused() -> None:
    with pytest.raises(FrameError):
        await _read_all([struct.pack(">I", MAX_FRAME + 1)])
