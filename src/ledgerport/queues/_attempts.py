"""The attempt log: every attempt ever made for a webhook delivery, redeliveries included, for the
console's delivery page (contract.md: Developer console, second round).

An attempt is logged by the outcome recorder in the statement that records its outcome, and
only by the claim that made it (the one still holding the lease): what the engine made and could
not record (its claim was taken over, its fan-out did not commit) is not logged, as its outcome
is not. Its number continues across redeliveries (``webhook_deliveries.attempts_made``), while
the delivery's ``attempts`` starts afresh for the retry schedule. The log keeps the first
RESPONSE_BODY_KEPT bytes of the answer's body as received, and the request's headers as sent,
its signature included: the signature is the HMAC of that attempt, never the secret. Rows go
with their delivery (the foreign key cascades), so they follow its 30 days; a body may go
before, dropped to keep its app within its storage quota (``_quota.py``).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from dataclasses import dataclass

from ledgerport.storage import Row, Transaction

RESPONSE_BODY_KEPT = 4096
"""Bytes of an answer's body an attempt reads and keeps at most; the rest is not read."""


@dataclass(frozen=True)
class AttemptMade:
    """What the attempt log keeps of an attempt besides its outcome's code and error."""

    started_at: float
    duration_ms: float
    response_body: bytes
    """The answer's first bytes as received (at most RESPONSE_BODY_KEPT; empty without one)."""
    response_truncated: bool
    """The body went on past ``response_body`` (the rest was not read)."""
    request_headers: Mapping[str, str]
    """The headers the request was sent with, the signature among them."""


@dataclass(frozen=True)
class LoggedAttempt:
    """One attempt of the log, as the console shows it."""

    attempt: int
    """Its number for the delivery, counted across redeliveries from 1."""
    started_at: float
    duration_ms: float
    response_code: int | None
    response_body: bytes | None
    response_truncated: bool
    error: str | None
    request_headers: dict[str, str]
    body_dropped_at: float | None = None
    """When the kept body was dropped to keep the app within its storage quota (None: it was
    not)."""

    @classmethod
    def from_row(cls, row: Row) -> LoggedAttempt:
        body = row["response_body"]
        return cls(
            attempt=int(row["attempt"]),
            started_at=float(row["started_at"]),
            duration_ms=float(row["duration_ms"]),
            response_code=row["response_code"],
            response_body=None if body is None else bytes(body),
            response_truncated=bool(row["response_truncated"]),
            error=row["error"],
            request_headers=json.loads(row["request_headers"]),
            body_dropped_at=row["body_dropped_at"],
        )

    @property
    def response_text(self) -> str | None:
        """The kept body as text: UTF-8, what does not decode shown as U+FFFD, a character cut
        at the end of what was kept left out."""
        if self.response_body is None:
            return None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(self.response_body, final=not self.response_truncated)


async def attempt_log(
    tx: Transaction, delivery_id: str, *, newest: int | None = None
) -> list[LoggedAttempt]:
    """Every attempt made for the delivery, oldest first; with ``newest``, the newest that many
    only (a delivery redelivered again and again has as many attempts as it was sent)."""
    if newest is None:
        rows = await tx.fetch(
            "SELECT * FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt", delivery_id
        )
    else:
        rows = await tx.fetch(
            "SELECT * FROM (SELECT * FROM webhook_attempts WHERE delivery_id = $1"
            " ORDER BY attempt DESC LIMIT $2) AS newest ORDER BY attempt",
            delivery_id,
            newest,
        )
    return [LoggedAttempt.from_row(row) for row in rows]


def headers_text(headers: Mapping[str, str]) -> str:
    """The request headers as the log stores them."""
    return json.dumps(dict(headers), separators=(",", ":"))
