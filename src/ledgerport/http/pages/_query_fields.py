"""The kinds of value a page's query string holds, as fields of a :class:`PageQuery`
(``_form_models``): text of a bounded length, one of a few words, an id of one kind, each
empty for none. A value is what the page's GET form or links send: empty is none, spaces around
a pasted value are dropped, and anything else the parameter cannot hold breaks the model (the
page's 400, naming the parameter and saying why), never a default read in its place.

A field's type names its kind in its metadata, which checks it and states its schema in the
document: ``status: Annotated[str | None, Choice(queues.RUN_STATUSES, "...")] = None``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError, core_schema

from .._ids import IdKind

QUERY_TEXT_MAX = 2000
"""Characters of a query parameter that holds free text and states no bound of its own."""


def text_or_nothing(value: Any) -> Any:
    """A parameter's text without the spaces around it; None when nothing is left."""
    if isinstance(value, str):
        return value.strip() or None
    return value


def one_of(allowed: Sequence[str], what: str) -> Callable[[str | None], str | None]:
    """The check of a parameter that is one of ``allowed`` (``what`` says which in words) or
    empty for all."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in allowed:
            raise PydanticCustomError("choice", f"must be {what}, or empty for all")
        return value

    return check


def an_id(kind: IdKind) -> Callable[[str | None], str | None]:
    """The check of a parameter that holds an id of ``kind``, or nothing."""
    described = kind.description[0].lower() + kind.description[1:]
    pattern = re.compile(kind.pattern)

    def check(value: str | None) -> str | None:
        if value is not None and not pattern.fullmatch(value):
            raise PydanticCustomError("id", f"must be {described}")
        return value

    return check


def at_most(limit: int) -> Callable[[str | None], str | None]:
    """The check of a text parameter of at most ``limit`` characters."""

    def check(value: str | None) -> str | None:
        if value is not None and len(value) > limit:
            raise PydanticCustomError("length", f"must be at most {limit} characters")
        return value

    return check


def id_or_nothing(kind: IdKind) -> dict[str, Any]:
    """The schema of a GET form's field that holds one id of ``kind``, or nothing (a form
    sends its empty fields)."""
    return {
        **kind.schema,
        "pattern": f"^(?:{kind.pattern[1:-1]})?$",
        "description": f"{kind.description}; empty for none",
    }


class QueryValue:
    """A query parameter's check and schema, as the metadata of its field's type
    (``Annotated[str | None, Choice(...)]``): its value without the spaces around it, None when
    empty, else checked."""

    def check(self, value: str) -> Any:
        """The parameter's value from its text (not empty), or PydanticCustomError."""
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        raise NotImplementedError

    required: bool = False
    """Whether the parameter must be given (its field then defaults to "" and validates its
    default, so a page without it is refused too)."""

    def read(self, value: Any) -> Any:
        text = text_or_nothing(value)
        if text is None and self.required:
            raise PydanticCustomError("missing", "is required")
        return None if text is None else self.check(str(text))

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self.read)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return self.json_schema()


@dataclass(frozen=True)
class Choice(QueryValue):
    """One of ``allowed`` (``what`` says which in words), or empty for all."""

    allowed: Sequence[str]
    what: str

    def check(self, value: str) -> str:
        return cast(str, one_of(self.allowed, self.what)(value))

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": ["", *self.allowed]}


@dataclass(frozen=True)
class AnId(QueryValue):
    """An id of ``kind``, or nothing; ``what`` says what it must be in words of its own, for
    a kind whose description would say too much."""

    kind: IdKind
    required: bool = False
    what: str | None = None

    def check(self, value: str) -> str:
        if self.what is not None and not re.fullmatch(self.kind.pattern, value):
            raise PydanticCustomError("id", f"must be {self.what}")
        return cast(str, an_id(self.kind)(value))

    def json_schema(self) -> dict[str, Any]:
        return dict(self.kind.schema) if self.required else id_or_nothing(self.kind)


@dataclass(frozen=True)
class Text(QueryValue):
    """Free text of at most ``limit`` characters, or nothing."""

    limit: int = QUERY_TEXT_MAX

    def read(self, value: Any) -> Any:
        # The bound is the value's as sent, as the document states it, spaces included.
        if isinstance(value, str):
            at_most(self.limit)(value)
        return super().read(value)

    def check(self, value: str) -> str:
        return cast(str, at_most(self.limit)(value))

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "maxLength": self.limit}


def required_by_value(field: FieldInfo) -> bool:
    """Whether a query field's value says it must be given (``required=True``)."""
    return any(isinstance(m, QueryValue) and m.required for m in field.metadata)
