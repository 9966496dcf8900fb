"""How the app author's commands print: aligned tables, one JSON document (or one a line),
one-line refusals, the lines ``tail`` prints, the stream it reads and the credentials file."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest
from rich.console import Console

from ledgerport import author_cli
from ledgerport.author_cli import Credentials, Refused, StreamEvent


def _rendered(rows: list[list[object]]) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(
        author_cli.table(["ID", "NAME", "WEBHOOKS"], rows)
    )
    return out.getvalue().splitlines()


def test_a_table_aligns_its_columns_and_shows_none_as_nothing() -> None:
    lines = _rendered([["app_1", "Books Sync", 2], ["app_22222", None, 10]])

    assert lines[0].split() == ["ID", "NAME", "WEBHOOKS"]
    starts = [line.index(word) for line, word in zip(lines, ["NAME", "Books", ""], strict=False)]
    assert starts[0] == starts[1]
    assert lines[2].split() == ["app_22222", "10"]
    assert lines[1].index("2") == lines[2].index("10")


def test_a_table_off_a_terminal_has_no_colour(capsys: pytest.CaptureFixture[str]) -> None:
    author_cli.show_rows(
        [{"id": "app_1", "name": "A"}], [("ID", "id"), ("NAME", "name")], as_json=False, empty=""
    )

    assert "\x1b[" not in capsys.readouterr().out


def test_json_output_is_one_document_with_the_rows(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"id": "app_1", "webhooks": 1}]
    author_cli.show_rows(rows, [("ID", "id")], as_json=True, empty="none")

    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == {"data": rows}


def test_no_rows_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    author_cli.show_rows([], [("ID", "id")], as_json=False, empty="You develop no apps yet.")

    assert capsys.readouterr().out == "You develop no apps yet.\n"


def test_a_refusal_is_one_line_with_exit_code_1() -> None:
    out = io.StringIO()
    refusal = Refused("The webhook\nwas not found  (WEBHOOK_NOT_FOUND, 404)")
    refusal.show(out)

    assert refusal.exit_code == 1
    assert out.getvalue() == "ledgerport: The webhook was not found (WEBHOOK_NOT_FOUND, 404)\n"


def test_a_delivery_line_says_when_what_how_and_where() -> None:
    line = author_cli.delivery_line(
        {
            "createdAt": "2026-12-07T08:00:00.000Z",
            "type": "invoice.paid",
            "status": "failed",
            "responseCode": 500,
            "attempt": 3,
            "id": "dlv_1",
            "webhookId": "wh_1",
            "lastError": "HTTP 500",
        }
    )

    assert line == (
        "2026-12-07T08:00:00.000Z  invoice.paid  failed 500  attempt 3  dlv_1 -> wh_1  HTTP 500"
    )


def test_a_run_line_says_its_function_duration_and_error() -> None:
    line = author_cli.run_line(
        {
            "createdAt": "2026-12-07T08:00:00.000Z",
            "function": "sync",
            "type": "customer.created",
            "status": "failed",
            "durationMs": 12,
            "id": "run_1",
            "error": "TypeError: x is undefined",
        }
    )

    assert line.split("  ") == [
        "2026-12-07T08:00:00.000Z",
        "sync",
        "customer.created",
        "failed 12 ms",
        "run_1",
        "TypeError: x is undefined",
    ]


def test_a_stream_is_read_event_by_event_with_ids_and_without_comments() -> None:
    lines = [
        ": keep-alive",
        "event: delivery",
        "id: 17-2",
        'data: {"id": "dlv_1"}',
        "",
        ": keep-alive",
        "",
        "event: delivery",
        "id: 17-3",
        'data: {"id":',
        'data: "dlv_2"}',
        "",
        "event: delivery",
        'data: {"cut": ',  # the connection dropped mid-event: never yielded
    ]

    assert list(author_cli.parse_events(lines)) == [
        StreamEvent("17-2", "delivery", {"id": "dlv_1"}),
        StreamEvent("17-3", "delivery", {"id": "dlv_2"}),
    ]


def test_credentials_are_kept_0600_for_several_servers_one_current(tmp_path: Path) -> None:
    path = tmp_path / "config" / "ledgerport" / "credentials.json"
    credentials = Credentials()
    credentials.remember("http://a.example/", "lp_dev_a")
    credentials.remember("http://b.example", "lp_dev_b")
    author_cli.save_credentials(credentials, path)
    loaded = author_cli.load_credentials(path)
    loaded.forget("http://b.example")

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert loaded.token("http://a.example") == "lp_dev_a"
    assert author_cli.load_credentials(path).current == "http://b.example"
    assert loaded.current == "http://a.example"
    assert author_cli.load_credentials(tmp_path / "none.json") == Credentials()


EVERY_COMMAND = [
    ["login"],
    ["logout"],
    ["apps"],
    ["trigger"],
    ["tail"],
    ["deliveries"],
    ["deliveries", "recover"],
    ["runs"],
    ["runs", "replay"],
    ["functions"],
    ["functions", "push"],
    ["functions", "versions"],
    ["functions", "rollback"],
    ["functions", "run"],
]


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=" ".join)
def test_every_command_has_help_with_an_example(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = author_cli.run_author_command([*command, "--help"])

    out = capsys.readouterr().out
    assert code == 0
    assert f"Usage: ledgerport {' '.join(command)}" in out
    assert "Example:" in out
    assert f"ledgerport {' '.join(command)}" in out.split("Example:", 1)[1]


@pytest.mark.parametrize("command", [["apps", "--bogus"], ["trigger"], ["tail", "everything"]])
def test_a_usage_error_exits_2(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = author_cli.run_author_command(command)

    assert code == 2
    assert "Usage: ledgerport" in capsys.readouterr().err


def test_a_command_before_login_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEDGERPORT_CLI_CONFIG", str(tmp_path / "credentials.json"))
    monkeypatch.delenv("LEDGERPORT_SERVER", raising=False)

    code = author_cli.run_author_command(["apps"])

    assert code == 1
    assert capsys.readouterr().err == (
        "ledgerport: not signed in: run ledgerport login --server URL first\n"
    )
