"""The diff of two versions' sources (``apps.source_diff``): hunks as ``diff -u`` makes them,
every line numbered as V8 numbers the source's lines, and bounded whatever the sources are: a
long changed stretch is not compared line by line, and what is shown is cut (and says so) past
its lines and characters."""

from __future__ import annotations

from difflib import unified_diff

from hypothesis import given
from hypothesis import strategies as st

from ledgerport import apps, catalog


def _patched(old: str, diff: apps.SourceDiff) -> list[str]:
    """``old``'s lines with the diff's hunks applied, each context and removed line checked
    against the line of ``old`` its number names."""
    lines = apps.source_lines(old)
    result: list[str] = []
    at = 0  # lines of ``old`` taken so far
    for hunk in diff.hunks:
        start = hunk.old_start - 1
        result += lines[at:start]
        at = start
        for line in hunk.lines:
            if line.kind == "added":
                result.append(line.text)
                continue
            assert line.old_line == at + 1
            assert line.text == lines[at]
            at += 1
            if line.kind == "context":
                result.append(line.text)
    return result + lines[at:]


def _numbered(diff: apps.SourceDiff) -> None:
    """Each hunk's counts are its lines', and its lines are numbered on from its starts."""
    for hunk in diff.hunks:
        old = [line.old_line for line in hunk.lines if line.kind != "added"]
        new = [line.new_line for line in hunk.lines if line.kind != "removed"]
        assert (len(old), len(new)) == (hunk.old_count, hunk.new_count)
        assert old == list(range(hunk.old_start, hunk.old_start + len(old)))
        assert new == list(range(hunk.new_start, hunk.new_start + len(new)))


_LINES = st.lists(st.sampled_from(["}", "", "  return x;", "let a = 1;", "a++;", "// é"]))


@given(_LINES, _LINES)
def test_applying_the_diff_to_the_old_source_makes_the_new_one(
    old_lines: list[str], new_lines: list[str]
) -> None:
    old, new = "\n".join(old_lines), "\n".join(new_lines)
    diff = apps.source_diff(old, new)
    assert _patched(old, diff) == apps.source_lines(new)
    _numbered(diff)
    assert diff.identical == (old == new)
    assert (diff.cut, diff.coarse) == (False, False)
    assert diff.added == sum(line.kind == "added" for h in diff.hunks for line in h.lines)
    assert diff.removed == sum(line.kind == "removed" for h in diff.hunks for line in h.lines)


def test_a_small_change_is_the_hunk_diff_u_makes() -> None:
    old = "".join(f"line {n}\n" for n in range(1, 21))
    new = old.replace("line 10\n", "line ten\nline ten and a half\n").replace("line 20\n", "")
    diff = apps.source_diff(old, new)
    expected = "".join(
        line if line.endswith("\n") else line + "\n"
        for line in unified_diff(
            apps.source_lines(old), apps.source_lines(new), "v2", "v1", lineterm=""
        )
    )
    assert diff.unified("v2", "v1") == expected
    assert [hunk.header for hunk in diff.hunks] == ["@@ -7,7 +7,8 @@", "@@ -17,5 +18,4 @@"]
    assert (diff.added, diff.removed) == (2, 2)
    first = diff.hunks[0].lines
    assert [(line.kind, line.old_line, line.new_line, line.text) for line in first[2:6]] == [
        ("context", 9, 9, "line 9"),
        ("removed", 10, None, "line 10"),
        ("added", None, 10, "line ten"),
        ("added", None, 11, "line ten and a half"),
    ]


def test_identical_sources_have_no_hunk() -> None:
    diff = apps.source_diff("a\nb\n", "a\nb\n")
    assert diff == apps.SourceDiff((), 0, 0)
    assert diff.identical
    assert diff.unified("old", "new") == ""


def test_lines_are_numbered_as_v8_numbers_them() -> None:
    """A line separator (U+2028) ends a line, as V8 reads it: the change is on line 2."""
    diff = apps.source_diff("a\u2028b\nc", "a\u2028B\nc")
    (hunk,) = diff.hunks
    assert [(line.kind, line.old_line, line.new_line) for line in hunk.lines] == [
        ("context", 1, 1),
        ("removed", 2, None),
        ("added", None, 2),
        ("context", 3, 3),
    ]


