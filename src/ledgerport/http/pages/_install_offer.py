"""Whether a listing's page offers its Install button to the person reading it, and in words why
not: the button is shown only where the install form would let them install (a business where
their role may install apps, reachable for the app), never as a button that can only be refused.

The rule is the install form's own (``access.offered``, through the marketplace); this module
only says what it decides, for the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledgerport import access, apps


@dataclass(frozen=True)
class InstallOffer:
    """What the listing's page shows where the Install button goes."""

    may_install: bool
    """The button is shown: nobody is signed in (it leads to the sign-in page first), or the
    signed-in person may install the app in one of their businesses."""
    why_not: str | None = None
    """Why there is no button, in words, when there is none."""


ANYONE = InstallOffer(may_install=True)
"""Nobody is signed in: the button leads to the sign-in page, then to the install form."""


def _names(roles: Sequence[tuple[str, str]]) -> str:
    """``Acme (viewer)``, ``Acme (viewer) and Bolt (accountant)``, ``A (viewer), B (viewer) and
    C (accountant)``."""
    shown = [f"{business} ({role})" for business, role in roles]
    if len(shown) == 1:
        return shown[0]
    return f"{', '.join(shown[:-1])} and {shown[-1]}"


def install_offer(
    app: apps.App, name: str, standings: Sequence[access.Standing], roles: Mapping[str, str]
) -> InstallOffer:
    """What the listing offers a signed-in person, whose businesses stand as ``standings`` for
    ``app`` (shown as ``name``) and whose role in each is ``roles[business id]``."""
    offered = access.offered(standings, reviewed=app.reviewed, scopes=None, through="marketplace")
    if any(standing.may_install for standing in offered):
        return ANYONE
    reachable = [
        standing
        for standing in standings
        if access.reachable(standing, reviewed=app.reviewed, through="marketplace")
    ]
    if not standings:
        why = f"You are not a member of any business yet, so there is nowhere to install {name}."
    elif not reachable:
        why = (
            f"{name} has not completed review: until it has, it can be installed only in its"
            " developer's sandbox businesses."
        )
    else:
        held = [(s.business.name, roles.get(s.business.id, "member")) for s in reachable]
        verb = "does" if len(held) == 1 else "do"
        role_words = "Your role in" if len(held) == 1 else "Your roles in"
        why = (
            f"{role_words} {_names(held)} {verb} not allow installing apps. Ask an owner or an"
            f" admin of the business to install {name}."
        )
    return InstallOffer(may_install=False, why_not=why)
