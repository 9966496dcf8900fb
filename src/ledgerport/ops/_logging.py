"""Logging with redaction: raw tokens, secrets and passwords never reach a log line."""

from __future__ import annotations

import logging
import re
import sys

_PATTERNS = (
    # ledgerport's own prefixed tokens and webhook secrets
    (re.compile(r"\b(lp_[a-z]+_)[A-Za-z0-9_\-]{8,}"), r"\1[REDACTED]"),
    (re.compile(r"\b(whsec_)[A-Za-z0-9_\-]{8,}"), r"\1[REDACTED]"),
    # Authorization header values and key=value secrets in query strings or forms
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]+"), r"\1 [REDACTED]"),
    (
        re.compile(
            r"(?i)\b(password|client_secret|code|code_verifier|refresh_token|access_token|"
            r"token|subject_token|device_code|user_code)=([^&\s\"']+)"
        ),
        r"\1=[REDACTED]",
    ),
    # JWTs (session tokens)
    (re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*"), "[REDACTED JWT]"),
)


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites each record's final message with secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if record.exc_info and record.exc_text is None:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
