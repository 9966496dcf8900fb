"""Freed memory goes back to the system every 30 s: the trims' pace on a mock clock, and the C
library's own trim giving back a heap left full of holes."""

from __future__ import annotations

import gc
import random

import pytest
import trio
import trio.testing

from ledgerport.ops import TRIM_INTERVAL, MemoryTrimmer, Metrics, system_trim


def _sample(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


async def test_trims_every_interval_and_counts_what_came_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    metrics = Metrics()
    resident = [100_000_000]
    trims: list[float] = []

    def trim() -> None:
        trims.append(trio.current_time())
        resident[0] -= 1_000_000

    trimmer = MemoryTrimmer(metrics, trim=trim, resident=lambda: resident[0])
    with trio.move_on_after(3.5 * TRIM_INTERVAL):
        async with trio.open_nursery() as nursery:
            await nursery.start(trimmer.run)
            assert trims == []
    assert trims == [TRIM_INTERVAL, 2 * TRIM_INTERVAL, 3 * TRIM_INTERVAL]
    assert _sample(metrics, "ledgerport_memory_trim_seconds_count") == 3
    assert _sample(metrics, "ledgerport_memory_returned_bytes_total") == 3_000_000


async def test_without_malloc_trim_it_starts_and_does_nothing() -> None:
    metrics = Metrics()
    trimmer = MemoryTrimmer(metrics, trim=None)
    trimmer._trim = None  # as on a C library without malloc_trim
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(trimmer.run)
    assert trimmer.trim_once() == 0
    assert _sample(metrics, "ledgerport_memory_trim_seconds_count") == 0


def test_the_c_librarys_trim_gives_back_a_heap_full_of_holes() -> None:
    """Blocks of 0.6 to 8 KB come from the C library's heap; freeing 19 in 20 of them leaves
    holes that stay resident until a trim."""
    if system_trim() is None:
        pytest.skip("the C library has no malloc_trim (not glibc)")
    metrics = Metrics()
    trimmer = MemoryTrimmer(metrics)
    trimmer.trim_once()
    rng = random.Random(7)
    blocks = [bytes(rng.randint(600, 8000)) for _ in range(40_000)]
    kept = blocks[::20]
    del blocks
    gc.collect()
    returned = trimmer.trim_once()
    assert returned > 50_000_000, f"{returned} bytes given back"
    assert len(kept) == 2000
