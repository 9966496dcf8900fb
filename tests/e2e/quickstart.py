"""docs/quickstart.md as a reader types it: its blocks, read in order, run against a real
``ledgerport serve`` (for ``test_quickstart.py``, and for ``test_readme_postgres.py``, which runs
its first steps on PostgreSQL).

The document's fenced blocks are read in order. A ```sh block preceded by an HTML comment
``<!-- quickstart-test: ROLE ... -->`` is typed in another terminal than the walkthrough's shell:

- ``server``: the first start. The test starts the installed ``ledgerport serve`` itself (see
  :func:`launch`), in a temporary directory on a free loopback port, with the block's
  ``LEDGERPORT_*`` assignments; the admin token it prints is what the reader pastes.
- ``receiver``: the test runs the block in the background in the same directory, with a free
  port in place of the document's 9001.

Every other ```sh block runs, in order, in one bash process under ``set -euo pipefail`` with
``BASE`` preset to the server's URL, so shell variables carry from one block to the next as they
do for a reader typing them into one terminal; its standard input holds the admin token, for the
block that asks for it. Where a receiver block stands, the script waits until the
test has done that block's part (a request file and an answer file in a directory of their own).

A ```text or ```json block is the output shown for the nearest ```sh block above it. The test
compares it with what that block printed (with ``...`` matching anything, the document's
``http://127.0.0.1:8080`` standing for the server's URL and 9001 for the receiver's port); the
lines shown under a server or receiver block must appear in that process's output.
bash and its children run in a process group of their own, killed if the time runs out.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

from . import served
from .served import Server, free_port, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "quickstart.md"
README = ROOT / "README.md"
DOC_BASE = "http://127.0.0.1:8080"
DOC_RECEIVER_PORT = "9001"
LEDGERPORT = Path(sys.executable).parent / "ledgerport"
"""The installed command, as the reader runs it (``.venv/bin/ledgerport``)."""
RUN_TIMEOUT = 240.0
"""Seconds the blocks may take in all: standard password hashing, sandbox workers."""
RECEIVER_TIMEOUT = 15.0
ROLE_MARKER = re.compile(
    r"<!--\s*quickstart-test:\s*(server|receiver)\b(?:(?!-->).)*-->\s*\Z", re.DOTALL
)
FENCE = re.compile(r"^```(\S*)\s*$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATOR = "@@quickstart-block-{}@@"
OUTPUT_LANGS = ("text", "json")
OTHER_TERMINALS = ("receiver",)
PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
ADMIN_TOKEN_LINE = re.compile(r"generated admin token \(shown once, store it now\): (\S+)")


@dataclass
class Block:
    lang: str
    text: str
    line: int
    role: str | None = None
    """server or receiver: typed in another terminal (see the module's docstring)."""
    expected: Block | None = field(default=None, repr=False)


def parse(document: str, name: str = DOC.name) -> list[Block]:
    """The fenced blocks of ``document`` in order, each output block attached to its sh block."""
    blocks: list[Block] = []
    prose: list[str] = []
    body: list[str] | None = None
    lang, start = "", 0
    for number, line in enumerate(document.splitlines(), start=1):
        if body is None:
            opening = FENCE.match(line)
            if opening is None:
                prose.append(line)
                continue
            lang, start, body = opening[1], number, []
            continue
        if line.strip() == "```":
            marker = ROLE_MARKER.search("\n".join(prose)) if lang == "sh" else None
            blocks.append(Block(lang, "\n".join(body) + "\n", start, marker and marker[1]))
            body, prose = None, []
            continue
        body.append(line)
    assert body is None, f"{name}: the block opened on line {start} is not closed"

    last_sh: Block | None = None
    for block in blocks:
        if block.lang == "sh":
            last_sh = block
        elif block.lang in OUTPUT_LANGS:
            assert last_sh is not None, f"output block on line {block.line} follows no sh block"
            assert last_sh.expected is None, (
                f"the sh block on line {last_sh.line} shows two outputs (lines "
                f"{last_sh.expected and last_sh.expected.line} and {block.line})"
            )
            last_sh.expected = block
    return blocks


def quickstart() -> list[Block]:
    return parse(DOC.read_text(encoding="utf-8"))


def command_of(text: str) -> tuple[dict[str, str], list[str]]:
    """The ``NAME=value`` assignments in front of a one-command block, and the command."""
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    names = [word for word in words if ASSIGNMENT.match(word)]
    assert words[: len(names)] == names, f"assignments must come first: {text}"
    return dict(name.split("=", 1) for name in names), words[len(names) :]


def serve_environment(block: Block) -> dict[str, str]:
    """The variables a server block starts ``ledgerport serve`` with."""
    env, command = command_of(block.text)
    assert len(command) == 2, f"the block on line {block.line} should run one command"
    assert Path(command[0]).name == "ledgerport", block.text
    assert command[1] == "serve", block.text
    return env


def normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


@dataclass(frozen=True)
class Places:
    """Where this run serves: the server's URL and the receiver's port, for the document's."""

    base: str
    receiver_port: int

    def text(self, doc_text: str) -> str:
        """``doc_text`` with the document's base URL (plain and percent-encoded) and receiver
        port as this run's."""
        return (
            doc_text.replace(DOC_BASE, self.base)
            .replace(quote(DOC_BASE, safe=""), quote(self.base, safe=""))
            .replace(f"127.0.0.1:{DOC_RECEIVER_PORT}", f"127.0.0.1:{self.receiver_port}")
            .replace(f'"127.0.0.1", {DOC_RECEIVER_PORT})', f'"127.0.0.1", {self.receiver_port})')
        )


def pattern(expected: str, *, dotall: bool) -> re.Pattern[str]:
    """``expected`` as a regular expression in which ``...`` matches any text."""
    any_text = "(?s:.*?)" if dotall else ".*?"
    return re.compile(any_text.join(re.escape(part) for part in expected.split("...")))


def shown_output_matches(expected: str, printed: str, places: Places) -> bool:
    wanted = pattern(normalized(places.text(expected)), dotall=True)
    return wanted.fullmatch(normalized(printed)) is not None


def missing_lines(expected: str, output: str, places: Places) -> list[str]:
    """The lines of ``expected`` that match no line of ``output``."""
    lines = output.splitlines()
    return [
        line
        for line in normalized(places.text(expected)).splitlines()
        if line and not any(pattern(line, dotall=False).fullmatch(got) for got in lines)
    ]


def script_of(blocks: list[Block], places: Places) -> str:
    """The blocks as one bash script: a typed block, then a separator line on stdout; where a
    block of another terminal stands, a wait for the test to have done its part."""
    parts = ["set -euo pipefail"]
    typed = 0
    for index, block in enumerate(blocks):
        parts.append(f"# {DOC.name}, line {block.line}")
        if block.role in OTHER_TERMINALS:
            parts.append(f': > "$QUICKSTART_CONTROL/request-{index}"')
            parts.append(f'until [ -e "$QUICKSTART_CONTROL/done-{index}" ]; do sleep 0.05; done')
            continue
        parts.append(places.text(block.text))
        parts.append(f"printf '\\n%s\\n' '{SEPARATOR.format(typed)}'")
        typed += 1
    return "\n".join(parts) + "\n"


def shell_environment(base: str, workdir: Path, control: Path) -> dict[str, str]:
    """The blocks' environment: no LEDGERPORT_*, no proxies, BASE preset."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("LEDGERPORT_")
        and key.lower() not in PROXY_VARIABLES
        and key not in {"BASE", "BASH_ENV", "ENV"}
    }
    python_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in (python_dir, env.get("PATH")) if p)
    env["BASE"] = base
    env["TMPDIR"] = str(workdir)
    env["QUICKSTART_CONTROL"] = str(control)
    return env


def launch(workdir: Path, env: Mapping[str, str], port: int, log_name: str) -> Server:
    """``ledgerport serve`` as the reader starts it (the installed command, in ``workdir``,
    nothing of the test's environment's LEDGERPORT_*), with ``env`` and on ``port``."""
    return served.launch([str(LEDGERPORT), "serve"], workdir, env, port, log_name)


def printed_admin_token(server: Server) -> str:
    found = ADMIN_TOKEN_LINE.search(server.output())
    assert found is not None, f"no generated admin token printed:\n{server.output()}"
    return found[1]


@contextmanager
def started(
    workdir: Path, env: Mapping[str, str], log_name: str = "server.log"
) -> Iterator[Server]:
    """A healthy server (see :func:`launch`) for the block's length, stopped afterwards."""
    server = launch(workdir, env, free_port(), log_name)
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(server.process)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def outputs(self, count: int) -> list[str]:
        """What each of the first ``count`` typed blocks printed on stdout."""
        found: list[str] = []
        rest = self.stdout
        for index in range(count):
            printed, marker, rest = rest.partition(f"\n{SEPARATOR.format(index)}\n")
            if not marker:
                break
            found.append(printed)
        return found


def run_blocks(
    blocks: list[Block],
    *,
    workdir: Path,
    places: Places,
    admin_token: str,
    other_terminal: Callable[[Block], None],
) -> Run:
    """Run ``blocks`` in one bash (see :func:`script_of`), the admin token on its standard
    input; ``other_terminal(block)`` does the part of each receiver block when the
    script reaches it."""
    control = workdir / "quickstart-control"
    control.mkdir()
    script = workdir / "quickstart.sh"
    script.write_text(script_of(blocks, places), encoding="utf-8")
    stdout_path, stderr_path = workdir / "blocks.stdout", workdir / "blocks.stderr"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            ["bash", str(script)],
            cwd=workdir,
            env=shell_environment(places.base, workdir, control),
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    assert process.stdin is not None
    process.stdin.write(f"{admin_token}\n".encode())
    process.stdin.close()
    deadline = time.monotonic() + RUN_TIMEOUT
    try:
        while process.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the quickstart blocks did not finish within {RUN_TIMEOUT} s\n"
                    f"--- stdout\n{stdout_path.read_text()}\n--- stderr\n{stderr_path.read_text()}"
                )
            for index, block in enumerate(blocks):
                request, done = control / f"request-{index}", control / f"done-{index}"
                if request.exists() and not done.exists():
                    other_terminal(block)
                    done.touch()
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    return Run(process.returncode, stdout_path.read_text(), stderr_path.read_text())


