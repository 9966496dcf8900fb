"""Schema migrations: applied in order and once, on both backends, also by concurrent migrators."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import trio

from ledgerport.storage import MigrationError, Store, load_migrations, open_postgres
from ledgerport.storage._migrations import Migration

TIMEOUT = 30
SUBPROCESS_TIMEOUT = 60
BACKENDS = ("sqlite", "postgres")
FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
TENANCY_TABLES = (
    "settings",
    "businesses",
    "users",
    "memberships",
    "role_permissions",
    "apps",
    "installations",
    "developer_tokens",
    "login_sessions",
    "events",
)


def _migrations_kind(store: Store) -> str:
    return "sqlite" if store.kind == "sqlite" else "postgres"


def _expected_versions(kind: str) -> list[int]:
    return list(range(1, len(load_migrations(kind)) + 1))


async def test_migrate_applies_every_migration_once(empty_store: Store) -> None:
    expected = _expected_versions(_migrations_kind(empty_store))

    with trio.fail_after(TIMEOUT):
        before = await empty_store.schema_version()
        first = await empty_store.migrate()
        after = await empty_store.schema_version()
        second = await empty_store.migrate()
        again = await empty_store.schema_version()

    assert expected
    assert before == 0
    assert first == expected
    assert after == len(expected)
    assert second == []
    assert again == len(expected)


async def test_migrate_records_each_version_and_name(empty_store: Store) -> None:
    migrations = load_migrations(_migrations_kind(empty_store))

    with trio.fail_after(TIMEOUT):
        await empty_store.migrate()
        async with empty_store.transaction() as tx:
            rows = await tx.fetch("SELECT version, name FROM schema_migrations ORDER BY version")

    assert [(row["version"], row["name"]) for row in rows] == [
        (m.version, m.name) for m in migrations
    ]


@pytest.mark.parametrize("table", TENANCY_TABLES)
async def test_tables_of_the_first_migration_exist(empty_store: Store, table: str) -> None:
    with trio.fail_after(TIMEOUT):
        await empty_store.migrate()
        async with empty_store.transaction() as tx:
            count = await tx.fetchval(f"SELECT COUNT(*) FROM {table}")

    assert count == 0


async def test_no_table_exists_before_migrating(empty_store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        if empty_store.kind == "sqlite":
            query = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
        else:
            query = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'"
        async with empty_store.transaction() as tx:
            count = await tx.fetchval(query)

    assert count == 0


async def test_a_failing_migration_applies_nothing(
    empty_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = [
        *load_migrations(_migrations_kind(empty_store)),
        Migration(
            9999,
            "broken",
            "CREATE TABLE half_done (id TEXT PRIMARY KEY);\nTHIS IS NOT SQL;\n",
        ),
    ]
    backend = "_sqlite" if empty_store.kind == "sqlite" else "_postgres"
    monkeypatch.setattr(f"ledgerport.storage.{backend}.load_migrations", lambda kind: broken)

    with trio.fail_after(TIMEOUT):
        with pytest.raises(MigrationError):
            await empty_store.migrate()
        assert await empty_store.schema_version() == 0
        async with empty_store.transaction() as tx:
            # Neither table exists, so creating them again succeeds.
            await tx.execute("CREATE TABLE half_done (id TEXT PRIMARY KEY)")
            await tx.execute("CREATE TABLE settings (id TEXT PRIMARY KEY)")


def _migration_files(kind: str) -> list[str]:
    folder = resources.files("ledgerport.storage") / "migrations" / kind
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))


@pytest.mark.parametrize("kind", BACKENDS)
def test_migration_files_are_numbered_without_gaps(kind: str) -> None:
    names = _migration_files(kind)
    matches = [FILE_NAME.match(name) for name in names]

    assert names
    assert all(matches), f"misnamed migration files: {names}"
    versions = [int(m[1]) for m in matches if m is not None]
    assert versions == list(range(1, len(names) + 1))
    assert [m.version for m in load_migrations(kind)] == versions


def test_both_backends_have_the_same_migrations() -> None:
    sqlite = [(m.version, m.name) for m in load_migrations("sqlite")]
    postgres = [(m.version, m.name) for m in load_migrations("postgres")]

    assert sqlite == postgres
    assert _migration_files("sqlite") == _migration_files("postgres")


@pytest.mark.parametrize("kind", BACKENDS)
def test_every_migration_splits_into_terminated_statements(kind: str) -> None:
    for migration in load_migrations(kind):
        statements = migration.statements()
        assert statements, migration.name
        for statement in statements:
            assert statement.endswith(";"), statement
            assert sqlite3.complete_statement(statement)


@pytest.mark.postgres
async def test_concurrent_migrators_apply_the_schema_once(postgres_url: str) -> None:
    expected = _expected_versions("postgres")
    results: list[list[int]] = []

    async def migrator() -> None:
        async with open_postgres(postgres_url, max_size=2) as store:
            results.append(await store.migrate())

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(migrator)
            nursery.start_soon(migrator)

        async with open_postgres(postgres_url, max_size=1) as store:
            version = await store.schema_version()
            async with store.transaction() as tx:
                recorded = await tx.fetch("SELECT version FROM schema_migrations ORDER BY version")

    assert sorted(results, key=len) == [[], expected]
    assert version == len(expected)
    assert [row["version"] for row in recorded] == expected


def _cli_env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
    env["LEDGERPORT_DATABASE_URL"] = database_url
    return env


def test_migrate_command_on_sqlite_runs_twice(tmp_path: Path) -> None:
    database = tmp_path / "m.db"
    command = [sys.executable, "-m", "ledgerport", "migrate"]
    env = _cli_env(f"sqlite:///{database}")
    assert env["LEDGERPORT_DATABASE_URL"].startswith("sqlite:////")

    for _ in range(2):
        result = subprocess.run(
            command,
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr

    assert database.is_file()
    with sqlite3.connect(database) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
    conn.close()
    assert sorted(versions) == _expected_versions("sqlite")


def test_migrate_command_fails_on_a_missing_directory(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ledgerport", "migrate"],
        env=_cli_env(f"sqlite:///{tmp_path}/missing/m.db"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "missing").exists()


@pytest.mark.postgres
async def test_migrate_command_on_postgres(postgres_url: str) -> None:
    with trio.fail_after(SUBPROCESS_TIMEOUT * 2):
        for _ in range(2):
            result = await trio.run_process(
                [sys.executable, "-m", "ledgerport", "migrate"],
                env=_cli_env(postgres_url),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert result.returncode == 0, result.stderr.decode()
            assert b"Traceback" not in result.stderr

    with trio.fail_after(TIMEOUT):
        async with open_postgres(postgres_url, max_size=1) as store:
            version = await store.schema_version()

    assert version == len(_expected_versions("postgres"))


def _split(sql: str) -> list[str]:
    return Migration(1, "example", sql).statements()


def test_statements_split_on_terminators() -> None:
    sql = """-- A header comment; with a semicolon.
