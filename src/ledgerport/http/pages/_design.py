"""The design every page of the application host shares, beyond its templates: the static files
(the stylesheet with its design tokens, the product mark that is also the favicon, the copy
button's script) served under a content-hashed name, times in words, stars, scopes in plain
words, and listing descriptions in a safe subset of Markdown.

Everything here is pure: the page handlers and the templates call it, and the unit tests check
it without a server.
"""

from __future__ import annotations

import hashlib
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from ledgerport import catalog

STATIC_DIR = Path(__file__).resolve().parent / "static"
ASSET_CACHE_CONTROL = "public, max-age=31536000, immutable"
"""A design file's name holds its content's hash, so a browser may keep it for a year."""
_CONTENT_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".js": "text/javascript; charset=utf-8",
}
DESIGN_FILES = ("ledgerport.css", "mark.svg", "copy.js", "live.js")
"""The design's static files: the stylesheet, the product mark (the favicon too), the copy
button's script (a page that shows a secret once offers to copy it; the page works without)
and the live rows' script (the webhook and function pages add what ends to their tables as it
ends; the pages are whole without it)."""


@dataclass(frozen=True)
class DesignFile:
    """One static file of the design, as served: ``/assets/<stem>.<hash><suffix>``."""

    name: str
    data: bytes
    content_type: str
    digest: str

    @property
    def served_name(self) -> str:
        stem, dot, suffix = self.name.rpartition(".")
        return f"{stem}.{self.digest}{dot}{suffix}"

    @property
    def url(self) -> str:
        return f"/assets/{self.served_name}"


@cache
def design_files() -> dict[str, DesignFile]:
    """The design's files by their plain name, read once; each name's hash is the first 12
    hex digits of its content's SHA-256."""
    files = {}
    for name in DESIGN_FILES:
        data = (STATIC_DIR / name).read_bytes()
        content_type = _CONTENT_TYPES[Path(name).suffix]
        files[name] = DesignFile(name, data, content_type, hashlib.sha256(data).hexdigest()[:12])
    return files


def asset_url(name: str) -> str:
    """The URL a page links the design file ``name`` with (``ledgerport.css``, ``mark.svg``)."""
    return design_files()[name].url


def served_file(served_name: str) -> DesignFile | None:
    """The design file served as ``served_name``, or None: a name whose hash is not the current
    content's is not found, so a year-long cache never keeps an old file under a new name."""
    for file in design_files().values():
        if file.served_name == served_name:
            return file
    return None


# --- Times ------------------------------------------------------------------------------------

_UNITS = (
    ("year", 365 * 86400),
    ("month", 30 * 86400),
    ("day", 86400),
    ("hour", 3600),
    ("minute", 60),
)
_THRESHOLDS = {"minute": 45 * 60, "hour": 22 * 3600, "day": 26 * 86400, "month": 320 * 86400}
"""Below how many seconds a span is said in the next smaller unit (as people round: 50 minutes
is "an hour", 25 days "25 days")."""


def relative_time(then: float, now: float) -> str:
    """``then`` in words against ``now``: "just now", "3 minutes ago", "in 2 hours"."""
    seconds = now - then
    span = abs(seconds)
    if span < 45:
        return "just now"
    words = ""
    for index, (unit, size) in enumerate(_UNITS):
        smaller = _UNITS[index + 1][0] if index + 1 < len(_UNITS) else None
        if smaller is not None and span < _THRESHOLDS[smaller]:
            continue
        count = max(1, math.floor(span / size + 0.5))
        words = f"{count} {unit}{'' if count == 1 else 's'}"
        break
    return f"{words} ago" if seconds > 0 else f"in {words}"


_ISO = "%Y-%m-%dT%H:%M:%SZ"
_EXACT = "%-d %b %Y, %H:%M:%S UTC"


def iso_instant(moment: float) -> str:
    """A ``<time datetime>`` value: UTC, to the second, ``Z``."""
    return datetime.fromtimestamp(moment, UTC).strftime(_ISO)


def exact_time(moment: float) -> str:
    """The exact time a person reads on hover: ``22 Sep 2026, 10:04:05 UTC``."""
    return datetime.fromtimestamp(moment, UTC).strftime(_EXACT)


