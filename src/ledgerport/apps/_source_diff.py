"""What activating a version of a hosted function changes: the unified diff of two sources,
every line numbered, within bounds whatever the sources are (what a page shows before it asks
to confirm a rollback).

Lines are the source's lines as V8 numbers them (``source_lines``), so a diff's line numbers
are those of the version's page and of a run's stack. The lines both sources begin and end with
are set aside first (a pass over each); what differs between them is compared line by line
(``difflib``, as ``diff -u`` shows it) when it is at most DIFF_COMPARED_LINES lines on each
side, and is otherwise shown as removed and then added whole (``coarse``): comparing costs more
than the lines' number, and a source may have 256 KiB of them. What is shown is bounded too:
DIFF_LINES_SHOWN lines and DIFF_CHARS_SHOWN characters at most, each line cut to
DIFF_LINE_CHARS characters (an ellipsis where it goes on); a diff shown in part says so
(``cut``) and still counts every line added and removed. :func:`version_diff` makes it in a
thread, after the transaction that read the sources.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

import trio

from ._functions import FunctionVersion
from ._module_source import source_lines

DIFF_CONTEXT = 3
"""Unchanged lines shown around each change, as ``diff -u``."""
DIFF_COMPARED_LINES = 2000
"""Lines of each source, past those they begin and end with in common, compared line by line
at most (measured: about 15 ms for 2,000 lines a side of few distinct lines, the worst case
found; 8,000 a side took 0.1 s and more)."""
DIFF_LINES_SHOWN = 1000
"""Lines of a diff shown at most."""
DIFF_LINE_CHARS = 240
"""Characters of a line shown at most."""
DIFF_CHARS_SHOWN = 64 * 1024
"""Characters of a diff's lines shown at most, in all."""

DiffKind = Literal["context", "removed", "added"]
_Opcode = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class DiffLine:
    kind: DiffKind
    old_line: int | None
    """Its number in the old source (None: an added line)."""
    new_line: int | None
    """Its number in the new source (None: a removed line)."""
    text: str
    """The line, cut to DIFF_LINE_CHARS characters (an ellipsis where it goes on)."""

    @property
    def mark(self) -> str:
        """Its mark in a unified diff: a space, ``-`` or ``+``."""
        return {"context": " ", "removed": "-", "added": "+"}[self.kind]


