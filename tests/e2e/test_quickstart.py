"""docs/quickstart.md, executed: the whole walkthrough against one real ``ledgerport serve``
started as the README starts it (production mode, the admin token it generates and prints) and
never restarted, a receiver in the background, a webhook delivery, its signature, a hosted
function's runs and a test run (see ``quickstart.py`` for how the blocks are run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .quickstart import (
    DOC,
    DOC_BASE,
    OUTPUT_LANGS,
    README,
    Block,
    Places,
    Receiver,
    check_typed_blocks,
    command_of,
    launch,
    missing_lines,
    parse,
    printed_admin_token,
    quickstart,
    run_blocks,
    serve_environment,
    shell_environment,
    start_receiver,
    stop_receiver,
)
from .served import free_port, stop, wait_healthy

SCOPES = ["customers:read", "customers:write", "invoices:read", "invoices:write"]


def _sh(blocks: list[Block]) -> list[Block]:
    return [block for block in blocks if block.lang == "sh"]


def _readme_serve_command() -> str:
    """The command the README's Quick start starts the service with."""
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start") : readme.index("## Configuration")]
    (first, *_) = [block for block in _sh(parse(section, README.name))]
    return first.text.strip().split("&&")[-1].strip()


def test_the_quickstart_runs_start_to_end_on_the_readmes_one_server() -> None:
    blocks = quickstart()
    shell = _sh(blocks)
    roles = [block.role for block in shell]
    assert roles.count("server") == 1, "exactly one start"
    assert shell[0].role == "server", "the start comes first"
    assert shell[0].text.strip() == _readme_serve_command() == ".venv/bin/ledgerport serve"
    assert serve_environment(shell[0]) == {}, "production mode, generated admin token"
    assert "restart" not in roles, "nothing is restarted"
    assert roles.count("receiver") == 1
    env, command = command_of(next(b for b in shell if b.role == "receiver").text)
    assert (env, command[:2]) == ({}, ["python3", "-c"])
    typed = [block for block in shell if block.role is None]
    assert "BASE=${BASE:-" + DOC_BASE + "}" in typed[0].text
    assert "read -rsp" in typed[0].text, "the admin token is pasted, not written down"
    assert all("ledgerport serve" not in block.text for block in typed)
    assert all(block.lang in ("sh", *OUTPUT_LANGS) for block in blocks), "unknown block kinds"
    # The loopback receiver works in production mode, and the page says why where it is made.
    document = DOC.read_text(encoding="utf-8")
    before_receiver = document[: document.index("<!-- quickstart-test: receiver")]
    reason = " ".join(before_receiver[before_receiver.rindex("## ") :].split())
    assert "reached only on a loopback address" in reason
    assert "nothing is restarted" in reason
    assert "Ctrl-C" not in before_receiver[before_receiver.index("## 2.") :]


def test_the_app_registers_the_scopes_its_examples_use() -> None:
    typed = [block.text for block in _sh(quickstart()) if block.role is None]
    registration = next(text for text in typed if '"$BASE/admin/apps"' in text)
    assert f'"scopes": {json.dumps(SCOPES)},' in registration
    consent = next(text for text in typed if "/oauth/authorize" in text and "SCOPES=" in text)
    assert f'SCOPES="{" ".join(SCOPES)}"' in consent


def test_quickstart_walkthrough_runs(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("the quickstart needs curl, which is not installed")
    blocks = quickstart()
    shell = _sh(blocks)
    first_start, steps = shell[0], shell[1:]
    places = Places(f"http://127.0.0.1:{free_port()}", free_port())
    port = int(places.base.rsplit(":", 1)[1])
    env = serve_environment(first_start)

    servers = [launch(tmp_path, env, port, "server.log")]
    receivers: list[Receiver] = []

    def other_terminal(block: Block) -> None:
        if block.role == "receiver":
            shell_env = shell_environment(places.base, tmp_path, tmp_path)
            receivers.append(start_receiver(block, places, tmp_path, shell_env))
        else:
            raise AssertionError(f"no part for the block on line {block.line}")

    try:
        wait_healthy(servers[0])
        admin_token = printed_admin_token(servers[0])
        run = run_blocks(
            steps,
            workdir=tmp_path,
            places=places,
            admin_token=admin_token,
            other_terminal=other_terminal,
        )
    finally:
        for receiver in receivers:
            stop_receiver(receiver)
        stop(servers[-1].process)

    received = receivers[0].output() if receivers else ""
    transcript = (
        f"--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}\n--- receiver\n{received}\n"
        + "".join(f"--- {server.log.name}\n{server.output()}\n" for server in servers)
    )
    check_typed_blocks(steps, run, places, transcript)
    assert len(servers) == 1, "one server from start to end"
    assert len(receivers) == 1, "the receiver ran"
    for block, output in (
        (first_start, servers[0].output()),
        *((b, received) for b in steps if b.role == "receiver"),
    ):
        if block.expected is not None:
            missing = missing_lines(block.expected.text, output, places)
            assert not missing, f"not printed by the block on line {block.line}: {missing}"
    # What the walkthrough promises, beyond the shown outputs' shapes.
    assert admin_token.startswith("lp_admin_")
    assert admin_token not in run.stdout, "the pasted token is not echoed"
    assert '"access_token":"lp_at_' in run.stdout
    assert "signature verified" in run.stdout
    assert '"status":"delivered","attempts":1,"responseCode":200' in run.stdout
    deliveries = [line for line in received.splitlines() if line.startswith("customer.created ")]
    assert len(deliveries) == 2, received  # one per customer created
    assert (tmp_path / "received.body").read_bytes().decode() == deliveries[-1].split(" ", 1)[1]
    assert '"logs":["invoice INV-0001 for Lovelace Analytical"]' in run.stdout
    assert '"number":"INV-0001"' in run.stdout
    assert '"message": "test event: nothing to do"' in run.stdout
    assert "refresh token reuse detected" in run.stdout
