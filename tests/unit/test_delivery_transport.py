"""The delivery client's HTTP/1.1 (``engine/_transport.py``) on in-memory streams: the request
written in one piece, an answer's head parsed, its body framed by ``Content-Length``, chunked or
the receiver's close, informational answers passed over, what makes a connection reusable, and
answers that are not HTTP refused in the attempt log's words. The same client against a real
receiver: tests/integration/test_delivery_connections.py and test_attempt_log.py."""

from __future__ import annotations

import ssl

import httpcore
import pytest
import trio
import trio.testing

from ledgerport.engine import (
    DeliveryClient,
    DeliveryConnection,
    DeliveryResponse,
    read_head,
    request_bytes,
)

ORIGIN = httpcore.Origin(b"http", b"receiver.example", 80)
URL = httpcore.URL("http://receiver.example/in?x=1")


async def _nowhere(host: str, port: int) -> list[str]:
    raise OSError("no resolving here")


async def _answered(*pieces: bytes) -> tuple[DeliveryResponse, DeliveryConnection, bytes]:
    """The answer ``pieces`` make (sent one write each, then the receiver's end of stream),
    and what the client wrote."""
    ours, theirs = trio.testing.memory_stream_pair()
    connection = DeliveryConnection(ORIGIN, ours)
    await connection.send(request_bytes(URL, [(b"Host", b"receiver.example")], b"{}"))
    for piece in pieces:
        await theirs.send_all(piece)
    await theirs.send_eof()
    written = bytes(await theirs.receive_some(65536))
    return await connection.answer(), connection, written


async def _body(response: DeliveryResponse) -> bytes:
    body = b""
    while chunk := await response.chunk():
        body += chunk
    return body


async def test_the_request_is_written_whole() -> None:
    _, _, written = await _answered(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert written == b"POST /in?x=1 HTTP/1.1\r\nHost: receiver.example\r\n\r\n{}"


@pytest.mark.parametrize(
    ("pieces", "status", "body", "reusable"),
    [
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"], 200, b"hello", True),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", b"\r\nhel", b"lo"], 200, b"hello", True),
        ([b"HTTP/1.1 201\r\ncontent-length: 0\r\n\r\n"], 201, b"", True),
        ([b"HTTP/1.1 204 No Content\r\n\r\n"], 204, b"", True),
        (
            [
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n",
                b"0\r\n",
                b"Trailer: 1\r\n\r\n",
            ],
            200,
            b"hello",
            True,
        ),
        (
            [
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r",
                b"\n2\r\nde",
                b"\r\n0\r\n\r\n",
            ],
            200,
            b"abcde",
            True,
        ),
        (
            [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"],
            200,
            b"ok",
            True,
        ),
        (
            [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"],
            200,
            b"ok",
            False,
        ),
        ([b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"], 200, b"ok", False),
        ([b"HTTP/1.1 200 OK\r\n\r\nuntil ", b"the end"], 200, b"until the end", False),
        ([b"HTTP/1.1 503 Busy\nRetry-After: 7\n\nlf"], 503, b"lf", False),
    ],
    ids=[
        "length",
        "length in pieces",
        "empty",
        "no content",
        "chunked with an extension and a trailer",
        "chunked in pieces",
        "informational first",
        "connection close",
        "HTTP/1.0",
        "until the receiver closes",
        "bare line feeds",
    ],
)
async def test_an_answer_is_framed_as_http_1_1_says(
    pieces: list[bytes], status: int, body: bytes, reusable: bool
) -> None:
    response, connection, _ = await _answered(*pieces)
    assert response.status == status
    assert await _body(response) == body
    assert response.ended
    assert connection.reusable is reusable


async def test_headers_are_kept_as_sent() -> None:
    response, _, _ = await _answered(
        b"HTTP/1.1 429 Slow\r\nRetry-After:  120 \r\nX-A: b: c\r\nContent-Length: 0\r\n\r\n"
    )
    assert response.headers == [
        (b"Retry-After", b"120"),
        (b"X-A", b"b: c"),
        (b"Content-Length", b"0"),
    ]


@pytest.mark.parametrize(
    "pieces",
    [
        [b""],
        [b"SSH-2.0-OpenSSH\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\n bad: fold\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nX: " + b"y" * 20000 + b"\r\n\r\n"],
    ],
    ids=[
        "nothing",
        "not http",
        "folded header",
        "header without colon",
        "bad length",
        "two lengths",
        "unknown transfer coding",
        "head too long",
    ],
)
async def test_an_answer_that_is_not_http_is_a_protocol_error(pieces: list[bytes]) -> None:
    with pytest.raises(httpcore.RemoteProtocolError):
        await _answered(*pieces)


@pytest.mark.parametrize(
    "pieces",
    [
        [b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nshort"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n0\r\n\r\n"],
    ],
    ids=["length cut short", "chunk cut short", "bad chunk size", "chunk without its line end"],
)
async def test_a_body_that_breaks_off_is_a_protocol_error(pieces: list[bytes]) -> None:
    response, connection, _ = await _answered(*pieces)
    with pytest.raises(httpcore.RemoteProtocolError):
        await _body(response)
    assert not connection.reusable


async def test_a_body_read_as_far_as_kept_reads_nothing_more() -> None:
    """What arrived already is still answered; then the read fails and the connection is
    not reused."""
    ours, theirs = trio.testing.memory_stream_pair()
    connection = DeliveryConnection(ORIGIN, ours)
    await theirs.send_all(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n" + b"a" * 4096 + b"\r\n"
    )
    response = await connection.answer()
    kept = bytearray()
    assert await read_head(response, kept)  # the body may go on
    assert kept == b"a" * 4096
    assert not response.ended
    assert not connection.reusable


@pytest.mark.parametrize(
    "header",
    [(b"X-Bad", b"a\r\nInjected: 1"), (b"X-Bad", b"a\nb"), (b"X Bad", b"a"), (b"X-Bad", b"a\0")],
    ids=["crlf", "line feed", "space in the name", "nul"],
)
def test_a_header_that_would_end_its_line_is_never_written(header: tuple[bytes, bytes]) -> None:
    with pytest.raises(httpcore.LocalProtocolError):
        request_bytes(URL, [(b"Host", b"receiver.example"), header], b"{}")


class _EarlyAnswer(trio.abc.Stream):
    """A receiver that answered and closed before reading the request: writing fails."""

    def __init__(self, answer: bytes) -> None:
        self._answer = answer

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        raise trio.BrokenResourceError("the receiver closed its end")

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        answer, self._answer = self._answer, b""
        return answer

    async def aclose(self) -> None:
        pass


async def test_an_answer_sent_before_the_request_was_read_is_still_read() -> None:
    """As httpcore did: a write that fails still reads the answer; the connection is closed."""
    client = DeliveryClient(
        max_connections=1,
        allow=lambda _address: True,
        resolver=_nowhere,
        ssl_context=ssl.create_default_context(),
    )
    answer = b"HTTP/1.1 413 Too Big\r\nContent-Length: 2\r\n\r\nno"
    client._idle.append(DeliveryConnection(ORIGIN, _EarlyAnswer(answer)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            DeliveryConnection, "expired", lambda _self: False
        )  # it has no socket to poll
        async with client.stream(
            httpcore.URL("http://receiver.example/in"), headers=[], content=b"{}"
        ) as response:
            assert response.status == 413
            assert await _body(response) == b"no"
    assert client._idle == []  # not used again
