"""The console API's bounds of what one developer holds open in one serving process: live
streams (``_live.py``) and a stream endpoint's waiting pulls (``developer/stream_endpoints.py``),
each refused past its bound with a 429 ``APP_RATE_LIMITED`` and a ``Retry-After``."""

from __future__ import annotations

from ledgerport import auth

STREAMS_PER_DEVELOPER = 10
"""Streams open at once for one developer, in one serving process."""
STREAM_RETRY_AFTER = 5
"""The Retry-After of a stream refused for the developer's bound."""
PULLS_PER_DEVELOPER = 10
"""Pulls waiting at once for one developer in one serving process (a listener has one)."""
PULL_RETRY_AFTER = 5
"""The Retry-After of a pull refused for the developer's bound."""


class TooManyStreams(auth.RateLimited):
    """The developer has :data:`STREAMS_PER_DEVELOPER` streams open already (429; the bound
    scaled as the rate limits are, in development)."""

    def __init__(self, limit: int) -> None:
        super().__init__(STREAM_RETRY_AFTER)
        self.message = (
            "Too many live streams: at most {0} may be open at once for a developer; close one"
            " first"
        )
        self.params = (limit,)
        self.args = (self.rendered,)


class TooManyPulls(auth.RateLimited):
    """The developer has :data:`PULLS_PER_DEVELOPER` pulls waiting already (429)."""

    def __init__(self) -> None:
        super().__init__(PULL_RETRY_AFTER)
        self.message = (
            "Too many pulls: at most {0} may wait at once for a developer; stop a listener first"
        )
        self.params = (PULLS_PER_DEVELOPER,)
        self.args = (self.rendered,)
