"""Python's garbage collector, timed: every collection's pause goes to the metrics.

A collection stops the whole process (every request, the engine, the event loop) for as long as
it walks its generation; a full one walks every object not frozen. ``ledgerport serve`` freezes
what start-up built (``gc.freeze()``), so a full collection walks only what requests and the
engine keep alive. The histogram shows how long the pauses are, by generation; the longest one
is what a request can wait on the collector at worst.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._metrics import Metrics


class CollectorTimer:
    """A ``gc.callbacks`` entry observing each collection's duration by generation."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._started = 0.0
        self.longest = 0.0
        """The longest pause seen, in seconds."""

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        self.longest = max(self.longest, pause)
        self._metrics.gc_pause.labels(str(info.get("generation", ""))).observe(pause)


@contextmanager
def timing_collections(metrics: Metrics) -> Iterator[CollectorTimer]:
    """Time every collection for the context's lifetime."""
    timer = CollectorTimer(metrics)
    gc.callbacks.append(timer)
    try:
        yield timer
    finally:
        gc.callbacks.remove(timer)
