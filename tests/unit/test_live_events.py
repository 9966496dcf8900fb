"""A deliveries stream writes each row's event straight from its columns
(``streams.delivery_event``): the bytes must be those of the delivery's list item, with its
webhook and attempt, written by the general path (the delivery object, its item dict, orjson)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ledgerport import queues
from ledgerport.http.developer.streams import delivery_event, delivery_event_data

BASE: dict[str, Any] = {
    "xid": 0,
    "seq": 41,
    "attempt": 1,
    "id": "dlv_01JEXAMPLE0000000000000000",
    "webhook_id": "wh_01JEXAMPLE000000000000000",
    "event_id": "evt_01JEXAMPLE00000000000000",
    "type": "invoice.created",
    "status": "delivered",
    "attempts": 1,
    "response_code": 200,
    "last_error": None,
    "created_at": 1_796_000_000.1234565,
    "next_attempt_at": 1_796_000_030.9995,
}

CASES: list[dict[str, Any]] = [
    {},
    {"xid": 7_000_123, "seq": 999_999_999_999},
    {"status": "queued", "attempts": 0, "response_code": None},
    {"status": "retrying", "attempts": 3, "response_code": 503, "last_error": "HTTP 503"},
    {"status": "sending", "next_attempt_at": 1_796_000_000.0},
    {"status": "failed", "response_code": None, "last_error": "Timed out: no answer within 2 s"},
    {"event_id": None, "type": "webhook.test"},
    {"last_error": 'quote " backslash \\ newline \n tab \t NUL-free \u2028 é 𝄞 \x01'},
    {"type": 'odd"type\\'},
    {"created_at": 1_796_000_000.0, "next_attempt_at": None, "status": "queued"},
    {"created_at": 1_796_000_000.9999996, "attempt": 12},
    {"created_at": 0.0005},
    {"status": "queued", "next_attempt_at": 1_796_000_059.9994999},
]


@pytest.mark.parametrize("change", CASES, ids=[str(i) for i in range(len(CASES))])
def test_a_delivery_event_is_the_bytes_of_its_list_item_written_by_the_general_path(
    change: dict[str, Any],
) -> None:
    named = {"horizon": 0, **BASE, **change}
    row = tuple(named[column] for column in queues.ATTEMPT_COLUMNS)
    item = queues.EndedAttempt.from_row(row)
    general = b"id: %d-%d\nevent: delivery\ndata: %s\n\n" % (
        *item.cursor,
        orjson.dumps(delivery_event_data(item)),
    )
    assert delivery_event(row) == general
    data = delivery_event(row).split(b"\ndata: ", 1)[1].removesuffix(b"\n\n")
    assert b"\n" not in data
    assert orjson.loads(data)["attempt"] == named["attempt"]


def test_the_cursor_of_a_row_is_its_xid_and_seq() -> None:
    named = {**BASE, "horizon": 0, "xid": 5, "seq": 9}
    row = tuple(named[column] for column in queues.ATTEMPT_COLUMNS)
    assert queues.row_cursor(row) == queues.Cursor(5, 9)
    assert delivery_event(row).startswith(b"id: 5-9\nevent: delivery\n")
