"""Operations: metrics, the collector's pauses, freed memory given back to the system, logging
with redaction and escaped control characters."""

from ._collector import CollectorTimer as CollectorTimer
from ._collector import timing_collections as timing_collections
from ._logging import CONTROL_ESCAPES as CONTROL_ESCAPES
from ._logging import QUIET_LOGGERS as QUIET_LOGGERS
from ._logging import REDACTIONS as REDACTIONS
from ._logging import JsonFormatter as JsonFormatter
from ._logging import RedactingFilter as RedactingFilter
from ._logging import Redaction as Redaction
from ._logging import configure_logging as configure_logging
from ._logging import escape_controls as escape_controls
from ._logging import loggable as loggable
from ._logging import redact as redact
from ._memory import TRIM_INTERVAL as TRIM_INTERVAL
from ._memory import MemoryTrimmer as MemoryTrimmer
from ._memory import system_trim as system_trim
from ._metrics import HTTP_METHODS as HTTP_METHODS
from ._metrics import OTHER as OTHER
from ._metrics import Metrics as Metrics
from ._metrics import closed_label as closed_label
from ._services import RESTART_FIRST as RESTART_FIRST
from ._services import RESTART_MAX as RESTART_MAX
from ._services import RESTART_RESET as RESTART_RESET
from ._services import NotReady as NotReady
from ._services import Services as Services
from ._services import supervise as supervise
