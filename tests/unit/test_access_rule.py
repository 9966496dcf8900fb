"""The one rule of which businesses the consent page and the marketplace's install form offer
(``access.offered``), why none is offered, and which one a form picks first: pure functions,
checked without a store over every kind of standing."""

from __future__ import annotations

import itertools

import pytest

from ledgerport import access, apps, books

READ = ("invoices:read",)
WIDER = ("invoices:read", "customers:write")


def _standing(
    name: str,
    *,
    sandbox: bool = False,
    may_install: bool = True,
    granted: tuple[str, ...] | None = None,
    with_developer: bool = False,
) -> access.Standing:
    business = books.Business(f"bus_{name}", name, sandbox, "paid", None)
    return access.Standing(business, may_install, granted, with_developer)


def _names(standings: list[access.Standing]) -> list[str]:
    return [s.business.name for s in standings]


def test_a_reviewed_app_is_offered_where_the_role_may_install_or_the_installation_grants() -> None:
    standings = [
        _standing("Owner's"),
        _standing("Viewer's, installed", may_install=False, granted=WIDER),
        _standing("Viewer's, narrower", may_install=False, granted=READ),
        _standing("Viewer's, not installed", may_install=False),
    ]
    asked_wider = access.offered(standings, reviewed=True, scopes=WIDER, through="consent")
    any_install = access.offered(standings, reviewed=True, scopes=None, through="marketplace")
    assert _names(asked_wider) == ["Owner's", "Viewer's, installed"]
    assert _names(any_install) == ["Owner's", "Viewer's, installed", "Viewer's, narrower"]


@pytest.mark.parametrize(
    ("through", "expected"),
    [("consent", ["Any sandbox", "Developer's sandbox"]), ("marketplace", ["Developer's sandbox"])],
)
def test_an_unreviewed_app_reaches_sandboxes_and_through_the_marketplace_its_own(
    through: access.Through, expected: list[str]
) -> None:
    standings = [
        _standing("Real"),
        _standing("Real with developer", with_developer=True),
        _standing("Any sandbox", sandbox=True),
        _standing("Developer's sandbox", sandbox=True, with_developer=True),
    ]
    offered = access.offered(standings, reviewed=False, scopes=READ, through=through)
    assert _names(offered) == expected


def test_the_rule_over_every_standing() -> None:
    """Every combination: offered exactly when reachable and (may install, or the installation
    already grants what is asked)."""
    for sandbox, may_install, granted, with_developer, reviewed, through in itertools.product(
        (False, True),
        (False, True),
        (None, READ, WIDER),
        (False, True),
        (False, True),
        ("consent", "marketplace"),
    ):
        standing = _standing(
            "B",
            sandbox=sandbox,
            may_install=may_install,
            granted=granted,
            with_developer=with_developer,
        )
        reachable = reviewed or (sandbox and (through == "consent" or with_developer))
        for scopes in (READ, WIDER, None):
            grants = granted is not None and (scopes is None or set(scopes) <= set(granted))
            offered = access.offered(
                [standing],
                reviewed=reviewed,
                scopes=scopes,
                through=through,  # type: ignore[arg-type]
            )
            assert bool(offered) == (reachable and (may_install or grants)), (
                standing,
                reviewed,
                through,
                scopes,
            )


def test_why_nothing_is_offered() -> None:
    real = _standing("Real", may_install=False)
    assert isinstance(
        access.none_offered([], reviewed=True, through="consent"), access.NoBusinessToConnect
    )
    assert isinstance(
        access.none_offered([real], reviewed=False, through="consent"), apps.AppNotReviewed
    )
    assert isinstance(
        access.none_offered([real], reviewed=True, through="consent"),
        access.NoBusinessToInstallIn,
    )


def test_the_install_form_picks_a_business_where_the_app_can_still_be_installed() -> None:
    offers = [
        _standing("Installed", granted=WIDER),
        _standing("Viewer's", may_install=False, granted=READ),
        _standing("Fresh"),
    ]
    assert access.preselected(offers, WIDER, through="marketplace") == "bus_Fresh"
    everywhere = [_standing("A", granted=WIDER), _standing("B", granted=WIDER)]
    assert access.preselected(everywhere, WIDER, through="marketplace") == "bus_A"


def test_the_consent_form_picks_the_business_where_the_app_is_installed() -> None:
    offers = [_standing("Fresh"), _standing("Installed", granted=READ)]
    assert access.preselected(offers, WIDER, through="consent") == "bus_Installed"
    assert access.preselected([_standing("Only")], WIDER, through="consent") == "bus_Only"


def test_a_standing_says_what_is_new() -> None:
    standing = _standing("B", granted=READ)
    assert standing.new_scopes(WIDER) == ["customers:write"]
    assert standing.already_grants(READ)
    assert not standing.already_grants(WIDER)
    assert _standing("C").new_scopes(WIDER) == list(WIDER)
