"""The MCP server at ``/mcp``: the data API's list, get and create as tools (Streamable HTTP,
the official SDK), with the data API's tokens, gates and limits."""

from ._blueprint import METADATA_PATH as METADATA_PATH
from ._blueprint import blueprint as blueprint
from ._front import InFront as InFront
from ._tools import DataTool as DataTool
from ._tools import read_tools as read_tools
