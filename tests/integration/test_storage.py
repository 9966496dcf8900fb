"""The Store interface, run over both backends by the ``store`` fixture.

Every test bounds its I/O with ``trio.fail_after`` so a hung database fails the test instead of the
run.
"""

from __future__ import annotations

import contextvars
import gc
import sqlite3
import weakref
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from ledgerport.storage import (
    BadValue,
    Conflict,
    StorageUnavailable,
    Store,
    Transaction,
    WalSync,
    open_postgres,
    open_sqlite,
)

from ..stores import RecordedSyncs, fresh_database

TIMEOUT = 30

COUNTERS_DDL = "CREATE TABLE test_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
GRANTS_DDL = (
    "CREATE TABLE test_grants (id TEXT PRIMARY KEY, used BOOLEAN NOT NULL, owner TEXT NOT NULL)"
)


async def _create(store: Store, ddl: str) -> None:
    async with store.transaction() as tx:
        await tx.execute(ddl)


async def _insert_business(tx: Transaction, business_id: str, **overrides: object) -> None:
    values = {
        "name": f"Business {business_id}",
        "sandbox": False,
        "plan": "paid",
        "invoice_limit": None,
        "created_at": 1_700_000_000.0,
    } | overrides
    await tx.execute(
        "INSERT INTO businesses (id, name, sandbox, plan, invoice_limit, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        business_id,
        values["name"],
        values["sandbox"],
        values["plan"],
        values["invoice_limit"],
        values["created_at"],
    )


async def _settings(store: Store) -> dict[str, str]:
    async with store.transaction() as tx:
        rows = await tx.fetch("SELECT key, value FROM settings ORDER BY key")
    return {row["key"]: row["value"] for row in rows}


async def _business_ids(store: Store) -> list[str]:
    async with store.transaction() as tx:
        rows = await tx.fetch("SELECT id FROM businesses ORDER BY id")
    return [row["id"] for row in rows]


