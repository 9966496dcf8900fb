"""The words the pages put where the eye is, checked without a server: a record and a kind
with their article, a refused form's problems beside their fields under their labels, and why
a listing offers no Install button."""

from __future__ import annotations

import pytest

from ledgerport import access, apps, books
from ledgerport.http.pages import (
    FormField,
    field_problems,
    install_offer,
    record_words,
    with_article,
)


@pytest.mark.parametrize(
    ("noun", "said"),
    [
        ("invoice", "an invoice"),
        ("account", "an account"),
        ("payment", "a payment"),
        ("purchase_return", "a purchase return"),
        ("journal_entry", "a journal entry"),
    ],
)
def test_a_noun_takes_its_article(noun: str, said: str) -> None:
    assert with_article(noun) == said


def test_a_record_is_named_by_its_number_or_name_never_its_id_alone() -> None:
    assert record_words("invoice", {"id": "inv_1", "number": "INV-0007"}) == "Invoice INV-0007"
    assert record_words("customer", {"id": "cus_1", "name": "Acme Ltd"}) == "Customer Acme Ltd"
    assert record_words("purchase_return", None) == (
        "A purchase return that is not in this business"
    )
    assert "inv_1" not in record_words("invoice", {"id": "inv_1"})


FIELDS = (
    FormField("name", "Name", ("name",)),
    FormField("slug", "Address", ("slug",)),
    FormField("redirect_uris", "Redirect URIs", ("redirectUris",)),
)


def test_problems_go_beside_their_fields_under_their_labels_in_the_forms_order() -> None:
    problems = field_problems(
        [
            "slug must be 3 to 60 lower-case letters",
            "something else went wrong",
            "name must be 1 to 60 characters",
            "redirectUris, line 2, must be https",
            "slugs are not names",  # a longer word is not the field's name
        ],
        FIELDS,
        outcome="the listing was not saved",
    )
    assert problems.heading == "There are 5 problems: the listing was not saved"
    assert [(item.input_id, item.text) for item in problems.items] == [
        ("name", "Name must be 1 to 60 characters"),
        ("slug", "Address must be 3 to 60 lower-case letters"),
        ("redirect_uris", "Redirect URIs, line 2, must be https"),
        (None, "Something else went wrong"),
        (None, "Slugs are not names"),
    ]
    slug = problems.of("slug")
    assert slug is not None
    assert slug.described_by == "slug-problem"
    assert problems.of("nothing") is None
    assert not field_problems([], FIELDS, outcome="x")


def _app(*, reviewed: bool = True) -> apps.App:
    return apps.App(
        id="app_1",
        client_id="cid_1",
        name="Books Sync",
        type="CONFIDENTIAL",
        client_secret_hash=None,
        redirect_uris=("https://books-sync.example/cb",),
        scopes=("invoices:read",),
        developer_user_id="usr_dev",
        reviewed=reviewed,
        status="ACTIVE",
        app_url=None,
        pinned_version=None,
    )


def _standing(name: str, *, may_install: bool, sandbox: bool = False) -> access.Standing:
    business = books.Business(f"bus_{name}", name, sandbox, "free", None)
    return access.Standing(business, may_install, None, with_developer=False)


def test_the_install_button_shows_to_whoever_may_install_somewhere() -> None:
    standings = [
        _standing("Acme", may_install=False),
        _standing("Bolt", may_install=True),
    ]
    offer = install_offer(_app(), "Books Sync", standings, {"bus_Acme": "viewer"})
    assert offer.may_install
    assert offer.why_not is None


def test_whoever_may_not_install_reads_why_in_words() -> None:
    standings = [_standing("Acme", may_install=False), _standing("Bolt", may_install=False)]
    roles = {"bus_Acme": "viewer", "bus_Bolt": "accountant"}
    offer = install_offer(_app(), "Books Sync", standings, roles)
    assert not offer.may_install
    assert offer.why_not == (
        "Your roles in Acme (viewer) and Bolt (accountant) do not allow installing apps. Ask an"
        " owner or an admin of the business to install Books Sync."
    )
    nowhere = install_offer(_app(), "Books Sync", [], {})
    assert nowhere.why_not == (
        "You are not a member of any business yet, so there is nowhere to install Books Sync."
    )
    unreviewed = install_offer(
        _app(reviewed=False), "Books Sync", [_standing("Acme", may_install=True)], {}
    )
    assert unreviewed.why_not is not None
    assert unreviewed.why_not.startswith("Books Sync has not completed review")