@dataclass
class Receiver:
    """A receiver block running in the background, and what it printed."""

    process: subprocess.Popen[bytes]
    output_path: Path

    def output(self) -> str:
        return self.output_path.read_text(errors="replace")


def start_receiver(block: Block, places: Places, workdir: Path, env: dict[str, str]) -> Receiver:
    """Run the receiver block in the background; answers once it accepts connections."""
    output_path = workdir / "receiver.out"
    with output_path.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", places.text(block.text)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    receiver = Receiver(process, output_path)
    deadline = time.monotonic() + RECEIVER_TIMEOUT
    while True:
        assert process.poll() is None, f"the receiver exited:\n{receiver.output()}"
        try:
            socket.create_connection(("127.0.0.1", places.receiver_port), timeout=1).close()
            return receiver
        except OSError:
            if time.monotonic() > deadline:
                stop_receiver(receiver)
                pytest.fail(f"the receiver did not listen within {RECEIVER_TIMEOUT} s")
            time.sleep(0.05)


def stop_receiver(receiver: Receiver) -> None:
    if receiver.process.poll() is None:
        os.killpg(receiver.process.pid, signal.SIGTERM)
        try:
            receiver.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(receiver.process.pid, signal.SIGKILL)
            receiver.process.wait(timeout=10)


def check_typed_blocks(blocks: list[Block], run: Run, places: Places, transcript: str) -> None:
    """Every typed block ran, and printed what the document shows under it."""
    typed = [block for block in blocks if block.role not in OTHER_TERMINALS]
    outputs = run.outputs(len(typed))
    if run.returncode != 0:
        failed = typed[len(outputs)].line if len(outputs) < len(typed) else None
        pytest.fail(
            f"the blocks exited with {run.returncode} in the block on line {failed} of "
            f"{DOC.name}\n{transcript}"
        )
    assert len(outputs) == len(typed), transcript
    wrong = [
        f"{DOC.name}, line {block.expected.line}: the output shown\n{block.expected.text}"
        f"is not what the block on line {block.line} printed\n{printed}"
        for block, printed in zip(typed, outputs, strict=True)
        if block.expected is not None
        and not shown_output_matches(block.expected.text, printed, places)
    ]
    assert not wrong, "\n\n".join(wrong)
