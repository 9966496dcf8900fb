"""docs/quickstart-cli.md, executed: each ```sh block in the terminal its marker names
(``<!-- quickstart-cli: ROLE -->``), against one ``ledgerport serve`` started as the page starts
it (production mode, the admin token it prints pasted):

- ``server``: the test starts the installed command in a temporary directory on a free port;
- ``typed``: run by bash in the reader's shell, whose variables carry to the next typed block
  (kept in a file between them), with ``BASE`` preset and the admin token on standard input;
- ``login``: run in the background; the test approves the code it prints as Ada, through the
  console's page (as a browser would), and it must end signed in;
- ``receiver`` and ``listen``: run in the background, the receiver with the secret listen
  printed in place of the page's ``whsec_...`` and its port free.

The ```text block after a block is what it prints (``...`` matches anything); the test checks
each against what that block printed, and that a delivery triggered reached the receiver,
verified, and was printed by listen."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .quickstart import ROOT, launch, missing_lines, printed_admin_token
from .quickstart import Places as _Places
from .served import free_port, stop, wait_healthy

DOC = ROOT / "docs" / "quickstart-cli.md"
MARKER = re.compile(r"<!--\s*quickstart-cli:\s*(\w+)\s*-->\s*\Z")
FENCE = re.compile(r"^```(\S*)\s*$")
DOC_BASE = "http://127.0.0.1:8080"
DOC_RECEIVER = "4242"
EMAIL, PASSWORD = "ada@example.com", "correct-horse-battery"
WAIT = 90.0
ASSIGNED = re.compile(r"(?:^|\s)([A-Z][A-Z0-9_]*)=|read -rsp '[^']*' ([A-Z][A-Z0-9_]*)")


def blocks() -> list[tuple[str | None, str, str]]:
    """(role, language, text) of each fenced block, in order."""
    found: list[tuple[str | None, str, str]] = []
    lines = DOC.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence and fence[1]:
            before = "\n".join(lines[:index]).rstrip()
            marker = MARKER.search(before)
            end = lines.index("```", index + 1)
            found.append(
                (marker[1] if marker else None, fence[1], "\n".join(lines[index + 1 : end]))
            )
            index = end + 1
            continue
        index += 1
    return found


def _cookies(response: httpx.Response, jar: dict[str, str]) -> dict[str, str]:
    """``jar`` with the cookies ``response`` sets. Kept by hand: the service in production mode
    sets them ``Secure``, which a browser sends to a loopback address over http and httpx's jar
    does not."""
    for header in response.headers.get_list("set-cookie"):
        name, _, value = header.split(";", 1)[0].partition("=")
        jar[name.strip()] = value
    return jar


def approve_as_ada(base: str, user_code: str) -> None:
    """Sign in on the service's page as Ada and approve the code, as her browser would."""
    with httpx.Client(base_url=base, timeout=10.0, trust_env=False) as browser:
        page = browser.get("/login")
        jar = _cookies(page, {})
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert csrf is not None
        cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
        signed_in = browser.post(
            "/login",
            data={"email": EMAIL, "password": PASSWORD, "csrf_token": csrf[1], "next": "/"},
            headers={"Cookie": cookie},
        )
        assert signed_in.status_code == 303, signed_in.text
        cookie = "; ".join(f"{k}={v}" for k, v in _cookies(signed_in, jar).items())
        approved = browser.post(
            "/developer/cli-logins",
            json={"userCode": user_code},
            headers={"Cookie": cookie, "Sec-Fetch-Site": "same-origin"},
        )
        assert approved.status_code == 204, approved.text


def _shown(expected: str, printed: str, places: _Places) -> None:
    missing = missing_lines(expected, printed, places)
    assert not missing, f"not printed: {missing}\n--- printed\n{printed}"


