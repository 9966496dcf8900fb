"""What a receiver asks of its endpoint (contract.md, third round: Webhook endpoints beyond the
spec): the signature scheme, a rate it can take, ordering by record and headers of its own, and
the rules their values follow.

Custom headers go with every attempt, after ours, and never in place of one: names are HTTP
tokens of at most 64 characters and may not be ``host``, ``content-*``, ``user-agent`` or begin
with ``webhook-`` or ``x-webhook-`` (the contract's list); ledgerport also refuses the headers an
attempt sets itself or that would change how its request is framed (``accept-encoding``,
``connection``, ``keep-alive``, ``transfer-encoding``, ``te``, ``trailer``, ``upgrade``,
``proxy-*``), and two names that differ only in case. Values are at most 512 characters of
visible ASCII, spaces allowed between them (an ``Authorization: Bearer ...`` value has one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal, get_args

from ledgerport import catalog

from ._signing_keys import SCHEMES, Scheme

Ordering = Literal["none", "record"]
ORDERINGS: Final[tuple[Ordering, ...]] = get_args(Ordering)
DisabledReason = Literal["gone", "failing"]

__all__ = ["ORDERINGS", "SCHEMES", "DisabledReason", "Ordering", "Scheme", "control_problems"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7e]+(?: +[\x21-\x7e]+)*")
_REFUSED_NAMES = frozenset(
    {
        "host",
        "user-agent",
        "accept-encoding",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
    }
)
_REFUSED_PREFIXES = ("content-", "webhook-", "x-webhook-", "proxy-")


def header_problems(headers: object) -> list[str]:
    """What is wrong with an endpoint's ``headers`` (empty: nothing); each problem names the
    header it is about."""
    if not isinstance(headers, Mapping):
        return ["headers must be an object of header names and values"]
    problems: list[str] = []
    if len(headers) > catalog.WEBHOOK_HEADERS_MAX:
        problems.append(f"headers has at most {catalog.WEBHOOK_HEADERS_MAX} entries")
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            problems.append(f"headers.{name} is not a header name (an HTTP token)")
            continue
        lower = name.lower()
        if len(name) > catalog.WEBHOOK_HEADER_NAME_MAX:
            problems.append(
                f"headers.{name} is longer than {catalog.WEBHOOK_HEADER_NAME_MAX} characters"
            )
        elif lower in _REFUSED_NAMES or lower.startswith(_REFUSED_PREFIXES):
            problems.append(f"headers.{name} is a header the service sets or may not be sent")
        elif lower in seen:
            problems.append(f"headers.{name} repeats a header name (names ignore case)")
        seen.add(lower)
        if not isinstance(value, str):
            problems.append(f"headers.{name} must be a string")
        elif len(value) > catalog.WEBHOOK_HEADER_VALUE_MAX:
            problems.append(
                f"headers.{name} is longer than {catalog.WEBHOOK_HEADER_VALUE_MAX} characters"
            )
        elif not _VALUE.fullmatch(value):
            problems.append(f"headers.{name} must be visible ASCII characters (spaces between)")
    return problems


def control_problems(changes: Mapping[str, object]) -> list[str]:
    """What is wrong with the receiver controls among ``changes`` (``signature``,
    ``rate_limit``, ``ordering``, ``headers``; those absent are not checked)."""
    problems: list[str] = []
    if "signature" in changes and changes["signature"] not in SCHEMES:
        problems.append(f"signature must be one of {', '.join(SCHEMES)}")
    if "rate_limit" in changes:
        limit = changes["rate_limit"]
        if limit is not None and (
            not isinstance(limit, int)
            or isinstance(limit, bool)
            or not 1 <= limit <= catalog.WEBHOOK_RATE_LIMIT_MAX
        ):
            problems.append(
                f"rateLimit must be an integer from 1 to {catalog.WEBHOOK_RATE_LIMIT_MAX}, or null"
            )
    if "ordering" in changes and changes["ordering"] not in ORDERINGS:
        problems.append(f"ordering must be one of {', '.join(ORDERINGS)}")
    if "headers" in changes:
        problems += header_problems(changes["headers"])
    return problems
