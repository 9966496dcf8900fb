"""HTTP front: OAuth, data API, developer API, operator API on quart-trio, and the pages a
browser sees (``http.pages``)."""

from ._app import create_app as create_app
from ._app import prepare_document as prepare_document
from ._app import use_platform as use_platform
from ._developer_bounds import STREAMS_PER_DEVELOPER as STREAMS_PER_DEVELOPER
from ._error_answer import Answer as Answer
from ._errors import ANSWERS as ANSWERS
from ._errors import answer_for as answer_for
from ._forms import DATE as DATE
from ._forms import NON_NEGATIVE_DECIMAL as NON_NEGATIVE_DECIMAL
from ._forms import NOT_BLANK as NOT_BLANK
from ._forms import POSITIVE_DECIMAL as POSITIVE_DECIMAL
from ._ids import ANY_RECORD_ID as ANY_RECORD_ID
from ._ids import CURSOR_SCHEMA as CURSOR_SCHEMA
from ._ids import ID_KINDS as ID_KINDS
from ._ids import PATH_ID_KINDS as PATH_ID_KINDS
from ._ids import RECORD_IDS as RECORD_IDS
from ._ids import IdKind as IdKind
from ._ids import token_schema as token_schema
from ._in_process import in_process_api as in_process_api
from ._live import READ_INTERVAL as READ_INTERVAL
from ._live import Broadcaster as Broadcaster
from ._live import end_live_streams as end_live_streams
from ._openapi import NUL_FREE as NUL_FREE
