"""schemathesis hooks of the OpenAPI contract test (loaded through ``SCHEMATHESIS_HOOKS``).

Generated Idempotency-Key values repeat across requests (the run is derandomized, and short
strings are few), and the same key with another request is rightly IDEMPOTENCY_KEY_REUSED (400).
Left as generated, every write would have to be allowed a 400 on valid data, which hides a 400
that is wrong. So a key of the documented form is replaced, just before it is sent, by a key no
other request used; a key outside the form (the negative cases) is sent as generated.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import schemathesis

HEADER = "idempotency-key"
DOCUMENTED_FORM = re.compile(r"[\x20-\x7e]{1,255}")


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    headers = case.headers
    if not headers:
        return
    for name, value in list(headers.items()):
        if name.lower() == HEADER and isinstance(value, str) and DOCUMENTED_FORM.fullmatch(value):
            headers[name] = f"contract-run-{uuid.uuid4()}"
