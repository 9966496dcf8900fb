"""The forms the OpenAPI document states are the forms the service makes and checks.

Every ``new_id("<prefix>")`` in the package names a kind the document knows (or one of the few
ids no request ever carries), and that kind's pattern matches the ids ``new_id`` makes and no
others; the cursor pattern is what ``books.decode_cursor`` takes; a token pattern matches what
``keys.new_token`` makes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ledgerport
from ledgerport import books, catalog, keys
from ledgerport.errors import InvalidInput
from ledgerport.http import ANY_RECORD_ID, CURSOR_SCHEMA, ID_KINDS, RECORD_IDS, token_schema
from ledgerport.ids import new_id

PACKAGE = Path(ledgerport.__file__).parent
NEVER_SENT = {
    "fam": "a refresh token family, kept inside the token store",
    "engine": "a delivery engine's lease holder",
    "runner": "a function runner's lease holder",
    "node": "a process's node name",
    "fn": "a function: routes name functions by their name",
    "lst": "a listing: routes reach it through its app",
    "oev": "an operational event: sent to the operational endpoint, no request names it",
}
"""Prefixes of ids that no request carries, so the document has no form for them."""


def _made_prefixes() -> set[str]:
    """The prefix of every ``new_id("...")`` call in the package, and of the record kinds'."""
    prefixes = {kind.id_prefix for kind in catalog.RECORD_KINDS.values()}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "new_id"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                prefixes.add(node.args[0].value)
    return prefixes


def test_every_kind_of_id_the_service_makes_has_a_form_or_is_never_sent() -> None:
    made = _made_prefixes()

    assert len(made) > 20
    assert made - NEVER_SENT.keys() == set(ID_KINDS)


@pytest.mark.parametrize("prefix", sorted(ID_KINDS))
def test_a_kinds_pattern_matches_its_ids_only(prefix: str) -> None:
    pattern = re.compile(ID_KINDS[prefix].pattern)
    made = new_id(prefix)
    others = [
        f"x{prefix}_{made[-24:]}",
        made.upper(),
        made[:-1],
        made + "0",
        f"{prefix}-{made[-24:]}",
    ]

    assert pattern.fullmatch(made)
    assert len(made) <= ID_KINDS[prefix].max_length
    assert not [other for other in others if pattern.fullmatch(other)]


def test_a_record_kinds_ids_are_no_other_kinds() -> None:
    for kind in RECORD_IDS:
        made = new_id(catalog.RECORD_KINDS[kind].id_prefix)
        assert re.fullmatch(ANY_RECORD_ID.pattern, made)
        matching = [k for k, other in RECORD_IDS.items() if re.fullmatch(other.pattern, made)]
        assert matching == [kind]


@given(st.text(max_size=25))
def test_the_cursor_pattern_is_what_the_server_takes(text: str) -> None:
    documented = re.fullmatch(CURSOR_SCHEMA["pattern"], text) is not None
    try:
        books.decode_cursor(text)
    except InvalidInput:
        taken = False
    else:
        taken = True

    assert documented == taken
    assert not documented or len(text) <= CURSOR_SCHEMA["maxLength"]


@given(st.from_regex(CURSOR_SCHEMA["pattern"], fullmatch=True))
def test_every_documented_cursor_is_taken(text: str) -> None:
    assert books.decode_cursor(text) >= 0


@pytest.mark.parametrize("prefix", sorted(catalog.TOKEN_PREFIXES.values()))
def test_a_token_pattern_matches_the_tokens_made(prefix: str) -> None:
    schema = token_schema(prefix, "a token")

    assert re.fullmatch(schema["pattern"], keys.new_token(prefix))
    assert not re.fullmatch(schema["pattern"], keys.new_token(prefix) + "x")
