"""An upload's module compiled in a worker process: the same outcome as compiling in the test's
own thread, but for V8's check, which only the worker makes; a time bound past which the worker
is killed, a memory bound, a module body never run, and nothing left running when the caller
gives up."""

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
from ledgerport.apps import (
    FunctionSourceNoHandler,
    SyntaxProblem,
    compile_module,
    compile_upload,
)
from ledgerport.errors import InvalidInput

from .workers import HANDLER, child_processes, heavy_module

TIMEOUT = 30
WORKER = Path(apps.__file__).with_name("_module_source.py")
"""The compile worker, run as ``compile_upload`` runs it."""
TINY = 0.01
"""Seconds of CPU: far too few for the worker to parse the heavy module."""
MEMORY_MIB = 256
"""The memory a worker is given beyond V8's own at its start, as ``compile_upload`` gives it."""

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


async def test_a_syntax_error_is_v8s_in_the_worker_and_tree_sitters_in_this_thread() -> None:
    """The worker names the error in V8's words; this thread, which V8 cannot share, in words
    of its own from tree-sitter's node, each where its parser stops (V8 at the argument it
    read last)."""
    source = "export const handler = (event) => {\n  context.log(event.type;\n};\n"
    with pytest.raises(FunctionSourceNoHandler) as here:
        compile_module(source)
    with trio.fail_after(TIMEOUT), pytest.raises(FunctionSourceNoHandler) as there:
        await compile_upload(source)
    assert there.value.syntax == SyntaxProblem(2, 21, "missing ) after argument list")
    assert here.value.syntax == SyntaxProblem(2, 25, "missing )")


V8_ONLY = {
    "declared twice": (
        "let total = 1;\nlet total = 2;\nexport const handler = () => total;",
        SyntaxProblem(2, 5, "Identifier 'total' has already been declared"),
    ),
    "octal in strict mode": (
        "export const handler = () => 010;",
        SyntaxProblem(1, 30, "Octal literals are not allowed in strict mode."),
    ),
    "bad regular expression": (
        "export const handler = (e) => /(a/.test(e.type);",
        SyntaxProblem(1, 31, "Invalid regular expression: /(a/: Unterminated group"),
    ),
    "two commas in an object": (
        "export default { a: 1,, };\nexport const handler = () => 1;",
        SyntaxProblem(1, 23, "Unexpected token ','"),
    ),
    "break outside a loop": (
        "export function handler() {\n  break;\n}",
        SyntaxProblem(2, 3, "Illegal break statement"),
    ),
}


@pytest.mark.parametrize("name", sorted(V8_ONLY))
async def test_errors_tree_sitter_lets_through_are_refused_by_v8(name: str) -> None:
    """Errors of JavaScript that tree-sitter's grammar does not check, which would otherwise
    fail every run, are refused at upload."""
    source, problem = V8_ONLY[name]
    compile_module(source)  # tree-sitter alone lets it through
    with trio.fail_after(TIMEOUT), pytest.raises(FunctionSourceNoHandler) as refused:
        await compile_upload(source)
    assert refused.value.syntax == problem


async def test_a_chain_too_deep_for_v8_is_refused_as_too_deep() -> None:
    """A chain no bracket counts (``a => a => ...``) can still be too deep for V8's parser:
    refused as the depth rule refuses brackets, not run to fail every time."""
    source = "export const handler = " + "a => " * 60_000 + "1;"
    with trio.fail_after(TIMEOUT), pytest.raises(InvalidInput) as refused:
        await compile_upload(source)
    assert refused.value.messages == [
        "source must nest less deeply: V8 runs out of stack reading it (a chain of thousands"
        " of levels, such as a => b => ..., else if ... or a = b = ...)"
    ]


NEVER_RUN = {
    "an endless top level before a syntax error": (
        "while (true) {}\nexport const handler = () => 1 +;",
        SyntaxProblem(2, 33, "Unexpected token ';'"),
    ),
    "closing the check's code early": (
        "}); while (true) {} (function () {",
        SyntaxProblem(1, 1, "Unexpected token '}'"),
    ),
    "closing a wrapper's function early": (
        "}\n})\nwhile (true) {}\n(async function () {",
        SyntaxProblem(1, 1, "Unexpected token '}'"),
    ),
}


async def test_a_module_body_is_never_run_at_upload() -> None:
    """The worker compiles the source and runs none of it: a top level that would loop
    forever compiles well within the CPU limit."""
    with trio.fail_after(TIMEOUT):
        compiled = await compile_upload("while (true) {}\nexport const handler = () => 1;")
    assert compiled.exports == ("handler",)


@pytest.mark.parametrize("name", sorted(NEVER_RUN))
async def test_a_refused_body_is_never_run_however_it_ends_the_code_around_it(name: str) -> None:
    """A source with a syntax error is refused at the error, within the CPU limit, whether or
    not it tries to close the code V8 reads it in and loop forever after."""
    source, problem = NEVER_RUN[name]
    with trio.fail_after(TIMEOUT), pytest.raises(FunctionSourceNoHandler) as refused:
        await compile_upload(source)
    assert refused.value.syntax == problem


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
    given less CPU than the parse needs is ended by SIGPROF.

    The limit is several times the compile's CPU (about a second, a quarter of
    it starting V8): CPU time itself grows on a loaded machine, where cores and caches are
    shared, and 1 s was once overrun by a compile of half that."""
    limit = 4.0

    def compile_held_back(cpu: float, held: float) -> subprocess.CompletedProcess[bytes]:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-P",
                str(WORKER),
                str(catalog.FUNCTION_SOURCE_MAX_DEPTH),
                str(cpu),
                str(MEMORY_MIB),
            ],
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


V8_BUSY = """
import signal
from py_mini_racer import MiniRacer
racer = MiniRacer()
signal.setitimer(signal.ITIMER_PROF, 0.3)
racer.eval("for (;;) {}")
"""


def test_the_profiling_timer_counts_the_cpu_v8_spends_in_its_own_thread() -> None:
    """What the worker's CPU limit relies on: V8 runs in a thread of mini-racer's, and the
    kernel's profiling timer, which counts every thread's CPU time, ends the process with
    SIGPROF (V8 installs no handler of its own for it)."""
    done = subprocess.run([sys.executable, "-c", V8_BUSY], capture_output=True, timeout=TIMEOUT)
    assert done.returncode == -signal.SIGPROF, done.stderr


def test_the_worker_holds_to_its_memory_limit() -> None:
    """Given a few MiB beyond V8's own, the worker cannot compile the heavy module (its tree
    alone takes more) and ends without an outcome; given what ``compile_upload`` gives it, it
    compiles it. Past the limit an allocation fails, whatever the source."""

    def compile_in(mib: int) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [
                sys.executable,
                "-P",
                str(WORKER),
                str(catalog.FUNCTION_SOURCE_MAX_DEPTH),
                "30",
                str(mib),
            ],
            input=heavy_module().encode(),
            capture_output=True,
            timeout=TIMEOUT,
        )

    starved = compile_in(8)
    given = compile_in(MEMORY_MIB)
    assert starved.returncode != 0
    assert starved.stdout == b""
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout)["exports"] == ["handler"]


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
