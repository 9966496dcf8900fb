"""The application reads a URL-encoded form (every OAuth request's) as quart's own parser does.

The request class parses such a form itself, without quart's parser object (see
``docs/performance.md``); these bodies are parsed by the application's request class and by
quart-trio's plain one, in a request context of each, and must give the same fields in the same
order: repeated and blank parameters, percent-escapes (also invalid UTF-8 in them), ``+`` for a
space, a body that is not UTF-8 (an empty form for both), and a multipart form, which still goes
to quart's parser. A NUL is refused by the application's class only (``test_nul_input.py``). A
form that has all arrived is read without waiting; one still arriving, once it has.
Parsing touches no storage: the table runs once, on SQLite.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio
from werkzeug.exceptions import RequestEntityTooLarge

before_storage = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

URL_ENCODED = "application/x-www-form-urlencoded"
BOUNDARY = "ledgerport-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"

BODIES = [
    pytest.param(URL_ENCODED, b"grant_type=refresh_token&refresh_token=lp_rt_abc", id="plain"),
    pytest.param(URL_ENCODED, b"resource=a&resource=b&scope=", id="repeated-and-blank"),
    pytest.param(URL_ENCODED, b"token&token_type_hint", id="names-without-values"),
    pytest.param(URL_ENCODED, b"a+b=c+d&e%20f=g%2Bh%26i", id="spaces-and-escapes"),
    pytest.param(URL_ENCODED, b"name=%C3%A9t%C3%A9&bad=%FF%FE", id="escaped-utf8-and-not"),
    pytest.param(URL_ENCODED, b"name=\xff\xfe", id="body-not-utf8"),
    pytest.param(URL_ENCODED, b"", id="empty"),
    pytest.param(URL_ENCODED, b"&&a=1&&b=2;c=3&", id="empty-pairs-and-semicolon"),
    pytest.param("application/x-url-encoded", b"a=1&b=2", id="older-type"),
    pytest.param(URL_ENCODED + "; charset=utf-8", b"a=%C3%A9", id="with-charset"),
    pytest.param(
        MULTIPART,
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="a"\r\n\r\n2\r\n'
            f"--{BOUNDARY}--\r\n"
        ).encode(),
        id="multipart",
    ),
    pytest.param("text/plain", b"a=1", id="not-a-form"),
]


async def _fields(app: QuartTrio, content_type: str, body: bytes) -> list[tuple[str, Any]]:
    async with app.test_request_context(
        "/oauth/token", method="POST", data=body, headers={"Content-Type": content_type}
    ):
        from quart import request

        form = await request.form
        return list(form.items(multi=True))


@before_storage
@pytest.mark.parametrize(("content_type", "body"), BODIES)
async def test_a_form_is_read_as_quarts_own_parser_reads_it(
    app: QuartTrio, content_type: str, body: bytes
) -> None:
    plain = QuartTrio("plain")

    assert await _fields(app, content_type, body) == await _fields(plain, content_type, body)


@before_storage
async def test_the_form_is_parsed_once_and_kept(app: QuartTrio) -> None:
    async with app.test_request_context(
        "/oauth/token", method="POST", data=b"a=1", headers={"Content-Type": URL_ENCODED}
    ):
        from quart import request

        first = await request.form
        assert await request.form is first
        assert list((await request.files).items()) == []
        assert await request.get_data() == b"a=1"


@before_storage
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/oauth/introspect"),
        ("GET", "/invoices"),
        ("GET", "/healthz"),
        ("GET", "/no/such/route"),
    ],
)
async def test_a_requests_blueprints_are_quarts(app: QuartTrio, method: str, path: str) -> None:
    """The request class answers its blueprint chain from a cache of split names; it must be
    what quart's own property answers, for a route in a blueprint, one outside any, and none."""
    from quart_trio.wrappers import TrioRequest

    async with app.test_request_context(path, method=method):
        from quart import request

        quarts = TrioRequest.blueprints.fget(request)  # type: ignore[attr-defined]
        assert request.blueprints == quarts
        assert request.blueprints == quarts, "asked again, from the kept chain"


@before_storage
async def test_a_nested_blueprints_chain_is_quarts(app: QuartTrio) -> None:
    """A blueprint inside another (``outer.inner``) answers both names, nearest first."""
    from quart import Blueprint
    from quart_trio.wrappers import TrioRequest

    inner, outer = Blueprint("inner", __name__), Blueprint("outer", __name__)

    @inner.get("/nested")
    async def nested() -> str:
        return "ok"

    outer.register_blueprint(inner)
    plain = QuartTrio("plain")
    plain.request_class = app.request_class
    plain.register_blueprint(outer)
    async with plain.test_request_context("/nested"):
        from quart import request

        assert type(request._get_current_object()) is app.request_class  # type: ignore[attr-defined]
        assert request.blueprints == ["outer.inner", "outer"]
        assert request.blueprints == TrioRequest.blueprints.fget(request)  # type: ignore[attr-defined]


@before_storage
async def test_a_form_that_has_all_arrived_is_read_without_waiting(app: QuartTrio) -> None:
    """A small form comes with its request's head: it is read without a turn of the
    scheduler (no checkpoint) and without the body timeout's cancel scope."""
    async with app.test_request_context(
        "/oauth/token", method="POST", data=b"a=1&b=2", headers={"Content-Type": URL_ENCODED}
    ):
        from quart import request

        with trio.testing.assert_no_checkpoints():
            form = await request.form
        assert list(form.items(multi=True)) == [("a", "1"), ("b", "2")]


@before_storage
async def test_a_form_still_arriving_is_read_whole_once_it_has(app: QuartTrio) -> None:
    async with app.test_request_context(
        "/oauth/token", method="POST", headers={"Content-Type": URL_ENCODED}
    ):
        from quart import request

        request.body = body = type(request.body)(None, None)
        read: list[Any] = []

        async def read_form() -> None:
            read.append(await request.form)

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_form)
                body.append(b"a=1")
                await trio.testing.wait_all_tasks_blocked()
                assert not read, "the form waits for the body's end"
                body.append(b"&b=2")
                body.set_complete()
        assert list(read[0].items(multi=True)) == [("a", "1"), ("b", "2")]


@before_storage
async def test_a_form_past_the_largest_body_is_refused_as_before(app: QuartTrio) -> None:
    async with app.test_request_context(
        "/oauth/token", method="POST", headers={"Content-Type": URL_ENCODED}
    ):
        from quart import request

        request.body = body = type(request.body)(None, 4)
        body.append(b"a=123")
        with pytest.raises(RequestEntityTooLarge), trio.fail_after(5):
            await request.form
