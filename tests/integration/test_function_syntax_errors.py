"""An upload's syntax error through the developer API, on both stores: FUNCTION_SOURCE_NO_HANDLER
at the line and column of the source as it was sent, in V8's words, carried by the message and
its params (partner-api.md: Error envelopes; docs/functions.md: Uploading)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from .data_api import owner_api
from .webhook_world import console_for

TIMEOUT = 60

SYNTAX_ERRORS = {
    # V8 stops at the argument it read last.
    "missing bracket": (
        "export async function handler(event, context) {\n"
        '  context.log("total", event.data.total;\n'
        "}\n",
        (2, 35, "missing ) after argument list"),
    ),
    "missing closing brace": (
        "export function handler(event) {\n  if (event.test) {\n    return 1;\n}\n",
        (5, 1, "Unexpected end of input"),
    ),
    "extra closing brace": (
        "export function handler(event) {\n  return 1;\n}\n}\n",
        (4, 1, "Unexpected token '}'"),
    ),
    "unterminated string": (
        "export function handler(event) {\n  return 'total;\n}\n",
        (2, 10, "Invalid or unexpected token"),
    ),
    "bad token on line 4": (
        "const a = 1;\nconst b = 2;\n\nconst c = a # b;\nexport const handler = () => c;\n",
        (4, 13, "Invalid or unexpected token"),
    ),
    # The first line is where the script a function runs as has its wrapper's opening: the
    # columns are the source's all the same.
    "first line, first column": (
        ") export const handler = () => 1;",
        (1, 1, "Unexpected token ')'"),
    ),
    "first line, later column": (
        "export const handler = (e => ;",
        (1, 30, "Unexpected token ';'"),
    ),
    # "é" is one UTF-16 code unit and two UTF-8 bytes, "😀" two units and four bytes: the
    # column counts code units, as V8 and a browser's text do (36 in bytes).
    "not ASCII before it": (
        "export const handler = () => {\n  const s = 'héllo 😀'; return s s;\n};\n",
        (2, 34, "Unexpected identifier 's'"),
    ),
    "CR LF line ends": (
        "const a = 1;\r\nconst b = 2;\r\nconst c = a ) b;\r\nexport const handler = () => c;\r\n",
        (3, 13, "Unexpected token ')'"),
    ),
    # A line separator ends a line for V8, as it does for a browser.
    "line separator": (
        "const a = 1;\u2028const b = a b;\nexport const handler = () => b;\n",
        (2, 13, "Unexpected identifier 'b'"),
    ),
    # What the script a function runs as makes of "export default" is longer than the
    # keywords: the columns after them are the source's all the same.
    "after export default": (
        "export default { total: 1 + };\nexport const handler = () => 1;\n",
        (1, 29, "Unexpected token '}'"),
    ),
    "after export default of a function": (
        "export default function () { return 1 +; }\nexport const handler = () => 1;\n",
        (1, 40, "Unexpected token ';'"),
    ),
    "after a top-level await": (
        "const rate = await Promise.resolve(2);\nexport const handler = (e) => e.n * rate *;\n",
        (2, 43, "Unexpected token ';'"),
    ),
    "export inside a function": (
        "export function handler() {\n  export const x = 1;\n}\n",
        (2, 3, "Unexpected token 'export'"),
    ),
    # Errors tree-sitter's grammar lets through, which V8 refuses in any module.
    "declared twice": (
        "let total = 1;\nlet total = 2;\nexport const handler = () => total;\n",
        (2, 5, "Identifier 'total' has already been declared"),
    ),
}


@pytest.mark.parametrize("name", sorted(SYNTAX_ERRORS))
async def test_a_syntax_error_is_answered_at_its_line_and_column_in_v8s_words(
    client: Any, admin_headers: dict[str, str], name: str
) -> None:
    source, (line, column, words) = SYNTAX_ERRORS[name]
    with trio.fail_after(TIMEOUT):
        console = await console_for(client, admin_headers, await owner_api(client, admin_headers))
        response = await console.call(
            "PUT", "/functions/totals", {"source": source, "events": ["invoice.created"]}
        )
        body = await response.get_json()
        listed = await console.ok("GET", "/functions")
    assert response.status_code == 400, body
    assert body == {
        "statusCode": 400,
        "error": "Bad Request",
        "code": "FUNCTION_SOURCE_NO_HANDLER",
        "message": "Function source is not an ES module exporting a handler: syntax error at"
        f" line {line}, column {column}: {words}",
        "params": {"p0": line, "p1": column, "p2": words},
    }
    assert listed["data"] == []


async def test_other_refusals_keep_their_one_param_the_reason(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """A source that is a module but exports no handler (or is not text) has no place: its
    one param is the reason."""
    with trio.fail_after(TIMEOUT):
        console = await console_for(client, admin_headers, await owner_api(client, admin_headers))
        response = await console.call(
            "PUT", "/functions/totals", {"source": "export const main = 1;", "events": []}
        )
        body = await response.get_json()
    assert response.status_code == 400
    assert body["message"] == (
        "Function source is not an ES module exporting a handler: the module exports no handler"
    )
    assert body["params"] == {"p0": "the module exports no handler"}
