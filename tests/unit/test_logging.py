"""Log lines stay one line each and keep secrets out, whatever a request puts in them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ledgerport.ops import (
    CONTROL_ESCAPES,
    QUIET_LOGGERS,
    REDACTIONS,
    RedactingFilter,
    configure_logging,
    escape_controls,
    loggable,
    redact,
)
from ledgerport.server import AccessLog

FORGED = "1999-12-31 23:59:59,999 CRITICAL ledgerport.supervisor: forged"
CONTROLS = [chr(code) for code in (*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)]


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("\n", "\\n"),
        ("\r", "\\r"),
        ("\t", "\\t"),
        ("\x00", "\\x00"),
        ("\x1b", "\\x1b"),
        ("\x7f", "\\x7f"),
        ("\x85", "\\x85"),
        ("\x9b", "\\x9b"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ],
)
def test_control_characters_are_written_as_escapes(raw: str, escaped: str) -> None:
    assert escape_controls(f"a{raw}b") == f"a{escaped}b"


def test_no_control_character_survives() -> None:
    escaped = escape_controls("".join(CONTROLS))

    assert escaped.isprintable()
    assert escaped.splitlines() == [escaped]


def test_printable_text_is_left_alone() -> None:
    text = "GET /naïve/café/日本 \\n is a backslash and an n \"quoted\" 'too' ~ ü"

    assert escape_controls(text) == text


def test_secrets_are_redacted_before_control_characters_are_escaped() -> None:
    secret = "lp_at_" + "s3cr3t" * 4

    # Escaped first, "\n" would glue an "n" to the token and hide it from the redaction.
    assert loggable(f"/x\n{secret}") == "/x\\nlp_at_[REDACTED]"


SECRET_LIKE = st.lists(
    st.sampled_from(
        [
            "lp_at_",
            "lp_admin_",
            "whsec_",
            "Bearer ",
            "basic\t",
            "Code=",
            "refresh_token=",
            "user_code=",
            "eyJ",
            "eyJhbGciOi.eyJzdWIiOi.c2ln",
            "lp_rt_0123456789ab",
            "whsec_0123456789ab",
            ".",
            "&",
            "=",
            "-",
            "_",
            " ",
            "\n",
            "\x85",
            "\u2028",
            "abcdEFGH1234",
            "x",
            "é",
        ]
    )
    | st.text(max_size=4),
    max_size=12,
).map("".join)
"""Text made of the pieces the patterns look for, glued in any order, and anything else."""


@given(SECRET_LIKE)
@example("/x?lp_at_0123456789ab")
@example('"whsec_0123456789ab"')
@example("Authorization: BASIC dXNlcjpwYXNz")
@example("bearer\tabc")
@example("grant_type=refresh_token&refresh_token=abc")
@example("a session token eyJhbGciOi.eyJzdWIiOi.c2ln")
@example("GET /oauth/introspect HTTP/1.1")
def test_a_text_is_redacted_and_escaped_as_every_pattern_applied_in_turn(text: str) -> None:
    """The one search that lets most texts through untouched changes no text's outcome."""
    expected = text
    for redaction in REDACTIONS:
        expected = redaction.pattern.sub(redaction.replacement, expected)

    assert redact(text) == expected
    assert escape_controls(text) == text.translate(CONTROL_ESCAPES)


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger whose records go through the service's filter and format to a string."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("ledgerport.test-logging")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def test_a_record_with_request_data_stays_one_line(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured

    logger.warning("refused %s for %s", f"/x\n{FORGED}", "agent\x85\u2028\x00")

    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(f"refused /x\\n{FORGED} for agent\\x85\\u2028\\x00")


def test_a_traceback_keeps_its_lines_but_not_the_breaks_in_exception_messages(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    secret = "lp_at_" + "s3cr3t" * 4

    try:
        try:
            raise RuntimeError(f"inner\u2028{FORGED}")
        except RuntimeError as inner:
            raise ValueError(f"outer {secret}\n{FORGED}") from inner
    except ValueError:
        logger.exception("unhandled error")

    text = stream.getvalue()
    lines = text.splitlines()
    assert lines[0].endswith("unhandled error")
    assert "Traceback (most recent call last):" in lines
    assert not [line for line in lines if line.startswith(FORGED[:10])]
    assert f"RuntimeError: inner\\u2028{FORGED}" in lines
    assert f"ValueError: outer lp_at_[REDACTED]\\n{FORGED}" in lines
    assert secret not in text


async def _forged_request_app(scope: Any, receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"no", "more_body": False})


async def _no_answer_app(scope: Any, receive: Any, send: Any) -> None:
    return None


async def _sent(message: Any) -> None:
    return None


def _scope(path: str, user_agent: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "path": path,
        "headers": [(b"host", b"127.0.0.1"), (b"user-agent", user_agent)],
        "client": ("127.0.0.1", 50000),
    }


async def test_the_access_line_is_safe_before_any_handler_sees_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ledgerport.access")
    secret = "lp_at_" + "s3cr3t" * 4

    await AccessLog(_forged_request_app)(
        _scope(f"/x\n{FORGED}\x00{secret}", b"agent\t\x85"), _sent, _sent
    )

    [record] = caplog.records
    message = record.getMessage()
    assert message.isprintable()
    assert f'"GET /x\\n{FORGED}\\x00lp_at_[REDACTED] 1.1" 404 2 "-" "agent\\t\\x85"' in message
    assert message.startswith("127.0.0.1:50000 - - [")


async def test_a_request_without_an_answer_is_logged_once_with_no_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ledgerport.access")

    await AccessLog(_no_answer_app)(_scope("/gone", b"curl"), _sent, _sent)

    [record] = caplog.records
    assert record.getMessage().endswith('"GET /gone 1.1" - - "-" "curl"')


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    """The process's logging as ``configure_logging`` sets it, written to a buffer; the root
    logger and the quiet loggers' levels are put back afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, {n: logging.getLogger(n).level for n in QUIET_LOGGERS})
    buffer = io.StringIO()
    yield buffer
    root.handlers[:], root.level = saved[0], saved[1]
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


def _configure(buffer: io.StringIO, format: str) -> None:
    configure_logging(format=format)
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)


def test_json_lines_are_one_object_each_and_redacted(configured: io.StringIO) -> None:
    _configure(configured, "json")
    log = logging.getLogger("ledgerport.test")
    log.info("token lp_at_abcdefghijklmnop for %s", "a\nb")
    try:
        raise ValueError("boom with lp_rt_abcdefghijklmnop")
    except ValueError:
        log.exception("failed")

    lines = configured.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["level"] == "INFO"
    assert first["logger"] == "ledgerport.test"
    assert first["message"] == "token lp_at_[REDACTED] for a\\nb"
    assert first["time"].endswith("+00:00")
    assert second["message"] == "failed"
    assert "ValueError" in second["exception"]
    assert "lp_rt_abcdefghijklmnop" not in second["exception"]


@pytest.mark.parametrize("format", ["text", "json"])
def test_libraries_tell_warnings_only(configured: io.StringIO, format: str) -> None:
    _configure(configured, format)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).info("HTTP Request: POST https://hooks.example/?key=secret")
    logging.getLogger("httpx").warning("a warning still shows")

    text = configured.getvalue()
    assert "hooks.example" not in text
    assert "a warning still shows" in text