def _read_until(stream: object, pattern: str, deadline: float) -> tuple[str, re.Match[str]]:
    seen = ""
    while time.monotonic() < deadline:
        line = stream.readline()  # type: ignore[attr-defined]
        if not line:
            break
        seen += line
        match = re.search(pattern, seen)
        if match:
            return seen, match
    raise AssertionError(f"{pattern!r} not printed:\n{seen}")


def test_the_cli_quickstart_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("the quickstart needs curl, which is not installed")
    steps = blocks()
    roles = [role for role, lang, _ in steps if lang == "sh"]
    assert roles == ["server", "typed", "login", "receiver", "listen", "typed"]
    port, receiver_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    places = _Places(base, receiver_port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
    env |= {
        "BASE": base,
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
    }
    variables = tmp_path / "variables.sh"
    variables.write_text("")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    server = launch(tmp_path, {}, port, "server.log")
    background: list[subprocess.Popen[str]] = []
    printed: list[tuple[str, str]] = []

    def shell(text: str, *, keep: bool) -> list[str]:
        script = f"set -euo pipefail\nsource {variables}\n{text}\n"
        if keep:  # what the block set, for the blocks typed after it
            names = " ".join(sorted({n for pair in ASSIGNED.findall(text) for n in pair if n}))
            script += f"for v in {names}; do declare -p $v >> {variables}; done\n"
        return ["bash", "-c", script]

    secret = ""
    try:
        wait_healthy(server)
        admin_token = printed_admin_token(server)
        deadline = time.monotonic() + WAIT
        for number, (role, lang, text) in enumerate(steps):
            if lang != "sh" or role == "server":
                continue
            expected = next(
                (t for r, lg, t in steps[number + 1 : number + 2] if lg == "text"), None
            )
            if role == "typed":
                done = subprocess.run(
                    shell(text, keep=True), input=admin_token + "\n", capture_output=True,
                    text=True, env=env, cwd=tmp_path, timeout=WAIT,
                )  # fmt: skip
                assert done.returncode == 0, done.stderr
                printed.append((text, done.stdout))
                if expected is not None:
                    _shown(expected, done.stdout, places)
            elif role == "login":
                login = subprocess.Popen(
                    shell(text, keep=False), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, env=env, cwd=tmp_path,
                )  # fmt: skip
                background.append(login)
                _, code = _read_until(login.stdout, r"approve the code (\S+)", deadline)
                approve_as_ada(base, code[1])
                out, err = login.communicate(timeout=WAIT)
                assert login.returncode == 0, err
                assert expected is not None
                _shown(expected, code.string + out, places)
            elif role == "receiver":
                receiver_text = text
            elif role == "listen":
                listen = subprocess.Popen(
                    shell(text.replace(DOC_RECEIVER, str(receiver_port)), keep=False),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, env=env, cwd=tmp_path,
                )  # fmt: skip
                background.append(listen)
                ready, found = _read_until(listen.stderr, r"secret is (whsec_\S+)", deadline)
                secret = found[1]
                assert expected is not None
                _shown(expected.replace(DOC_RECEIVER, str(receiver_port)), ready, places)
                runnable = receiver_text.replace("whsec_...", secret).replace(
                    DOC_RECEIVER, str(receiver_port)
                )
                receiver = subprocess.Popen(
                    shell(runnable, keep=False), stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                )  # fmt: skip
                background.append(receiver)
        assert secret
        listened, _ = _read_until(listen.stdout, r"customer\.created  200 .*attempt 1", deadline)
        received, _ = _read_until(receiver.stdout, r"signature verified", deadline)
        listen.send_signal(signal.SIGINT)
        _, stopped = listen.communicate(timeout=WAIT)
    finally:
        for process in background:
            if process.poll() is None:
                process.kill()
                process.communicate()
        stop(server.process)

    assert received.strip() == "customer.created signature verified"
    assert re.fullmatch(r"\S+ \S+  customer\.created  200  \d+ ms  attempt 1  dlv_\w+\n", listened)
    assert listen.returncode == 0, stopped
    assert "deleted the stream endpoint" in stopped
