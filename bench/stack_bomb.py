"""A stack bomb: what a run page of a function that throws from deep recursion into a 256 KiB
line costs another client's ``/healthz``, on a served instance.

Usage::

    .venv/bin/python bench/stack_bomb.py [--backend sqlite|postgres|both] [--samples N]
        [--fetchers N]

Per store, a ``ledgerport serve`` process (development mode, two sandbox workers) and one
developer with one app (no business, no installation): the function (``tests/e2e/stack_bomb.py``:
one line of about 256 KiB, a recursion 240 deep that throws, ``Error.stackTraceLimit``
unbounded) is uploaded and test-run once, and so is an ordinary function that throws, the
reference. Then ``/healthz`` is asked ``--samples`` times (default 200), one every 20 ms on one
keep-alive connection: alone, then while ``--fetchers`` threads (default 2) ask for the ordinary
run's console page one after another, then likewise the bomb's. Reported: /healthz p50, p99 and
slowest in each phase and the p99 ratios to the lone one in the same run, each run page's size
and time, the stack kept, and the server's resident memory (its peak included).

Target (issue 44): a run page answers in milliseconds whatever the guest threw, and /healthz
beside the bomb's page is where it is beside an ordinary run's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.served import start_server, stop, store_env, wait_healthy
from tests.e2e.stack_bomb import (
    Developer,
    Pages,
    bomb_run,
    developer,
    fetching,
    healthz_latencies,
    p50_p99_max,
    run_page_path,
)

ADMIN_TOKEN = "lp_admin_bench-stack-bomb-0123456789abcdef"
INTERVAL = 0.02
PLAIN = (
    "export function handler(event) {\n  const name = event.data.name;\n"
    '  throw new Error("no " + name);\n}\n'
)
"""The reference: an ordinary function that throws, whose run page is fetched the same way."""


def _memory(pid: int) -> tuple[float, float]:
    """The process's resident memory now and at its peak, in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def _ms(values: tuple[float, ...]) -> str:
    return "".join(f"{value * 1000:10.1f}ms" for value in values)


def _say(line: str) -> None:
    print(line, flush=True)  # noqa: T201 - the bench's report


def _phase(
    name: str, base: str, dev: Developer, path: str, samples: int, fetchers: int
) -> tuple[list[float], Pages]:
    with fetching(base, dev, path, fetchers) as pages:
        latencies = healthz_latencies(base, samples, INTERVAL)
    _say(f"   /healthz beside {name:<9}{_ms(p50_p99_max(latencies))}")
    if len(pages.seconds) >= 2:
        _say(f"   {name} run page   {_ms(p50_p99_max(pages.seconds))}  n={len(pages.seconds)}")
    _say(f"   {name} run page size {pages.largest / 1024:.1f} KiB; errors {len(pages.errors)}")
    return latencies, pages


def bench(backend: str, samples: int, fetchers: int) -> None:
    _say(f"== {backend}: {samples} /healthz alone, then beside {fetchers} run page fetchers")
    with tempfile.TemporaryDirectory() as tmp, store_env(backend, Path(tmp)) as env:
        server = start_server(
            Path(tmp),
            ADMIN_TOKEN,
            {**env, "LEDGERPORT_PASSWORD_HASHING": "fast", "LEDGERPORT_FUNCTION_WORKERS": "2"},
        )
        try:
            wait_healthy(server)
            dev = developer(server.base, ADMIN_TOKEN)
            plain = bomb_run(server.base, dev, PLAIN, "plain")
            run = bomb_run(server.base, dev)
            stack = run.get("stack") or ""
            _say(
                f"   bomb run: {run['status']}, stack kept {len(stack)} characters,"
                f" {stack.count(chr(10))} lines"
            )
            _say("                            p50         p99     slowest")
            alone = healthz_latencies(server.base, samples, INTERVAL)
            _say(f"   /healthz alone          {_ms(p50_p99_max(alone))}")
            ordinary, _ = _phase(
                "ordinary",
                server.base,
                dev,
                run_page_path(dev, plain["id"], "plain"),
                samples,
                fetchers,
            )
            before = _memory(server.process.pid)
            bombed, _ = _phase(
                "bomb", server.base, dev, run_page_path(dev, run["id"]), samples, fetchers
            )
            after = _memory(server.process.pid)
        finally:
            stop(server.process)
    _say(
        f"   server memory {before[0]:.0f} MB before the bomb's pages, {after[0]:.0f} MB after,"
        f" peak {after[1]:.0f} MB"
    )
    p99 = p50_p99_max(alone)[1]
    _say(
        f"   /healthz p99 beside the bomb's pages / alone: {p50_p99_max(bombed)[1] / p99:.2f}x;"
        f" beside an ordinary run's pages / alone: {p50_p99_max(ordinary)[1] / p99:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--fetchers", type=int, default=2)
    args = parser.parse_args()
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        bench(backend, args.samples, args.fetchers)


if __name__ == "__main__":
    main()
