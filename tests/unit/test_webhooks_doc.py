"""The receivers shown in docs/webhooks.md verify what the engine signs: the Python one here,
the Node.js one with the machine's ``node`` (skipped where there is none)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledgerport.engine import signature_header

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
SECRET = "whsec_" + "s" * 43
OLD_SECRET = "whsec_" + "o" * 43
BODY = b'{"id":"dlv_1","eventId":"evt_1","type":"invoice.created","data":{"total":"1.00"}}'


def _block(language: str) -> str:
    found = re.search(rf"```{language}\n(.*?)```", DOC.read_text(), re.S)
    assert found is not None, f"docs/webhooks.md shows no {language} receiver"
    return found.group(1)


def _python_verify() -> Callable[..., bool]:
    namespace: dict[str, object] = {}
    exec(_block("python"), namespace)  # the document's own example
    verify = namespace["verify"]
    assert callable(verify)
    return verify  # type: ignore[return-value]


CASES = [
    # (header secrets, verifying secret, body, seconds ago, accepted)
    ((SECRET,), SECRET, BODY, 0, True),
    ((SECRET, OLD_SECRET), OLD_SECRET, BODY, 0, True),
    ((SECRET,), OLD_SECRET, BODY, 0, False),
    ((SECRET,), SECRET, BODY + b" ", 0, False),
    ((SECRET,), SECRET, BODY, 301, False),
]


@pytest.mark.parametrize(("secrets", "secret", "body", "ago", "accepted"), CASES)
def test_the_python_receiver(
    secrets: tuple[str, ...], secret: str, body: bytes, ago: int, accepted: bool
) -> None:
    header = signature_header(list(secrets), int(time.time()) - ago, BODY)
    assert _python_verify()(body, header, secret) is accepted


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed here")
def test_the_nodejs_receiver() -> None:
    calls = []
    for secrets, secret, body, ago, _ in CASES:
        header = signature_header(list(secrets), int(time.time()) - ago, BODY)
        calls.append({"body": body.decode(), "header": header, "secret": secret})
    script = (
        _block("javascript")
        + f"\nconst calls = {json.dumps(calls)};\n"
        + "console.log(JSON.stringify(calls.map((c) =>"
        + " verify(Buffer.from(c.body), c.header, c.secret))));\n"
    )
    run = subprocess.run(
        ["node", "-e", script], capture_output=True, text=True, timeout=30, check=True
    )
    assert json.loads(run.stdout) == [accepted for *_, accepted in CASES]
