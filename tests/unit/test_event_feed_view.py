"""What an app may read of its business's event log (``books.feed_view``), row by catalog row.

Spec: Events, Webhook registration and audiences: business and privacy events reach an app only
when the app holds the gating scope AND the business's ACTIVE installation grants it; app events
go to the app whatever its scopes. The Events API applies the same rule.
"""

from __future__ import annotations

import pytest

from ledgerport import books, catalog

BUSINESS = "bus_1"
APP = "app_1"


def _event(name: str, *, business_id: str = BUSINESS, app_id: str | None = None) -> books.Event:
    return books.Event(
        id="evt_1",
        seq=1,
        type=name,
        business_id=business_id,
        app_id=app_id,
        api_version=catalog.CURRENT_API_VERSION,
        created=0.0,
        data={},
    )


def _view(app_scopes: tuple[str, ...], installation_scopes: tuple[str, ...]) -> books.FeedView:
    return books.feed_view(
        business_id=BUSINESS,
        app_id=APP,
        app_scopes=app_scopes,
        installation_scopes=installation_scopes,
    )


GATED = [event for event in catalog.EVENTS if event.audience != "app"]
APP_EVENTS = [event for event in catalog.EVENTS if event.audience == "app"]


@pytest.mark.parametrize("event", GATED, ids=lambda event: event.name)
@pytest.mark.parametrize(
    ("registered", "granted", "shown"),
    [(True, True, True), (True, False, False), (False, True, False), (False, False, False)],
    ids=["both", "registered only", "granted only", "neither"],
)
def test_a_gated_event_needs_its_scope_registered_and_granted(
    event: catalog.EventType, registered: bool, granted: bool, shown: bool
) -> None:
    assert event.scope is not None
    others = ("events:read", "profile:read")
    view = _view(
        (*others, event.scope) if registered else others,
        (*others, event.scope) if granted else others,
    )
    assert (event.name in view.gated) is shown
    assert view.shows(_event(event.name)) is shown
    assert event.name not in view.own


@pytest.mark.parametrize("event", APP_EVENTS, ids=lambda event: event.name)
def test_an_app_event_is_shown_for_this_app_only_whatever_the_scopes(
    event: catalog.EventType,
) -> None:
    view = _view((), ())
    assert event.name in view.own
    assert view.shows(_event(event.name, app_id=APP))
    assert not view.shows(_event(event.name, app_id="app_2"))
    assert not view.shows(_event(event.name, app_id=None))


@pytest.mark.parametrize("event", catalog.EVENTS, ids=lambda event: event.name)
def test_another_business_is_never_shown(event: catalog.EventType) -> None:
    view = _view(catalog.SCOPES, catalog.SCOPES)
    assert view.shows(_event(event.name, app_id=APP))
    assert not view.shows(_event(event.name, business_id="bus_2", app_id=APP))


def test_types_narrow_the_view() -> None:
    view = books.feed_view(
        business_id=BUSINESS,
        app_id=APP,
        app_scopes=("invoices:read", "customers:read"),
        installation_scopes=("invoices:read",),
        types=["invoice.paid", "customer.created", "app.installed"],
    )
    assert view.gated == {"invoice.paid"}
    assert view.own == {"app.installed"}


@pytest.mark.parametrize(
    ("types", "unknown"),
    [
        (["invoice.nope"], ("invoice.nope",)),
        (["invoice.paid", "zeta", "alpha"], ("alpha", "zeta")),
        ([""], ("",)),
        (["Invoice.Paid"], ("Invoice.Paid",)),
    ],
)
def test_types_not_in_the_catalog_are_named(types: list[str], unknown: tuple[str, ...]) -> None:
    with pytest.raises(books.UnknownEventTypes) as raised:
        books.feed_view(
            business_id=BUSINESS, app_id=APP, app_scopes=(), installation_scopes=(), types=types
        )
    assert raised.value.names == unknown
    assert raised.value.params == (",".join(unknown),)
