"""The engine: the supervisor and the tasks that own everything after a commit."""

from ._scheduler import Scheduler as Scheduler
from ._supervisor import serve as serve
