"""Freed memory given back to the system, so resident memory follows what the process uses.

CPython takes its larger blocks (request bodies, answers, query buffers: anything over 512
bytes) from the C library's allocator. glibc gives freed memory back to the system only from
the top of its heap: a block still in use above a freed region keeps the region resident. Under
a steady load the heap's free space grows in the middle of it, and resident memory with it,
by 10 to 15 MB in the first half hour of a soak, while the live objects stay flat; a
``malloc_trim(0)`` then returned 13 MB of a 119 MB process. :class:`MemoryTrimmer` calls it
every ``TRIM_INTERVAL``: each call gives back what was freed since the last one, a millisecond
or two once the first has run (the process waits while it runs; the histogram shows for how
long). Where the C library has no ``malloc_trim`` (not glibc) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import time
from collections.abc import Callable

import trio

from ._metrics import Metrics

TRIM_INTERVAL = 30.0
"""Seconds between two trims."""

log = logging.getLogger("ledgerport.memory")

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident_bytes() -> int:
    """This process's resident memory, or 0 where /proc is not there."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def system_trim() -> Callable[[], object] | None:
    """The C library's ``malloc_trim(0)``, or None where there is none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class MemoryTrimmer:
    """Every ``interval`` seconds, give the allocator's free memory back to the system."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        trim: Callable[[], object] | None = None,
        resident: Callable[[], int] = _resident_bytes,
        interval: float = TRIM_INTERVAL,
    ) -> None:
        self._metrics = metrics
        self._trim = trim if trim is not None else system_trim()
        self._resident = resident
        self._interval = interval

    def trim_once(self) -> int:
        """Trim now; answers the bytes of resident memory given back."""
        if self._trim is None:
            return 0
        before = self._resident()
        started = time.perf_counter()
        self._trim()
        self._metrics.memory_trim.observe(time.perf_counter() - started)
        returned = max(0, before - self._resident())
        self._metrics.memory_returned.inc(returned)
        return returned

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self._trim is None:
            log.info("the C library has no malloc_trim: freed memory is given back as it can")
        task_status.started()
        if self._trim is None:
            return
        while True:
            await trio.sleep(self._interval)
            self.trim_once()
