"""A function's source as the console's pages show it, within bounds whatever the source and
the stack of a run hold: the lines around a stack frame's position (an excerpt, the mark under
its column), the frames of a run's stack with their links and excerpts, and a version's source a
page of lines at a time.

The guest writes its stack and the developer its source (256 KiB at most, one line or 256 K
lines): each bound here is what keeps a page to what one request may cost the process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from ledgerport import apps

EXCERPT_AROUND = 2
"""Lines of the source shown before and after the line a stack frame names."""
EXCERPT_FRAMES = 10
"""Frames of a stack shown with the lines around them: the first ten into the source, each
position once (a recursion names the same one hundreds of times); the others are listed, each
linking to its line."""
EXCERPT_LINE_CHARS = 160
"""Characters of a source line an excerpt shows, around the column the frame names: a longer
line (a bundle's is one line of 256 KiB) shows those, an ellipsis where it goes on."""
EXCERPT_BUDGET = 16 * 1024
"""Characters of source the excerpts of one page show in all; past it, frames are listed
without their lines. With the two bounds above it keeps a run page to tens of kilobytes,
whatever stack the guest threw (one excerpt per frame of whole lines made one page 114 MB)."""
TAB_WIDTH = 4
"""Columns a tab takes in the source shown, so the mark under a column stays under it."""
SOURCE_PAGE_LINES = 5000
"""Lines of a version's source its page shows at once (``from``, the first, goes on): a source
of 256 KiB may be 256 K lines, and one page of all of them weighed 27 MB and took 2.6 s."""


@dataclass(frozen=True)
class SourceLine:
    """A line of a function's source as a page shows it: its number, its text (tabs as
    spaces), and whether a stack frame names it."""

    number: int
    text: str
    marked: bool = False


@dataclass(frozen=True)
class Excerpt:
    """The lines around the one a stack frame names, and the mark under its column."""

    line: int
    column: int
    lines: tuple[SourceLine, ...]
    caret: str
    """Spaces up to the column in the marked line's text as shown, then ``^``."""

    @property
    def size(self) -> int:
        """Characters it shows."""
        return sum(len(line.text) for line in self.lines) + len(self.caret)


def _shown(text: str) -> str:
    return text.expandtabs(TAB_WIDTH)


def index_of_column(text: str, column: int) -> int:
    """Where a V8 column (from 1, in UTF-16 code units) falls in ``text``, as an index."""
    prefix = text[: max(column - 1, 0)]
    if prefix.isascii() or max(prefix) <= "\uffff":
        return len(prefix)  # one code unit a character up to the column
    units = 0
    for index, char in enumerate(text):
        if units >= column - 1:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def _window(text: str, start: int, width: int) -> str:
    """The ``width`` characters of ``text`` from ``start``, an ellipsis on each side where it
    goes on."""
    before = "\u2026" if start > 0 and text else ""
    after = "\u2026" if len(text) > start + width else ""
    return before + text[start : start + width] + after


def excerpt(
    lines: Sequence[str],
    line: int,
    column: int,
    around: int = EXCERPT_AROUND,
    width: int = EXCERPT_LINE_CHARS,
) -> Excerpt | None:
    """The ``around`` lines before and after line ``line`` of a source split in
    ``lines`` (``apps.source_lines``), that line marked and the mark under ``column``; of a
    line longer than ``width`` characters, the ``width`` around the column (the same ones of
    each line shown, so they stay aligned). None when the source has no such line."""
    if not 1 <= line <= len(lines):
        return None
    first, last = max(1, line - around), min(len(lines), line + around)
    marked = lines[line - 1]
    at = index_of_column(marked, max(column, 1))
    start = max(0, min(at - width // 2, len(marked) - width))
    lead = "\u2026" if start > 0 else ""
    return Excerpt(
        line,
        column,
        tuple(
            SourceLine(number, _shown(_window(lines[number - 1], start, width)), number == line)
            for number in range(first, last + 1)
        ),
        " " * len(_shown(lead + marked[start:at])) + "^",
    )


@dataclass(frozen=True)
class ShownFrame:
    """A frame of a run's stack, and, for a frame in the source, where it points: its link
    into the version's source page and the lines around it."""

    frame: apps.StackFrame
    href: str | None = None
    excerpt: Excerpt | None = None


def shown_stack(stack: str, *, source: str | None, version_href: str | None) -> list[ShownFrame]:
    """Each frame of a run's stack with, for a frame in the source, a link to its line on the
    source page of the version that ran (``version_href``, when that version is still kept)
    and, within the page's bounds (EXCERPT_FRAMES positions, EXCERPT_BUDGET characters), the
    lines around it (when ``source`` is known)."""
    lines = apps.source_lines(source) if source is not None else None
    excerpted: set[tuple[int, int]] = set()
    budget = EXCERPT_BUDGET
    shown = []
    for frame in apps.stack_frames(stack):
        if frame.line is None or frame.column is None:
            shown.append(ShownFrame(frame))
            continue
        href = line_href(version_href, frame.line) if version_href is not None else None
        around = None
        position = (frame.line, frame.column)
        if lines is not None and position not in excerpted and len(excerpted) < EXCERPT_FRAMES:
            around = excerpt(lines, frame.line, frame.column)
            if around is not None and around.size > budget:
                around, budget = None, 0
            elif around is not None:
                excerpted.add(position)
                budget -= around.size
        shown.append(ShownFrame(frame, href, around))
    return shown


def source_page_start(line: int) -> int:
    """The first line of the page of a version's source that shows ``line``."""
    return (line - 1) // SOURCE_PAGE_LINES * SOURCE_PAGE_LINES + 1


def line_href(version_href: str, line: int) -> str:
    """The address of ``line`` on the source pages of the version at ``version_href``."""
    start = source_page_start(line)
    return f"{version_href}{'' if start == 1 else f'?from={start}'}#L{line}"


def numbered_source(lines: Sequence[str], first: int) -> Markup:
    """Source lines as the version's page shows them, the first numbered ``first``: each
    numbered, addressable (``id="L12"``) and its tabs as spaces. Made here rather than by a
    template loop, which cost ten times as much a line."""
    return Markup(
        "".join(
            f'<span class="source-line" id="L{number}"><span class="line-number"'
            f' aria-hidden="true">{number}</span>{escape(_shown(text))}</span>'
            for number, text in enumerate(lines, start=first)
        )
    )
