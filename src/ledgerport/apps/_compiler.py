"""Where a hosted function's module is compiled: in the caller's thread, or, for an upload, in a
worker process, bounded in CPU time and memory, where V8 checks it too.

Parsing holds the interpreter: tree-sitter's parser does not release the GIL (measured: a thread
parsing a 260 KB source held a ticking thread for 180 ms, as long as the parse itself), and the
walks over a tree of half a million nodes are Python. So an upload is compiled in a fresh
process (``python -P`` running ``_module_source.py``, which loads tree-sitter and mini-racer
only: about 250 ms of CPU to start, most of it V8's), never on the event loop nor on a thread
of it. The worker is also where V8 can check the source: mini-racer cannot run in the service's
own process (its asyncio loop breaks under trio_asyncio), so :func:`compile_module`, in the
caller's thread, has tree-sitter's checks only.

The limit on time counts the worker's own CPU time (the kernel's profiling timer, set by the
worker as it starts), not the time it waits for a core: on a loaded machine a legal upload takes
longer but is not refused. Past it the kernel ends the process and the upload is refused, as it
is when the worker runs out of the ``MEMORY_LIMIT_MIB`` it may take once V8 is up. A worker that
outlasts ``WALL_LIMIT`` seconds all the same (it could only be waiting) is killed, and the upload
fails as the service's failure, not the module's. At most ``COMPILES_AT_ONCE`` run at once in a
process of the service, so a burst of uploads cannot take every core.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import trio

from ledgerport import catalog
from ledgerport.errors import InvalidInput

from ._errors import FunctionSourceNoHandler
from ._module_source import OUT_OF_MEMORY, CompiledModule, Refused, SyntaxProblem, transform

COMPILES_AT_ONCE = 2
"""Uploads compiled at the same moment in one process of the service; the next ones wait."""
WALL_LIMIT = 120.0
"""Seconds a compile worker may last, waiting included, before it is killed as stuck."""
MEMORY_LIMIT_MIB = 256
"""MiB of memory a compile worker may take beyond what it holds once V8 is up (its data
segment: V8's heap and parser, Python's, tree-sitter's tree). The largest source takes a few
dozen (measured: 256 KiB of the smallest statements, the most syntax nodes a source makes)."""
V8_OUT_OF_MEMORY = b"Fatal process out of memory"
"""What V8 writes on standard error as it ends a process that ran out of memory."""
STDERR_KEPT = 2048
"""Bytes of a failed worker's standard error kept in the exception."""
_WORKER = Path(__file__).with_name("_module_source.py")
_SLOTS: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar(
    "ledgerport.apps.compile_slots"
)


def _domain_error(refused: Refused) -> Exception:
    if refused.kind == "no_handler":
        return FunctionSourceNoHandler(refused.syntax or refused.messages[0])
    return InvalidInput(refused.messages)


def compile_module(source: str) -> CompiledModule:
    """The script of ``source``, compiled in this thread (see ``_module_source``), with
    tree-sitter's checks only: V8's are the compile worker's (:func:`compile_upload`).

    Raises FunctionSourceNoHandler when the source is not an ES module (a syntax error, where
    tree-sitter finds it) or exports no ``handler``, and InvalidInput when it nests brackets
    deeper than catalog.FUNCTION_SOURCE_MAX_DEPTH or imports anything. It holds its thread, and
    the GIL, for as long as the parse takes: an upload is compiled with :func:`compile_upload`
    instead.
    """
    try:
        return transform(source, max_depth=catalog.FUNCTION_SOURCE_MAX_DEPTH)
    except Refused as refused:
        raise _domain_error(refused) from None


def _slots() -> trio.CapacityLimiter:
    """The compile slots of this trio run (one limiter per run: trio objects never cross)."""
    try:
        return _SLOTS.get()
    except LookupError:
        slots = trio.CapacityLimiter(COMPILES_AT_ONCE)
        _SLOTS.set(slots)
        return slots


async def _kill(process: trio.Process) -> None:
    # The worker holds nothing that needs a chance to clean up: no SIGTERM first.
    process.kill()


async def compile_upload(
    source: str, *, cpu_limit: float = catalog.FUNCTION_COMPILE_SECONDS
) -> CompiledModule:
    """:func:`compile_module` in a worker process, off the event loop, within ``cpu_limit``
    seconds of the worker's own CPU time (neither waiting for a slot nor for a core counts) and
    MEMORY_LIMIT_MIB of memory, with V8's check of the source besides tree-sitter's: a syntax
    error is V8's, where V8 stops and in its words (FunctionSourceNoHandler's ``syntax``), and
    a source V8 cannot read for nesting too deeply is refused (InvalidInput).

    Past either limit the worker ends, and InvalidInput is raised once it is gone; a cancelled
    caller kills it. A worker that fails without an outcome, or that is still there after
    WALL_LIMIT seconds, is the service's failure (RuntimeError).
    """
    async with _slots():
        with trio.move_on_after(WALL_LIMIT):
            done = await trio.run_process(
                # -P: the worker's folder stays off sys.path, its siblings are no modules of it.
                [
                    sys.executable,
                    "-P",
                    str(_WORKER),
                    str(catalog.FUNCTION_SOURCE_MAX_DEPTH),
                    repr(float(cpu_limit)),
                    str(MEMORY_LIMIT_MIB),
                ],
                stdin=source.encode(),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                deliver_cancel=_kill,
            )
            return _outcome(done, cpu_limit)
    raise RuntimeError(f"the module compiler did not end within {WALL_LIMIT:g} seconds")


def _outcome(done: subprocess.CompletedProcess[bytes], cpu_limit: float) -> CompiledModule:
    if done.returncode == -signal.SIGPROF:
        raise InvalidInput(
            [
                f"source must compile within {cpu_limit:g} seconds of CPU time: split or"
                " simplify the module"
            ]
        )
    if done.returncode == OUT_OF_MEMORY or (
        done.returncode < 0 and V8_OUT_OF_MEMORY in done.stderr
    ):
        raise InvalidInput(
            [
                f"source must compile within {MEMORY_LIMIT_MIB} MiB of memory: split or"
                " simplify the module"
            ]
        )
    if done.returncode != 0:
        tail = done.stderr[-STDERR_KEPT:].decode(errors="replace").strip()
        raise RuntimeError(f"the module compiler exited with {done.returncode}: {tail}")
    outcome = json.loads(done.stdout)
    if "refused" in outcome:
        syntax = outcome["syntax"]
        problem = None if syntax is None else SyntaxProblem(**syntax)
        raise _domain_error(Refused(outcome["refused"], outcome["messages"], problem))
    return CompiledModule(outcome["script"], tuple(outcome["exports"]))
