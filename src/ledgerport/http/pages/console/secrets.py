"""The console's page of an app's secrets (contract.md, third round: "Hosted functions: secrets,
outbound fetch, schedules"): their names and when each was written, the form that writes one
and the button that deletes one, as ``/developer/apps/{appId}/secrets`` does. A value goes
into the form once and is never shown again: not on the page, not in the form sent back when
it is refused, not in a notice."""

from __future__ import annotations

from functools import partial

from quart import Blueprint, Response
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, catalog, storage
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._ids import APP
from ..._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    Param,
    operation,
    page,
    redirect_reply,
)
from .._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_again, form_guard
from .._form_models import BUTTON_BODY, PageForm, read_form
from .._frame import console_developer, console_signed_in, returns_to
from .._notices import Notice, form_page, with_notice
from .._problems import answers_again
from ._shared import CONSOLE_CSP

blueprint = Blueprint("console_secrets", __name__)
blueprint.before_request(console_signed_in)

_APP = Param("app_id", "path", "The app", APP.schema)
_NAME = Param(
    "name",
    "path",
    "The secret's name",
    {"type": "string", "pattern": catalog.SECRET_NAME_PATTERN},
)
_PAGE_ERRORS = (storage.BadValue, apps.AppNotFound, storage.StorageUnavailable)
_SIGN_IN = "Not signed in: to the sign-in page, returning here"


class SecretForm(PageForm):
    """The form that writes a secret: its name and value. A field left out is as if empty:
    the page comes back saying what is wrong, the name kept and the value not."""

    stated_required = ("name", "value")
    name: str = ""
    value: str = ""


def _secrets_path(app_id: str) -> str:
    return f"/console/apps/{app_id}/secrets"


async def _secrets_page(
    app_id: str, *, name: str = "", problem: Notice | None = None, status: int = 200
) -> Response:
    async with unit_of_work(reads=True) as tx:
        app = await apps.get_developed_app(tx, app_id, console_developer())
        secrets = await apps.list_secrets(tx, app_id)
        functions = await apps.list_functions(tx, app_id)
    return await form_page(
        "console_secrets.html",
        status=status,
        csp=CONSOLE_CSP,
        app=app,
        secrets=secrets,
        fetching=[f for f in functions if f.allowed_hosts],
        name=name,
        problem=problem,
        name_pattern=catalog.SECRET_NAME_PATTERN,
        value_max=catalog.SECRET_VALUE_MAX_BYTES,
        secrets_max=catalog.SECRETS_PER_APP_MAX,
        current="secrets",
    )


@blueprint.get("/console/apps/<app_id>/secrets")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's secrets (names only) and the form that writes one"),
    redirect_reply(_SIGN_IN),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def secrets_page(app_id: str) -> ResponseReturnValue:
    """The app's secrets by name, when each was written, and the form that writes one."""
    return await _secrets_page(app_id)


async def _sent_again(problem: Notice, status: int, *, app_id: str) -> Response:
    """The page again, the name as it was sent and the value not, ``problem`` beside it."""
    name = (await read_form(SecretForm)).name.strip()
    return await _secrets_page(app_id, name=name, problem=problem, status=status)


@blueprint.post("/console/apps/<app_id>/secrets")
@form_guard(form_again(_sent_again))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Saved: back to the secrets page, saying so", SET_COOKIE.optional()),
    page(400, "The page again, the name kept and the value not, saying why not"),
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, SecretForm),),
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def write_secret(app_id: str) -> ResponseReturnValue:
    """Write the secret, as ``PUT /developer/apps/{appId}/secrets/{name}``."""
    form = await read_form(SecretForm)
    name = form.name.strip()
    answers_again(partial(_sent_again, app_id=app_id))
    p = platform()
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        problem = apps.secret_name_problem(name)
        if problem is not None:
            raise InvalidInput([problem])
        await apps.put_secret(
            tx, p.keyring, now=p.now(), app_id=app_id, name=name, value=form.value
        )
    return with_notice(_secrets_path(app_id), "secret-saved", name)


@blueprint.post("/console/apps/<app_id>/secrets/<name>/delete")
@form_guard(back_with_notice(lambda app_id, **_: _secrets_path(app_id)))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the secrets page, saying the secret is deleted or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, InvalidInput, RequestEntityTooLarge, apps.SecretNotFound),
    bodies=BUTTON_BODY,
    params=(_APP, _NAME, CSRF_COOKIE_PARAM),
)
async def delete_secret(app_id: str, name: str) -> ResponseReturnValue:
    """Delete the secret, as ``DELETE /developer/apps/{appId}/secrets/{name}``."""
    back = _secrets_path(app_id)
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        await apps.delete_secret(tx, app_id=app_id, name=name)
    return with_notice(back, "secret-deleted", name)
