"""What adapts hypercorn and quart-trio to the service: the ASGI wrappers between the server and
the application (the management listener's mark, the drain's request count, the connection
guard, the access log) and hypercorn's HTTP/1.1 connections with less work a request. Each
relies on a pinned release; tests/unit/test_wire.py, test_drain.py and
test_dependency_contracts.py name the behaviours relied on."""

from ._asgi import MANAGEMENT as MANAGEMENT
from ._asgi import MANAGEMENT_PATHS as MANAGEMENT_PATHS
from ._asgi import ManagementListener as ManagementListener
from ._asgi import replaying as replaying
from ._drain import RequestTracker as RequestTracker
from ._serving import AccessLog as AccessLog
from ._serving import ConnectionGuard as ConnectionGuard
from ._wire import CoalescingH11Protocol as CoalescingH11Protocol
from ._wire import IdleTimer as IdleTimer
from ._wire import LeanTaskGroup as LeanTaskGroup
from ._wire import LeanTCPServer as LeanTCPServer
from ._wire import OneTaskHTTPConnection as OneTaskHTTPConnection
from ._wire import lean_connections as lean_connections
