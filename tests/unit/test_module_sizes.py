"""No module of the HTTP front (``src/ledgerport/http/``, the pages included) is over 400 lines.

A module past the bound is split by what its parts mean (a surface's models apart from its
routes, one object's pages apart from another's), never cut at a line count: docs/architecture.md
describes the shape.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HTTP = Path(__file__).resolve().parents[2] / "src" / "ledgerport" / "http"
MAX_LINES = 400
MODULES = sorted(HTTP.rglob("*.py"))


def test_the_bound_sees_the_whole_front() -> None:
    seen = {path.relative_to(HTTP).as_posix() for path in MODULES}
    assert {"_app.py", "_errors.py", "pages/_frame.py", "pages/console/webhooks.py"} <= seen


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(HTTP).as_posix())
def test_no_http_module_is_over_the_bound(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, (
        f"http/{path.relative_to(HTTP).as_posix()} has {lines} lines, over {MAX_LINES}:"
        " split it by meaning"
    )
