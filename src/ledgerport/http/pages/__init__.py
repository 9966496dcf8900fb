"""Everything a browser sees on the application host: sign-in and the home page, the consent
and device pages, the embedded app's bridge, the marketplace and the developer console, with
their kit (the page frame, the design, notices, problem pages, the forms' CSRF token), templates
and static files."""

from ._blueprints import PAGES as PAGES
from ._blueprints import Pages as Pages
from ._design import DESIGN_FILES as DESIGN_FILES
from ._design import asset_url as asset_url
from ._design import described_scopes as described_scopes
from ._design import record_words as record_words
from ._design import relative_time as relative_time
from ._design import render_markdown as render_markdown
from ._design import served_file as served_file
from ._design import stars_element as stars_element
from ._design import stars_label as stars_label
from ._design import time_element as time_element
from ._design import with_article as with_article
from ._field_problems import FormField as FormField
from ._field_problems import field_problems as field_problems
from ._form_models import PageForm as PageForm
from ._form_models import Repeated as Repeated
from ._form_models import read_form as read_form
from ._frame import page_csp as page_csp
from ._install_offer import install_offer as install_offer
from ._notices import NOTICES as NOTICES
from ._notices import notice_of as notice_of
from ._notices import notice_text as notice_text
from .console._debug import form_time as form_time
from .console._debug import parse_form_time as parse_form_time
from .console._debug import pretty_payload as pretty_payload
from .console._debug import query_string as query_string
from .console._debug import shown_log_lines as shown_log_lines
from .console._debug import url_label as url_label
from .console._forms import EventChoice as EventChoice
from .console._forms import EventGroup as EventGroup
from .console._forms import SourceProblem as SourceProblem
from .console._forms import areas_out_of_reach as areas_out_of_reach
from .console._forms import event_groups as event_groups
from .console._forms import kept_order as kept_order
from .console._forms import secret_fingerprint as secret_fingerprint
from .console._forms import source_problem as source_problem
from .console._source_views import EXCERPT_BUDGET as EXCERPT_BUDGET
from .console._source_views import EXCERPT_FRAMES as EXCERPT_FRAMES
from .console._source_views import EXCERPT_LINE_CHARS as EXCERPT_LINE_CHARS
from .console._source_views import SOURCE_PAGE_LINES as SOURCE_PAGE_LINES
from .console._source_views import excerpt as excerpt
from .console._source_views import line_href as line_href
from .console._source_views import shown_stack as shown_stack