-- Another comment line.

CREATE TABLE a (id TEXT PRIMARY KEY);
CREATE TABLE b (
    id TEXT PRIMARY KEY,
    -- a comment inside; the statement goes on
    a_id TEXT REFERENCES a (id),
    note TEXT NOT NULL DEFAULT 'x; y'
);

-- between statements
CREATE INDEX b_a ON b (a_id);
INSERT INTO a (id) VALUES ('one;two');
"""

    assert _split(sql) == [
        "CREATE TABLE a (id TEXT PRIMARY KEY);",
        "CREATE TABLE b (\n"
        "    id TEXT PRIMARY KEY,\n"
        "    -- a comment inside; the statement goes on\n"
        "    a_id TEXT REFERENCES a (id),\n"
        "    note TEXT NOT NULL DEFAULT 'x; y'\n"
        ");",
        "CREATE INDEX b_a ON b (a_id);",
        "INSERT INTO a (id) VALUES ('one;two');",
    ]


def test_statements_keep_a_trigger_body_whole() -> None:
    sql = """CREATE TRIGGER touch AFTER UPDATE ON a
BEGIN
    UPDATE a SET n = n + 1 WHERE id = new.id;
    DELETE FROM b WHERE a_id = new.id;
END;
CREATE TABLE c (id TEXT);
"""

    statements = _split(sql)

    assert len(statements) == 2
    assert statements[0].startswith("CREATE TRIGGER touch")
    assert statements[0].endswith("END;")
    assert statements[1] == "CREATE TABLE c (id TEXT);"


def test_statements_of_a_file_without_newline_at_the_end() -> None:
    assert _split("CREATE TABLE a (id TEXT);\n  CREATE TABLE b (id TEXT);") == [
        "CREATE TABLE a (id TEXT);",
        "CREATE TABLE b (id TEXT);",
    ]


@pytest.mark.parametrize("sql", ["", "\n\n", "-- only a comment\n", "   \n-- x;\n"])
def test_statements_of_an_empty_file(sql: str) -> None:
    assert _split(sql) == []


def test_split_statements_run_on_sqlite() -> None:
    sql = """-- comment
CREATE TABLE a (
    id TEXT PRIMARY KEY, -- trailing comment; still inside
    n INTEGER NOT NULL DEFAULT 0
);
INSERT INTO a (id) VALUES ('x;y');
"""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in _split(sql):
            conn.execute(statement)
        assert conn.execute("SELECT id, n FROM a").fetchall() == [("x;y", 0)]
    finally:
        conn.close()


def test_unterminated_statement_is_a_migration_error() -> None:
    with pytest.raises(MigrationError, match="0001_example"):
        _split("CREATE TABLE a (id TEXT);\nCREATE TABLE b (\n    id TEXT\n)\n")
