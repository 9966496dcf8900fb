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

from ledgerport.storage import (
    Migration,
    MigrationError,
    StorageError,
    Store,
    load_migrations,
    open_postgres,
    open_sqlite,
)

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


async def test_a_failing_migration_applies_nothing(empty_store: Store) -> None:
    broken = [
        *load_migrations(_migrations_kind(empty_store)),
        Migration(
            9999,
            "broken",
            "CREATE TABLE half_done (id TEXT PRIMARY KEY);\nTHIS IS NOT SQL;\n",
        ),
    ]

    with trio.fail_after(TIMEOUT):
        with pytest.raises(MigrationError):
            await empty_store.migrate(broken)
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
        # A migration with nothing to do on one store keeps the numbering and says why.
        assert statements or migration.sql.lstrip().startswith("--"), migration.name
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


async def _migrate_up_to(store: Store, version: int) -> None:
    kind = _migrations_kind(store)
    await store.migrate([m for m in load_migrations(kind) if m.version <= version])


async def _seed_app_and_installation(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO users (id, email, password_hash, name, created_at)"
            " VALUES ('usr_1', 'dev@example.com', 'x', NULL, 1)"
        )
        await tx.execute(
            "INSERT INTO businesses (id, name, sandbox, plan, invoice_limit, created_at)"
            " VALUES ('bus_1', 'Acme', false, 'paid', NULL, 1)"
        )
        await tx.execute(
            "INSERT INTO apps (id, client_id, name, type, client_secret_hash, redirect_uris,"
            " scopes, developer_user_id, reviewed, status, app_url, pinned_version, created_at)"
            " VALUES ('app_1', 'cid_1', 'Sync', 'PUBLIC', NULL, '[]', '[]', 'usr_1', true,"
            " 'ACTIVE', 'https://sync.example', '2026-09-22', 1)"
        )
        await tx.execute(
            "INSERT INTO installations (id, app_id, business_id, user_id, scopes, state,"
            " created_at, updated_at) VALUES ('ins_1', 'app_1', 'bus_1', 'usr_1', '[]',"
            " 'ACTIVE', 1, 1)"
        )


async def test_grants_migration_keeps_existing_apps_and_their_references(
    empty_store: Store,
) -> None:
    with trio.fail_after(TIMEOUT):
        await _migrate_up_to(empty_store, 2)
        await _seed_app_and_installation(empty_store)

        await empty_store.migrate()

        async with empty_store.transaction() as tx:
            app = await tx.fetchrow("SELECT * FROM apps WHERE id = 'app_1'")
            installation_app = await tx.fetchval(
                "SELECT a.client_id FROM installations i JOIN apps a ON a.id = i.app_id"
            )
    assert app is not None
    assert (app["client_id"], app["app_url"], app["pinned_version"]) == (
        "cid_1",
        "https://sync.example",
        "2026-09-22",
    )
    assert app["registration"] is None
    assert installation_app == "cid_1"


