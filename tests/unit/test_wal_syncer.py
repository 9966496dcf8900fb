"""The process that syncs a SQLite store's WAL (``storage.wal_syncer``): its answers, the file it
syncs, its checkpoints, and how it ends."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ledgerport.storage import wal_syncer

TIMEOUT = 30


class Syncer:
    """``wal_syncer.serve`` on a thread, asked over pipes as the store asks its process."""

    def __init__(self, wal_path: str, checkpoint_interval: float) -> None:
        self._requests_read, self._requests = os.pipe()
        self._answers, self._answers_written = os.pipe()
        self._pending = b""
        self.thread = threading.Thread(
            target=wal_syncer.serve,
            args=(wal_path, checkpoint_interval, self._requests_read, self._answers_written),
            daemon=True,
        )
        self.thread.start()

    def ask(self) -> list[str]:
        """One request; answers the lines up to its answer (a checkpoint's failure first)."""
        os.write(self._requests, b"s")
        lines: list[str] = []
        while not lines or lines[-1].split(" ")[0] not in ("synced", "failed"):
            while b"\n" not in self._pending:
                data = os.read(self._answers, 4096)
                assert data, "the syncer ended"
                self._pending += data
            line, _, self._pending = self._pending.partition(b"\n")
            lines.append(line.decode())
        return lines

    def close(self) -> None:
        os.close(self._requests)
        self.thread.join(TIMEOUT)
        for fd in (self._requests_read, self._answers, self._answers_written):
            os.close(fd)


@contextmanager
def syncer(wal_path: str, checkpoint_interval: float = 3600.0) -> Iterator[Syncer]:
    running = Syncer(wal_path, checkpoint_interval)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def synced_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the syncer syncs, in order: ``data FILE`` (fdatasync) and ``entry DIRECTORY`` (an
    fsync of a directory, for the WAL's entry in it)."""
    done: list[str] = []
    real_fdatasync, real_fsync = os.fdatasync, os.fsync

    def fdatasync(fd: int) -> None:
        done.append(f"data {os.readlink(f'/proc/self/fd/{fd}')}")
        real_fdatasync(fd)

    def fsync(fd: int) -> None:
        done.append(f"entry {os.readlink(f'/proc/self/fd/{fd}')}")
        real_fsync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(os, "fsync", fsync)
    return done


def _database(path: Path) -> sqlite3.Connection:
    """A database in WAL mode that checkpoints only when asked, as the store's connection."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (value TEXT)")
    return conn


def test_each_request_syncs_the_wal_before_its_answer(
    tmp_path: Path, synced_files: list[str]
) -> None:
    conn = _database(tmp_path / "a.db")
    wal = str(tmp_path / "a.db-wal")
    try:
        with syncer(wal) as running:
            assert synced_files == []  # nothing before it is asked
            assert running.ask() == ["synced"]
            assert synced_files == [f"entry {tmp_path}", f"data {wal}"]
            assert running.ask() == ["synced"]
            assert synced_files == [f"entry {tmp_path}", f"data {wal}", f"data {wal}"]
    finally:
        conn.close()


def test_a_failed_sync_is_answered_and_the_next_request_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal = tmp_path / "b.db-wal"
    with syncer(str(wal)) as running:
        (answer,) = running.ask()  # no WAL file to open yet
        assert answer.startswith("failed [Errno 2] No such file or directory")
        wal.write_bytes(b"")
        real = os.fdatasync

        def failing(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fdatasync", failing)
        assert running.ask() == ["failed [Errno 5] Input/output error"]
        monkeypatch.setattr(os, "fdatasync", real)
        assert running.ask() == ["synced"]


def test_a_sync_is_followed_by_a_checkpoint_at_most_every_interval(tmp_path: Path) -> None:
    conn = _database(tmp_path / "c.db")
    marker = "checkpointed-" + "x" * 40
    try:
        conn.execute("INSERT INTO t (value) VALUES (?)", (marker,))
        assert marker.encode() not in (tmp_path / "c.db").read_bytes()
        with syncer(str(tmp_path / "c.db-wal"), checkpoint_interval=3600.0) as running:
            assert running.ask() == ["synced"]
            assert marker.encode() not in (tmp_path / "c.db").read_bytes()  # not due yet
        with syncer(str(tmp_path / "c.db-wal"), checkpoint_interval=0.0) as running:
            assert running.ask() == ["synced"]
        # Ended after the checkpoint that followed its sync: copied into the database itself.
        assert marker.encode() in (tmp_path / "c.db").read_bytes()
    finally:
        conn.close()


def test_a_failed_checkpoint_is_reported_before_the_next_answer(tmp_path: Path) -> None:
    (tmp_path / "d.db").write_bytes(b"not a database" * 512)
    (tmp_path / "d.db-wal").write_bytes(b"")
    with syncer(str(tmp_path / "d.db-wal"), checkpoint_interval=0.0) as running:
        assert running.ask() == ["synced"]
        assert running.ask() == ["checkpoint-failed file is not a database", "synced"]


def test_the_process_ends_with_its_input_and_only_then(tmp_path: Path) -> None:
    """Run as the store runs it: SIGINT and SIGTERM (sent to a whole process group by a
    terminal or a service manager) leave it syncing; the end of its input ends it."""
    conn = _database(tmp_path / "e.db")
    try:
        with subprocess.Popen(
            [sys.executable, "-I", "-S", wal_syncer.__file__, str(tmp_path / "e.db-wal"), "1.0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        ) as process:
            _signals_leave_it_syncing(process)
    finally:
        conn.close()


def _signals_leave_it_syncing(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(b"s")
    process.stdin.flush()
    assert process.stdout.readline() == b"synced\n"  # started, its signals set
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGTERM)
    process.stdin.write(b"s")
    process.stdin.flush()
    assert process.stdout.readline() == b"synced\n"
    process.stdin.close()
    assert process.wait(TIMEOUT) == 0
