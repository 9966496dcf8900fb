"""The pages' design as pure functions: the design files under hashed names, times in words,
stars, the Markdown subset of listing descriptions, the notice table, the problem pages' words
and the pages' Content-Security-Policy."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledgerport import access, apps, auth, catalog
from ledgerport.errors import InvalidInput
from ledgerport.http import ANSWERS, answer_for
from ledgerport.http.pages import (
    DESIGN_FILES,
    NOTICES,
    asset_url,
    described_scopes,
    notice_of,
    notice_text,
    page_csp,
    relative_time,
    render_markdown,
    served_file,
    stars_element,
    stars_label,
    time_element,
)

STATIC_DIR = (
    Path(__file__).resolve().parents[2] / "src" / "ledgerport" / "http" / "pages" / "static"
)
NOW = datetime(2026, 9, 22, 10, 0, 0, tzinfo=UTC).timestamp()


# --- Design files -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", DESIGN_FILES)
def test_a_design_file_is_served_under_its_content_hash(name: str) -> None:
    data = (STATIC_DIR / name).read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:12]
    stem, suffix = name.rsplit(".", 1)
    url = asset_url(name)
    assert url == f"/assets/{stem}.{digest}.{suffix}"
    found = served_file(url.removeprefix("/assets/"))
    assert found is not None
    assert found.data == data


@pytest.mark.parametrize("name", ["ledgerport.css", "ledgerport.000000000000.css", "mark.svg"])
def test_a_name_without_the_current_hash_is_not_served(name: str) -> None:
    assert served_file(name) is None


def test_the_stylesheet_has_design_tokens_and_no_import_from_elsewhere() -> None:
    css = (STATIC_DIR / "ledgerport.css").read_text()
    for token in ("--lp-color-brand", "--lp-text-2xl", "--lp-space-4", "--lp-radius"):
        assert f"{token}:" in css
    assert "@import" not in css
    assert "url(" not in css  # nothing loaded from anywhere, not even this origin


# --- Times and stars --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "just now"),
        (44, "just now"),
        (45, "1 minute ago"),
        (180, "3 minutes ago"),
        (44 * 60, "44 minutes ago"),
        (45 * 60, "1 hour ago"),
        (5 * 3600, "5 hours ago"),
        (22 * 3600, "1 day ago"),
        (3 * 86400, "3 days ago"),
        (26 * 86400, "1 month ago"),
        (400 * 86400, "1 year ago"),
        (-180, "in 3 minutes"),
        (-2 * 3600, "in 2 hours"),
    ],
)
def test_relative_time_in_words(seconds: float, words: str) -> None:
    assert relative_time(NOW - seconds, NOW) == words


def test_a_time_element_carries_the_exact_time_for_machines_and_on_hover() -> None:
    element = str(time_element(NOW - 180, NOW))
    assert element == (
        '<time datetime="2026-09-22T09:57:00Z" title="22 Sep 2026, 09:57:00 UTC">'
        "3 minutes ago</time>"
    )
    assert str(time_element(None, NOW)) == ""


@pytest.mark.parametrize(
    ("stars", "label", "drawn"),
    [
        (4, "4 out of 5 stars", "★★★★☆"),
        (4.5, "4.5 out of 5 stars", "★★★★★"),
        (1.0, "1 out of 5 stars", "★☆☆☆☆"),
    ],
)
def test_stars_are_read_as_words(stars: float, label: str, drawn: str) -> None:
    assert stars_label(stars) == label
    element = str(stars_element(stars))
    assert f'role="img" aria-label="{label}"' in element
    assert drawn in element


def test_scopes_in_plain_words_mark_write_access() -> None:
    read, write = described_scopes(["invoices:read", "invoices:write"])
    assert (read.words, read.writes) == (catalog.SCOPE_DESCRIPTIONS["invoices:read"], False)
    assert (write.words, write.writes) == (catalog.SCOPE_DESCRIPTIONS["invoices:write"], True)


# --- Markdown ---------------------------------------------------------------------------------


def test_markdown_keeps_paragraphs_lists_and_emphasis() -> None:
    html = str(render_markdown("Keeps **books** in step.\n\n- invoices\n- payments\n\n1. one"))
    assert "<p>Keeps <strong>books</strong> in step.</p>" in html
    assert "<ul>\n<li>invoices</li>\n<li>payments</li>\n</ul>" in html
    assert "<ol>\n<li>one</li>\n</ol>" in html


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        "before <script>alert(1)</script> after",
        '<img src="x" onerror="alert(1)">',
        "<iframe src=https://evil.example></iframe>",
        '<a href="https://evil.example">raw</a>',
        "<style>body{display:none}</style>",
    ],
)
def test_markdown_shows_raw_html_as_text(source: str) -> None:
    html = str(render_markdown(source))
    assert not re.search(r"<(script|img|iframe|a|style)\b", html)
    assert "&lt;" in html


@pytest.mark.parametrize(
    "link",
    [
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<b>x</b>",
        "vbscript:msgbox(1)",
        "http://plain.example/",
        "/relative/path",
        "mailto:a@example.com",
    ],
)
def test_markdown_links_only_to_https(link: str) -> None:
    html = str(render_markdown(f"[click]({link}) and <{link}>"))
    assert "<a " not in html


def test_an_https_link_is_nofollow_noopener() -> None:
    html = str(render_markdown("[docs](https://books.example/docs) <https://books.example/>"))
    assert '<a href="https://books.example/docs" rel="nofollow noopener">docs</a>' in html
    assert '<a href="https://books.example/" rel="nofollow noopener">' in html


def test_markdown_images_are_their_alt_text_only() -> None:
    html = str(render_markdown('![A chart <b>x</b>](https://books.example/chart.png "t")'))
    assert "<img" not in html
    assert "A chart &lt;b&gt;x&lt;/b&gt;" in html


def test_markdown_headings_start_below_the_page_headings() -> None:
    html = str(render_markdown("# Features\n\n## More\n\n###### Deep"))
    assert "<h3>Features</h3>" in html
    assert "<h4>More</h4>" in html
    assert "<h6>Deep</h6>" in html
    assert "<h1" not in html
    assert "<h2" not in html


# --- The notice table -------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["", "unknown", "Rating-Saved", "problem:", "problem:nope.Error"])
def test_an_unknown_notice_code_shows_nothing(code: str) -> None:
    assert notice_text(code, ("anything",)) is None


def test_a_known_notice_is_its_words_filled_in() -> None:
    shown = notice_text("installed", ("Books Sync", "Acme"))
    assert shown is not None
    assert (shown.text, shown.tone) == ("Books Sync is installed in Acme", "success")
    expired = notice_text("form-expired")
    assert expired is not None
    assert expired.tone == "problem"


def test_a_notice_whose_values_do_not_fit_shows_nothing() -> None:
    assert notice_text("installed", ("only one",)) is None
    assert notice_text("problem:ledgerport.errors.InvalidInput", ()) is None


@pytest.mark.parametrize("code", sorted(NOTICES))
def test_every_notice_reads_without_placeholders(code: str) -> None:
    holes = len(re.findall(r"\{\d\}", NOTICES[code].words))
    shown = notice_text(code, tuple(f"v{n}" for n in range(holes)))
    assert shown is not None
    assert "{" not in shown.text


@pytest.mark.parametrize(
    "error",
    [
        InvalidInput(["stars must be a whole number from 1 to 5"]),
        access.BusinessNotOffered(),
        apps.RatingNotAllowed(),
        apps.RevisionInWrongState("rev_1", "submitted", "submitted"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_a_problem_notice_is_the_words_of_its_row(error: Exception) -> None:
    answer = answer_for(error)
    code, *values = notice_of(error, answer)
    shown = notice_text(code, values)
    assert shown is not None
    assert shown.tone == "problem"
    assert shown.text == " ".join(w for w in answer.page_words(error) if w)


def test_problem_pages_keep_the_consent_messages_word_for_word_beside_plain_words() -> None:
    for error in (
        auth.UnknownClient(),
        auth.RedirectUriMismatch(),
        auth.ScopesNotPermitted(),
        auth.PkceRequired(),
        auth.TargetRefused(),
        auth.RequestExpired(),
        apps.AppNotReviewed(),
    ):
        message, explanation = answer_for(error).page_words(error)
        assert message in catalog.CONSENT_MESSAGES
        assert explanation
        assert "start again" in explanation or "sandbox" in explanation


def test_problem_page_words_name_no_internal_id() -> None:
    ids = re.compile(r"\b(app|bus|usr|ins|rev|dlv|ast)_[0-9a-f]{6,}")
    for error in (
        apps.AppNotFound("app_0123456789abcdef01234567"),
        apps.NotAMember("usr_0123456789abcdef01234567", "bus_0123456789abcdef01234567"),
        auth.NoActiveInstallation("app_0123456789abcdef01234567", "bus_0123456789abcdef0123"),
        apps.RevisionInWrongState("rev_0123456789abcdef01234567", "submitted", "submitted"),
    ):
        message, explanation = answer_for(error).page_words(error)
        assert not ids.search(message), message
        assert explanation is None


def test_every_row_with_page_words_fills_them_from_its_params() -> None:
    for cls, rule in ANSWERS.items():
        page = getattr(rule, "page", None)
        if page:
            assert "{" not in re.sub(r"\{\d\}", "", page), cls


# --- Content-Security-Policy ------------------------------------------------------------------


def test_the_page_policy_allows_the_stylesheet_and_images_from_this_origin_only() -> None:
    policy = dict(part.strip().split(" ", 1) for part in page_csp().split(";"))
    assert policy["style-src"] == "'self'"
    assert policy["img-src"] == "'self'"
    assert policy["default-src"] == "'none'"
    assert "script-src" not in policy
    assert "unsafe-inline" not in page_csp()


def test_a_framing_page_adds_its_app_and_the_bridge_only() -> None:
    policy = dict(
        part.strip().split(" ", 1) for part in page_csp(frame_src="https://app.example").split(";")
    )
    assert policy["frame-src"] == "https://app.example"
    assert policy["script-src"] == "'self'"
    assert policy["connect-src"] == "'self'"
    assert policy["style-src"] == "'self'"
