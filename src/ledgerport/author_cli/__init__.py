"""The app author's commands in the ``ledgerport`` command: ``login``, ``logout``, ``apps``,
``trigger``, ``tail``, ``deliveries``, ``runs``. They talk to a server over HTTP only (its
console API, with the developer token ``login`` keeps), never to its database."""

from ._credentials import Credentials as Credentials
from ._credentials import load_credentials as load_credentials
from ._credentials import save_credentials as save_credentials
from ._events import StreamEvent as StreamEvent
from ._events import parse_events as parse_events
from ._main import AUTHOR_COMMANDS as AUTHOR_COMMANDS
from ._main import run_author_command as run_author_command
from ._output import Refused as Refused
from ._output import show_rows as show_rows
from ._output import table as table
from .tail import delivery_line as delivery_line
from .tail import run_line as run_line
