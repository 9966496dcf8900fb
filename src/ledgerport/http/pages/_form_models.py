"""The forms of the application host as pydantic models, the schema library of the JSON API: one
model states a form in the OpenAPI document and reads it from the request (:func:`read_form`).

A form is text: every field is a string, or a list of strings for a field sent once per ticked
checkbox (:data:`Repeated`). A field left out is as if empty (its default) and an unknown field
is ignored, as a browser's form may hold more than the route reads. The rules a value must keep
are the domain's, whose refusals come back to the form as they always did (a notice on its page,
or the form again): what the document states beyond the text (an id's form, a field's choices,
its length, that the form sends it) is stated with ``WithJsonSchema`` and
:attr:`PageForm.stated_required`, never refused here. The CSRF token is the guard's (``_csrf``),
checked before the handler reads the form.

A page's query string is a model too (:class:`PageQuery`, read by :func:`read_query`): its
fields are the page's parameters (a field's alias the parameter's name), the document's
parameters are made from it (:func:`query_params`), and a value that breaks it is refused
(InvalidInput: the page's 400 with the messages), never read as a default.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, TypeVar, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, WithJsonSchema
from quart import request

from ledgerport.errors import InvalidInput

from .._errors import validation_messages
from .._openapi import FORM, Body, Param
from ._query_fields import required_by_value

_Form = TypeVar("_Form", bound="PageForm")
_Query = TypeVar("_Query", bound="PageQuery")

CsrfToken = Annotated[
    str,
    WithJsonSchema(
        {"type": "string", "minLength": 1, "description": "The form's token, bound to lp_csrf"}
    ),
]
"""The field every form of the application host carries, in the OpenAPI document."""
Repeated = Annotated[
    list[str],
    WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}),
]
"""A field sent once per ticked checkbox: none, one or several values."""


def _as_sent(schema: dict[str, Any], model: type[Any]) -> None:
    """The document says what a browser's form sends: the token and the fields its page always
    fills in (the model reads any of them left out as empty)."""
    for field in schema.get("properties", {}).values():
        field.pop("default", None)
    stated: tuple[str, ...] = getattr(model, "stated_required", ())
    schema["required"] = ["csrf_token", *stated]


class PageForm(BaseModel):
    """A form of the application host: its CSRF token and its fields."""

    model_config = ConfigDict(
        extra="ignore", frozen=True, use_attribute_docstrings=True, json_schema_extra=_as_sent
    )
    stated_required: ClassVar[tuple[str, ...]] = ()
    """Fields the document says the form sends, beside the token."""

    csrf_token: CsrfToken = ""


class ButtonForm(PageForm):
    """A button's form: its CSRF token."""


BUTTON_BODY = (Body(FORM, ButtonForm),)
"""What a button posts, in the OpenAPI document."""


def _repeated(model: type[PageForm], name: str) -> bool:
    return get_origin(model.model_fields[name].annotation) is list


async def read_form(model: type[_Form]) -> _Form:
    """This request's form as ``model``: a repeated field as the list of its values, any other
    as its first value; a form that breaks the model is refused (InvalidInput) with its
    messages."""
    form = await request.form
    values = {
        name: form.getlist(name) if _repeated(model, name) else form[name]
        for name in model.model_fields
        if name in form
    }
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise InvalidInput(validation_messages(error)) from error


class PageQuery(BaseModel):
    """A page's query string: one field a parameter, named by its alias when it has one. A
    parameter left out takes the field's default and an unknown one is ignored (a GET form
    sends every field, links keep what they were given)."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)


def _parameter(name: str, model: type[BaseModel]) -> str:
    return model.model_fields[name].alias or name


def read_query(model: type[_Query]) -> _Query:
    """This request's query string as ``model``: a repeated field (a list) as the values of
    its parameter, any other as its first value; a query that breaks the model is refused
    (InvalidInput) with its messages, each naming the parameter."""
    args = request.args
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = _parameter(name, model)
        if key in args:
            values[key] = args.getlist(key) if get_origin(field.annotation) is list else args[key]
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise InvalidInput(validation_messages(error)) from error


def query_params(model: type[PageQuery]) -> tuple[Param, ...]:
    """The document's query parameters of a page, from the model its handler reads them
    with: each field's schema and docstring."""
    schema = model.model_json_schema(by_alias=True)
    required = set(schema.get("required", ())) | {
        _parameter(name, model)
        for name, field in model.model_fields.items()
        if required_by_value(field)
    }
    params = []
    for name, stated in schema.get("properties", {}).items():
        stated = {k: v for k, v in stated.items() if k not in ("title", "default", "description")}
        described = " ".join(schema["properties"][name].get("description", "").split())
        params.append(Param(name, "query", described, stated, name in required))
    return tuple(params)
