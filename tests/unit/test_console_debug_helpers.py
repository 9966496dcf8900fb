"""What the console's debugging pages compute without a server: the excerpt around a stack
frame's line with the mark under its column (tabs and characters beyond the BMP included, a
long line shown around the column), the excerpts of a stack within their bounds, the frames'
links into the version's source and its pages, log lines' times, the recovery form's times, the
deliveries' query strings, a payload pretty-printed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledgerport.errors import InvalidInput
from ledgerport.http.pages import (
    EXCERPT_BUDGET,
    EXCERPT_FRAMES,
    SOURCE_PAGE_LINES,
    excerpt,
    form_time,
    line_href,
    parse_form_time,
    pretty_payload,
    query_string,
    shown_log_lines,
    shown_stack,
    url_label,
)


def test_an_excerpt_marks_the_line_and_the_column_among_the_lines_around_it() -> None:
    lines = ["one", "two", "three", "\tfour()", "five", "six", "seven"]

    shown = excerpt(lines, 4, 2)

    assert shown is not None
    assert [(line.number, line.text, line.marked) for line in shown.lines] == [
        (2, "two", False),
        (3, "three", False),
        (4, "    four()", True),
        (5, "five", False),
        (6, "six", False),
    ]
    # Column 2 is the "f" after the tab, which shows as four columns.
    assert shown.caret == "    ^"


def test_an_excerpt_stops_at_the_sources_ends_and_names_no_line_past_them() -> None:
    lines = ["first", "second"]

    start = excerpt(lines, 1, 1)
    assert start is not None
    assert [line.number for line in start.lines] == [1, 2]
    assert start.caret == "^"
    assert excerpt(lines, 3, 1) is None
    assert excerpt(lines, 0, 1) is None


def test_an_excerpts_column_counts_utf16_code_units_as_v8_does() -> None:
    # "😀" is two UTF-16 code units: column 5 is the "x" after it, the fourth character.
    shown = excerpt(["a😀bx"], 1, 5)

    assert shown is not None
    assert shown.caret == "   ^"


def test_frames_link_into_the_versions_source_and_show_the_lines_around() -> None:
    stack = "Error: no\n    at handler (function.js:2:3)\n    at function.js:40:1\n    at x (y)"

    shown = shown_stack(stack, source="a\nbcd\ne", version_href="/v/2")
    unkept = shown_stack(stack, source=None, version_href=None)

    assert [frame.href for frame in shown] == ["/v/2#L2", "/v/2#L40", None]
    first = shown[0].excerpt
    assert first is not None
    assert [line.number for line in first.lines] == [1, 2, 3]
    assert first.caret == "  ^"
    assert shown[1].excerpt is None  # the source has no line 40
    assert [(frame.href, frame.excerpt) for frame in unkept] == [(None, None)] * 3


def test_an_excerpt_of_a_long_line_shows_its_width_around_the_column_on_every_line() -> None:
    long = "".join(chr(ord("a") + n % 26) for n in range(10_000))
    lines = ["short", long, "\t" + long]

    shown = excerpt(lines, 2, 5001, width=20)

    assert shown is not None
    # Index 5000 is the column; the window is the 20 characters from 10 before it.
    assert [line.text for line in shown.lines] == [
        "\u2026",
        "\u2026" + long[4990:5010] + "\u2026",
        "\u2026" + long[4989:5009] + "\u2026",
    ]
    assert shown.caret == " " * 11 + "^"
    assert shown.size == sum(len(line.text) for line in shown.lines) + 12
    # Near the line's end the window ends with it; near its start it starts with it.
    end = excerpt([long], 1, 10_000, width=20)
    start = excerpt([long], 1, 3, width=20)
    assert end is not None
    assert start is not None
    assert end.lines[0].text == "\u2026" + long[-20:]
    assert end.caret == " " * 20 + "^"
    assert start.lines[0].text == long[:20] + "\u2026"
    assert start.caret == "  ^"


def test_a_stack_shows_ten_positions_with_their_lines_each_once_within_the_budget() -> None:
    frames = [f"    at f (function.js:1:{n % 30 + 1})" for n in range(240)]
    stack = "\n".join(["Error: deep", *frames])

    shown = shown_stack(stack, source="x" * 300_000, version_href="/v/1")

    with_lines = [frame for frame in shown if frame.excerpt is not None]
    assert len(shown) == 240
    assert all(frame.href == "/v/1#L1" for frame in shown)
    assert len(with_lines) == EXCERPT_FRAMES
    assert len({(f.frame.line, f.frame.column) for f in with_lines}) == EXCERPT_FRAMES
    assert sum(frame.excerpt.size for frame in with_lines if frame.excerpt) <= EXCERPT_BUDGET


def test_the_excerpts_stop_where_the_budget_ends() -> None:
    tabs = "\t" * 300_000  # each shown as four spaces: an excerpt of 160 is 640 and more
    lines = "\n".join([tabs] * 5)
    stack = "\n".join(["Error: x", *[f"    at f (function.js:3:{n})" for n in range(1, 11)]])

    shown = shown_stack(stack, source=lines, version_href=None)

    sizes = [frame.excerpt.size for frame in shown if frame.excerpt is not None]
    assert 0 < len(sizes) < EXCERPT_FRAMES
    assert sum(sizes) <= EXCERPT_BUDGET
    assert all(frame.excerpt is None for frame in shown[len(sizes) :])


def test_a_frame_links_to_the_page_of_the_source_that_shows_its_line() -> None:
    assert line_href("/v/1", 1) == "/v/1#L1"
    assert line_href("/v/1", SOURCE_PAGE_LINES) == f"/v/1#L{SOURCE_PAGE_LINES}"
    after = SOURCE_PAGE_LINES + 1
    assert line_href("/v/1", after) == f"/v/1?from={after}#L{after}"
    assert line_href("/v/1", 3 * SOURCE_PAGE_LINES + 7) == (
        f"/v/1?from={3 * SOURCE_PAGE_LINES + 1}#L{3 * SOURCE_PAGE_LINES + 7}"
    )


def test_log_lines_show_their_exact_time_and_how_long_after_the_start() -> None:
    start = datetime(2026, 9, 22, 8, 0, tzinfo=UTC).timestamp()

    shown = shown_log_lines([(start + 0.012, "one"), (None, "two")], start)
    no_start = shown_log_lines([(start, "three")], None)

    assert shown[0].message == "one"
    assert shown[0].instant == "2026-09-22T08:00:00.012Z"
    assert shown[0].exact == "22 Sep 2026, 08:00:00.012 UTC"
    assert shown[0].offset == "+12 ms"
    assert (shown[1].instant, shown[1].offset) == (None, None)
    assert no_start[0].offset is None


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-09-22T08:00", datetime(2026, 9, 22, 8, 0, tzinfo=UTC)),
        ("2026-09-22T08:00:30", datetime(2026, 9, 22, 8, 0, 30, tzinfo=UTC)),
        (" 2026-09-22T08:00 ", datetime(2026, 9, 22, 8, 0, tzinfo=UTC)),
        ("2026-09-22T10:00:00+02:00", datetime(2026, 9, 22, 8, 0, tzinfo=UTC)),
        ("2026-09-22T08:00:00Z", datetime(2026, 9, 22, 8, 0, tzinfo=UTC)),
    ],
)
def test_the_recovery_forms_time_is_read_in_utc(text: str, moment: datetime) -> None:
    assert parse_form_time(text) == moment.timestamp()


@pytest.mark.parametrize(
    "text", ["", "yesterday", "2026-09-22 08:00", "2026-13-01T08:00", "2026-09-22T08:00:00 CEST"]
)
def test_the_recovery_form_refuses_what_is_no_time(text: str) -> None:
    with pytest.raises(InvalidInput, match="since must be a date and time in UTC"):
        parse_form_time(text)


def test_a_form_time_is_the_minute_a_datetime_local_field_holds() -> None:
    moment = datetime(2026, 9, 22, 8, 5, 59, tzinfo=UTC).timestamp()

    assert form_time(moment) == "2026-09-22T08:05"
    assert parse_form_time(form_time(moment)) == moment - 59


def test_query_strings_keep_only_the_values_given() -> None:
    assert query_string({"status": "failed", "type": None, "eventId": ""}) == "?status=failed"
    assert query_string({"status": None}) == ""
    assert query_string({"eventId": "evt_1&x=<y>"}) == "?eventId=evt_1%26x%3D%3Cy%3E"


def test_a_payload_is_pretty_printed_with_its_characters_and_kept_when_not_json() -> None:
    assert pretty_payload('{"name":"Caf\\u00e9","n":[1]}') == (
        '{\n  "name": "Café",\n  "n": [\n    1\n  ]\n}'
    )
    assert pretty_payload("not json") == "not json"


def test_a_webhook_is_named_by_its_host_and_path() -> None:
    assert url_label("https://hooks.example.com:8443/in/ledgerport?x=1") == (
        "hooks.example.com:8443/in/ledgerport"
    )
