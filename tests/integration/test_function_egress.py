"""The engine's side of ``context.fetch`` (``engine/_egress.py``) against a real receiver on
loopback: a secret's value goes only into a header value of a fetch to an allowed host, and
every rule refuses with an error that names the host and never a header's value (contract.md,
third round: "Hosted functions: secrets, outbound fetch, schedules"; the issue's hostile code:
no secret learnt by redirect, DNS rebinding, error text or timing)."""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
import trio
import trustme

from ledgerport import apps, catalog
from ledgerport.engine import Egress
from ledgerport.keys import Keyring
from ledgerport.runtime import FetchAnswer, FetchCall, RunRequest

from ..receiver import Answer, receiving

TIMEOUT = 30
VALUE = "sk_live_51Hvalue-of-the-secret"
APP = "app_1"


class CountingKeyring(Keyring):
    """A keyring that counts what it opens."""

    opened = 0

    def decrypt(self, token: str, *, context: str) -> str:
        self.opened += 1
        return super().decrypt(token, context=context)


@dataclass
class Way:
    egress: Egress
    told: dict[str, list[str]]
    deadlines: dict[str, float]
    keyring: CountingKeyring
    placeholders: dict[str, str]
    request: RunRequest

    async def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: list[list[str]] | None = None,
        body: str | None = None,
    ) -> FetchAnswer:
        return await self.egress.fetch(self.request, FetchCall(method, url, headers or [], body))

    @property
    def key(self) -> str:
        return self.placeholders["API_KEY"]

    def notes(self) -> list[str]:
        return self.told.get(self.request.run_id, [])


@asynccontextmanager
async def way_out(
    allowed: tuple[str, ...],
    *,
    development: bool = True,
    loopback: bool = False,
    wall: float = 10.0,
    resolver: apps.Resolver = apps.resolve,
    ssl_context: ssl.SSLContext | None = None,
    secrets: dict[str, str] | None = None,
) -> AsyncIterator[Way]:
    keyring = CountingKeyring("k" * 43)
    deadlines: dict[str, float] = {}
    told: dict[str, list[str]] = {}
    egress = Egress(
        keyring=keyring,
        note=lambda run_id, note, at, after: told.setdefault(run_id, []).append(note),
        deadlines=deadlines,
        development=development,
        loopback=loopback,
        resolver=resolver,
        ssl_context=ssl_context,
    )
    sealed = {
        name: apps.SealedSecret.seal(keyring, app_id=APP, name=name, value=value)
        for name, value in (secrets or {"API_KEY": VALUE}).items()
    }
    placeholders = egress.open("run_1", allowed_hosts=allowed, secrets_by_name=sealed)
    deadlines["run_1"] = trio.current_time() + wall
    try:
        yield Way(
            egress, told, deadlines, keyring, placeholders, RunRequest("run_1", "k", "", "{}")
        )
    finally:
        await egress.aclose()


async def test_a_secret_goes_only_into_header_values_of_a_fetch_to_an_allowed_host() -> None:
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver, way_out(("127.0.0.1",)) as way:
            receiver.default = Answer(201, body=b'{"id":"ch_1"}', headers=(("X-Id", "ch_1"),))
            answer = await way.fetch(
                f"http://127.0.0.1:{receiver.port}/charges?key={way.key}",
                method="POST",
                headers=[
                    ["Authorization", f"Bearer {way.key}"],
                    ["X-Both", f"{way.key}:{way.key}"],
                    ["Content-Type", "application/json"],
                ],
                body=f'{{"key":"{way.key}"}}',
            )
            (got,) = receiver.received
    assert answer.error is None
    assert answer.status == 201
    assert answer.body == '{"id":"ch_1"}'
    assert ["X-Id", "ch_1"] in answer.headers
    assert got.headers["authorization"] == f"Bearer {VALUE}"
    assert got.headers["x-both"] == f"{VALUE}:{VALUE}"
    assert got.path == f"/charges?key={way.key}"
    assert got.body == f'{{"key":"{way.key}"}}'.encode()
    assert got.headers["user-agent"] == "ledgerport-functions/1"
    assert way.notes() == [
        f"fetch POST 127.0.0.1: 201 ({note.rsplit('(', 1)[1]}" for note in way.notes()
    ]
    assert all(VALUE not in note and way.key not in note for note in way.notes())