async def test_apps_may_have_no_developer_after_the_grants_migration(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO apps (id, client_id, name, type, redirect_uris, scopes, reviewed,"
            " status, created_at) VALUES ('app_2', 'cid_2', 'Registered', 'PUBLIC', '[]', '[]',"
            " false, 'ACTIVE', 1)"
        )
        developer = await tx.fetchval("SELECT developer_user_id FROM apps WHERE id = 'app_2'")
    assert developer is None


async def test_foreign_keys_still_hold_on_rebuilt_apps(store: Store) -> None:
    with pytest.raises(StorageError):
        async with store.transaction() as tx:
            await tx.execute(
                "INSERT INTO apps (id, client_id, name, type, redirect_uris, scopes,"
                " developer_user_id, reviewed, status, created_at) VALUES ('app_3', 'cid_3',"
                " 'Orphan', 'PUBLIC', '[]', '[]', 'usr_missing', false, 'ACTIVE', 1)"
            )


async def test_sqlite_migration_leaving_a_dangling_reference_fails(tmp_path: Path) -> None:
    dangling = Migration(
        9999,
        "dangling",
        "INSERT INTO installations (id, app_id, business_id, user_id, scopes, state,"
        " created_at, updated_at) VALUES ('ins_x', 'app_x', 'bus_x', 'usr_x', '[]', 'ACTIVE',"
        " 1, 1);\n",
    )
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(str(tmp_path / "dangling.db")) as store:
            await store.migrate()
            with pytest.raises(MigrationError, match="dangling references"):
                await store.migrate([*load_migrations("sqlite"), dangling])
            assert await store.schema_version() == len(load_migrations("sqlite"))
            async with store.transaction() as tx:
                count = await tx.fetchval("SELECT COUNT(*) FROM installations")
    assert count == 0


@pytest.mark.parametrize(
    ("state", "hits"),
    [
        ("[[1000,1],[1001,3],[1004,2]]", "[1000,1,3,0,0,2]"),
        ("[[77,5]]", "[77,5]"),
    ],
)
async def test_the_dense_counts_migration_keeps_every_counts_hits(
    empty_store: Store, state: str, hits: str
) -> None:
    """Migration 0025: a count kept as (bucket, hits) pairs in ``state`` is the same count in
    ``hits``, dense (empty buckets between as zeros), and ``state`` is left empty (what a
    process of the previous version reads as no count); a lockout's state is not touched."""
    lockout = '{"failures": [1000.5], "until": 0.0}'
    with trio.fail_after(TIMEOUT):
        await _migrate_up_to(empty_store, 24)
        async with empty_store.transaction() as tx:
            await tx.executemany(
                "INSERT INTO rate_limits (budget, key, state, expires_at) VALUES ($1, $2, $3, $4)",
                [("count", "k", state, 1100.0), ("lockout", "k", lockout, 1200.0)],
            )
        await empty_store.migrate()
        rows = await empty_store.autocommit.fetch(
            "SELECT budget, state, hits, expires_at FROM rate_limits ORDER BY budget"
        )
    assert [tuple(row.values()) for row in rows] == [
        ("count", "", hits, 1100.0),
        ("lockout", lockout, "", 1200.0),
    ]


async def test_the_function_health_migration_reads_what_the_runs_kept(
    empty_store: Store,
) -> None:
    """Migration 0033: each function's hourly counts of runs ended, its last run ended and its
    last error (of a run failed for good, or of an attempt to be tried again; a run given back
    unattempted made none) are read from the runs kept, so the health is true from then on; a
    function with no run ended has none, and a long error is kept to its first 300
    characters."""
    hour = 3600
    at = 1_790_002_800.0  # the first second of an hour
    runs = [
        # id, function, status, ended, duration, error
        ("run_1", "fn_1", "succeeded", at + 10, 2.0, None),
        ("run_2", "fn_1", "failed", at + 20, 2.0, "Error: boom"),
        ("run_3", "fn_1", "succeeded", at + hour + 5, 2.0, None),
        ("run_4", "fn_1", "retrying", at + hour + 6, 2.0, "the worker died during the run"),
        ("run_5", "fn_1", "retrying", at + hour + 7, None, "the service stopped during the run"),
        ("run_6", "fn_2", "failed", at + 30, None, "x" * 301),
        ("run_7", "fn_3", "queued", at + 40, None, None),
    ]
    with trio.fail_after(TIMEOUT):
        await _migrate_up_to(empty_store, 32)
        await _seed_app_and_installation(empty_store)
        async with empty_store.transaction() as tx:
            for function_id in ("fn_1", "fn_2", "fn_3"):
                await tx.execute(
                    "INSERT INTO functions (id, app_id, name, events, version, latest_version,"
                    " created_at, updated_at) VALUES ($1, 'app_1', $1, '[]', 1, 1, 1, 1)",
                    function_id,
                )
            await tx.executemany(
                "INSERT INTO function_runs (id, function_id, app_id, type, body, status,"
                " attempts, created_at, updated_at, duration_ms, error)"
                " VALUES ($1, $2, 'app_1', 'customer.created', '{}', $3, 1, $4, $4, $5, $6)",
                runs,
            )
        await empty_store.migrate()
        hours = await empty_store.autocommit.fetch(
            "SELECT function_id, hour, succeeded, failed FROM function_health_hours"
            " ORDER BY function_id, hour"
        )
        health = await empty_store.autocommit.fetch(
            "SELECT * FROM function_health ORDER BY function_id"
        )
    first = int(at // hour)
    assert [tuple(row.values()) for row in hours] == [
        ("fn_1", first, 1, 1),
        ("fn_1", first + 1, 1, 0),
        ("fn_2", first, 0, 1),
    ]
    assert [dict(row) for row in health] == [
        {
            "function_id": "fn_1",
            "last_run_id": "run_3",
            "last_run_at": at + hour + 5,
            "last_run_status": "succeeded",
            "last_error": "the worker died during the run",
            "last_error_at": at + hour + 6,
            "last_error_run_id": "run_4",
        },
        {
            "function_id": "fn_2",
            "last_run_id": "run_6",
            "last_run_at": at + 30,
            "last_run_status": "failed",
            "last_error": "x" * 300 + "\u2026",
            "last_error_at": at + 30,
            "last_error_run_id": "run_6",
        },
    ]
