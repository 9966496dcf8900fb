"""The marketplace's forms' problems beside their fields: the install form's (the business, the
scopes) and the rating form's (the stars, the review).

Both forms answer with a redirect back to their page and a notice (``_notices``); the page
puts the notice's problem beside the field it is about: by the problem's kind (its exception,
the notice's code) for the install form's refusals, by the field its sentences name for the
rating's. A notice of no field (the form expired) stays in the summary alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from ledgerport import access, apps

from ._field_problems import FormField, FormProblems, refused_beside
from ._notices import Notice, problem_code

INSTALL_FIELDS = (
    FormField("business_id", "Business", ("business_id",)),
    FormField("scopes", "Access", ("scopes", "scope")),
)
"""The install form's fields in its order."""
_INSTALL_OWNERS: Mapping[str, str] = {
    problem_code(access.NoScopeChosen): "scopes",
    problem_code(apps.ScopesNotRegistered): "scopes",
    problem_code(access.BusinessNotOffered): "business_id",
    problem_code(apps.AppNotReviewed): "business_id",
    problem_code(apps.InstallNotPermitted): "business_id",
}
"""Which field each refusal of an install is about."""
RATING_FIELDS = (
    FormField("stars", "Stars", ("stars",)),
    FormField("review", "Your review", ("review",)),
)
"""The rating form's fields in its order, named as the rating rules name them."""


def install_problems(notice: Notice | None) -> FormProblems | None:
    """Why the app was not installed, beside the field the refusal is about."""
    if notice is None or notice.tone != "problem":
        return None
    return refused_beside(
        (notice.text,),
        INSTALL_FIELDS,
        outcome="the app was not installed",
        owner=_INSTALL_OWNERS.get(notice.code),
    )


def rating_problems(notice: Notice | None) -> FormProblems | None:
    """Why the rating was not saved, beside the fields its sentences name."""
    if notice is None or notice.tone != "problem":
        return None
    return refused_beside(notice.sentences, RATING_FIELDS, outcome="the rating was not saved")
