"""One rule for the text a request brings: it holds no NUL character (U+0000).

PostgreSQL's text columns refuse NUL and SQLite's store it, so without one rule a name, an
e-mail, an account code or an invoice line with a NUL would be kept on one backend and refused
on the other, and text that other systems cut short at a NUL would reach the records. The rule
is applied where each kind of input is parsed, once for every route: the query string and the
path parameters before any handler runs (:func:`refuse_nul_in_url`), form fields when a form is
parsed (:class:`CheckedRequest`), and JSON bodies when they are parsed (``request.get_json``
and :func:`parse_json`, which the routes that read their own body use). A NUL is a validation
failure (:class:`NulInText`), answered in the shape of the route: the envelope's array message,
the OAuth endpoints' ``invalid_request``, or the page's 400. Uploaded files are bytes, not text,
and are not looked at.

:class:`CheckedRequest` overrides private parts of Quart's request (its form loading, its body's
state and its blueprint chain): tests/unit/test_dependency_contracts.py pins what it relies on,
pyproject.toml bounds the release, and docs/upstream/quart.md is the report to Quart's
maintainers.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from quart import request
from quart.helpers import _split_blueprint_path
from quart.wrappers import Body
from quart_trio.formparser import TrioFormDataParser
from quart_trio.wrappers import TrioRequest
from werkzeug.datastructures import MultiDict

from ledgerport.errors import InvalidInput

NUL = "\x00"


class NulInText(InvalidInput):
    """A text of the request (query, path, form field or JSON string) holds a NUL character."""

    def __init__(self, where: str) -> None:
        super().__init__([f"{where} must not contain NUL characters"])


def _joined(parent: str, key: object) -> str:
    return f"{parent}.{key}" if parent else str(key)


def refuse_nul(value: object) -> None:
    """Raise NulInText naming the first text in the parsed JSON ``value`` that holds a NUL, by
    its path as the validation messages write one (``lines.0.description``). Walked with a
    stack, so any depth the parser accepted is walked."""
    pending: list[tuple[object, str]] = [(value, "")]
    while pending:
        item, path = pending.pop()
        if isinstance(item, str):
            if NUL in item:
                raise NulInText(path or "the request body")
        elif isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and NUL in key:
                    raise NulInText(f"a field name in {path or 'the request body'}")
            pending.extend((child, _joined(path, key)) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            pending.extend(
                (child, _joined(path, i)) for i, child in reversed(list(enumerate(item)))
            )


def parse_json(raw: str | bytes, **options: Any) -> Any:
    """``json.loads(raw, **options)``, refusing a NUL in any string (NulInText); a body that is
    not JSON raises as ``json.loads`` does, for the caller to answer in its own words."""
    parsed = json.loads(raw, **options)
    refuse_nul(parsed)
    return parsed


def _refuse_nul_in_pairs(pairs: Iterable[tuple[str | None, str]], kind: str) -> None:
    for name, value in pairs:
        if name is None:
            # A multipart part whose Content-Disposition names nothing readable (its name's
            # closing quote escaped, say): no browser sends one, and no handler could read it.
            raise InvalidInput([f"a {kind} has no name"])
        if NUL in name:
            raise NulInText(f"a {kind} name")
        if NUL in value:
            raise NulInText(f"{kind} {name}")


async def refuse_nul_in_url() -> None:
    """Before every request: no NUL in the query string or the path parameters."""
    _refuse_nul_in_pairs(request.args.items(multi=True), "query parameter")
    _refuse_nul_in_pairs(
        (
            (name, value)
            for name, value in (request.view_args or {}).items()
            if isinstance(value, str)
        ),
        "path parameter",
    )


class _CheckedFormDataParser(TrioFormDataParser):
    async def parse(
        self,
        body: Body,
        mimetype: str,
        content_length: int | None,
        options: dict[str, str] | None = None,
    ) -> tuple[MultiDict[str, Any], MultiDict[str, Any]]:
        fields, files = await super().parse(body, mimetype, content_length, options)
        _refuse_nul_in_pairs(fields.items(multi=True), "form field")
        return fields, files


_URL_ENCODED = frozenset({"application/x-www-form-urlencoded", "application/x-url-encoded"})
"""The form types quart parses as a query string."""


@functools.lru_cache(maxsize=64)
def _blueprint_chain(name: str) -> tuple[str, ...]:
    """``name`` and the names of its parent blueprints, nearest first (``a.b.c``, ``a.b``,
    ``a``), split by quart's own helper and kept (as a tuple, so no caller can change it): the
    names are the application's own blueprints, a handful."""
    return tuple(_split_blueprint_path(name))


class CheckedRequest(TrioRequest):
    """The application's request: its form fields and its JSON body refuse NUL as they are
    parsed, whichever route reads them."""

    form_data_parser_class = _CheckedFormDataParser

    async def _load_form_data(self) -> None:
        """A URL-encoded form (every OAuth request's) parsed here as quart's parser parses it:
        the body read within the body timeout, UTF-8 query-string pairs with blank values
        kept, a body that is not UTF-8 an empty form (the parser is silent on it), NUL
        refused. Without the parser object, its lock and its dispatch, which cost a tenth of
        an introspection's own time. Multipart forms go to quart's parser."""
        if self._form is not None or self.mimetype not in _URL_ENCODED:
            await super()._load_form_data()
            return
        raw = self._arrived()
        if raw is None:
            raw = await self.get_data(cache=True, as_text=False, parse_form_data=False)
        try:
            pairs = parse_qsl(raw.decode(), keep_blank_values=True)
        except ValueError:
            pairs = []
        _refuse_nul_in_pairs(pairs, "form field")
        self._form = self.parameter_storage_class(pairs)
        self._files = self.parameter_storage_class()

    def _arrived(self) -> bytes | None:
        """The whole body when it has arrived (and is not too large) before it is asked for,
        else None: what ``get_data`` answers, without the cancel scope of its timeout and its
        turn of the scheduler, which cost a small form more than parsing it."""
        body = self.body
        if body._must_raise is None and body._complete.is_set():
            return bytes(body._data)
        return None

    @property
    def blueprints(self) -> list[str]:
        """The matched endpoint's blueprint and its parents, nearest first, as quart's property
        answers them; the chain of each name split once (quart asks for it several times a
        request, splitting it again each time)."""
        name = self.blueprint
        return [] if name is None else list(_blueprint_chain(name))

    async def get_json(self, force: bool = False, silent: bool = False, cache: bool = True) -> Any:
        parsed = await super().get_json(force=force, silent=silent, cache=cache)
        refuse_nul(parsed)
        return parsed
