"""JSON answers written by orjson.

The app's provider (Quart-Schema's, which knows pydantic models) keeps its rules for what is
not plain JSON: dates, dataclasses and anything else orjson would write its own way go through
its ``default``, so an answer reads the same as before, only sooner. What orjson refuses (an
integer past 64 bits, text with a lone surrogate) is written by the provider as before.
Stored JSON can be answered as it is, without parsing it first: :func:`stored`.

Both functions lean on private parts: Flask's JSON provider (Quart's) and Quart-Schema's
conversion of answers. tests/unit/test_dependency_contracts.py pins what they rely on,
pyproject.toml bounds the releases, and docs/upstream/flask.md and docs/upstream/quart-schema.md
are the reports to their maintainers.
"""

from __future__ import annotations

from typing import Any

import orjson
from quart import Quart, Response

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_PLAIN = (dict, list, str, bytes, int, Response)
"""What a view's answer (or a part of its tuple: body, status, headers) holds when it needs no
conversion."""


def stored(text: str) -> Any:
    """JSON text kept in the database, embedded as it is in an answer."""
    return orjson.Fragment(text)


def answer_with_orjson(app: Quart) -> None:
    """Make ``app``'s JSON answers (a returned dict, ``jsonify``) with orjson."""
    base: Any = type(app.json)

    class Provider(base):  # type: ignore[misc]
        def response(self, *args: Any, **kwargs: Any) -> Response:
            if self.compact is False or (self.compact is None and self._app.debug):
                return super().response(*args, **kwargs)  # type: ignore[no-any-return]
            obj = self._prepare_response_obj(args, kwargs)
            try:
                body = orjson.dumps(obj, default=self.default, option=_OPTIONS)
            except TypeError:  # orjson.JSONEncodeError is one
                return super().response(*args, **kwargs)  # type: ignore[no-any-return]
            return self._app.response_class(body + b"\n", mimetype=self.mimetype)  # type: ignore[no-any-return]

    provider = Provider(app)
    provider.sort_keys = False  # answers keep their field order
    app.json = provider


def skip_conversion_of_plain_answers(app: Quart) -> None:
    """Quart-Schema converts every view's answer through pydantic before Quart makes the
    response: for a dict or a list that is a ``TypeAdapter`` built anew for each answer (and
    one more for a tuple's headers), a tenth of a short request's time, to convert nothing. An
    answer that is already plain (a dict, a list, text, bytes or a response, with plain
    headers) goes straight to Quart; anything else (a model, a dataclass) through the
    conversion as before."""
    converting = app.make_response
    plain = type(app).make_response.__get__(app)

    async def make_response(result: Any) -> Any:
        parts = result if isinstance(result, tuple) else (result,)
        if all(isinstance(part, _PLAIN) for part in parts):
            return await plain(result)
        return await converting(result)

    app.make_response = make_response  # type: ignore[method-assign]
