"""What the console's pages share: their blueprint (every page the signed-in developer's), its
problem page's title and ways, the page policy, the parameters and answers they declare, the
paths of an app's webhooks and functions, and the confirmation page of a consequential step."""

from __future__ import annotations

from collections.abc import Sequence

from quart import Blueprint, Response

from ledgerport import apps, storage

from ..._ids import APP, FUNCTION_NAME, WEBHOOK
from ..._openapi import (
    Param,
    page,
    redirect_reply,
)
from .._form_models import PageForm
from .._frame import Way, console_signed_in, page_csp
from .._notices import (
    form_page,
)

blueprint = Blueprint("console_pages", __name__)

PAGE_TITLE = "Console"
"""Title of the console pages' problem pages."""
WAYS = (Way("Your apps", "/console"),)
"""Where a console page's problem offers to go on."""
APP_PARAM = Param("app_id", "path", "The app", APP.schema)


PAGE_ERRORS = (storage.BadValue, apps.AppNotFound, storage.StorageUnavailable)


blueprint.before_request(console_signed_in)


CONSOLE_CSP = page_csp()
"""The console pages load the design's stylesheet and images from this origin (the listing
editor's previews among them), and nothing else."""


# --- Webhook endpoints: add, edit, switch off and on, delete, rotate the secret ---------------

WEBHOOK_PARAM = Param("webhook_id", "path", "The webhook", WEBHOOK.schema)
WEBHOOK_NOT_FOUND = page(404, "Not an app of the signed-in developer, or not one of its webhooks")
SIGNED_OUT = redirect_reply("Not signed in: to the sign-in page, returning here")


def webhooks_path(app_id: str) -> str:
    return f"/console/apps/{app_id}/webhooks"


def webhook_path(app_id: str, webhook_id: str, tail: str) -> str:
    return f"/console/apps/{app_id}/webhooks/{webhook_id}/{tail}"


class ConfirmForm(PageForm):
    """A confirmation page's form: ``confirm`` ``yes`` does it; without it, the answer is the
    confirmation page."""

    confirm: str = ""


async def confirm_page(
    app: apps.App,
    *,
    current: str,
    nav_label: str,
    heading: str,
    lead: str,
    consequences: Sequence[str],
    action: str,
    button: str,
    danger: bool,
    back: str,
) -> Response:
    return await form_page(
        "console_confirm.html",
        csp=CONSOLE_CSP,
        app=app,
        current=current,
        below=True,
        nav_label=nav_label,
        heading=heading,
        lead=lead,
        consequences=consequences,
        action=action,
        button=button,
        danger=danger,
        back=back,
    )


NAME_PARAM = Param(
    "name",
    "path",
    "The function's name",
    FUNCTION_NAME,
)
FUNCTION_NOT_FOUND = page(404, "Not an app of the signed-in developer, or not one of its functions")


def functions_path(app_id: str) -> str:
    return f"/console/apps/{app_id}/functions"


def function_path(app_id: str, name: str, tail: str) -> str:
    return f"/console/apps/{app_id}/functions/{name}/{tail}"
