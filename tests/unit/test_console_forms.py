"""What the console's forms show beside their fields, as pure functions: the event checkboxes
grouped by area (what the app may receive, and what a form kept that it may not), the order a
saved webhook's events keep, where a refused source's problem lies, and the fingerprint that
binds a secret's one showing to it; and the policy of the page that loads the copy script."""

from __future__ import annotations

import pytest

from ledgerport import apps, catalog
from ledgerport.auth import Keyring
from ledgerport.http.pages import (
    areas_out_of_reach,
    event_groups,
    kept_order,
    page_csp,
    secret_fingerprint,
    source_problem,
)

SCOPES = ("invoices:read", "invoices:write", "customers:read")


def test_the_checkboxes_are_the_receivable_events_grouped_in_the_catalogs_order() -> None:
    groups = event_groups(SCOPES, ["invoice.paid", "app.installed"])
    assert [g.key for g in groups] == ["app", "privacy", "customers", "invoices"]
    assert [g.title for g in groups] == [
        "The app itself",
        "Privacy requests",
        "Customers",
        "Invoices",
    ]
    assert groups[3].hint == "Needs invoices:read"
    names = [c.name for g in groups for c in g.choices]
    assert names == [e.name for e in catalog.EVENTS if e.audience == "app" or e.scope in SCOPES]
    assert [c.name for g in groups for c in g.choices if c.checked] == [
        "app.installed",
        "invoice.paid",
    ]
    assert [c.name for c in groups[1].choices] == ["customer.redact"]
    assert all(c.receivable for g in groups for c in g.choices)


def test_a_chosen_event_the_app_may_not_receive_stays_checked_and_marked() -> None:
    groups = {g.key: g for g in event_groups(SCOPES, ["supplier.created", "no.such_event"])}
    (supplier,) = groups["suppliers"].choices
    assert (supplier.name, supplier.checked, supplier.receivable, supplier.scope) == (
        "supplier.created",
        True,
        False,
        "suppliers:read",
    )
    assert list(groups)[-1] == "unknown"
    (unknown,) = groups["unknown"].choices
    assert (unknown.name, unknown.checked, unknown.receivable) == ("no.such_event", True, False)
    assert "supplier.updated" not in {c.name for g in groups.values() for c in g.choices}


def test_an_app_with_no_scope_is_offered_its_own_events_only() -> None:
    groups = event_groups((), [])
    assert [g.key for g in groups] == ["app"]
    assert len(groups[0].choices) == 5
    assert areas_out_of_reach(()) == tuple(
        dict.fromkeys(e.area for e in catalog.EVENTS if e.audience == "business")
    )


def test_the_areas_out_of_reach_are_those_whose_read_scope_is_missing() -> None:
    assert areas_out_of_reach(SCOPES) == (
        "suppliers",
        "payments",
        "purchases",
        "purchase-returns",
        "quotes",
        "accounts",
        "journal",
    )
    assert areas_out_of_reach(catalog.SCOPES) == ()


@pytest.mark.parametrize(
    ("sent", "before", "kept"),
    [
        (["a", "b", "c"], ["c", "a"], ["c", "a", "b"]),
        (["a", "b"], [], ["a", "b"]),
        (["b"], ["a", "b"], ["b"]),
        ([], ["a"], []),
        (["x", "y", "a"], ["a"], ["a", "x", "y"]),
    ],
)
def test_a_saved_webhook_keeps_the_order_of_the_events_it_had(
    sent: list[str], before: list[str], kept: list[str]
) -> None:
    assert kept_order(sent, before) == kept


SOURCE = "export function handler(event) {\n  const x = 1\n  return { x: x * };\n}\n"


def test_a_problem_names_its_line_and_column_and_the_lines_up_to_it() -> None:
    found = source_problem("syntax error at line 3, column 17", SOURCE)
    assert found is not None
    assert (found.line, found.column) == (3, 17)
    assert [(line.number, line.text) for line in found.excerpt] == [
        (1, "export function handler(event) {"),
        (2, "  const x = 1"),
        (3, "  return { x: x * };"),
    ]
    assert found.excerpt[-1].text[found.caret] == "*"