def test_a_change_deep_in_a_long_source_is_compared_exactly() -> None:
    """What the sources begin and end with in common is set aside before comparing: a
    100,000-line source changed on one line is one exact hunk."""
    lines = [f"const v{n} = {n};" for n in range(1, 100_001)]
    old = "\n".join(lines)
    new = old.replace("const v50000 = 50000;", "const v50000 = 0;")
    diff = apps.source_diff(old, new)
    assert (diff.coarse, diff.cut) == (False, False)
    (hunk,) = diff.hunks
    assert hunk.header == "@@ -49997,7 +49997,7 @@"
    assert [line.text for line in hunk.lines if line.kind != "context"] == [
        "const v50000 = 50000;",
        "const v50000 = 0;",
    ]


def test_a_long_changed_stretch_is_shown_removed_then_added_whole() -> None:
    """Past DIFF_COMPARED_LINES lines of difference on a side, nothing is compared line by
    line (cost grows faster than the lines do): the stretch is removed, then added."""
    many = apps.DIFF_COMPARED_LINES + 1
    old = "\n".join(["head", *(f"old {n}" for n in range(many)), "tail"])
    new = "\n".join(["head", *(f"old {n}" if n % 2 else f"new {n}" for n in range(many)), "tail"])
    diff = apps.source_diff(old, new)
    assert (diff.coarse, diff.cut) == (True, True)
    assert (diff.added, diff.removed) == (many, many)
    (hunk,) = diff.hunks
    assert [line.kind for line in hunk.lines] == ["context"] + ["removed"] * (
        apps.DIFF_LINES_SHOWN - 1
    )
    within = apps.source_diff(
        "\n".join(["head", *(f"old {n}" for n in range(many - 1)), "tail"]),
        "\n".join(
            ["head", *(f"old {n}" if n % 2 else f"new {n}" for n in range(many - 1)), "tail"]
        ),
    )
    assert not within.coarse
    assert within.added == within.removed == apps.DIFF_COMPARED_LINES // 2


def test_a_huge_diff_is_cut_at_its_lines_and_says_so() -> None:
    """Two sources of the largest size with nothing in common: the diff shown stops at
    DIFF_LINES_SHOWN lines, counts every line, and its last hunk is consistent as cut."""
    size = catalog.FUNCTION_SOURCE_MAX_BYTES
    old = "a\n" * (size // 2)
    new = "b\n" * (size // 2)
    diff = apps.source_diff(old, new)
    shown = [line for hunk in diff.hunks for line in hunk.lines]
    assert (diff.cut, diff.coarse) == (True, True)
    assert len(shown) == apps.DIFF_LINES_SHOWN
    assert (diff.added, diff.removed) == (size // 2, size // 2)
    _numbered(diff)


def test_long_lines_are_cut_and_the_diff_stops_at_its_characters() -> None:
    """A line of 256 KiB shows its first DIFF_LINE_CHARS characters and an ellipsis; the
    characters shown in all stop at DIFF_CHARS_SHOWN."""
    wide = "x" * (256 * 1024)
    diff = apps.source_diff(wide, wide + "y")
    (hunk,) = diff.hunks
    assert [line.text for line in hunk.lines] == ["x" * apps.DIFF_LINE_CHARS + "\u2026"] * 2
    assert not diff.cut
    rows = apps.DIFF_CHARS_SHOWN // apps.DIFF_LINE_CHARS + 10
    old = "\n".join(f"{n:08}" + "o" * 300 for n in range(rows))
    new = "\n".join(f"{n:08}" + "n" * 300 for n in range(rows))
    cut = apps.source_diff(old, new)
    shown = sum(len(line.text) for hunk in cut.hunks for line in hunk.lines)
    assert cut.cut
    assert apps.DIFF_CHARS_SHOWN - apps.DIFF_LINE_CHARS - 1 < shown <= apps.DIFF_CHARS_SHOWN
    _numbered(cut)
