"""Asks ``GET <base>/healthz`` every ``interval`` seconds over one keep-alive connection and
prints one JSON line a second: ``at`` (time.monotonic()), ``answers``, ``gap`` (the longest time
between two consecutive answers that ended in this second), ``slowest`` (the slowest answer of
the second) and ``errors``; all times in seconds. Stops after ``limit`` seconds, or when its
standard output is closed.

Usage::

    .venv/bin/python bench/_prober.py BASE INTERVAL LIMIT

Run by the soak bench in a process of its own, so that a pause of the bench's own process is
not taken for one of the server's.
"""

from __future__ import annotations

import json
import sys
import time

import httpx

TIMEOUT = 5.0


def main() -> None:
    base, interval, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    began = time.monotonic()
    last_answer = began
    second_ends = began + 1.0
    answers = errors = 0
    gap = slowest = 0.0
    with httpx.Client(base_url=base, timeout=TIMEOUT, trust_env=False) as http:
        for _ in range(int(limit / interval) + 1):
            now = time.monotonic()
            if now - began > limit:
                return
            if now >= second_ends:
                line = {
                    "at": now,
                    "answers": answers,
                    "gap": gap,
                    "slowest": slowest,
                    "errors": errors,
                }
                try:
                    print(json.dumps(line), flush=True)  # noqa: T201 - the probe's report
                except BrokenPipeError:
                    return
                answers = errors = 0
                gap = slowest = 0.0
                second_ends = now + 1.0
            asked = time.monotonic()
            try:
                ok = http.get("/healthz").status_code == 200
            except httpx.HTTPError:
                ok = False
            answered = time.monotonic()
            if ok:
                answers += 1
                gap = max(gap, answered - last_answer)
                slowest = max(slowest, answered - asked)
                last_answer = answered
            else:
                errors += 1
            time.sleep(max(0.0, interval - (time.monotonic() - asked)))


if __name__ == "__main__":
    main()
