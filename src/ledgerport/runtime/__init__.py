"""Hosted-function runtime: a pool of sandbox worker processes running V8 (mini-racer), spoken to
in msgpack frames over pipes."""

from ._frames import MAX_FRAME as MAX_FRAME
from ._frames import FrameError as FrameError
from ._frames import FrameReader as FrameReader
from ._frames import decode_frame as decode_frame
from ._frames import encode_frame as encode_frame
from ._pool import RunLimits as RunLimits
from ._pool import RunOutcome as RunOutcome
from ._pool import RunRequest as RunRequest
from ._pool import SandboxPool as SandboxPool
from ._pool import WorkerStartFailed as WorkerStartFailed
from ._pool import no_api as no_api
