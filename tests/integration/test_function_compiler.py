"""An upload's module compiled in a worker process: the same outcome as compiling in the test's
own thread, a time bound past which the worker is killed, and nothing left running when the
caller gives up."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from ledgerport import apps, catalog
from ledgerport.apps import FunctionSourceNoHandler, compile_module, compile_upload
from ledgerport.errors import InvalidInput

from .workers import HANDLER, child_processes, heavy_module

TIMEOUT = 30
WORKER = Path(apps.__file__).with_name("_module_source.py")
"""The compile worker, run as ``compile_upload`` runs it."""
TINY = 0.01
"""Seconds of CPU: far too few for the worker to parse the heavy module."""

ACCEPTED = {
    "plain": HANDLER,
    "export clause": "const run = () => 'clause'; export { run as handler };",
    "destructured": "const o = { handler: () => 1 }; export const { handler, a: [b] = [] } = o;",
    "default beside": "export default 42; export async function handler(e) { return e }",
    "not ASCII": "export const handler = () => 'héllo wörld ✓';",
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
async def test_a_worker_compiles_what_this_thread_compiles(name: str) -> None:
    source = ACCEPTED[name]
    with trio.fail_after(TIMEOUT):
        compiled = await compile_upload(source)
    assert compiled == compile_module(source)


REFUSED = {
    "syntax error": ("export const handler = 1;\nlet = = 2;", FunctionSourceNoHandler),
    "no handler": ("export const main = 1", FunctionSourceNoHandler),
    "import": ('import x from "y";\n' + HANDLER, InvalidInput),
    "too deep": (
        HANDLER + "const x = " + "[" * 300 + "]" * 300 + ";",
        InvalidInput,
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_a_worker_refuses_what_this_thread_refuses(name: str) -> None:
    source, error = REFUSED[name]
    with pytest.raises(error) as here:
        compile_module(source)
    with trio.fail_after(TIMEOUT), pytest.raises(error) as there:
        await compile_upload(source)
    assert str(there.value) == str(here.value)


async def test_past_the_cpu_limit_the_worker_is_ended_and_the_upload_refused() -> None:
    before = child_processes()
    with trio.fail_after(TIMEOUT), pytest.raises(InvalidInput) as refused:
        await compile_upload(heavy_module(), cpu_limit=TINY)
    assert refused.value.messages == [
        f"source must compile within {TINY:g} seconds of CPU time: split or simplify the module"
    ]
    assert child_processes() == before


def test_the_limit_counts_cpu_time_not_the_time_spent_waiting_for_a_core() -> None:
    """A compile worker held back (stopped) for longer than its whole CPU limit, as a loaded
    machine keeps it waiting for a core, still compiles: it spent little CPU. The same worker
    given less CPU than the parse needs is ended by SIGPROF."""
    limit = 1.0

    def compile_held_back(cpu: float, held: float) -> subprocess.CompletedProcess[bytes]:
        worker = subprocess.Popen(
            [sys.executable, "-P", str(WORKER), str(catalog.FUNCTION_SOURCE_MAX_DEPTH), str(cpu)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        worker.send_signal(signal.SIGSTOP)
        time.sleep(held)
        worker.send_signal(signal.SIGCONT)
        out, err = worker.communicate(heavy_module().encode(), timeout=TIMEOUT)
        return subprocess.CompletedProcess(worker.args, worker.returncode, out, err)

    held_back = compile_held_back(limit, held=limit + 0.5)
    starved = compile_held_back(TINY, held=0)

    assert held_back.returncode == 0, held_back.stderr
    assert json.loads(held_back.stdout)["exports"] == ["handler"]
    assert starved.returncode == -signal.SIGPROF


async def test_a_caller_that_gives_up_leaves_no_worker_behind() -> None:
    before = child_processes()
    with trio.fail_after(TIMEOUT):
        with trio.move_on_after(TINY) as gave_up:
            await compile_upload(heavy_module())
    assert gave_up.cancelled_caught
    assert child_processes() == before


async def test_the_heavy_module_is_legal_and_compiles_within_the_bound() -> None:
    """What the tests above kill is a module the service accepts given its time."""
    with trio.fail_after(TIMEOUT):
        compiled = await compile_upload(heavy_module())
    assert compiled.exports == ("handler",)
