"""The live rows say what the server-rendered rows say: ``static/live.js``'s words for a
delivery's last answer (``responseOrError``, from the stream event's ``responseCode`` and
``lastError``) against ``webhook_words.response_or_error``, case by case, run by Node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import ledgerport.http.pages
from ledgerport.http.pages.console.webhook_words import response_or_error

LIVE_JS = Path(ledgerport.http.pages.__file__).parent / "static" / "live.js"
NODE = shutil.which("node")

CASES: list[tuple[int | None, str | None]] = [
    (200, None),
    (204, None),
    (None, None),
    (299, None),
    (300, None),
    (404, None),
    (410, None),
    (500, "HTTP 500"),
    (None, "HTTP 503"),
    (None, "timeout: no answer within 2 s"),
    (None, "  timeout:   no answer within 10 s  "),
    (None, "connection error: all attempts to connect to 127.0.0.1:9 failed"),
    (None, "connection error: [Errno 111] Connection REFUSED"),
    (None, "connection error: cannot resolve x.invalid: no"),
    (None, "connection error: TLS handshake failed"),
    (None, "not sent: the webhook is switched off"),
    (None, "the receiver said something unexpected"),
    (None, ""),
    (None, "connection error: " + "x" * 300),
    (None, "not sent: " + "word " * 40),
    (None, "timeout: " + "é" * 130),
    (None, "HTTP 502 " + "🙂" * 130),
    (200, "timeout: no answer within 2 s"),
]


def _node_says(cases: list[tuple[int | None, str | None]]) -> list[str]:
    script = (
        "const live = require(process.argv[1]);"
        "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(cases.map(([c, e]) => live.responseOrError(c, e))));"
    )
    assert NODE is not None
    done = subprocess.run(
        [NODE, "-e", script, str(LIVE_JS)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    said: list[str] = json.loads(done.stdout)
    return said


@pytest.mark.skipif(NODE is None, reason="Node is not installed")
def test_the_live_rows_say_what_the_server_rows_say() -> None:
    said = _node_says(CASES)
    expected = [response_or_error(code, error) for code, error in CASES]
    assert list(zip(CASES, said, strict=True)) == list(zip(CASES, expected, strict=True))


def test_a_delivered_row_shows_its_code_and_a_failed_one_its_words() -> None:
    assert response_or_error(200, None) == "200"
    assert response_or_error(None, None) == ""
    assert response_or_error(500, "HTTP 500") == "Answered HTTP 500"
    assert response_or_error(None, "timeout: no answer within 2 s") == (
        "Timed out: no answer within 2 s"
    )
