"""A worker that breaks the sandbox protocol on purpose, to show what the pool does with frames
it must not believe: ``python forged_worker.py BEHAVIOUR --memory-mib N``.

Behaviours (each answers ``Run`` frames; ``Ready`` first, as a worker does):

- ``other-run-api``: asks the API for a run that is not the one going on, waits half a second
  for an answer, then ends the run, saying in its log whether one came;
- ``other-run-done``: reports a run other than the one going on as done;
- ``huge-outcome``: reports success with 8 MB of logs and a 5 MB result;
- ``unclean``: ends the run, saying something outside it tried to act;
- ``api-after-done``: ends the run, then asks the API for it;
- ``other-run-fetch``: fetches for a run that is not the one going on, as ``other-run-api``;
- ``fetch-after-done``: ends the run, then fetches for it.
"""

from __future__ import annotations

import os
import sys
import time

from ledgerport.runtime import (
    HEADER_SIZE,
    Api,
    ApiResult,
    Done,
    Fetch,
    FetchResult,
    Ready,
    Run,
    decode_frame,
    encode_frame,
    frame_length,
)


def _send(frame: object) -> None:
    os.write(1, encode_frame(frame))  # type: ignore[arg-type]


def _read_exactly(size: int, deadline: float | None = None) -> bytes | None:
    data = b""
    while len(data) < size:
        if deadline is not None:
            import select

            ready, _, _ = select.select([0], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                return None
        chunk = os.read(0, size - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data


def _receive(deadline: float | None = None) -> object | None:
    header = _read_exactly(HEADER_SIZE, deadline)
    if header is None:
        return None
    payload = _read_exactly(frame_length(header))
    assert payload is not None
    return decode_frame(payload)


def main() -> None:
    behaviour = sys.argv[1]
    _send(Ready(pid=os.getpid()))
    while True:
        frame = _receive()
        if not isinstance(frame, Run):
            continue
        if behaviour == "other-run-api":
            _send(Api(run="run_other", call=1, method="GET", path="/customers", body=None))
            answer = _receive(deadline=time.monotonic() + 0.5)
            seen = "answered" if isinstance(answer, ApiResult) else "unanswered"
            _send(Done(run=frame.run, ok=True, result=None, logs=[seen]))
        elif behaviour == "other-run-done":
            _send(Done(run="run_other", ok=True, result='"forged"'))
            _send(Done(run=frame.run, ok=True, result='"forged"'))
        elif behaviour == "huge-outcome":
            logs = ["y" * 999] * 8000
            _send(Done(run=frame.run, ok=True, result='"' + "x" * 5_000_000 + '"', logs=logs))
        elif behaviour == "unclean":
            _send(Done(run=frame.run, ok=True, result='"fine"', clean=False))
        elif behaviour == "api-after-done":
            _send(Done(run=frame.run, ok=True, result='"done"'))
            _send(Api(run=frame.run, call=1, method="POST", path="/customers", body="{}"))
        elif behaviour == "other-run-fetch":
            _send(_fetch("run_other"))
            answer = _receive(deadline=time.monotonic() + 0.5)
            seen = "answered" if isinstance(answer, FetchResult) else "unanswered"
            _send(Done(run=frame.run, ok=True, result=None, logs=[seen]))
        elif behaviour == "fetch-after-done":
            _send(Done(run=frame.run, ok=True, result='"done"'))
            _send(_fetch(frame.run))


def _fetch(run: str) -> Fetch:
    return Fetch(
        run=run,
        call=1,
        method="GET",
        url="https://api.example.com/",
        headers=[["Authorization", "lpsecret_" + "0" * 32]],
        body=None,
        at=0,
    )


if __name__ == "__main__":
    main()
