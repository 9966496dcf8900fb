"""Cost of the failing-webhooks count (``/metrics``, every 30 s) against the history kept.

Usage::

    .venv/bin/python bench/failing_count.py [--window W] [--history H] [--rounds R]

Two SQLite stores, migrated as in service (no ANALYZE), hold the deliveries of four webhooks
with 1 KiB bodies, one in ten failing: the ``small`` store only the ``--window`` (32,400: 15
minutes at 36 a second) deliveries that ended in the count's window, the ``large`` one the same
plus ``--history`` (1,000,000: about eight hours at that rate) that ended before it. Each round
times ``queues.failing_webhooks`` on both, interleaved; then the index on ``updated_at`` is
dropped from the large store and the count timed again: the plan SQLite takes without it, which
is what the count read before the index. On SQLite the count runs on the event loop, so its time
is a pause of every request of the process. The figure to compare is the ratio of the large
store to the small one, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import say

from ledgerport import queues
from ledgerport.storage import open_sqlite

WINDOW = queues.FAILING_WINDOW
BODY = "x" * 1024


def fill(path: str, now: float, window: int, history: int) -> None:
    """``window`` deliveries ended in the window and ``history`` before it, oldest first."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    rows = []
    span = history / 36.0
    for i in range(history):
        ended = now - WINDOW - span + i / 36.0
        rows.append(_row(i, ended))
    for i in range(window):
        rows.append(_row(history + i, now - WINDOW + 1 + i * (WINDOW - 2) / max(window, 1)))
    conn.executemany(
        "INSERT INTO webhook_deliveries (id, webhook_id, app_id, type, body, status, attempts,"
        " last_error, created_at, updated_at) VALUES (?, ?, 'app_1', 'customer.created', ?, ?,"
        " ?, ?, ?, ?)",
        rows,
    )
    conn.commit()
    conn.close()


def _row(i: int, ended: float) -> tuple[object, ...]:
    failed = i % 10 == 0
    return (
        f"dlv_{i:010d}",
        f"wh_{i % 4}",
        BODY,
        "failed" if failed else "delivered",
        6 if failed else 1,
        "HTTP 500" if failed else None,
        ended - 1.0,
        ended,
    )


async def timed(path: str, now: float, rounds: int) -> list[float]:
    times = []
    async with open_sqlite(path) as store:
        for _ in range(rounds):
            began = time.perf_counter()
            await queues.failing_webhooks(
                store.autocommit, since=now - WINDOW, at_least=queues.FAILING_AT_LEAST
            )
            times.append((time.perf_counter() - began) * 1000)
    return times


async def main(args: argparse.Namespace) -> None:
    now = time.time()
    with tempfile.TemporaryDirectory(prefix="ledgerport-failing-") as directory:
        paths = {}
        for name, history in (("small", 0), ("large", args.history)):
            paths[name] = os.path.join(directory, f"{name}.db")
            async with open_sqlite(paths[name]) as store:
                await store.migrate()
            fill(paths[name], now, args.window, history)
        results: dict[str, list[float]] = {"small": [], "large": []}
        for _ in range(args.rounds):
            for name in results:
                results[name] += await timed(paths[name], now, 1)
        conn = sqlite3.connect(paths["large"])
        conn.execute("DROP INDEX webhook_deliveries_updated")
        conn.close()
        results["large, without the index"] = await timed(paths["large"], now, args.rounds)

    say(
        f"failing-webhooks count, SQLite: {args.window} deliveries in the window,"
        f" {args.history} before it in the large store; median of {args.rounds}"
    )
    small = statistics.median(results["small"])
    for name, times in results.items():
        median = statistics.median(times)
        say(f"   {name:26} {median:9.1f} ms   {median / small:6.1f}x the small store")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=32_400)
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args()


if __name__ == "__main__":
    trio.run(main, parse())
