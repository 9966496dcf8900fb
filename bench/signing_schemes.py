"""Cost of signing one delivery attempt in each signature scheme, against ``stripe``'s.

Usage::

    .venv/bin/python bench/signing_schemes.py [--n N] [--rounds R] [--keys K]

Signs ``--n`` (20,000) attempts of a typical 600-byte delivery body with
``engine._schemes.signature_headers`` in each scheme (``stripe``, ``standard``,
``standard-asymmetric``), each attempt with its own timestamp and ``--keys`` keys (1; 2 is a
rotation's overlap), as the engine signs every attempt afresh. The schemes take turns for
``--rounds`` (5) rounds and each keeps its fastest round, so that a burst of other work on the
machine costs one scheme no more than another. Printed: microseconds per attempt in each
scheme, and the ratios standard/stripe and asymmetric/stripe, measured in the same run (the
baseline is ``stripe``, the spec's scheme, what every attempt cost so far).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import say

from ledgerport.apps import SCHEMES, Scheme, new_signing_key
from ledgerport.engine import signature_headers

BODY_BYTES = 600
DELIVERY_ID = "dlv_5b0f0c0e6f3a1d2e3f4a5b6c"


def typical_body() -> bytes:
    """A delivery body of BODY_BYTES bytes, as the engine sends one: compact JSON."""
    body = {
        "id": DELIVERY_ID,
        "eventId": "evt_0c6b3f1e2d4a5b6c7d8e9f00",
        "type": "invoice.created",
        "apiVersion": "2026-09-22",
        "businessId": "bus_9a8b7c6d5e4f3a2b1c0d9e8f",
        "created": 1790000000,
        "data": {
            "id": "inv_3c2b1a0f9e8d7c6b5a4f3e2d",
            "number": "INV-0001",
            "status": "draft",
            "total": "301.00",
            "memo": "",
        },
    }
    short = len(json.dumps(body, separators=(",", ":")).encode())
    body["data"]["memo"] = "x" * (BODY_BYTES - short)  # type: ignore[index]
    encoded = json.dumps(body, separators=(",", ":")).encode()
    assert len(encoded) == BODY_BYTES, len(encoded)
    return encoded


def one_round(scheme: Scheme, keys: Sequence[str], body: bytes, n: int) -> float:
    """Seconds to sign ``n`` attempts of ``body`` in ``scheme``."""
    started = time.perf_counter()
    for timestamp in range(1790000000, 1790000000 + n):
        signature_headers(scheme, keys, delivery_id=DELIVERY_ID, timestamp=timestamp, body=body)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="attempts signed a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=1, help="keys signing each attempt")
    args = parser.parse_args(argv)
    body = typical_body()
    keys = {scheme: [new_signing_key(scheme) for _ in range(args.keys)] for scheme in SCHEMES}
    for scheme in SCHEMES:
        one_round(scheme, keys[scheme], body, 100)
    best = dict.fromkeys(SCHEMES, float("inf"))
    for _ in range(args.rounds):
        for scheme in SCHEMES:
            best[scheme] = min(best[scheme], one_round(scheme, keys[scheme], body, args.n))
    per_attempt = {scheme: best[scheme] / args.n * 1e6 for scheme in SCHEMES}
    say(
        f"{args.n} attempts of a {len(body)}-byte body, {args.keys} key(s) each, "
        f"fastest of {args.rounds} rounds, Python {sys.version.split()[0]}"
    )
    for scheme in SCHEMES:
        say(f"  {scheme:<20} {per_attempt[scheme]:8.2f} µs per attempt")
    baseline = per_attempt["stripe"]
    say(f"  standard/stripe      {per_attempt['standard'] / baseline:8.2f}")
    say(f"  asymmetric/stripe    {per_attempt['standard-asymmetric'] / baseline:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
