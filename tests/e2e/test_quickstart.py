"""docs/quickstart.md, executed: the walkthrough's shell blocks against a real ``ledgerport serve``.

The document's fenced blocks are read in order. The ```sh block preceded by the HTML comment
``<!-- quickstart-test: server ... -->`` starts the service; the test does not run it but starts
``ledgerport serve`` itself, in a temporary directory on a free loopback port, with that block's
``LEDGERPORT_*`` assignments. Every other ```sh block runs, in order, in one bash process under
``set -euo pipefail`` with ``BASE`` preset to the server's URL, so shell variables carry from one
block to the next as they do for a reader typing them into one terminal.

A ```text or ```json block is the output shown for the nearest ```sh block above it. The test
compares it with what that block printed (with ``...`` matching anything and the document's
``http://127.0.0.1:8080`` standing for the server's URL); the server block's shown lines must
appear in the server's log. The run is bounded by RUN_TIMEOUT; bash and its children run in a
process group of their own, killed if the time runs out.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

from .served import start_server, stop, wait_healthy

DOC = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"
DOC_BASE = "http://127.0.0.1:8080"
RUN_TIMEOUT = 60.0
SERVER_MARKER = re.compile(r"<!--\s*quickstart-test:\s*server\b(?:(?!-->).)*-->\s*\Z", re.DOTALL)
FENCE = re.compile(r"^```(\S*)\s*$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATOR = "@@quickstart-block-{}@@"
OUTPUT_LANGS = ("text", "json")
PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


@dataclass
class Block:
    lang: str
    text: str
    line: int
    server: bool = False
    expected: Block | None = field(default=None, repr=False)


def parse(document: str) -> list[Block]:
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
            server = lang == "sh" and SERVER_MARKER.search("\n".join(prose)) is not None
            blocks.append(Block(lang, "\n".join(body) + "\n", start, server))
            body, prose = None, []
            continue
        body.append(line)
    assert body is None, f"{DOC.name}: the block opened on line {start} is not closed"

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


def server_environment(block: Block) -> dict[str, str]:
    """The ``NAME=value`` assignments in front of the server block's ``ledgerport serve``."""
    words = shlex.split(block.text.replace("\\\n", " "), comments=True)
    names = [word for word in words if ASSIGNMENT.match(word)]
    command = words[len(names) :]
    assert words[: len(names)] == names, f"assignments must come first: {block.text}"
    assert len(command) == 2, f"the server block should run one command: {block.text}"
    assert Path(command[0]).name == "ledgerport", block.text
    assert command[1] == "serve", block.text
    return dict(name.split("=", 1) for name in names)


def normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def for_server(expected: str, base: str) -> str:
    """``expected`` with the document's base URL, plain and percent-encoded, as ``base``."""
    return expected.replace(DOC_BASE, base).replace(quote(DOC_BASE, safe=""), quote(base, safe=""))


def pattern(expected: str, *, dotall: bool) -> re.Pattern[str]:
    """``expected`` as a regular expression in which ``...`` matches any text."""
    any_text = "(?s:.*?)" if dotall else ".*?"
    return re.compile(any_text.join(re.escape(part) for part in expected.split("...")))


def shown_output_matches(expected: str, printed: str, base: str) -> bool:
    wanted = pattern(normalized(for_server(expected, base)), dotall=True)
    return wanted.fullmatch(normalized(printed)) is not None


def missing_log_lines(expected: str, log: str, base: str) -> list[str]:
    lines = log.splitlines()
    return [
        line
        for line in normalized(for_server(expected, base)).splitlines()
        if line and not any(pattern(line, dotall=False).fullmatch(got) for got in lines)
    ]


def script_of(blocks: list[Block]) -> str:
    parts = ["set -euo pipefail"]
    for index, block in enumerate(blocks):
        parts.append(f"# {DOC.name}, line {block.line}")
        parts.append(block.text)
        parts.append(f"printf '\\n%s\\n' '{SEPARATOR.format(index)}'")
    return "\n".join(parts) + "\n"


def shell_environment(base: str, workdir: Path) -> dict[str, str]:
    """The test's environment for the blocks: no LEDGERPORT_*, no proxies, BASE preset."""
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
    return env


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def outputs(self, count: int) -> list[str]:
        """What each of the first ``count`` blocks printed on stdout."""
        found: list[str] = []
        rest = self.stdout
        for index in range(count):
            printed, marker, rest = rest.partition(f"\n{SEPARATOR.format(index)}\n")
            if not marker:
                break
            found.append(printed)
        return found


def run_blocks(script: Path, env: dict[str, str], workdir: Path) -> Run:
    process = subprocess.Popen(
        ["bash", str(script)],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=10)
        pytest.fail(
            f"the quickstart blocks did not finish within {RUN_TIMEOUT} s\n"
            f"--- stdout\n{stdout}\n--- stderr\n{stderr}"
        )
    return Run(process.returncode, stdout, stderr)


def test_quickstart_document_is_well_formed() -> None:
    blocks = parse(DOC.read_text(encoding="utf-8"))
    shell = [block for block in blocks if block.lang == "sh"]
    assert [block.server for block in shell].count(True) == 1, "exactly one server block"
    assert shell[0].server, "the server block comes first"
    env = server_environment(shell[0])
    assert env.get("LEDGERPORT_ENV") == "development"
    assert "LEDGERPORT_ADMIN_TOKEN" in env
    assert "LEDGERPORT_BIND" not in env, "the test chooses the port"
    assert "BASE=${BASE:-" + DOC_BASE + "}" in shell[1].text
    assert all("ledgerport serve" not in block.text for block in shell[1:])
    assert all(block.lang in ("sh", *OUTPUT_LANGS) for block in blocks), "unknown block kinds"


def test_quickstart_walkthrough_runs(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("the quickstart needs curl, which is not installed")
    blocks = parse(DOC.read_text(encoding="utf-8"))
    shell = [block for block in blocks if block.lang == "sh"]
    server_block, steps = shell[0], shell[1:]
    assert server_block.server
    doc_env = server_environment(server_block)

    server = start_server(tmp_path, doc_env["LEDGERPORT_ADMIN_TOKEN"], env=doc_env)
    try:
        wait_healthy(server)
        script = tmp_path / "quickstart.sh"
        script.write_text(script_of(steps), encoding="utf-8")
        run = run_blocks(script, shell_environment(server.base, tmp_path), tmp_path)
    finally:
        stop(server.process)

    transcript = (
        f"--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}\n--- server log\n{server.output()}"
    )
    outputs = run.outputs(len(steps))
    if run.returncode != 0:
        failed = steps[len(outputs)].line if len(outputs) < len(steps) else None
        pytest.fail(
            f"the blocks exited with {run.returncode} in the block on line {failed} of "
            f"{DOC.name}\n{transcript}"
        )
    assert '{"data":[],"next":null}' in run.stdout, transcript
    assert re.search(r'"access_token":"lp_at_[^"]+","token_type":"Bearer"', run.stdout), transcript
    assert re.search(r'"refresh_token":"lp_rt_[^"]+"', run.stdout), transcript
    assert len(outputs) == len(steps), transcript
    for block, printed in zip(steps, outputs, strict=True):
        if block.expected is not None:
            assert shown_output_matches(block.expected.text, printed, server.base), (
                f"{DOC.name}, line {block.expected.line}: the output shown\n"
                f"{block.expected.text}\nis not what the block on line {block.line} printed\n"
                f"{printed}"
            )
    if server_block.expected is not None:
        missing = missing_log_lines(server_block.expected.text, server.output(), server.base)
        assert not missing, f"not in the server log: {missing}\n{server.output()}"
