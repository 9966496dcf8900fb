"""The process that puts a SQLite store's commits on disk: it syncs the store's WAL file when
asked, and checkpoints the WAL into the database now and then (``WalSync``).

A sync made on a thread of the serving process needs the interpreter's lock twice, to start
and to come back, while the event loop holds it serving requests: under load a 0.5 ms
``fdatasync`` kept a request waiting 3 ms on average. This process has its own interpreter; the
serving process asks over a pipe and waits for the answer on its event loop.

It is run by path as a script (``python -I -S wal_syncer.py WAL_PATH CHECKPOINT_INTERVAL``),
so it imports nothing but the standard library. The protocol, one request at a time:

- the server writes one byte to the process's standard input: sync every commit made so far;
- the process answers one line on its standard output: ``synced``, or ``failed REASON`` (the
  commits' fate is then unknown: the next sync covers them again);
- after an answer, at most every ``CHECKPOINT_INTERVAL`` seconds, a PASSIVE checkpoint on a
  connection of its own (it waits for no reader or writer); one that fails is reported by a
  line ``checkpoint-failed REASON`` before the next answer, and tried again when the next is
  due.

The end of its standard input (the server closed it, or died) ends the process, and nothing
else does: it ignores SIGINT and SIGTERM, which a terminal or a service manager sends to the
whole process group, so the server's last commits while it drains are still synced.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # ``signal`` without its enums: a third of the start
import os
import sys
import time

# Imported at the first checkpoint, not at the start (a store's open waits for the start). Mypy
# takes any name TYPE_CHECKING as true; typing itself would cost this process its start twice.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

CHECKPOINT_BUSY_TIMEOUT = 10.0
"""Seconds the checkpoint's connection waits for a lock while it opens the database."""


def _open(wal_path: str) -> int:
    """The WAL file, opened for syncing, its own entry in its directory synced once (as SQLite
    does under ``synchronous = FULL``)."""
    fd = os.open(wal_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        directory = os.open(os.path.dirname(wal_path) or ".", os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError:
        os.close(fd)
        raise
    return fd


def _answer(answers: int, line: str) -> None:
    data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
    while data:
        data = data[os.write(answers, data) :]


class _Checkpointer:
    """PASSIVE checkpoints of the database whose WAL is synced, on a connection of its own
    (opened at the first one; ``sqlite3`` is imported then, not at the process's start)."""

    def __init__(self, database_path: str) -> None:
        self._path = database_path
        self._conn: sqlite3.Connection | None = None

    def checkpoint(self) -> str | None:
        """Answers what went wrong, or None."""
        import sqlite3

        try:
            if self._conn is None:
                self._conn = sqlite3.connect(
                    self._path, isolation_level=None, timeout=CHECKPOINT_BUSY_TIMEOUT
                )
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            return str(exc)
        return None


def serve(wal_path: str, checkpoint_interval: float, requests: int = 0, answers: int = 1) -> None:
    """Answer the requests read from the file descriptor ``requests`` on ``answers`` until the
    requests end (see the module's docstring)."""
    fd: int | None = None
    checkpointer = _Checkpointer(wal_path.removesuffix("-wal"))
    checkpointed = time.monotonic()
    while os.read(requests, 64):
        try:
            if fd is None:
                fd = _open(wal_path)
            os.fdatasync(fd)
        except OSError as exc:
            _answer(answers, f"failed {exc}")
            continue
        _answer(answers, "synced")
        if time.monotonic() - checkpointed >= checkpoint_interval:
            checkpointed = time.monotonic()
            problem = checkpointer.checkpoint()
            if problem is not None:
                _answer(answers, f"checkpoint-failed {problem}")


def main(argv: list[str]) -> int:
    wal_path, interval = argv
    # A Ctrl-C at the terminal, or a service manager stopping the whole group, reaches this
    # process too: it goes on syncing while the server drains, and ends when the server closes
    # its pipe (or dies).
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)
    try:
        serve(wal_path, float(interval))
    except BrokenPipeError:  # the server went while it was answered: nothing left to do
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
