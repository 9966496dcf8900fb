"""How fast ``ledgerport functions run FILE`` starts: the wall time of a whole run of a module
that returns at once (the command's imports, its sandbox worker's start, the compile and the
run), against ``python -c pass`` on the same interpreter in the same run.

Usage::

    .venv/bin/python bench/cli.py [--runs N]

The two commands are run alternately, ``N`` times each, so both meet the machine's same
moments; the script prints the median and the slowest of each, and the command's median as a
ratio of ``python -c pass``'s. The target (issue 48) is a median under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULE = "export async function handler(event) { return { type: event.type }; }\n"
TARGET = 1.0


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        module = Path(scratch) / "handler.js"
        module.write_text(MODULE)
        run = [sys.executable, "-m", "ledgerport", "functions", "run", str(module), "--json"]
        bare = [sys.executable, "-c", "pass"]
        _timed(run)  # the first run fills the OS's file cache; it is not counted
        runs, bares = [], []
        for _ in range(args.runs):
            runs.append(_timed(run))
            bares.append(_timed(bare))
    run_median, bare_median = statistics.median(runs), statistics.median(bares)
    print(f"functions run: median {run_median:.3f} s, slowest {max(runs):.3f} s")  # noqa: T201
    print(f"python -c pass: median {bare_median:.3f} s, slowest {max(bares):.3f} s")  # noqa: T201
    verdict = "within" if run_median < TARGET else "over"
    print(  # noqa: T201
        f"ratio {run_median / bare_median:.1f}x python -c pass; {verdict} the {TARGET:.0f} s target"
    )


if __name__ == "__main__":
    main()
