"""The quart-trio application: API host and application host routes, one error mapping."""

from __future__ import annotations

import time

import flask.templating
from quart import Response, g, request
from quart_schema import QuartSchema
from quart_trio import QuartTrio
from werkzeug.exceptions import NotFound

from ledgerport import __version__, catalog
from ledgerport.ops import HTTP_METHODS, closed_label
from ledgerport.platform import Platform
from ledgerport.server import MANAGEMENT, MANAGEMENT_PATHS, OneTaskHTTPConnection

from . import _ops, admin, cli_login, mcp, oauth, oauth_clients
from ._browser import SESSION_COOKIE
from ._context import APP_STATE_PREFIX, PLATFORM_KEY
from ._context import platform as current_platform
from ._document import provider_for, serve_document
from ._dpop import DPOP_NONCE_KEY
from ._envelopes import OAUTH, register_error_handlers
from ._headers import API_CSP, SECURITY_HEADERS
from ._input import CheckedRequest, refuse_nul_in_url
from ._json import answer_with_orjson, skip_conversion_of_plain_answers
from .api import RecordIdConverter
from .api import blueprint as api_blueprint
from .developer import blueprint as developer_blueprint
from .pages import PAGES, page_csp

_PAGE_CSP = page_csp()
_SECURITY_BY_LOWER = {name.lower(): (name, value) for name, value in SECURITY_HEADERS.items()}
"""The security headers by their names in lower case, as an answer's present ones are read."""


def use_platform(app: QuartTrio, platform: Platform) -> None:
    """Serve ``platform`` from now on. Building an application compiles a hundred URL rules
    (about 0.2 s), so the tests build one per process and point it at each test's platform;
    everything a request reaches of the platform is looked up at the request, and what the
    application built for the platform it served before (limits, lockouts) is dropped."""
    for key in [key for key in app.extensions if key.startswith(APP_STATE_PREFIX)]:
        del app.extensions[key]
    app.extensions[PLATFORM_KEY] = platform


PREPARE_DOCUMENT = "ledgerport.prepare_document"


async def prepare_document(app: QuartTrio) -> None:
    """Build the OpenAPI document in a worker thread (seconds of work), so the first
    ``GET /openapi.json`` finds it ready and no request waits on the event loop for it."""
    await app.extensions[PREPARE_DOCUMENT]()


def create_app(platform: Platform) -> QuartTrio:
    """Build the HTTP application serving ``platform``."""
    app = QuartTrio("ledgerport")
    app.request_class = CheckedRequest
    app.asgi_http_class = OneTaskHTTPConnection
    app.config["MAX_CONTENT_LENGTH"] = catalog.REQUEST_BODY_MAX_BYTES
    use_platform(app, platform)
    # Errors answer in the shape of the blueprint that raised them; the envelope elsewhere. The
    # OpenAPI document states the same shapes.
    error_shapes = {
        oauth.blueprint.name: OAUTH,
        oauth_clients.blueprint.name: OAUTH,
        cli_login.blueprint.name: OAUTH,
        **PAGES.error_shapes,
    }
    QuartSchema(
        app,
        openapi_path="/openapi.json",
        redoc_ui_path=None,
        scalar_ui_path=None,
        swagger_ui_path=None,
        info={"title": "ledgerport", "version": __version__},
        security_schemes={
            "admin": {"type": "http", "scheme": "bearer"},
            "accessToken": {"type": "http", "scheme": "bearer"},
            "clientBasic": {"type": "http", "scheme": "basic"},
            "developerToken": {"type": "http", "scheme": "bearer"},
            "session": {"type": "apiKey", "in_": "cookie", "name": SESSION_COOKIE},
        },
        openapi_provider_class=provider_for(error_shapes),
    )
    # After QuartSchema, which installs its own JSON provider and the document's route.
    answer_with_orjson(app)
    skip_conversion_of_plain_answers(app)
    app.extensions[PREPARE_DOCUMENT] = serve_document(app)
    register_error_handlers(app, error_shapes, unrouted_page=PAGES.unrouted)
    app.url_map.converters["record"] = RecordIdConverter
    for blueprint in (
        _ops.blueprint,
        admin.blueprint,
        oauth.blueprint,
        oauth_clients.blueprint,
        cli_login.blueprint,
        *PAGES.blueprints,
        api_blueprint,
        mcp.blueprint,
        developer_blueprint,
    ):
        app.register_blueprint(blueprint)
    render_without_flasks_context(app)

    # A tool call to /mcp is answered in front of the application, its data API call the one
    # request in it (``mcp._front``).
    app.asgi_app = mcp.InFront(app, app.asgi_app)  # type: ignore[method-assign, assignment]

    @app.before_request
    async def _start_timer() -> None:
        g.started = time.perf_counter()
        g.arrived = time.time()  # before any wait for the database: when the request came in
        current_platform().metrics.http_in_flight.inc()

    # After the timer, so a refused request is counted like any other.
    app.before_request(refuse_nul_in_url)

    if platform.config.management is not None:

        @app.before_request
        async def _split_listeners() -> None:
            """With a management listener, the operational paths are answered there only,
            and nothing else is."""
            if request.scope.get(MANAGEMENT, False) != (request.path in MANAGEMENT_PATHS):
                raise NotFound()

    @app.after_request
    async def _finish(response: Response) -> Response:
        # The headers the answer lacks, added: werkzeug's setdefault makes and catches an HTTP
        # error (BadRequestKeyError) for each header it does not find.
        headers = response.headers
        present = {name.lower() for name, _ in headers.items()}
        for lowered, (name, value) in _SECURITY_BY_LOWER.items():
            if lowered not in present:
                headers.add(name, value)
        if "content-security-policy" not in present:
            is_html = response.mimetype == "text/html"
            headers.add("Content-Security-Policy", _PAGE_CSP if is_html else API_CSP)
        for name, value in (g.get("rate_limit_headers") or {}).items():
            response.headers[name] = value
        for name, value in (g.get("response_headers") or {}).items():
            response.headers[name] = value
        nonce = g.get(DPOP_NONCE_KEY)
        if nonce is not None:
            response.headers["DPoP-Nonce"] = nonce
        started = g.get("started")
        if started is not None:
            metrics = current_platform().metrics
            route = request.url_rule.rule if request.url_rule is not None else "<unmatched>"
            method = closed_label(request.method, HTTP_METHODS)
            metrics.request_answered(
                route, method, response.status_code, time.perf_counter() - started
            )
            metrics.http_in_flight.dec()
            g.started = None
        return response

    return app


def render_without_flasks_context(app: QuartTrio) -> None:
    """Leave out of ``app``'s template context the processor that Flask's blueprint class
    (Quart's extends it) gives every blueprint: Flask's default, a sync function that reads
    Flask's request context, which Quart never sets, so it adds nothing; quart-trio ran it on a
    worker thread for each blueprint of every page rendered, a thread's round trip each.
    Quart's own default (``g``, ``request``, ``session``) stays, for every template."""
    flasks = flask.templating._default_template_ctx_processor
    for processors in app.template_context_processors.values():
        processors[:] = [processor for processor in processors if processor is not flasks]