async def test_insert_and_fetch(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            inserted = await tx.execute(
                "INSERT INTO settings (key, value) VALUES ($1, $2)", "alpha", "1"
            )
            await tx.execute("INSERT INTO settings (key, value) VALUES ($1, $2)", "beta", "2")

            rows = await tx.fetch("SELECT key, value FROM settings ORDER BY key")
            row = await tx.fetchrow("SELECT key, value FROM settings WHERE key = $1", "beta")
            missing = await tx.fetchrow("SELECT key, value FROM settings WHERE key = $1", "nope")
            value = await tx.fetchval("SELECT value FROM settings WHERE key = $1", "alpha")
            absent = await tx.fetchval("SELECT value FROM settings WHERE key = $1", "nope")
            count = await tx.fetchval("SELECT COUNT(*) FROM settings")
            none = await tx.fetch("SELECT key FROM settings WHERE key = $1", "nope")

    assert inserted == 1
    assert rows == [{"key": "alpha", "value": "1"}, {"key": "beta", "value": "2"}]
    assert all(type(r) is dict for r in rows)
    assert row == {"key": "beta", "value": "2"}
    assert type(row) is dict
    assert missing is None
    assert value == "1"
    assert absent is None
    assert count == 2
    assert none == []


async def test_a_parameter_may_be_used_twice_and_out_of_order(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ($2, $1)", "v", "k")
            found = await tx.fetchval(
                "SELECT COUNT(*) FROM settings WHERE key = $1 OR value = $1 OR key = $2", "k", "x"
            )
            row = await tx.fetchrow("SELECT key, value FROM settings")

    assert row == {"key": "k", "value": "v"}
    assert found == 1


async def test_execute_answers_the_rows_changed(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            for key in ("a", "b", "c", "d"):
                await tx.execute("INSERT INTO settings (key, value) VALUES ($1, 'old')", key)

            updated = await tx.execute(
                "UPDATE settings SET value = 'new' WHERE key IN ($1, $2, $3)", "a", "b", "c"
            )
            unchanged = await tx.execute("UPDATE settings SET value = 'x' WHERE key = 'zzz'")
            deleted = await tx.execute("DELETE FROM settings WHERE value = 'new'")
            deleted_none = await tx.execute("DELETE FROM settings WHERE key = 'zzz'")

    assert updated == 3
    assert unchanged == 0
    assert deleted == 3
    assert deleted_none == 0
    assert await _settings(store) == {"d": "old"}


async def test_executemany(store: Store) -> None:
    rows = [(f"key-{i:02d}", f"value-{i}") for i in range(25)]

    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.executemany("INSERT INTO settings (key, value) VALUES ($1, $2)", rows)
        async with store.transaction() as tx:
            await tx.executemany(
                "UPDATE settings SET value = $2 WHERE key = $1",
                [("key-00", "changed"), ("key-24", "also")],
            )

        settings = await _settings(store)

    assert len(settings) == 25
    assert settings["key-00"] == "changed"
    assert settings["key-24"] == "also"
    assert settings["key-13"] == "value-13"


async def test_executemany_failure_rolls_back_the_batch(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.executemany(
                    "INSERT INTO settings (key, value) VALUES ($1, $2)",
                    [("one", "1"), ("two", "2"), ("one", "again")],
                )

        assert await _settings(store) == {}


async def test_commit_makes_rows_visible_to_a_later_transaction(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await _insert_business(tx, "biz_1")
            await tx.execute("INSERT INTO settings (key, value) VALUES ('committed', 'yes')")

        async with store.transaction() as tx:
            name = await tx.fetchval("SELECT name FROM businesses WHERE id = $1", "biz_1")
            value = await tx.fetchval("SELECT value FROM settings WHERE key = 'committed'")

    assert name == "Business biz_1"
    assert value == "yes"


class _Boom(Exception):
    pass


async def test_a_raising_transaction_rolls_back_everything(store: Store) -> None:
    async def write_then_fail() -> None:
        async with store.transaction() as tx:
            await _insert_business(tx, "biz_rolled_back")
            await tx.execute("INSERT INTO settings (key, value) VALUES ('lost', 'x')")
            await tx.execute("UPDATE settings SET value = 'during' WHERE key = 'kept'")
            assert await tx.fetchval("SELECT COUNT(*) FROM settings") == 2
            raise _Boom

    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('kept', 'before')")

        with pytest.raises(_Boom):
            await write_then_fail()

        assert await _settings(store) == {"kept": "before"}
        assert await _business_ids(store) == []


async def test_a_transaction_that_runs_nothing_commits_and_the_store_stays_usable(
    store: Store,
) -> None:
    with trio.fail_after(TIMEOUT):
        for _ in range(3):
            async with store.transaction():
                pass
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('after', 'ok')")
        assert await _settings(store) == {"after": "ok"}


async def _insert_then_fail(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute("INSERT INTO settings (key, value) VALUES ('lost', 'x')")
        raise _Boom


async def test_a_failing_first_statement_rolls_back_and_the_store_stays_usable(
    store: Store,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('kept', 'x')")
        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.execute("INSERT INTO settings (key, value) VALUES ('kept', 'again')")
        with pytest.raises(_Boom):
            await _insert_then_fail(store)
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('after', 'ok')")
        assert await _settings(store) == {"after": "ok", "kept": "x"}


async def test_cancellation_inside_a_transaction_rolls_back(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        with trio.CancelScope() as scope:
            async with store.transaction() as tx:
                await _insert_business(tx, "biz_cancelled")
                await tx.execute("INSERT INTO settings (key, value) VALUES ('cancelled', 'x')")
                scope.cancel()
                await trio.sleep(1)
                pytest.fail("the cancelled transaction went on")
        assert scope.cancelled_caught

        assert await _settings(store) == {}
        assert await _business_ids(store) == []
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('after', 'ok')")
        assert await _settings(store) == {"after": "ok"}


async def test_cancellation_from_outside_while_a_transaction_waits(store: Store) -> None:
    inside = trio.Event()

    async def writer() -> None:
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('outside', 'x')")
            inside.set()
            await trio.sleep_forever()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            await inside.wait()
            nursery.cancel_scope.cancel()

        assert await _settings(store) == {}
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('after', 'ok')")
        assert await _settings(store) == {"after": "ok"}


async def test_deadline_expiring_in_a_transaction_rolls_back(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        with trio.move_on_after(0.2) as scope:
            async with store.transaction() as tx:
                for i in range(1_000_000):
                    await tx.execute(
                        "INSERT INTO settings (key, value) VALUES ($1, 'x')", f"k{i:07d}"
                    )
        assert scope.cancelled_caught

        assert await _settings(store) == {}
        async with store.transaction() as tx:
            assert await tx.execute("INSERT INTO settings (key, value) VALUES ('a', 'b')") == 1


@pytest.mark.postgres
async def test_cancelling_a_running_postgres_statement_rolls_back(postgres_url: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_postgres(postgres_url, max_size=2) as store:
            await store.migrate()
            with trio.move_on_after(0.3) as scope:
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ('sleepy', 'x')")
                    await tx.execute("SELECT pg_sleep(20)")
            assert scope.cancelled_caught

            assert await _settings(store) == {}
            for i in range(6):
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ($1, 'ok')", f"k{i}")
            assert len(await _settings(store)) == 6


async def _insert_then_sleep(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute("INSERT INTO settings (key, value) VALUES ('slow', 'x')")
        await tx.execute("SELECT pg_sleep(20)")


@pytest.mark.postgres
async def test_a_statement_over_the_time_limit_is_cancelled_and_the_store_stays_usable(
    postgres_url: str,
) -> None:
    """The time limit is kept on the trio side (no asyncio timer per query): a statement that
    runs past it is cancelled on the server, its unit rolls back, and the pool's connections
    go on serving."""
    with trio.fail_after(TIMEOUT):
        async with open_postgres(postgres_url, max_size=2, statement_timeout=0.5) as store:
            await store.migrate()
            started = trio.current_time()
            with pytest.raises(StorageUnavailable, match=r"no answer within 0\.5 s"):
                await _insert_then_sleep(store)
            assert trio.current_time() - started < 10, "the server went on with the statement"
            assert store.statistics().unavailable == 1
            with pytest.raises(StorageUnavailable):
                await store.autocommit.fetchval("SELECT pg_sleep(20)")
            assert await _settings(store) == {}
            for i in range(4):
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ($1, 'ok')", f"k{i}")
            assert len(await _settings(store)) == 4


class _Refused(Exception):
    pass


async def _write_then_refuse(store: Store) -> None:
    async with store.transaction(reads=True) as tx:
        await tx.fetch("SELECT key FROM settings")
        await tx.execute("INSERT INTO settings (key, value) VALUES ('c', '3')")
        raise _Refused


async def test_a_reads_unit_reads_without_a_transaction_until_it_writes(store: Store) -> None:
    """A unit marked ``reads`` (a GET) that only reads is no transaction on PostgreSQL (no
    BEGIN or COMMIT round trip); one that writes all the same commits or rolls back whole."""
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")
        before = store.statistics().transactions
        async with store.transaction(reads=True) as tx:
            assert await tx.fetchval("SELECT value FROM settings WHERE key = 'a'") == "1"
            assert await tx.fetch("SELECT key FROM settings") == [{"key": "a"}]
        if store.kind == "postgresql":
            assert store.statistics().transactions == before
        async with store.transaction(reads=True) as tx:
            await tx.fetchval("SELECT value FROM settings WHERE key = 'a'")
            await tx.execute("INSERT INTO settings (key, value) VALUES ('b', '2')")
        with pytest.raises(_Refused):
            await _write_then_refuse(store)
        assert await _settings(store) == {"a": "1", "b": "2"}


async def test_a_sqlite_reads_unit_leaves_the_write_lock_to_others(tmp_path: Path) -> None:
    """Its BEGIN is deferred: another connection writes while it reads; a unit of the default
    kind holds the write lock from its first statement."""
    path = str(tmp_path / "reads.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                async with store.transaction(reads=True) as tx:
                    await tx.fetch("SELECT key FROM settings")
                    other.execute("BEGIN IMMEDIATE")
                    other.execute("INSERT INTO settings (key, value) VALUES ('other', 'x')")
                    other.execute("COMMIT")
                async with store.transaction() as tx:
                    await tx.fetch("SELECT key FROM settings")
                    with pytest.raises(sqlite3.OperationalError, match="locked"):
                        other.execute("BEGIN IMMEDIATE")
            finally:
                other.close()
            assert await _settings(store) == {"other": "x"}


async def test_a_sqlite_write_waits_off_the_loop_while_another_program_holds_the_lock(
    tmp_path: Path,
) -> None:
    """A request's ``BEGIN IMMEDIATE`` runs on the event loop when the write lock is free; when
    another program holds it, the transaction waits for it on the worker thread while the loop
    goes on, and writes once the lock is given back."""
    path = str(tmp_path / "held.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            written = trio.Event()
            ticks = 0

            async def write() -> None:
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ('mine', 'y')")
                written.set()

            async def tick() -> None:
                nonlocal ticks
                while not written.is_set():
                    ticks += 1
                    await trio.sleep(0.01)

            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("INSERT INTO settings (key, value) VALUES ('other', 'x')")
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(write)
                    nursery.start_soon(tick)
                    await trio.sleep(0.3)
                    assert not written.is_set()  # it waits for the lock...
                    assert ticks >= 5  # ...and the loop goes on meanwhile
                    other.execute("COMMIT")
            finally:
                other.close()
            assert await _settings(store) == {"mine": "y", "other": "x"}
            async with store.transaction() as tx:  # the lock free again: begun at once
                await tx.execute("INSERT INTO settings (key, value) VALUES ('after', 'z')")
            assert await _settings(store) == {"after": "z", "mine": "y", "other": "x"}


async def test_a_sqlite_commit_is_synced_before_its_block_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits run with synchronous = NORMAL, and the WAL file is synced to disk before the
    transaction's block is left; a transaction that wrote nothing syncs nothing."""
    path = str(tmp_path / "synced.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            syncs = RecordedSyncs(monkeypatch)
            async with store.transaction() as tx:
                assert await tx.fetchval("PRAGMA synchronous") == 1  # NORMAL
                assert await tx.fetchval("PRAGMA wal_autocheckpoint") == 0
                await tx.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")
                assert syncs.files == []
            assert syncs.files == [path + "-wal"]
            async with store.transaction() as tx:
                await tx.fetchval("SELECT value FROM settings WHERE key = 'a'")
            async with store.transaction(reads=True) as tx:
                await tx.fetchval("SELECT value FROM settings WHERE key = 'a'")
            await store.autocommit.fetchval("SELECT value FROM settings WHERE key = 'a'")
            assert syncs.files == [path + "-wal"]
            async with store.transaction(background=True) as tx:
                await tx.execute("INSERT INTO settings (key, value) VALUES ('b', '2')")
            assert syncs.files == [path + "-wal"] * 2
            async with store.transaction() as tx:  # no row changed, the schema did
                await tx.execute("CREATE TABLE test_synced (x INTEGER)")
            assert syncs.files == [path + "-wal"] * 3


async def test_a_sqlite_commit_not_durable_waits_for_no_sync_and_the_next_covers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``durable=False``: the commit is in the WAL when the block ends, seen by every read
    after it and by another connection (another process), and kept when the store closes; no
    sync is made for it, nor for the reads after it. The next durable commit's sync covers
    it."""
    path = str(tmp_path / "not-durable.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            syncs = RecordedSyncs(monkeypatch)
            async with store.transaction(durable=False) as tx:
                await tx.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")
            assert (
                await store.autocommit.fetchval("SELECT value FROM settings WHERE key = 'a'") == "1"
            )
            assert await _settings(store) == {"a": "1"}
            with sqlite3.connect(path) as other:
                assert other.execute("SELECT value FROM settings").fetchall() == [("1",)]
            assert syncs.files == []
            async with store.transaction() as tx:
                await tx.execute("INSERT INTO settings (key, value) VALUES ('b', '2')")
            assert syncs.files == [path + "-wal"]
        async with open_sqlite(path) as reopened:
            assert await _settings(reopened) == {"a": "1", "b": "2"}


@pytest.mark.postgres
async def test_a_postgres_unit_not_durable_commits_without_waiting_for_the_wal(
    asyncio_loop: object,
) -> None:
    """``durable=False`` on PostgreSQL: the unit runs with ``synchronous_commit`` off, its own
    setting only (the next unit on the same connection has the server's), and its commit is
    seen by the reads after it."""
    async with fresh_database() as url:
        async with open_postgres(url, max_size=1) as setup:
            await setup.migrate()
            # The test databases commit without waiting for the WAL; this one as a server
            # configured for durability does, for the connections opened after.
            async with setup.transaction() as tx:
                await tx.execute(
                    "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on',"
                    " current_database()); END $$"
                )
        async with open_postgres(url, max_size=1) as store:
            await _unit_not_durable(store)


async def _unit_not_durable(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction(durable=False) as tx:
            assert await tx.fetchval("SHOW synchronous_commit") == "off"
            await tx.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")
        async with store.transaction() as tx:
            assert await tx.fetchval("SHOW synchronous_commit") == "on"
        async with store.transaction(durable=False, reads=True) as tx:
            assert await tx.fetchval("SELECT value FROM settings") == "1"
            await tx.execute("UPDATE settings SET value = '2'")
            assert await tx.fetchval("SHOW synchronous_commit") == "off"
        assert await _settings(store) == {"a": "2"}


async def test_sqlite_commits_made_during_a_sync_share_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty writers against a disk taking 50 ms a sync: each leaves its block only after a
    sync that began after its commit ended, and the syncs are far fewer than the commits."""
    path = str(tmp_path / "grouped.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            syncs = RecordedSyncs(monkeypatch, seconds=0.05)
            left: list[tuple[int, int]] = []

            async def write(i: int) -> None:
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ($1, 'x')", f"k{i}")
                    begun = len(syncs.files)  # syncs begun before this commit
                left.append((begun, syncs.ended))

            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(write, i)
            assert len(left) == 20
            assert all(ended >= begun + 1 for begun, ended in left), left
            assert len(syncs.files) <= 5, syncs.files
            assert len(await _settings(store)) == 20


async def test_what_a_sqlite_read_sees_is_on_disk_before_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read outside a transaction made while a commit's sync is under way sees the commit only
    once it is on disk: no answer rests on a commit a power cut could take back. An engine's
    (background) transaction does not wait for the disk holding the one connection: it reads
    at once, and ``durable()`` waits for the sync before it acts on what it read."""
    path = str(tmp_path / "seen.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            syncs = RecordedSyncs(monkeypatch, seconds=0.5)
            seen: dict[str, tuple[Any, int]] = {}

            async def write() -> None:
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")

            async def read() -> None:
                value = await store.autocommit.fetchval("SELECT value FROM settings")
                seen["read"] = (value, syncs.ended)

            async def engine() -> None:
                async with store.transaction(background=True) as tx:
                    seen["engine"] = (await tx.fetchval("SELECT value FROM settings"), syncs.ended)
                    await store.durable()
                    seen["acts"] = (None, syncs.ended)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write)
                await syncs.began.wait()  # the commit made, its sync under way
                assert not syncs.ended
                nursery.start_soon(read)
                nursery.start_soon(engine)
            assert seen == {"read": ("1", 1), "engine": ("1", 0), "acts": (None, 1)}


async def test_a_sqlite_read_never_runs_inside_another_transaction(tmp_path: Path) -> None:
    """A read outside a transaction shares the one connection: made while a transaction holds
    it between two statements (its write not committed), it waits for the turn and sees the
    commit, never the write half done; made while no one holds it, it runs at once."""
    path = str(tmp_path / "turns.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            seen: list[Any] = []
            written = trio.Event()
            go_on = trio.Event()

            async def write() -> None:
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")
                    written.set()
                    await go_on.wait()
                    await tx.execute("UPDATE settings SET value = '2' WHERE key = 'a'")

            async def read() -> None:
                seen.append(await store.autocommit.fetchval("SELECT value FROM settings"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write)
                await written.wait()
                nursery.start_soon(read)
                await trio.testing.wait_all_tasks_blocked()
                assert seen == []  # waiting for the turn
                go_on.set()
            assert seen == ["2"]
            assert await store.autocommit.fetchrow("SELECT value FROM settings") == {"value": "2"}
            assert await store.autocommit.fetch("SELECT key FROM settings") == [{"key": "a"}]


async def test_a_failed_sync_fails_its_commits_and_the_next_covers_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The syncer answers a failed sync (the disk's error): the commits waiting for it fail,
    their fate unknown to their callers, and the next sync covers them. A failed checkpoint is
    logged and the sync it came before stands."""
    script = tmp_path / "syncer.py"
    script.write_text(
        "import os\n"
        "answers = [b'failed [Errno 5] Input/output error\\n',"
        " b'checkpoint-failed database is locked\\nsynced\\n']\n"
        "while os.read(0, 64):\n"
        "    os.write(1, answers.pop(0) if answers else b'synced\\n')\n"
    )
    wal = WalSync(str(tmp_path / "f.db-wal"), syncer=str(script))
    with trio.fail_after(TIMEOUT):
        try:
            await wal.start()
            wal.committed()
            with pytest.raises(StorageUnavailable, match=r"cannot sync .*Input/output error"):
                await wal.synced()
            wal.committed()
            await wal.synced()  # both commits
            assert wal.syncs == 1
            assert "checkpoint of " + str(tmp_path) + "/f.db-wal: database is locked" in caplog.text
            await wal.synced()  # nothing new: not asked
            assert wal.syncs == 1
        finally:
            await wal.aclose()


async def test_a_dead_syncer_fails_its_sync_and_another_takes_over(tmp_path: Path) -> None:
    """The syncer process killed (by an operator, by the kernel): the sync asked of it fails its
    transaction, the next sync starts another, and closing the store ends it."""
    path = str(tmp_path / "killed.db")
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path) as store:
            await store.migrate()
            wal = store._wal
            assert wal is not None
            first = wal._process
            assert first is not None
            first.kill()
            await first.wait()
            with pytest.raises(StorageUnavailable, match=r"syncer of .* ended"):
                async with store.transaction() as tx:
                    await tx.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")
            async with store.transaction() as tx:
                await tx.execute("INSERT INTO settings (key, value) VALUES ('b', '2')")
            second = wal._process
            assert second is not None
            assert second.pid != first.pid
            assert second.returncode is None
            assert await _settings(store) == {"a": "1", "b": "2"}
        assert second.returncode == 0  # the store closed its pipe: it ended on its own


async def test_sqlite_checkpoints_after_syncs_keep_the_wal_bounded(tmp_path: Path) -> None:
    """Automatic checkpoints are off (they would run on the event loop); a sync is followed by
    a checkpoint on a connection of its own, at most every ``checkpoint_interval`` seconds (0
    here: after every sync), so the WAL's frames are copied into the database as the service
    writes."""
    path = str(tmp_path / "checkpointed.db")
    marker = "checkpointed-" + "x" * 40
    with trio.fail_after(TIMEOUT):
        async with open_sqlite(path, checkpoint_interval=0.0) as store:
            await store.migrate()
            async with store.transaction() as tx:
                assert await tx.fetchval("PRAGMA wal_autocheckpoint") == 0
                await tx.execute("INSERT INTO settings (key, value) VALUES ('a', $1)", marker)
            # In the database file itself, not only in its WAL: copied by the checkpoint.
            assert marker.encode() in await trio.Path(path).read_bytes()
            assert marker.encode() in await trio.Path(path + "-wal").read_bytes()


async def test_unique_violation_is_a_conflict_and_the_store_stays_usable(store: Store) -> None:
    async def write_then_duplicate() -> None:
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('other', 'x')")
            await tx.execute("INSERT INTO settings (key, value) VALUES ('dup', 'second')")

    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('dup', 'first')")

        with pytest.raises(Conflict):
            await write_then_duplicate()

        assert await _settings(store) == {"dup": "first"}
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('after', 'ok')")
        assert await _settings(store) == {"after": "ok", "dup": "first"}


async def test_unique_column_violation_is_a_conflict(store: Store) -> None:
    insert_user = (
        "INSERT INTO users (id, email, password_hash, name, created_at)"
        " VALUES ($1, $2, 'hash', NULL, 0)"
    )
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute(insert_user, "usr_1", "a@example.com")

        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.execute(insert_user, "usr_2", "a@example.com")

        async with store.transaction() as tx:
            assert await tx.fetchval("SELECT COUNT(*) FROM users") == 1


async def test_foreign_key_violation_is_a_conflict(store: Store) -> None:
    insert_user = (
        "INSERT INTO users (id, email, password_hash, name, created_at)"
        " VALUES ('usr_1', 'a@example.com', 'hash', NULL, 0)"
    )
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute(insert_user)

        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.execute(
                    "INSERT INTO memberships (business_id, user_id, role, active, updated_at)"
                    " VALUES ($1, $2, 'owner', $3, 0)",
                    "biz_missing",
                    "usr_1",
                    True,
                )

        async with store.transaction() as tx:
            assert await tx.fetchval("SELECT COUNT(*) FROM memberships") == 0
            await _insert_business(tx, "biz_1")
            await tx.execute(
                "INSERT INTO memberships (business_id, user_id, role, active, updated_at)"
                " VALUES ('biz_1', 'usr_1', 'owner', $1, 0)",
                True,
            )

        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.execute("DELETE FROM businesses WHERE id = 'biz_1'")

        assert await _business_ids(store) == ["biz_1"]


async def test_on_conflict_upsert(store: Store) -> None:
    upsert = (
        "INSERT INTO settings (key, value) VALUES ($1, $2)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )
    insert_if_absent = "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            first = await tx.execute(upsert, "k", "1")
        async with store.transaction() as tx:
            second = await tx.execute(upsert, "k", "2")
            kept = await tx.execute(insert_if_absent, "k", "3")
            added = await tx.execute(insert_if_absent, "new", "4")

        settings = await _settings(store)

    assert (first, second) == (1, 1)
    assert (kept, added) == (0, 1)
    assert settings == {"k": "2", "new": "4"}


@pytest.mark.parametrize("flag", [True, False])
async def test_booleans_round_trip(store: Store, flag: bool) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await _insert_business(tx, "biz_1", sandbox=flag)
        async with store.transaction() as tx:
            row = await tx.fetchrow("SELECT sandbox FROM businesses WHERE id = 'biz_1'")
            matching = await tx.fetchval("SELECT COUNT(*) FROM businesses WHERE sandbox = $1", flag)
            literal = await tx.fetchval(
                "SELECT COUNT(*) FROM businesses WHERE sandbox = " + ("true" if flag else "false")
            )

    assert row is not None
    assert bool(row["sandbox"]) is flag
    assert matching == 1
    assert literal == 1


@pytest.mark.parametrize(
    "value", [1_712_345_678.123456, 0.1, -2.5e-9, 1e300, 0.0], ids=lambda v: repr(v)
)
async def test_floats_round_trip(store: Store, value: float) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await _insert_business(tx, "biz_1", created_at=value)
        async with store.transaction() as tx:
            stored = await tx.fetchval("SELECT created_at FROM businesses WHERE id = 'biz_1'")
            earlier = await tx.fetchval(
                "SELECT COUNT(*) FROM businesses WHERE created_at < $1", value + abs(value) + 1
            )

    assert isinstance(stored, float)
    assert stored == value
    assert earlier == 1


async def test_integers_and_nulls_round_trip(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await _insert_business(tx, "biz_big", invoice_limit=2**40)
            await _insert_business(tx, "biz_none", invoice_limit=None)
        async with store.transaction() as tx:
            rows = await tx.fetch("SELECT id, invoice_limit FROM businesses ORDER BY id")

    assert rows == [
        {"id": "biz_big", "invoice_limit": 2**40},
        {"id": "biz_none", "invoice_limit": None},
    ]


async def test_concurrent_transactions_lose_no_update(store: Store) -> None:
    tasks = 20
    rounds = 3

    async def increment() -> None:
        for _ in range(rounds):
            async with store.transaction() as tx:
                current = await tx.fetchval("SELECT value FROM test_counters WHERE name = 'c'")
                assert current is not None
                await trio.lowlevel.checkpoint()
                changed = await tx.execute(
                    "UPDATE test_counters SET value = value + 1 WHERE name = 'c'"
                )
                assert changed == 1

    with trio.fail_after(TIMEOUT):
        await _create(store, COUNTERS_DDL)
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO test_counters (name, value) VALUES ('c', 0)")

        async with trio.open_nursery() as nursery:
            for _ in range(tasks):
                nursery.start_soon(increment)

        async with store.transaction() as tx:
            total = await tx.fetchval("SELECT value FROM test_counters WHERE name = 'c'")

    assert total == tasks * rounds


async def test_concurrent_transactions_all_commit(store: Store) -> None:
    async def write(i: int) -> None:
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ($1, $2)", f"k{i:02d}", "v")
            await trio.sleep(0.01)
            await tx.execute("UPDATE settings SET value = 'done' WHERE key = $1", f"k{i:02d}")

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(write, i)

        settings = await _settings(store)

    assert settings == {f"k{i:02d}": "done" for i in range(20)}


CLAIM = "UPDATE test_grants SET used = true, owner = $2 WHERE id = $1 AND used = false"


async def test_conditional_update_has_one_winner_among_racers(store: Store) -> None:
    racers = 8
    won: dict[str, int] = {}
    start = trio.Event()

    async def claim(name: str) -> None:
        await start.wait()
        async with store.transaction() as tx:
            won[name] = await tx.execute(CLAIM, "grant_1", name)

    with trio.fail_after(TIMEOUT):
        await _create(store, GRANTS_DDL)
        async with store.transaction() as tx:
            await tx.execute(
                "INSERT INTO test_grants (id, used, owner) VALUES ('grant_1', $1, '')", False
            )

        async with trio.open_nursery() as nursery:
            for i in range(racers):
                nursery.start_soon(claim, f"racer-{i}")
            await trio.sleep(0.05)
            start.set()

        async with store.transaction() as tx:
            row = await tx.fetchrow("SELECT used, owner FROM test_grants WHERE id = 'grant_1'")

    assert sorted(won.values()) == [0] * (racers - 1) + [1]
    winners = [name for name, changed in won.items() if changed == 1]
    assert row is not None
    assert bool(row["used"]) is True
    assert row["owner"] == winners[0]


async def test_conditional_update_waits_for_the_first_claimer_to_commit(store: Store) -> None:
    first_claimed = trio.Event()
    results: dict[str, int] = {}

    async def first() -> None:
        async with store.transaction() as tx:
            results["first"] = await tx.execute(CLAIM, "grant_1", "first")
            first_claimed.set()
            await trio.sleep(0.3)

    async def second() -> None:
        await first_claimed.wait()
        async with store.transaction() as tx:
            results["second"] = await tx.execute(CLAIM, "grant_1", "second")

    with trio.fail_after(TIMEOUT):
        await _create(store, GRANTS_DDL)
        async with store.transaction() as tx:
            await tx.execute(
                "INSERT INTO test_grants (id, used, owner) VALUES ('grant_1', $1, '')", False
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            nursery.start_soon(second)

        async with store.transaction() as tx:
            owner = await tx.fetchval("SELECT owner FROM test_grants WHERE id = 'grant_1'")

    assert results == {"first": 1, "second": 0}
    assert owner == "first"


async def test_conditional_update_is_free_again_after_the_claimer_rolls_back(
    store: Store,
) -> None:
    first_claimed = trio.Event()
    results: dict[str, int] = {}

    async def claim_then_fail() -> None:
        async with store.transaction() as tx:
            results["first"] = await tx.execute(CLAIM, "grant_1", "first")
            first_claimed.set()
            await trio.sleep(0.3)
            raise _Boom

    async def first() -> None:
        with pytest.raises(_Boom):
            await claim_then_fail()

    async def second() -> None:
        await first_claimed.wait()
        async with store.transaction() as tx:
            results["second"] = await tx.execute(CLAIM, "grant_1", "second")

    with trio.fail_after(TIMEOUT):
        await _create(store, GRANTS_DDL)
        async with store.transaction() as tx:
            await tx.execute(
                "INSERT INTO test_grants (id, used, owner) VALUES ('grant_1', $1, '')", False
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            nursery.start_soon(second)

        async with store.transaction() as tx:
            owner = await tx.fetchval("SELECT owner FROM test_grants WHERE id = 'grant_1'")

    assert results == {"first": 1, "second": 1}
    assert owner == "second"


async def test_settings_claim_by_conditional_where(store: Store) -> None:
    results: list[int] = []

    async def claim() -> None:
        async with store.transaction() as tx:
            results.append(
                await tx.execute(
                    "UPDATE settings SET value = 'used' WHERE key = 'token' AND value = 'unused'"
                )
            )

    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO settings (key, value) VALUES ('token', 'unused')")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(claim)
            nursery.start_soon(claim)

    assert sorted(results) == [0, 1]
    assert await _settings(store) == {"token": "used"}


async def test_placeholders_inside_quoted_text_stay_text(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        async with store.transaction() as tx:
            row = await tx.fetchrow(
                "SELECT '$1 costs $2' AS quoted, 'it''s $1' AS escaped, $1::TEXT AS bound"
                if store.kind != "sqlite"
                else "SELECT '$1 costs $2' AS quoted, 'it''s $1' AS escaped, $1 AS bound",
                "value",
            )

    assert row is not None
    assert (row["quoted"], row["escaped"], row["bound"]) == ("$1 costs $2", "it's $1", "value")


@pytest.mark.parametrize(
    "value",
    ["\ud800", "ok\udfffok", 2**70],
    ids=["lone-high-surrogate", "lone-low-surrogate", "int-beyond-64-bits"],
)
async def test_unstorable_values_are_bad_values(store: Store, value: object) -> None:
    """Library errors of bad input are converted at the storage boundary: BadValue (a 400),
    never a UnicodeEncodeError or an OverflowError reaching a handler (a 500)."""
    with trio.fail_after(30), pytest.raises(BadValue):
        async with store.transaction() as tx:
            await tx.fetchval("SELECT value FROM settings WHERE key = $1", value)


# --- queued writes and serialization keys ---------------------------------------------------------


async def _append_counters(tx: Transaction, items: list[object]) -> None:
    await tx.executemany(
        "INSERT INTO test_counters (name, value) VALUES ($1, $2)", [(i, 1) for i in items]
    )


async def _counter_names(store: Store) -> list[str]:
    async with store.transaction() as tx:
        rows = await tx.fetch("SELECT name FROM test_counters ORDER BY name")
    return [row["name"] for row in rows]


async def test_queued_items_are_written_just_before_commit(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _create(store, COUNTERS_DDL)
        async with store.transaction() as tx:
            tx.queue("counters", _append_counters).append("a")
            tx.queue("counters", _append_counters).extend(["b", "c"])
            queued_yet = await tx.fetchval("SELECT COUNT(*) FROM test_counters")

        assert queued_yet == 0
        assert await _counter_names(store) == ["a", "b", "c"]


async def test_queued_items_of_a_rolled_back_transaction_are_never_written(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _create(store, COUNTERS_DDL)

        async def queue_then_fail() -> None:
            async with store.transaction() as tx:
                tx.queue("counters", _append_counters).append("a")
                raise _Boom

        with pytest.raises(_Boom):
            await queue_then_fail()

        assert await _counter_names(store) == []


async def test_a_failing_flush_rolls_the_whole_transaction_back(store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _create(store, COUNTERS_DDL)

        async def write_then_queue_duplicates() -> None:
            async with store.transaction() as tx:
                await tx.execute("INSERT INTO test_counters (name, value) VALUES ('direct', 1)")
                tx.queue("counters", _append_counters).extend(["dup", "dup"])

        with pytest.raises(Conflict):
            await write_then_queue_duplicates()

        assert await _counter_names(store) == []
        async with store.transaction() as tx:  # the store is usable again
            tx.queue("counters", _append_counters).append("after")
        assert await _counter_names(store) == ["after"]


async def test_a_serialization_key_holds_others_until_commit(store: Store) -> None:
    """The second transaction to take a key passes only once the first has committed: what it
    then reads includes the first's write."""
    first_holds = trio.Event()
    seen: dict[str, int] = {}

    async def first() -> None:
        async with store.transaction() as tx:
            await tx.serialize("k")
            await tx.serialize("k")  # again: free
            first_holds.set()
            await trio.sleep(0.3)
            await tx.execute("INSERT INTO test_counters (name, value) VALUES ('first', 1)")

    async def second() -> None:
        await first_holds.wait()
        async with store.transaction() as tx:
            await tx.serialize("k")
            seen["rows"] = await tx.fetchval("SELECT COUNT(*) FROM test_counters")

    with trio.fail_after(TIMEOUT):
        await _create(store, COUNTERS_DDL)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            nursery.start_soon(second)

    assert seen == {"rows": 1}


async def test_different_serialization_keys_do_not_wait(postgres_url: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_postgres(postgres_url, max_size=2) as store:
            async with store.transaction() as one:
                await one.serialize("key-one")
                async with store.transaction() as other:
                    await other.serialize("key-two")


@pytest.mark.postgres
async def test_listeners_share_one_connection_and_background_work_leaves_requests_room(
    postgres_url: str,
) -> None:
    """A pool of four: three listeners share one connection, background transactions hold at
    most one more at a time (half of what remains, rounded down), and a request's transaction
    goes through at once while both wait."""
    order: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with open_postgres(postgres_url, max_size=4) as store:
            holding = trio.Event()
            release = trio.Event()

            async def background(name: str) -> None:
                async with store.transaction(background=True) as tx:
                    await tx.fetchval("SELECT 1")
                    order.append(name)
                    holding.set()
                    await release.wait()

            async with (
                store.listen("a", lambda: None),
                store.listen("b", lambda: None),
                store.listen("c", lambda: None),
                trio.open_nursery() as nursery,
            ):
                for name in ("first background", "second background", "third background"):
                    nursery.start_soon(background, name)
                await holding.wait()
                await trio.testing.wait_all_tasks_blocked()
                async with store.transaction() as tx:
                    order.append(f"request {await tx.fetchval('SELECT 1')}")
                release.set()
    backgrounds = ["first background", "second background", "third background"]
    assert order[0] in backgrounds
    assert order[1] == "request 1"
    assert sorted(name for name in order if name != "request 1") == backgrounds


@pytest.mark.postgres
async def test_listeners_leaving_at_once_undo_their_listen_one_at_a_time(
    postgres_url: str,
) -> None:
    """Eight listeners on the one listening connection, cancelled together (a stopping
    engine), three rounds: each UNLISTEN waits for the one before it on that connection, none
    fails, the connection goes back to the pool, and a listener after them still hears its
    channel."""
    with trio.fail_after(TIMEOUT):
        async with open_postgres(postgres_url, max_size=3) as store:

            async def listen_until_cancelled(
                channel: str, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
            ) -> None:
                async with store.listen(channel, lambda: None):
                    task_status.started()
                    await trio.sleep_forever()

            for _ in range(3):
                async with trio.open_nursery() as nursery:
                    for index in range(8):
                        await nursery.start(listen_until_cancelled, f"leaving-{index}")
                    nursery.cancel_scope.cancel()
            heard = trio.Event()
            async with store.listen("after", heard.set):
                async with store.transaction() as tx:
                    await tx.notify("after")
                await heard.wait()
            # The listening connection went back: the whole pool serves transactions.
            async with store.transaction() as one, store.transaction() as two:
                async with store.transaction() as three:
                    for tx in (one, two, three):
                        assert await tx.fetchval("SELECT 1") == 1


@pytest.mark.postgres
async def test_a_call_to_postgres_keeps_nothing_of_the_callers_context(
    postgres_url: str,
) -> None:
    """What a request sets in its context (quart's request and app contexts) is gone once the
    request is: the asyncio side's tasks and the timers asyncpg starts in them (each query's
    timeout, which trio_asyncio keeps until its deadline even when cancelled) start from a
    context of the store's own, and the pool starts no idle timer per release."""

    class Marker:
        """Stands for a request."""

    caller: contextvars.ContextVar[Marker] = contextvars.ContextVar("caller")
    refs: list[weakref.ref[Marker]] = []

    async def request_like(store: Store) -> None:
        marker = Marker()
        refs.append(weakref.ref(marker))
        caller.set(marker)
        for _ in range(20):
            async with store.transaction() as tx:
                await tx.fetchval("SELECT 1")
        await store.ping()

    with trio.fail_after(TIMEOUT):
        async with open_postgres(postgres_url, max_size=2) as store:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(request_like, store)
            gc.collect()
            assert refs[0]() is None, gc.get_referrers(refs[0]())
