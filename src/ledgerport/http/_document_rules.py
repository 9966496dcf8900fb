"""The rules the OpenAPI document states for every operation at once, after it is written: no
text of a request holds a NUL (``NUL_FREE`` on every string without a rule of its own, and
``NulFreeJson`` for the members of an object that ignores unknown members), and the session
cookie's refusal of a cross-site request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._openapi import (
    NUL_FREE,
    SCHEMA_REF,
)

_RULED = frozenset({"pattern", "enum", "const"})
"""Keywords by which a string schema states its own rule (a pattern of its own states the NUL
there, as the operator API's e-mail does)."""


NUL_FREE_JSON = "NulFreeJson"
"""The component of any JSON value without NUL in its strings and member names: what an object
that ignores members it does not know takes beside its own."""
_NUL_FREE_JSON_REF = SCHEMA_REF.format(model=NUL_FREE_JSON)


def _nul_free_json() -> dict[str, Any]:
    any_value = {"$ref": _NUL_FREE_JSON_REF}
    return {
        "description": "Any JSON value whose strings and member names hold no NUL",
        "anyOf": [
            {"type": "null"},
            {"type": "boolean"},
            {"type": "number"},
            {"type": "string", "pattern": NUL_FREE},
            {"type": "array", "items": any_value},
            {
                "type": "object",
                "propertyNames": {"pattern": NUL_FREE},
                "additionalProperties": any_value,
            },
        ],
    }


def _open_object(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is an object that takes members it does not name (ignored, or any)."""
    is_object = schema.get("type") == "object" or "properties" in schema
    return is_object and schema.get("additionalProperties", True) in (True, {})


def _nul_free(schema: Any, components: Mapping[str, Any], seen: set[str]) -> None:
    """Give every string of ``schema`` that has no rule of its own the NUL_FREE pattern, and
    every object that takes members it does not name NUL-free names and values, following
    references into ``components`` (each once, ``seen``)."""
    if not isinstance(schema, dict):
        return
    if _open_object(schema):
        schema["propertyNames"] = {"pattern": NUL_FREE}
        schema["additionalProperties"] = {"$ref": _NUL_FREE_JSON_REF}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            _nul_free(components.get(name), components, seen)
        return
    types = schema.get("type")
    is_text = types == "string" or (isinstance(types, list) and "string" in types)
    if is_text and not schema.keys() & _RULED and schema.get("format") != "binary":
        schema["pattern"] = NUL_FREE
    for key in ("items", "additionalProperties"):
        _nul_free(schema.get(key), components, seen)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for part in schema.get(key, ()):
            _nul_free(part, components, seen)
    for part in schema.get("properties", {}).values():
        _nul_free(part, components, seen)


def state_nul_refusal(document: dict[str, Any]) -> None:
    """State the NUL rule (``_input``) where a client reads the rules of what it sends: on the
    text of every query and path parameter and of every request body."""
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components[NUL_FREE_JSON] = _nul_free_json()
    seen: set[str] = {NUL_FREE_JSON}
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", ()):
                if parameter.get("in") in ("query", "path"):
                    _nul_free(parameter.get("schema"), components, seen)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _nul_free(media.get("schema"), components, seen)


SESSION_SCHEME_DESCRIPTION = (
    "The application host's session cookie. On /developer/*, a request it authenticates with an"
    " unsafe method (POST, PUT, PATCH, DELETE) must come from the service's own origin"
    " (Sec-Fetch-Site: same-origin, or an Origin of the API or application host) or carry the"
    " CSRF token of one of its pages in X-CSRF-Token; otherwise it is refused, 403"
    " CROSS_SITE_REQUEST, before anything else is checked. A developer token is unaffected."
)


def state_cross_site_refusal(document: dict[str, Any]) -> None:
    """The session cookie's security scheme says when a request it authenticates is refused as
    cross-site (quart-schema's scheme types take no description)."""
    schemes = document.get("components", {}).get("securitySchemes", {})
    if "session" in schemes:
        schemes["session"]["description"] = SESSION_SCHEME_DESCRIPTION
