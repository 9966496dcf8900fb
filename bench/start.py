"""A served process's start: the time until it answers ``/healthz``, until its OpenAPI document
is served, and the CPU it spent by then, against another checkout in the same run.

Usage::

    .venv/bin/python bench/start.py --against DIR [--starts N]

Each start is ``ledgerport serve`` on a new SQLite file in a scratch directory (its migrations
included), on a free loopback port, in development mode with a known admin token. The script
asks ``/healthz`` every 10 ms until it answers, then ``GET /openapi.json`` (built in a worker
thread as the process starts), then reads the process's CPU time (user and system, from Linux's
``/proc``) and stops it. ``--against DIR`` (another checkout, such as a ``git worktree`` of the
commit before a change) is started alternately with this one, ``N`` times each, so both meet
the machine's same moments. It prints the median of each figure for each checkout, and this
checkout's CPU as a ratio of the other's.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ADMIN_TOKEN = "lp_admin_bench-start-0123456789abcdef"
HEALTHY_WITHIN = 60.0
DOCUMENT_WITHIN = 120.0


@dataclass(frozen=True)
class Start:
    healthy: float
    """Seconds from the process's launch to its first answer of ``/healthz``."""
    document: float
    """Seconds from the launch to the OpenAPI document's answer."""
    cpu: float
    """CPU seconds (user and system) the process spent by then."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_seconds(pid: int) -> float:
    """The user and system CPU time of process ``pid`` so far (Linux's ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    # After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_once(code: Path | None) -> Start:
    """One start of the checkout at ``code`` (this one when None)."""
    with tempfile.TemporaryDirectory(prefix="ledgerport-bench-start-") as directory:
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
        env |= {
            "LEDGERPORT_ENV": "development",
            "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
            "LEDGERPORT_BIND": f"127.0.0.1:{port}",
            "LEDGERPORT_DATABASE_URL": f"sqlite:///{directory}/served.db",
        }
        if code is not None:
            env["PYTHONPATH"] = str(code / "src")
        base = f"http://127.0.0.1:{port}"
        launched = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "ledgerport", "serve"],
            cwd=directory,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with httpx.Client(base_url=base, trust_env=False, timeout=DOCUMENT_WITHIN) as http:
                while True:
                    if time.monotonic() - launched > HEALTHY_WITHIN:
                        raise SystemExit(f"{code or 'this checkout'}: not healthy in time")
                    try:
                        if http.get("/healthz").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(0.01)
                healthy = time.monotonic() - launched
                assert http.get("/openapi.json").status_code == 200
                document = time.monotonic() - launched
            return Start(healthy, document, _cpu_seconds(process.pid))
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="another checkout's root")
    parser.add_argument("--starts", type=int, default=8, help="starts of each checkout")
    args = parser.parse_args()
    ours: list[Start] = []
    theirs: list[Start] = []
    for index in range(args.starts):
        pair = [(ours, None), (theirs, args.against)]
        if index % 2:
            pair.reverse()
        for into, code in pair:
            into.append(start_once(code))
    print(f"{args.starts} starts each, alternating (SQLite, a new file each)")  # noqa: T201
    print("| checkout | healthy s | document s | CPU s |")  # noqa: T201
    print("|---|---:|---:|---:|")  # noqa: T201
    for name, starts in (("this", ours), (str(args.against), theirs)):
        print(  # noqa: T201
            f"| {name} | {statistics.median(s.healthy for s in starts):.2f}"
            f" | {statistics.median(s.document for s in starts):.2f}"
            f" | {statistics.median(s.cpu for s in starts):.2f} |"
        )
    ratio = statistics.median(s.cpu for s in ours) / statistics.median(s.cpu for s in theirs)
    print(f"CPU to the document served: {ratio:.2f}x of {args.against}")  # noqa: T201


if __name__ == "__main__":
    main()
