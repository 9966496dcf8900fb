"""The query strings of the webhook pages as models (``_form_models.read_query``): the endpoint
page's filters, cursor and where its recovery form starts, and the recovery's confirmation
page's moment and cursor. Each value is what the page's GET form or links send: empty is none,
spaces around a pasted value are dropped, and anything else the parameter cannot hold is a 400
page that says which parameter and why, never a default read in its place."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from ledgerport import catalog, queues
from ledgerport.errors import InvalidInput

from ..._ids import DELIVERY, EVENT
from .._form_models import PageQuery
from .._query_fields import an_id, one_of, text_or_nothing
from ._debug import _FORM_TIME, _FORM_TIME_PATTERN, id_or_nothing, one_of_words, parse_form_time

_IN_UTC = "must be a date and time in UTC, as 2026-09-22T08:00"


def _form_time_text(value: str | None) -> str | None:
    """A ``datetime-local`` field's value that names a moment, kept as the text it is."""
    if value is None:
        return None
    if not _FORM_TIME.fullmatch(value):
        raise PydanticCustomError("time", _IN_UTC)
    try:
        parse_form_time(value)
    except InvalidInput:
        raise PydanticCustomError("time", _IN_UTC) from None
    return value


def _moment(value: Any) -> float:
    """The moment a ``datetime-local`` field (or an ISO 8601 time with its offset) names."""
    try:
        return parse_form_time(value if isinstance(value, str) else "")
    except InvalidInput:
        raise PydanticCustomError("time", _IN_UTC) from None


DeliveryStatus = Annotated[
    queues.DeliveryStatus | None,
    PlainValidator(
        lambda value: one_of(queues.DELIVERY_STATUSES, one_of_words(queues.DELIVERY_STATUSES))(
            text_or_nothing(value)
        )
    ),
    WithJsonSchema({"type": "string", "enum": ["", *queues.DELIVERY_STATUSES]}),
]
EventType = Annotated[
    str | None,
    BeforeValidator(text_or_nothing),
    AfterValidator(one_of(catalog.EVENT_NAMES, "an event type of the catalog")),
    WithJsonSchema({"type": "string", "enum": ["", *catalog.EVENT_NAMES]}),
]
DeliveryId = Annotated[
    str | None,
    BeforeValidator(text_or_nothing),
    AfterValidator(an_id(DELIVERY)),
    WithJsonSchema(id_or_nothing(DELIVERY)),
]
EventId = Annotated[
    str | None,
    BeforeValidator(text_or_nothing),
    AfterValidator(an_id(EVENT)),
    WithJsonSchema(id_or_nothing(EVENT)),
]
FormTimeText = Annotated[
    str | None,
    BeforeValidator(text_or_nothing),
    AfterValidator(_form_time_text),
    WithJsonSchema({"type": "string", "pattern": f"^(?:{_FORM_TIME_PATTERN})?$"}),
]
Moment = Annotated[
    float,
    BeforeValidator(_moment),
    WithJsonSchema({"type": "string", "pattern": f"^(?:{_FORM_TIME_PATTERN})?$"}),
]


class DeliveriesQuery(PageQuery):
    """The endpoint page's query string: its deliveries' filters and cursor, and where its
    recovery form starts and goes on."""

    status: DeliveryStatus = None
    """Only the deliveries in this status (empty: every status)"""
    event_type: EventType = Field(default=None, alias="type")
    """Only the deliveries of this event type (empty: every type)"""
    event_id: EventId = Field(default=None, alias="eventId")
    """Only the delivery of this event (empty: every event)"""
    after: DeliveryId = None
    """The next of an earlier page: the deliveries after it, with the same filters"""
    recover_since: FormTimeText = None
    """What the recovery form's since starts with (UTC, as 2026-09-22T08:00): where an earlier
    recovery looked from"""
    recover_after: DeliveryId = None
    """Where the recovery form goes on: the next of an earlier recovery with that since"""


class RecoverQuery(PageQuery):
    """The recovery's confirmation page's query string: the moment it recovers from and,
    going on, after which delivery."""

    since: Moment = Field(default="", validate_default=True)
    """The moment to recover from (UTC, as 2026-09-22T08:00): the failed deliveries created
    then or later"""
    after: DeliveryId = None
    """Where the recovery goes on: the next of an earlier recovery with that since"""