def time_element(moment: float | None, now: float) -> Markup:
    """``moment`` as a ``<time>`` element: words relative to ``now``, the machine-readable
    instant in ``datetime`` and the exact time in its title; nothing for None."""
    if moment is None:
        return Markup("")
    # Made without escaping: digits, letters, spaces and punctuation that need none (a page
    # of deliveries or attempts has a hundred of these).
    at = datetime.fromtimestamp(moment, UTC)
    return Markup(
        f'<time datetime="{at.strftime(_ISO)}" title="{at.strftime(_EXACT)}">'
        f"{relative_time(moment, now)}</time>"
    )


# --- Ratings and scopes -----------------------------------------------------------------------


def stars_label(stars: float) -> str:
    """What a screen reader says of a rating: "4 out of 5 stars", "4.5 out of 5 stars"."""
    rounded = round(stars, 1)
    shown = f"{rounded:.1f}".removesuffix(".0")
    return f"{shown} out of 5 stars"


def stars_element(stars: float) -> Markup:
    """A rating as five stars drawn in text (filled to the nearest whole star), read as
    ``stars_label`` by assistive technology."""
    filled = min(5, max(0, math.floor(stars + 0.5)))
    return Markup('<span class="stars" role="img" aria-label="{0}">{1}</span>').format(
        stars_label(stars), Markup("★" * filled + "☆" * (5 - filled))
    )


@dataclass(frozen=True)
class ScopeWords:
    """A scope as the consent, device and install pages show it."""

    scope: str
    words: str
    writes: bool
    """Whether it lets the app change the books, not only read them."""


def described_scopes(scopes: Sequence[str]) -> list[ScopeWords]:
    """Each scope with its plain-language description and whether it writes."""
    return [
        ScopeWords(scope, catalog.SCOPE_DESCRIPTIONS.get(scope, scope), scope.endswith(":write"))
        for scope in scopes
    ]


def kind_words(kind: str) -> str:
    """A record kind or an event's noun as a person reads it: ``purchase_return`` is
    "purchase return"."""
    return kind.replace("_", " ").replace("-", " ")


def with_article(noun: str) -> str:
    """``noun`` in words with its indefinite article: "an invoice", "a payment", "an account",
    "a journal entry"."""
    words = kind_words(noun)
    article = "an" if words[:1].lower() in "aeiou" and words else "a"
    return f"{article} {words}"


def record_words(kind: str, document: Mapping[str, Any] | None) -> str:
    """The record an extension is shown for, as its page names it: its kind and its number
    ("Invoice INV-0007") or its name ("Customer Acme Ltd"); a record the business does not
    hold is named by its kind only ("An invoice that is not in this business"), never by its
    id alone."""
    title = kind_words(kind).capitalize()
    if document is None:
        return f"{with_article(kind).capitalize()} that is not in this business"
    for field in ("number", "displayName", "name", "code"):
        value = document.get(field)
        if isinstance(value, str) and value.strip():
            return f"{title} {value.strip()}"
    return f"{title} created {str(document.get('createdAt', ''))[:10]}".rstrip()


# --- Markdown ---------------------------------------------------------------------------------

HEADING_SHIFT = 2
"""A description's ``#`` is the page's third level: the page has its title and sections."""


def _https_only(url: str) -> bool:
    return url.strip().lower().startswith("https://")


def _link_open(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener")
    return str(self.renderToken(tokens, idx, options, env))


def _image_as_text(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    return html.escape(tokens[idx].content)


@cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = _https_only  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image_as_text)
    return md


def render_markdown(text: str) -> Markup:
    """A listing's description as HTML: CommonMark's paragraphs, lists, emphasis, code and
    headings (one level per ``#``, starting at h3). Raw HTML is shown as text, a link is a link
    only to an ``https:`` address and gets ``rel="nofollow noopener"``, an image is its alt
    text."""
    md = _markdown()
    tokens = md.parse(text)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            level = min(6, int(token.tag[1]) + HEADING_SHIFT)
            token.tag = f"h{level}"
    return Markup(md.renderer.render(tokens, md.options, {}))
