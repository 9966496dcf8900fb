"""The README's PostgreSQL example, run as written on a fresh database: its ``createdb``, then its
``ledgerport serve`` (the key file created out of the working directory, in the configuration
directory's keys), then the quickstart's first steps against that server, up to the webhook's
receiver, typed in another terminal (see ``quickstart.py``). And what the README says of a key
file whose directory is missing.

The README names the local server (``-h 127.0.0.1 -U postgres``); the test runs it against
LEDGERPORT_TEST_POSTGRES only when that is the same server, and skips with the reason otherwise.
Only the database's name is the test's own, so that runs never meet."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ..stores import POSTGRES_ADMIN_URL, REQUIRE_POSTGRES, postgres_unusable
from .quickstart import (
    LEDGERPORT,
    README,
    Block,
    Places,
    check_typed_blocks,
    command_of,
    parse,
    printed_admin_token,
    quickstart,
    run_blocks,
    started,
)
from .served import free_port

README_DATABASE = "ledgerport"
README_SERVER = ("127.0.0.1", 5432, "postgres")
COMMAND_TIMEOUT = 60


def _postgres_example() -> tuple[list[str], dict[str, str], list[str]]:
    """The README's PostgreSQL block: its createdb command, and the variables and the command
    of its ``ledgerport serve``."""
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## PostgreSQL") : readme.index("## Operator API")]
    (block,) = [block for block in parse(section, README.name) if block.lang == "sh"]
    createdb, serve = block.text.strip().split("\n", 1)
    env, command = command_of(serve)
    return shlex.split(createdb), env, command


def _same_server() -> str | None:
    """Why LEDGERPORT_TEST_POSTGRES is not the server the README names, or None."""
    admin = urlsplit(POSTGRES_ADMIN_URL)
    if (admin.hostname, admin.port or 5432, admin.username) != README_SERVER:
        return f"the README's example names {README_SERVER}, the tests' server is elsewhere"
    return None


@pytest.fixture
def fresh_database_name() -> Iterator[str]:
    reason = postgres_unusable() or _same_server()
    if reason is not None:
        if REQUIRE_POSTGRES and postgres_unusable() is not None:
            pytest.fail(f"{reason} (LEDGERPORT_REQUIRE_POSTGRES=1)", pytrace=False)
        pytest.skip(reason)
    if shutil.which("createdb") is None or shutil.which("dropdb") is None:
        pytest.skip("createdb is missing (PostgreSQL's client programs)")
    name = f"ledgerport_readme_{secrets.token_hex(6)}"
    yield name
    subprocess.run(
        ["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", "--force", name],
        capture_output=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def test_the_example_is_the_one_this_test_runs() -> None:
    createdb, env, command = _postgres_example()

    assert createdb == ["createdb", "-h", "127.0.0.1", "-U", "postgres", README_DATABASE]
    assert env == {
        "LEDGERPORT_DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{README_DATABASE}",
    }
    assert command == [".venv/bin/ledgerport", "serve"]


def test_the_readme_postgresql_example_serves_the_quickstart(
    tmp_path: Path, fresh_database_name: str
) -> None:
    createdb, env, _ = _postgres_example()
    created = subprocess.run(
        [*createdb[:-1], fresh_database_name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    url = env["LEDGERPORT_DATABASE_URL"]
    env["LEDGERPORT_DATABASE_URL"] = url.removesuffix(README_DATABASE) + fresh_database_name
    blocks = quickstart()
    shell = [block for block in blocks if block.lang == "sh"]
    first_steps: list[Block] = []
    for block in shell[1:]:
        if block.role is not None:
            break
        first_steps.append(block)

    with started(tmp_path, env) as server:
        places = Places(server.base, free_port())
        admin_token = printed_admin_token(server)
        run = run_blocks(
            first_steps,
            workdir=tmp_path,
            places=places,
            admin_token=admin_token,
            other_terminal=lambda block: pytest.fail(f"no other terminal before {block.line}"),
        )
    transcript = (
        f"--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}\n--- server\n{server.output()}"
    )

    check_typed_blocks(first_steps, run, places, transcript)
    assert f"database: postgresql://postgres@127.0.0.1:5432/{fresh_database_name}" in (
        server.output()
    )
    # The key was generated out of the checkout, in the configuration directory's keys.
    assert not [path for path in tmp_path.iterdir() if path.suffix == ".key"]
    keys = Path(os.environ["XDG_CONFIG_HOME"]) / "ledgerport" / "keys"
    key_file = keys / f"postgresql-127.0.0.1-5432-{fresh_database_name}.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert '{"data":[],"next":null}' in run.stdout  # the first API call
    assert len(first_steps) >= 10


def test_a_key_file_in_a_missing_directory_stops_the_start_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "etc" / "ledgerport"
    env = {
        "LEDGERPORT_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/ledgerport",
        "LEDGERPORT_SECRET_KEY_FILE": str(missing / "root.key"),
        "LEDGERPORT_BIND": f"127.0.0.1:{free_port()}",
    }

    result = subprocess.run(
        [str(LEDGERPORT), "serve"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"ledgerport: configuration error: LEDGERPORT_SECRET_KEY_FILE: directory {missing} does"
        " not exist; create it first"
    ]
    assert not missing.exists()
