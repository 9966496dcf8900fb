"""The frames between the pool and a sandbox worker: a 4-byte length, then msgpack of one map
that is exactly one of the protocol's types."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
import trio
import trio.testing

from ledgerport.runtime import (
    MAX_FRAME,
    Api,
    ApiResult,
    Done,
    Fetch,
    FetchResult,
    Frame,
    FrameError,
    FrameReader,
    Ready,
    Run,
    decode_frame,
    encode_frame,
)

FRAMES: list[Frame] = [
    Ready(pid=42),
    Run(
        run="run_1",
        key="fn_1:1",
        script="(async function () {})",
        event='{"data":{"n":1}}',
        cpu=2.0,
        heap=64 * 1024 * 1024,
        log=65536,
        result=65536,
    ),
    Run(
        run="run_2",
        key="fn_1:1",
        script="(async function () {})",
        event="{}",
        cpu=2.0,
        heap=1024,
        log=1024,
        result=1024,
        secrets={"STRIPE_KEY": "lpsecret_" + "0" * 32},
    ),
    Fetch(
        run="run_1",
        call=3,
        method="POST",
        url="https://api.example.com/v1",
        headers=[["Authorization", "Bearer lpsecret_" + "0" * 32]],
        body='{"a":1}',
        at=12,
        lines=2,
    ),
    FetchResult(
        run="run_1",
        call=3,
        status=201,
        headers=[["Content-Type", "application/json"]],
        body="{}",
        error=None,
    ),
    FetchResult(run="run_1", call=4, status=0, headers=[], body="", error="refused"),
    Api(run="run_1", call=1, method="GET", path="/customers", body=None),
    Api(run="run_1", call=2, method="POST", path="/customers", body='{"name":"A"}'),
    ApiResult(run="run_1", call=1, status=200, body={"data": [{"id": "cus_1"}], "next": None}),
    Done(run="run_1", ok=True, result='"x"', logs=["a", "b"], log_times=[0, 12], cpu_ms=1.5),
    Done(run="run_1", ok=False, result=None, error="boom", limit="log", clean=False),
]


@pytest.mark.parametrize("frame", FRAMES, ids=lambda frame: type(frame).__name__)
def test_every_frame_goes_through_the_wire_unchanged(frame: Frame) -> None:
    wire = encode_frame(frame)
    (length,) = struct.unpack(">I", wire[:4])
    assert length == len(wire) - 4
    assert decode_frame(wire[4:]) == frame
    assert msgpack.unpackb(wire[4:])["op"] == frame.op


def test_a_frame_over_the_limit_is_refused() -> None:
    with pytest.raises(FrameError):
        encode_frame(Done(run="run_1", ok=True, result="x" * (MAX_FRAME + 1)))


def _map(frame: Frame, **changes: Any) -> bytes:
    message = msgpack.unpackb(encode_frame(frame)[4:])
    message.update(changes)
    for name, value in changes.items():
        if value is _DROP:
            del message[name]
    return msgpack.packb(message)  # type: ignore[no-any-return]


_DROP = object()
API = Api(run="run_1", call=1, method="GET", path="/x", body=None)
DONE = Done(run="run_1", ok=True, result=None)
FETCH = Fetch(
    run="run_1", call=1, method="GET", url="https://a.example/", headers=[], body=None, at=0
)
RUN = Run(run="run_1", key="k", script="", event="{}", cpu=1.0, heap=1, log=1, result=1)

REFUSED = {
    "junk": b"\xc1",
    "a list": msgpack.packb([1, 2]),
    "a string": msgpack.packb("text"),
    "no op": msgpack.packb({"run": "run_1"}),
    "an unknown op": _map(API, op="eval"),
    "an op that is no string": _map(API, op=["api"]),
    "a missing field": _map(API, body=_DROP),
    "an extra field": _map(API, token="lp_at_x"),
    "a call that is no integer": _map(API, call="1"),
    "a call that is a boolean": _map(API, call=True),
    "a run id that is no string": _map(API, run=7),
    "ok that is no boolean": _map(DONE, ok=1),
    "logs that are no strings": _map(DONE, logs=[1, 2]),
    "log times that are no integers": _map(DONE, logs=["a"], log_times=[1.5]),
    "log times that are booleans": _map(DONE, logs=["a"], log_times=[True]),
    "log times that are no list": _map(DONE, log_times="0"),
    "a result that is a map": _map(DONE, result={"a": 1}),
    "headers that are no pairs": _map(FETCH, headers=[["Authorization"]]),
    "headers that are a map": _map(FETCH, headers={"Authorization": "x"}),
    "a header value that is no string": _map(FETCH, headers=[["A", 1]]),
    "a time that is a boolean": _map(FETCH, at=True),
    "a count of lines that is a boolean": _map(FETCH, lines=True),
    "a count of lines that is text": _map(API, lines="2"),
    "secrets that are no strings": _map(RUN, secrets={"KEY": 1}),
    "secrets that are a list": _map(RUN, secrets=["KEY"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_payload_that_is_not_exactly_a_frame_is_refused(case: str) -> None:
    with pytest.raises(FrameError):
        decode_frame(REFUSED[case])


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
    data = encode_frame(FRAMES[1]) + encode_frame(DONE)
    one_byte_at_a_time = [data[i : i + 1] for i in range(len(data))]
    assert await _read_all([data]) == [FRAMES[1], DONE]
    assert await _read_all(one_byte_at_a_time) == [FRAMES[1], DONE]


async def test_an_end_between_frames_is_clean_and_one_inside_a_frame_is_not() -> None:
    frame = encode_frame(API)
    assert await _read_all([]) == []
    with pytest.raises(FrameError):
        await _read_all([frame[:-1]])
    with pytest.raises(FrameError):
        await _read_all([frame[:2]])


async def test_an_announced_length_over_the_limit_is_refused() -> None:
    with pytest.raises(FrameError):
        await _read_all([struct.pack(">I", MAX_FRAME + 1)])
