"""The pages as the application assembles them: their blueprints, and how each answers the
problems its routes raise."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from quart import Blueprint

from .._envelopes import ErrorShape
from . import bridge, command_line, consent, console, device, marketplace, sign_in
from ._csrf import guard_forms
from ._frame import PROBLEM_TITLE, look_up_viewer
from ._problems import BROWSER_PAGE, page_shape


@dataclass(frozen=True)
class Pages:
    """What the application registers of the pages."""

    blueprints: tuple[Blueprint, ...]
    """The blueprints, in the order the application registers them."""
    error_shapes: Mapping[str, ErrorShape]
    """How each page blueprint answers the problems its routes raise: its problem page, by the
    blueprint's name."""
    unrouted: ErrorShape
    """How a browser's request that reached no route is answered."""


PAGES = Pages(
    blueprints=(
        sign_in.blueprint,
        consent.blueprint,
        device.blueprint,
        command_line.blueprint,
        bridge.blueprint,
        bridge.token_blueprint,
        console.blueprint,
        console.debug_blueprint,
        console.secrets.blueprint,
        marketplace.blueprint,
    ),
    error_shapes={
        sign_in.blueprint.name: page_shape(sign_in.PAGE_TITLE, sign_in.WAYS),
        consent.blueprint.name: page_shape(PROBLEM_TITLE),
        device.blueprint.name: page_shape(PROBLEM_TITLE, device.WAYS),
        command_line.blueprint.name: page_shape(command_line.PAGE_TITLE, command_line.WAYS),
        bridge.blueprint.name: page_shape(bridge.PAGE_TITLE, bridge.WAYS),
        console.blueprint.name: page_shape(console.PAGE_TITLE, console.WAYS),
        console.debug_blueprint.name: page_shape(console.PAGE_TITLE, console.WAYS),
        console.secrets.blueprint.name: page_shape(console.PAGE_TITLE, console.WAYS),
        marketplace.blueprint.name: page_shape(marketplace.PAGE_TITLE, marketplace.WAYS),
    },
    unrouted=BROWSER_PAGE,
)
"""The pages of the application host."""

for _blueprint in PAGES.blueprints:
    _blueprint.before_request(look_up_viewer)
guard_forms(*PAGES.blueprints)
