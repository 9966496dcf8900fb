"""The collector's pauses reach the metrics, by generation, for as long as they are timed."""

from __future__ import annotations

import gc

from ledgerport.ops import Metrics, timing_collections


def _count(metrics: Metrics, generation: str) -> float:
    value = metrics.registry.get_sample_value(
        "ledgerport_gc_pause_seconds_count", {"generation": generation}
    )
    return value or 0.0


def test_each_collection_is_timed_by_generation_while_timing() -> None:
    metrics = Metrics()
    with timing_collections(metrics) as timer:
        gc.collect()
        gc.collect(0)
    assert _count(metrics, "2") >= 1
    assert _count(metrics, "0") >= 1
    assert timer.longest > 0
    timed = _count(metrics, "2")
    gc.collect()
    assert _count(metrics, "2") == timed  # no longer timed
    assert timer not in gc.callbacks