def test_the_excerpt_starts_two_lines_up_and_at_the_first_line() -> None:
    first = source_problem("import is not allowed (line 1, column 1)", SOURCE)
    assert first is not None
    assert [line.number for line in first.excerpt] == [1]
    assert first.caret == 0
    fourth = source_problem("line 4, column 1", SOURCE)
    assert fourth is not None
    assert [line.number for line in fourth.excerpt] == [2, 3, 4]


def test_the_column_counts_utf16_units_and_the_caret_characters_and_tabs() -> None:
    """The checks count a column in UTF-16 code units, as V8 does; the caret stands under
    the character."""
    source = "const s = '\u00e9t\u00e9';\n\tlet = 1;\n"
    found = source_problem("line 1, column 16", source)  # 15 units (17 UTF-8 bytes) before
    assert found is not None
    assert found.excerpt[-1].text[found.caret] == ";"
    tabbed = source_problem("line 2, column 6", source)
    assert tabbed is not None
    assert tabbed.excerpt[-1].text == "    let = 1;"
    assert tabbed.excerpt[-1].text[tabbed.caret] == "="


@pytest.mark.parametrize(
    ("line", "column", "under"),
    [
        # "\u00e9" is one code unit (two UTF-8 bytes): column 34 is the second "s".
        ("  const s = 'h\u00e9llo'; return s s;", 31, "s"),
        # "\U0001f600" is two code units (four UTF-8 bytes), one character.
        ("  const s = 'hi \U0001f600'; return s s;", 31, "s"),
        ("  const s = '\U0001f600\u00e9\U0001f600'; return s s;", 31, "s"),
    ],
)
def test_a_syntax_error_puts_the_caret_under_its_utf16_column_past_characters_not_ascii(
    line: str, column: int, under: str
) -> None:
    source = f"export const handler = () => {{\n{line}\n}};\n"
    found = source_problem(apps.SyntaxProblem(2, column, "Unexpected identifier 's'"), source)
    assert found is not None
    assert (found.line, found.column, found.words) == (2, column, "Unexpected identifier 's'")
    assert found.excerpt[-1].text == line
    assert found.excerpt[-1].text[found.caret] == under
    assert found.excerpt[-1].text[found.caret + 1 :] == ";"


def test_a_syntax_error_counts_lines_as_v8_does() -> None:
    """A CR LF is one line end, a line separator one more."""
    source = "const a = 1;\r\nconst b = 2;\u2028const c = a ) b;\n"
    found = source_problem(apps.SyntaxProblem(3, 13, "Unexpected token ')'"), source)
    assert found is not None
    assert [line.number for line in found.excerpt] == [1, 2, 3]
    assert found.excerpt[-1].text[found.caret] == ")"


def test_a_syntax_error_past_the_source_has_no_excerpt() -> None:
    assert source_problem(apps.SyntaxProblem(9, 1, "Unexpected end of input"), SOURCE) is None


@pytest.mark.parametrize(
    "message",
    [
        "the module exports no handler",
        "events.0 'x' is not an event of the catalog",
        "syntax error at line 9, column 1",
        "syntax error at line 0, column 1",
        "syntax error at line 2, column 0",
    ],
)
def test_a_problem_that_names_no_place_of_the_source_has_no_excerpt(message: str) -> None:
    assert source_problem(message, SOURCE) is None


def test_a_secrets_fingerprint_names_that_secret_of_that_webhook_under_this_key() -> None:
    keyring = Keyring("console-forms-test-key-0123456789abcdef0123")
    shown = secret_fingerprint(keyring, "wh_1", "whsec_a")
    assert len(shown) == 24
    assert shown == secret_fingerprint(keyring, "wh_1", "whsec_a")
    assert shown != secret_fingerprint(keyring, "wh_1", "whsec_b")
    assert shown != secret_fingerprint(keyring, "wh_2", "whsec_a")
    assert shown != secret_fingerprint(
        Keyring("another-key-0123456789abcdef0123456"), "wh_1", "whsec_a"
    )
    assert "whsec_a" not in shown


def test_the_page_that_offers_a_copy_button_loads_scripts_from_this_origin_only() -> None:
    policy = dict(part.strip().split(" ", 1) for part in page_csp(scripts=True).split(";"))
    assert policy["script-src"] == "'self'"
    assert "connect-src" not in policy
    assert "frame-src" not in policy
    assert policy["default-src"] == "'none'"
    assert policy["style-src"] == "'self'"
