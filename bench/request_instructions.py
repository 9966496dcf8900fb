"""Instructions a request costs the served process, counted by valgrind's callgrind.

Usage::

    .venv/bin/python bench/request_instructions.py [--backend sqlite|postgres] [--n N]
        [--kinds healthz introspection refresh] [--against DIR]

A ``ledgerport serve`` process runs under ``valgrind --tool=callgrind`` with instrumentation
off; for each kind of request (as ``bench/request_path.py`` sends them: 16 tenants, 16 in
flight, each request from its own client address) it is switched on for ``--n`` requests and
the instructions the process ran meanwhile (every thread; not the WAL's syncer, a process of
its own, nor the database server) are divided by ``--n``. The count is the same from one run to
the next to a tenth of a percent whatever else the machine does, where times on two shared
cores move by a tenth: it tells a change of a few percent in a request's work, which a
throughput bench cannot. It counts work, not time: waits, system calls and cache misses are not
in it. ``--against DIR`` measures the checkout at DIR (its ``src``) first, in the same run.

Each kind also prints its count against ``healthz``'s, the baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tests.e2e.served as served
from bench._load import answer, client, forwarded_for, nodes, provision_tenant, refresh, say
from bench.request_path import SCOPES, TENANTS, _elapsed
from tests.e2e.served import store_env

WARM = 300
HERE = Path(__file__).resolve().parent.parent


def _control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True)


def _last_total(workdir: Path, pid: str) -> int:
    """The instructions in the newest of ``pid``'s dumps."""
    dumps = sorted(workdir.glob(f"callgrind.{pid}.*"), key=os.path.getmtime)
    total = re.search(r"^totals: (\d+)", dumps[-1].read_text(), re.MULTILINE)
    assert total is not None, dumps[-1]
    return int(total.group(1))


async def measure(backend: str, source: Path, kinds: list[str], n: int) -> dict[str, float]:
    """Thousands of instructions a request of each kind, served from ``source``."""
    workdir = Path(tempfile.mkdtemp(prefix="ledgerport-instructions-"))
    wrapper = workdir / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={source} exec valgrind --tool=callgrind --instr-atstart=no"
        f' --callgrind-out-file={workdir}/callgrind.%p {sys.executable} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    counts: dict[str, float] = {}
    stack = contextlib.ExitStack()
    executable, timeout = sys.executable, served.STARTUP_TIMEOUT
    try:
        store = await trio.to_thread.run_sync(stack.enter_context, store_env(backend, workdir))
        sys.executable, served.STARTUP_TIMEOUT = str(wrapper), 600.0
        env = store | {
            "LEDGERPORT_FUNCTION_WORKERS": "0",
            "LEDGERPORT_RATE_LIMIT_FACTOR": "1000",
            "LEDGERPORT_TRUSTED_PROXIES": "127.0.0.1/32",
            "LEDGERPORT_PASSWORD_HASHING": "fast",
        }
        with nodes(workdir, env) as running:
            node = await running.start("bench")
            sys.executable = executable
            pid = str(node.pid)
            async with client(node.base) as http:
                tenants = [await provision_tenant(http, SCOPES, f"T{i}") for i in range(TENANTS)]
                pairs = [[t.refresh_token, t.access_token] for t in tenants]

                async def healthz(worker: int, i: int) -> httpx.Response:
                    return await http.get("/healthz", headers=forwarded_for(i))

                async def introspection(worker: int, i: int) -> httpx.Response:
                    return await http.post(
                        "/oauth/introspect",
                        data={"token": pairs[worker][1]},
                        headers={"Authorization": tenants[worker].basic, **forwarded_for(i)},
                    )

                async def rotate(worker: int, i: int) -> httpx.Response:
                    response = await refresh(
                        http, tenants[worker], pairs[worker][0], headers=forwarded_for(i)
                    )
                    pair = answer(response)
                    pairs[worker] = [pair["refresh_token"], pair["access_token"]]
                    return response

                sends = {"healthz": healthz, "introspection": introspection, "refresh": rotate}
                for kind in kinds:
                    await _elapsed(WARM, sends[kind])
                for number, kind in enumerate(kinds, start=1):
                    _control("--zero", pid)
                    _control("--instr=on", pid)
                    await _elapsed(n, sends[kind], 10**6 * number)
                    _control("--instr=off", pid)
                    _control(f"--dump={kind}", pid)
                    counts[kind] = _last_total(workdir, pid) / n / 1000
    finally:
        sys.executable, served.STARTUP_TIMEOUT = executable, timeout
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(stack.close)
        shutil.rmtree(workdir, ignore_errors=True)
    return counts


async def main(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    kinds = ["healthz", *[kind for kind in args.kinds if kind != "healthz"]]
    here = HERE / "src"
    sources = [("against", args.against / "src")] if args.against else []
    say(f"== {args.backend}: thousands of instructions a request, {args.n} of each kind")
    results = {}
    for label, source in [*sources, ("this", here)]:
        results[label] = counts = await measure(args.backend, source, kinds, args.n)
        cells = [
            f"{kind} {counts[kind]:8.0f} ({counts[kind] / counts['healthz']:.2f}x)"
            for kind in kinds
        ]
        say(f"   {label:<8} " + "   ".join(cells))
    if args.against:
        say(
            "   this/against "
            + "   ".join(
                f"{kind} {results['this'][kind] / results['against'][kind]:.3f}" for kind in kinds
            )
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, default=300, help="requests of each kind counted")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=["healthz", "introspection", "refresh"],
        default=["healthz", "introspection", "refresh"],
    )
    parser.add_argument("--against", type=Path, help="another checkout, measured first")
    trio.run(main, parser.parse_args())
