"""HTTP front: OAuth, data API, console, operator API and pages on quart-trio."""

from ._app import create_app as create_app
from ._app import prepare_document as prepare_document
from ._app import use_platform as use_platform
from ._asgi import ManagementListener as ManagementListener
from ._design import DESIGN_FILES as DESIGN_FILES
from ._design import asset_url as asset_url
from ._design import described_scopes as described_scopes
from ._design import relative_time as relative_time
from ._design import render_markdown as render_markdown
from ._design import served_file as served_file
from ._design import stars_element as stars_element
from ._design import stars_label as stars_label
from ._design import time_element as time_element
from ._drain import RequestTracker as RequestTracker
from ._errors import ANSWERS as ANSWERS
from ._errors import NOTICES as NOTICES
from ._errors import Answer as Answer
from ._errors import answer_for as answer_for
from ._errors import notice_of as notice_of
from ._errors import notice_text as notice_text
from ._in_process import in_process_api as in_process_api
from ._pages import page_csp as page_csp
from ._serving import AccessLog as AccessLog
from ._serving import ConnectionGuard as ConnectionGuard