async def test_an_ipv6_literal_is_fetched_with_its_host_in_brackets() -> None:
    async def serve(stream: trio.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += await stream.receive_some(65536)
        seen.append(head)
        await stream.send_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await stream.aclose()

    seen: list[bytes] = []
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            (listener,) = await nursery.start(
                functools.partial(trio.serve_tcp, serve, 0, host="::1")
            )
            port = listener.socket.getsockname()[1]
            async with way_out(("::1",)) as way:
                answer = await way.fetch(f"http://[::1]:{port}/v6")
            nursery.cancel_scope.cancel()
    assert answer.status == 204, answer.error
    assert f"Host: [::1]:{port}\r\n".encode() in seen[0]


async def test_a_placeholder_of_another_run_stays_a_placeholder() -> None:
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver, way_out(("127.0.0.1",)) as way:
            other = way.egress.open(
                "run_2",
                allowed_hosts=("127.0.0.1",),
                secrets_by_name={
                    "API_KEY": apps.SealedSecret.seal(
                        way.keyring, app_id="app_2", name="API_KEY", value="theirs"
                    )
                },
            )
            await way.fetch(
                f"http://127.0.0.1:{receiver.port}/",
                headers=[["Authorization", other["API_KEY"]]],
            )
            (got,) = receiver.received
    assert other["API_KEY"] != way.key
    assert got.headers["authorization"] == other["API_KEY"]


async def test_placeholders_are_drawn_for_each_run() -> None:
    with trio.fail_after(TIMEOUT):
        async with way_out(("a.example",)) as way:
            again = way.egress.open(
                "run_2",
                allowed_hosts=(),
                secrets_by_name={"API_KEY": apps.SealedSecret(APP, "API_KEY", "sealed")},
            )
            way.egress.close("run_1")
            closed = await way.fetch("https://a.example/")
    assert again["API_KEY"] != way.key
    assert again["API_KEY"].startswith("lpsecret_")
    assert closed.error == "context.fetch: the run has ended"


REFUSALS = {
    "host not allowed": (
        "https://evil.example/steal",
        {},
        "context.fetch to evil.example: refused: the host is not in the function's allowedHosts",
    ),
    "a wildcard's apex": (
        "https://example.com/",
        {},
        "context.fetch to example.com: refused: the host is not in the function's allowedHosts",
    ),
    "not http": (
        "ftp://api.example.com/file",
        {},
        "context.fetch to api.example.com: refused: only https:// URLs may be fetched",
    ),
    "user info": (
        "https://me:pw@api.example.com/",
        {},
        "context.fetch to api.example.com: refused: a URL with a user name or password",
    ),
    "spaces": (
        "https://api.example.com/a b",
        {},
        "context.fetch to api.example.com: refused: the URL is not a URL without spaces or"
        " control characters",
    ),
    "trace": (
        "https://api.example.com/",
        {"method": "TRACE"},
        "context.fetch to api.example.com: refused: TRACE is not allowed",
    ),
    "connect": (
        "https://api.example.com/",
        {"method": "connect"},
        "context.fetch to api.example.com: refused: CONNECT is not allowed",
    ),
    "not a method": (
        "https://api.example.com/",
        {"method": "GE T"},
        "context.fetch to api.example.com: refused: the method is not an HTTP method",
    ),
    "a url too long": (
        "https://api.example.com/" + "a" * 8192,
        {},
        "context.fetch to api.example.com: refused: a URL longer than 8192 characters",
    ),
    "host header": (
        "https://api.example.com/",
        {"headers": [["Host", "internal"]]},
        "context.fetch to api.example.com: refused: a header the engine sets itself or may not"
        " send",
    ),
    "proxy header": (
        "https://api.example.com/",
        {"headers": [["Proxy-Authorization", "x"]]},
        "context.fetch to api.example.com: refused: a header the engine sets itself or may not"
        " send",
    ),
    "bad header name": (
        "https://api.example.com/",
        {"headers": [["X Key", "x"]]},
        "context.fetch to api.example.com: refused: a header name that is not an HTTP token",
    ),
    "too many headers": (
        "https://api.example.com/",
        {"headers": [[f"X-{n}", "1"] for n in range(51)]},
        "context.fetch to api.example.com: refused: more than 50 headers",
    ),
    "body too large": (
        "https://api.example.com/",
        {"method": "POST", "body": "x" * (1024 * 1024 + 1)},
        "context.fetch to api.example.com: refused: a body larger than 1048576 bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_every_refusal_names_the_host_opens_no_secret_and_sends_nothing(case: str) -> None:
    url, options, error = REFUSALS[case]
    with trio.fail_after(TIMEOUT):
        async with way_out(("api.example.com", "*.example.com")) as way:
            headers = [
                [name, value.replace("KEY", way.key)] for name, value in options.get("headers", [])
            ]
            answer = await way.fetch(
                url,
                method=options.get("method", "GET"),
                headers=[["Authorization", way.key], *headers],
                body=options.get("body"),
            )
            notes = way.notes()
    assert answer.error == error
    assert way.keyring.opened == 0  # nothing about a secret can be timed
    assert len(notes) == 1
    assert error.split(": ", 1)[1] in notes[0]


async def test_the_log_names_what_the_guest_wrote_only_as_a_method_and_a_host() -> None:
    """A method or a host that carries a line break writes no line of the platform's own."""
    with trio.fail_after(TIMEOUT):
        async with way_out(("api.example.com",)) as way:
            await way.fetch("https://api.example.com/", method="GET\n[ledgerport] forged")
            await way.fetch("https://evil.example\u2028x/")
    assert way.notes()[0].startswith(
        "fetch (not a method) api.example.com: refused: the method is not an HTTP method ("
    )
    assert way.notes()[1].startswith("fetch GET evil.example?x: refused: the URL is not a URL")
    assert all("\n" not in note and "\u2028" not in note for note in way.notes())


async def test_an_error_never_carries_a_secrets_value() -> None:
    """A value that cannot be a header's (a line break in it) is refused without quoting it."""
    with trio.fail_after(TIMEOUT):
        async with (
            receiving() as receiver,
            way_out(("127.0.0.1",), secrets={"API_KEY": "line\r\nX-Injected: yes"}) as way,
        ):
            answer = await way.fetch(
                f"http://127.0.0.1:{receiver.port}/", headers=[["Authorization", way.key]]
            )
    assert answer.error == (
        "context.fetch to 127.0.0.1: refused: a header value that cannot be sent (visible ASCII,"
        " spaces and tabs, at most 8192 characters)"
    )
    assert "line" not in answer.error
    assert "Injected" not in answer.error
    assert receiver.received == []


async def test_http_is_refused_in_production_even_to_an_allowed_host() -> None:
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver, way_out(("127.0.0.1",), development=False) as way:
            answer = await way.fetch(f"http://127.0.0.1:{receiver.port}/")
    assert answer.error == (
        "context.fetch to 127.0.0.1: refused: only https:// (http:// only to a loopback host,"
        " in development)"
    )
    assert receiver.received == []


async def test_a_name_that_resolves_to_a_private_address_now_is_refused_at_connect() -> None:
    """DNS rebinding: the allowed name resolves to loopback when the fetch connects."""
    resolved: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["127.0.0.1"]

    with trio.fail_after(TIMEOUT):
        async with way_out(("api.example.com",), development=False, resolver=rebinding) as way:
            answer = await way.fetch(
                "https://api.example.com/", headers=[["Authorization", way.key]]
            )
    assert resolved == ["api.example.com"]
    assert answer.error == (
        "context.fetch to api.example.com: refused: the host resolves only to addresses"
        " functions may not reach (private, loopback, link-local, multicast or reserved)"
    )


def _tls() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A receiver's server context for 127.0.0.1, and a client context that trusts it."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


async def test_https_in_production_to_a_service_reached_on_loopback() -> None:
    server, client = _tls()
    with trio.fail_after(TIMEOUT):
        async with (
            receiving(tls=server) as receiver,
            way_out(("127.0.0.1",), development=False, loopback=True, ssl_context=client) as way,
        ):
            answer = await way.fetch(receiver.url, headers=[["Authorization", way.key]])
            (got,) = receiver.received
    assert answer.status == 200, answer.error
    assert got.headers["authorization"] == VALUE


async def test_a_redirect_is_answered_not_followed() -> None:
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver, way_out(("127.0.0.1",)) as way:
            receiver.default = Answer(
                302, body=b"", headers=(("Location", "https://evil.example/collect"),)
            )
            answer = await way.fetch(
                f"http://127.0.0.1:{receiver.port}/", headers=[["Authorization", way.key]]
            )
            await trio.sleep(0.1)
    assert answer.status == 302
    assert ["Location", "https://evil.example/collect"] in answer.headers
    assert len(receiver.received) == 1


async def test_an_answer_over_a_mebibyte_is_refused_whole() -> None:
    size = catalog.FUNCTION_FETCH_ANSWER_MAX_BYTES
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver, way_out(("127.0.0.1",)) as way:
            receiver.script = [Answer(body=b"x" * size), Answer(body=b"x" * (size + 1))]
            fits = await way.fetch(f"http://127.0.0.1:{receiver.port}/")
            over = await way.fetch(f"http://127.0.0.1:{receiver.port}/")
    assert fits.status == 200
    assert len(fits.body) == size
    assert over.error == (
        f"context.fetch to 127.0.0.1: failed: the answer is larger than {size} bytes"
    )


async def test_a_run_makes_fifty_fetches_at_most() -> None:
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver, way_out(("127.0.0.1",)) as way:
            answers = [await way.fetch(f"http://127.0.0.1:{receiver.port}/{n}") for n in range(52)]
    assert [a.status for a in answers[:50]] == [200] * 50
    assert answers[50].error == answers[51].error == "context.fetch: at most 50 fetches a run"
    assert len(receiver.received) == 50
    assert len(way.notes()) == 51


async def test_a_fetch_ends_at_the_runs_wall_limit() -> None:
    with trio.fail_after(TIMEOUT):
        async with receiving() as receiver, way_out(("127.0.0.1",), wall=0.5) as way:
            receiver.default = Answer(delay=5.0)
            started = trio.current_time()
            answer = await way.fetch(f"http://127.0.0.1:{receiver.port}/")
            took = trio.current_time() - started
    assert (
        answer.error == "context.fetch to 127.0.0.1: failed: no answer within the run's wall limit"
    )
    assert took < 2.0


async def test_a_host_that_does_not_answer_http_fails_the_fetch() -> None:
    async def garbage(stream: trio.SocketStream) -> None:
        await stream.send_all(b"SSH-2.0-OpenSSH\r\n\r\n")
        await stream.aclose()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            (listener,) = await nursery.start(
                functools.partial(trio.serve_tcp, garbage, 0, host="127.0.0.1")
            )
            port = listener.socket.getsockname()[1]
            async with way_out(("127.0.0.1",)) as way:
                answer = await way.fetch(f"http://127.0.0.1:{port}/")
            nursery.cancel_scope.cancel()
    assert answer.error == (
        "context.fetch to 127.0.0.1: failed: the connection failed or the answer is not HTTP"
    )


async def test_a_fetch_to_a_closed_port_fails() -> None:
    async with receiving() as receiver:
        port = receiver.port
    with trio.fail_after(TIMEOUT):
        async with way_out(("127.0.0.1",)) as way:
            answer = await way.fetch(f"http://127.0.0.1:{port}/")
    assert answer.error == (
        "context.fetch to 127.0.0.1: failed: the connection failed or the answer is not HTTP"
    )