@dataclass(frozen=True)
class DiffHunk:
    """A run of changes with the lines around them: ``old_count`` lines of the old source from
    line ``old_start`` (context and removed), ``new_count`` of the new one from ``new_start``
    (context and added). With no line of a source, its start is the line after the place the
    hunk stands at (the header names the line before, as ``diff -u`` does)."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[DiffLine, ...]

    @property
    def header(self) -> str:
        """``@@ -old +new @@`` as ``diff -u`` writes it (a range of one line is its number, an
        empty one the line before it with a count of 0)."""
        return (
            f"@@ -{_range(self.old_start, self.old_count)}"
            f" +{_range(self.new_start, self.new_count)} @@"
        )


@dataclass(frozen=True)
class SourceDiff:
    hunks: tuple[DiffHunk, ...]
    added: int
    """Lines added in all, shown or not."""
    removed: int
    """Lines removed in all, shown or not."""
    cut: bool = False
    """The hunks shown are not the whole diff: DIFF_LINES_SHOWN or DIFF_CHARS_SHOWN was
    reached (the last hunk shown may end early)."""
    coarse: bool = False
    """What differs was too long to compare line by line: it is shown removed and added whole."""

    @property
    def identical(self) -> bool:
        return not self.hunks

    def unified(self, old_name: str, new_name: str) -> str:
        """The diff as ``diff -u`` writes it (the hunks shown, their lines as shown)."""
        if not self.hunks:
            return ""
        lines = [f"--- {old_name}", f"+++ {new_name}"]
        for hunk in self.hunks:
            lines.append(hunk.header)
            lines += [f"{line.mark}{line.text}" for line in hunk.lines]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class VersionDiff:
    """What making ``new`` the active version changes from ``old``."""

    old: FunctionVersion
    new: FunctionVersion
    diff: SourceDiff


def _range(start: int, count: int) -> str:
    if count == 1:
        return str(start)
    return f"{start - 1 if count == 0 else start},{count}"


def _shown(text: str) -> str:
    if len(text) > DIFF_LINE_CHARS:
        return text[:DIFF_LINE_CHARS] + "\u2026"
    return text


def _opcodes(old: Sequence[str], new: Sequence[str]) -> tuple[list[_Opcode], bool]:
    """The diff's operations over the whole sources (as ``SequenceMatcher.get_opcodes``), and
    whether the middle was too long to compare."""
    most = min(len(old), len(new))
    head = 0
    while head < most and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < most - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    old_end, new_end = len(old) - tail, len(new) - tail
    codes: list[_Opcode] = []
    if head:
        codes.append(("equal", 0, head, 0, head))
    coarse = max(old_end, new_end) - head > DIFF_COMPARED_LINES
    if coarse:
        codes.append(("replace", head, old_end, head, new_end))
    elif old_end > head or new_end > head:
        matcher = SequenceMatcher(None, old[head:old_end], new[head:new_end])
        codes += [
            (tag, i1 + head, i2 + head, j1 + head, j2 + head)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        ]
    if tail:
        codes.append(("equal", old_end, len(old), new_end, len(new)))
    return codes, coarse


def _grouped(codes: list[_Opcode], context: int) -> Iterator[list[_Opcode]]:
    """The operations in hunks, each change with ``context`` equal lines around it at most
    (``SequenceMatcher.get_grouped_opcodes``' rule)."""
    if not any(tag != "equal" for tag, *_ in codes):
        return
    codes = list(codes)
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    group: list[_Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _lines(group: list[_Opcode], old: Sequence[str], new: Sequence[str]) -> Iterator[DiffLine]:
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            for offset in range(i2 - i1):
                yield DiffLine(
                    "context", i1 + offset + 1, j1 + offset + 1, _shown(old[i1 + offset])
                )
            continue
        for i in range(i1, i2):
            yield DiffLine("removed", i + 1, None, _shown(old[i]))
        for j in range(j1, j2):
            yield DiffLine("added", None, j + 1, _shown(new[j]))


def source_diff(old_source: str, new_source: str, *, context: int = DIFF_CONTEXT) -> SourceDiff:
    """The unified diff from ``old_source`` to ``new_source``, within the bounds of the module
    docstring."""
    old, new = source_lines(old_source), source_lines(new_source)
    if old == new:
        return SourceDiff((), 0, 0)
    codes, coarse = _opcodes(old, new)
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag != "equal")
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag != "equal")
    hunks: list[DiffHunk] = []
    shown_lines = shown_chars = 0
    cut = False
    for group in _grouped(codes, context):
        kept: list[DiffLine] = []
        for line in _lines(group, old, new):
            if shown_lines >= DIFF_LINES_SHOWN or shown_chars + len(line.text) > DIFF_CHARS_SHOWN:
                cut = True
                break
            kept.append(line)
            shown_lines += 1
            shown_chars += len(line.text)
        if kept:
            hunks.append(
                DiffHunk(
                    old_start=group[0][1] + 1,
                    old_count=sum(line.kind != "added" for line in kept),
                    new_start=group[0][3] + 1,
                    new_count=sum(line.kind != "removed" for line in kept),
                    lines=tuple(kept),
                )
            )
        if cut:
            break
    return SourceDiff(tuple(hunks), added, removed, cut=cut, coarse=coarse)


def _slot() -> trio.CapacityLimiter:
    """The one thread diffs take turns in, in this trio run (trio objects never cross runs)."""
    try:
        return _SLOT.get()
    except LookupError:
        slot = trio.CapacityLimiter(1)
        _SLOT.set(slot)
        return slot


_SLOT: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("source_diff_slot")


async def version_diff(
    old: tuple[FunctionVersion, str], new: tuple[FunctionVersion, str]
) -> VersionDiff:
    """What making the version ``new`` active changes from ``old``, each as
    ``version_source`` answers it (for a rollback's confirmation: the active version, then the
    one to activate). Call it after the transaction that read them: the diff takes up to tens
    of milliseconds of CPU (it runs in a thread, one diff at a time), and no transaction should
    wait for it."""
    diff = await trio.to_thread.run_sync(source_diff, old[1], new[1], limiter=_slot())
    return VersionDiff(old[0], new[0], diff)
