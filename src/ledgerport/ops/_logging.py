"""Logging that is safe to feed request data: secrets redacted, one record one line.

Raw tokens, secrets and passwords never reach a log line, and neither do control characters: a
request path, header or exception message holding a newline (or NUL, a C1 control, U+2028) would
otherwise split its record or forge a line that looks like the service's own.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import NamedTuple


class Redaction(NamedTuple):
    """A pattern ``redact`` masks, its replacement, and what it cannot match without."""

    pattern: re.Pattern[str]
    replacement: str
    needs: str
    """A regular expression that finds something in every text the pattern matches: one search
    for all of them tells that a text has nothing to redact."""


REDACTIONS = (
    # ledgerport's own prefixed tokens and webhook secrets
    Redaction(re.compile(r"\b(lp_[a-z]+_)[A-Za-z0-9_\-]{8,}"), r"\1[REDACTED]", "lp_"),
    # (base64url for the stripe scheme's secrets, standard base64 for Standard Webhooks' secrets
    # and Ed25519 keys)
    Redaction(re.compile(r"\b(whsec_|whsk_)[A-Za-z0-9_\-+/=]{8,}"), r"\1[REDACTED]", "wh"),
    # Authorization header values and key=value secrets in query strings or forms
    Redaction(
        re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]+"),
        r"\1 [REDACTED]",
        "(?i:bearer|basic)",
    ),
    Redaction(
        re.compile(
            r"(?i)\b(password|client_secret|code|code_verifier|refresh_token|access_token|"
            r"token|subject_token|device_code|user_code)=([^&\s\"']+)"
        ),
        r"\1=[REDACTED]",
        "=",
    ),
    # JWTs (session tokens)
    Redaction(
        re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*"),
        "[REDACTED JWT]",
        "eyJ",
    ),
)
"""What ``redact`` masks, applied in this order."""

# C0, DEL, C1 and the Unicode line and paragraph separators: everything a terminal or a
# line-based reader (str.splitlines among them) may take as a line break or a command.
CONTROL_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))} | {
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
"""What ``escape_controls`` writes for each control character (a ``str.translate`` table)."""


_MAYBE_SECRET = re.compile("|".join(redaction.needs for redaction in REDACTIONS))
"""A text without any of what ``REDACTIONS`` need has nothing to redact, which is what nearly
every request's method, path and headers are. One search for these takes a tenth of the time
of the patterns themselves."""
_ANY_CONTROL = re.compile("[" + "".join(re.escape(chr(code)) for code in CONTROL_ESCAPES) + "]")


def redact(text: str) -> str:
    if _MAYBE_SECRET.search(text) is None:
        return text
    for redaction in REDACTIONS:
        text = redaction.pattern.sub(redaction.replacement, text)
    return text


def escape_controls(text: str) -> str:
    r"""``text`` with its control characters written as escapes (``\n``, ``\x00``, ``\u2028``).

    Backslashes are left as they are: the point is that no input can end a line or drive a
    terminal, and the line stays readable.
    """
    return text if _ANY_CONTROL.search(text) is None else text.translate(CONTROL_ESCAPES)


def loggable(text: str) -> str:
    """``text`` redacted, then escaped: the order matters, since an escape such as ``\\n``
    glued to a token would hide the token from the patterns' word boundaries."""
    return escape_controls(redact(text))


class RedactingFilter(logging.Filter):
    """Rewrites each record's final message with secrets masked and control characters escaped.

    A traceback keeps its own line breaks, but the messages of the exceptions in it are escaped
    too: they can carry request data.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = loggable(message)
        if record.exc_info and record.exc_text is None:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            if record.exc_info and record.exc_info[1] is not None:
                for raw in _exception_messages(record.exc_info[1]):
                    record.exc_text = record.exc_text.replace(raw, loggable(raw))
            record.exc_text = redact(record.exc_text)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


def _exception_messages(error: BaseException) -> set[str]:
    """The non-empty messages and notes of ``error`` and of every exception chained or grouped
    in it, as the traceback prints them."""
    messages: set[str] = set()
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        try:
            messages.add(str(current))
        except Exception:  # a broken __str__: the traceback prints no message for it either
            pass
        messages.update(note for note in getattr(current, "__notes__", ()) if isinstance(note, str))
        pending.extend(
            inner
            for inner in (
                current.__cause__,
                current.__context__,
                *getattr(current, "exceptions", ()),
            )
            if inner is not None
        )
    messages.discard("")
    return messages


QUIET_LOGGERS = ("httpx", "httpcore", "hpack", "asyncio", "trio_asyncio")
"""Libraries whose INFO lines are not the service's to tell: httpx alone logged a line for every
webhook attempt, with its whole target URL (whose query may hold a receiver's secret)."""


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, and
    ``exception`` with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: int = logging.INFO, *, format: str = "text") -> None:
    """The process's one handler, on standard error: redacted, a record a line, as ``text`` or
    ``json``; the libraries of :data:`QUIET_LOGGERS` tell warnings and errors only."""
    handler = logging.StreamHandler(sys.stderr)
    if format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
