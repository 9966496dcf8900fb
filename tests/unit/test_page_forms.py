"""The pages' forms as pydantic models: what ``read_form`` makes of a browser's form, and what
the OpenAPI document says a form sends."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, WithJsonSchema
from quart_trio import QuartTrio

from ledgerport.http.pages import PageForm, Repeated, read_form


class Sample(PageForm):
    """A form with a text, a repeated field and a field the page always sends."""

    stated_required = ("kind",)
    name: str = ""
    events: Repeated = Field(default_factory=list)
    kind: Annotated[str, WithJsonSchema({"type": "string", "enum": ["a", "b"]})] = ""


async def _read(form: dict[str, str | list[str]]) -> Sample:
    app = QuartTrio(__name__)
    pairs = [
        (k, v)
        for k, values in form.items()
        for v in ([values] if isinstance(values, str) else values)
    ]
    body = "&".join(f"{k}={v}" for k, v in pairs)
    async with app.test_request_context(
        "/",
        method="POST",
        data=body.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    ):
        return await read_form(Sample)


async def test_a_repeated_field_is_the_list_of_its_values() -> None:
    assert (await _read({"events": ["a", "b"]})).events == ["a", "b"]
    assert (await _read({"events": "a"})).events == ["a"]


async def test_a_field_left_out_is_empty_and_an_unknown_one_ignored() -> None:
    read = await _read({"other": "x"})
    assert (read.csrf_token, read.name, read.events, read.kind) == ("", "", [], "")


async def test_a_text_field_is_its_first_value_and_kept_as_sent() -> None:
    """What the document states beyond the text is never refused here: the domain judges."""
    read = await _read({"name": [" one ", "two"], "kind": "neither"})
    assert (read.name, read.kind) == (" one ", "neither")


def test_the_document_says_what_the_page_sends() -> None:
    schema = Sample.model_json_schema()
    assert schema["required"] == ["csrf_token", "kind"]
    assert all("default" not in field for field in schema["properties"].values())
    assert schema["properties"]["kind"]["enum"] == ["a", "b"]
    assert schema["properties"]["csrf_token"]["minLength"] == 1


def test_the_document_takes_a_repeated_field_as_one_value_or_several() -> None:
    schema = Sample.model_json_schema()["properties"]["events"]
    assert {option["type"] for option in schema["anyOf"]} == {"array", "string"}
