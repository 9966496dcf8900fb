"""Hosted-function sources: which ES modules are accepted, what is refused and why, that the
script they become runs in V8 with the module's semantics (checked in a child process: V8 does
not share a process with the tests' event loops), and a run's stack read back into its frames
and their lines of the source."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from ledgerport import catalog
from ledgerport.apps import (
    SCRIPT_NAME,
    FunctionSourceNoHandler,
    StackFrame,
    SyntaxProblem,
    compile_module,
    source_lines,
    source_stack,
    stack_frames,
)
from ledgerport.errors import InvalidInput

ACCEPTED = {
    "sync function": ("export function handler(event) { return event.type }", "t"),
    "async function": (
        "export async function handler(event) { await null; return event.n * 2 }",
        42,
    ),
    "const arrow": ("export const handler = (event) => event.n + 1", 22),
    "async arrow": ("export const handler = async (event) => [event.n]", [21]),
    "export clause": ("const run = () => 'clause'; export { run as handler };", "clause"),
    "export clause, same name": (
        "function handler() { return 'same' }\nexport { handler }",
        "same",
    ),
    "destructured": (
        "const o = { handler: () => 'pattern' }; export const { handler } = o;",
        "pattern",
    ),
    "string alias": ("const h = () => 'quoted'; export { h as \"handler\" };", "quoted"),
    "top-level await": (
        "const x = await Promise.resolve(40); export const handler = () => x + 2",
        42,
    ),
    "default export beside": (
        "export default 42; export const handler = () => typeof __ledgerport_default",
        "number",
    ),
    "module scope is strict": (
        "export const handler = () => { try { undeclared = 1; return 'sloppy' }"
        " catch (e) { return e.name } }",
        "ReferenceError",
    ),
    "no this at top level": (
        "const self = this; export const handler = () => typeof self",
        "undefined",
    ),
    "context is passed": ("export function handler(event, context) { return context.tag }", "ctx"),
}

NO_HANDLER = {
    "no export": ("function handler() {}", "the module exports no handler"),
    "default only": ("export default function handler() {}", "the module exports no handler"),
    "other name": ("export const main = () => 1", "the module exports no handler"),
    "syntax error": ("export const handler = (e => ;", "syntax error at line 1"),
    "syntax error, later line": ("export const handler = 1;\nlet = = 2;", "syntax error at line 2"),
    "not JavaScript": ("def handler(event): pass", "syntax error at line 1"),
}

REFUSED = {
    "import declaration": (
        'import x from "y";\nexport const handler = () => x',
        "import is not allowed",
    ),
    "bare import": ('import "polyfill";\nexport const handler = 1', "import is not allowed"),
    "dynamic import": ('export const handler = () => import("q")', "import() is not allowed"),
    "import.meta": ("export const handler = () => import.meta.url", "import.meta is not allowed"),
    "re-export": ('export * from "z"; export const handler = 1', "exporting from another module"),
    "named re-export": (
        'export { handler } from "z";',
        "exporting from another module",
    ),
    "top-level return": ("return 1; export const handler = 1", "return outside a function"),
}

CHECK = """
import json, sys
from py_mini_racer import MiniRacer
results = {}
for name, script in json.load(sys.stdin).items():
    mr = MiniRacer()
    promise = mr.eval(
        "(" + script + ")().then(m => m.handler({type: 't', n: 21}, {tag: 'ctx'}))"
        ".then(r => JSON.stringify(r))"
    )
    value = promise.get(timeout=5)
    results[name] = json.loads(value) if isinstance(value, str) else value
print(json.dumps(results))
"""


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_sources_export_a_handler(name: str) -> None:
    source, _ = ACCEPTED[name]
    assert "handler" in compile_module(source).exports


def test_accepted_sources_run_in_v8_as_modules() -> None:
    scripts = {name: compile_module(source).script for name, (source, _) in ACCEPTED.items()}
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        input=json.dumps(scripts),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    results = json.loads(done.stdout)
    expected = {name: value for name, (_, value) in ACCEPTED.items()}
    assert results == expected


@pytest.mark.parametrize("name", sorted(NO_HANDLER))
def test_sources_without_a_handler_are_refused(name: str) -> None:
    source, reason = NO_HANDLER[name]
    with pytest.raises(FunctionSourceNoHandler) as refused:
        compile_module(source)
    assert reason in str(refused.value)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_sources_that_load_anything_are_refused(name: str) -> None:
    source, reason = REFUSED[name]
    with pytest.raises(InvalidInput) as refused:
        compile_module(source)
    assert any(reason in problem for problem in refused.value.messages)


def test_line_numbers_in_the_script_are_the_sources() -> None:
    source = "const a = 1;\nconst b = 2;\nexport function handler() { return a + b }\n"
    lines = compile_module(source).script.splitlines()
    assert lines[0].endswith("const a = 1;")
    assert lines[1] == "const b = 2;"
    assert lines[2] == " " * len("export ") + "function handler() { return a + b }"


POSITIONED = (
    "export const first = 1; export function handler(event) { if (event.n) return deep(); }\n"
    "export {\n"
    "  \U0001d465 as alias,\n"
    "};\n"
    "const \U0001d465 = 'wide'; export const later = 2;\n"
    "function deep() { throw new RangeError('on purpose') }\n"
)
"""A source whose exports are taken off on several lines; an identifier of an astral
character (two UTF-16 units) in a clause taken off."""


def _units(text: str) -> int:
    """The length of ``text`` in UTF-16 code units, as V8 counts columns."""
    return len(text.encode("utf-16-le")) // 2


def test_what_is_taken_off_the_source_leaves_its_lines_and_columns() -> None:
    script = compile_module(POSITIONED).script
    lines = script.split("\n")
    source = POSITIONED.split("\n")
    # The first line: the wrapper's opening, then the source's own columns.
    prefix = '(async function () {"use strict";'
    assert lines[0] == prefix + source[0].replace("export ", " " * 7)
    assert lines[1:4] == [" " * _units(line) for line in source[1:4]]
    assert lines[4] == source[4].replace("export ", " " * 7)
    assert lines[5] == source[5]


STACK = """
import json, sys
from py_mini_racer import MiniRacer
racer = MiniRacer()
promise = racer.eval(
    "(0, eval)(" + json.dumps(sys.stdin.read()) + ")()"
    ".then(m => { try { m.handler({n: 1}) } catch (e) { return e.stack } })"
)
print(json.dumps(promise.get(timeout=5)))
"""


def test_a_stack_points_into_the_uploaded_source() -> None:
    """Run in V8 as the sandbox runs it (a script of its own), a throwing handler's stack names
    ``function.js`` at the source's lines and columns, and holds nothing of the code around."""
    done = subprocess.run(
        [sys.executable, "-c", STACK],
        input=compile_module(POSITIONED).script,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )
    stack = source_stack(json.loads(done.stdout))
    frames = [line.strip() for line in stack.splitlines()[1:]]
    thrown = POSITIONED.split("\n")[5].index("new RangeError") + 1
    called = POSITIONED.split("\n")[0].index("deep()") + 1
    assert stack.splitlines()[0] == "RangeError: on purpose"
    assert frames == [
        f"at deep ({SCRIPT_NAME}:6:{thrown})",
        f"at Object.handler ({SCRIPT_NAME}:1:{called})",
    ]


def test_source_stack_moves_the_first_lines_columns_and_drops_the_runtimes_frames() -> None:
    wrapper = len('(async function () {"use strict";')
    stack = (
        "Error: x\n"
        f"    at f (function.js:1:{wrapper + 5})\n"
        "    at g (function.js:12:3)\n"
        "    at Array.map (<anonymous>)\n"
        "    at invoke (<anonymous>:180:20)\n"
        "    at <anonymous>:1:25"
    )
    assert source_stack(stack) == (
        "Error: x\n"
        "    at f (function.js:1:5)\n"
        "    at g (function.js:12:3)\n"
        "    at Array.map (<anonymous>)"
    )


MAX_DEPTH = catalog.FUNCTION_SOURCE_MAX_DEPTH
HANDLER_EXPORT = "export const handler = () => 1;"
NESTINGS = {
    "arrays": ("const x = ", "[", "", "]", 0),
    "parentheses": ("const x = ", "(", "1", ")", 0),
    "objects": ("const x = ", "{a: ", "1", "}", 0),
    "blocks": ("", "{", "", "}", 0),
    # A function's parameters open a level inside the braces around it.
    "functions": ("", "function f() {", "", "}", len("function f")),
    "template substitutions": ("const x = ", "`${", "1", "}`", 1),
}
"""Ways to nest: what comes before, what opens a level, the innermost part, what closes a
level, and where in what opens a level the bracket that goes one level too deep stands."""


def _nested(kind: str, depth: int) -> str:
    before, opening, inner, closing, _ = NESTINGS[kind]
    return f"{before}{opening * depth}{inner}{closing * depth};\n{HANDLER_EXPORT}"


@pytest.mark.parametrize("kind", sorted(NESTINGS))
def test_brackets_may_nest_as_deep_as_the_limit(kind: str) -> None:
    assert compile_module(_nested(kind, MAX_DEPTH)).exports == ("handler",)


@pytest.mark.parametrize("kind", sorted(NESTINGS))
def test_brackets_nested_one_level_deeper_are_refused_naming_the_limit(kind: str) -> None:
    before, opening, _, _, offset = NESTINGS[kind]
    too_deep = len(before) + len(opening) * MAX_DEPTH + offset
    with pytest.raises(InvalidInput) as refused:
        compile_module(_nested(kind, MAX_DEPTH + 1))
    assert refused.value.messages == [
        f"source must nest brackets at most {MAX_DEPTH} levels deep"
        f" (level {MAX_DEPTH + 1} at line 1, column {too_deep + 1})"
    ]


def test_sources_as_deep_as_the_limit_run_in_v8() -> None:
    scripts = {kind: compile_module(_nested(kind, MAX_DEPTH)).script for kind in NESTINGS}
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        input=json.dumps(scripts),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == dict.fromkeys(NESTINGS, 1)


def test_brackets_in_strings_comments_patterns_and_template_text_do_not_count() -> None:
    deep = "([{" * MAX_DEPTH
    source = (
        f'const s = "{deep}";\n'
        f"const t = `{deep}`;\n"
        f"const r = /{re.escape(deep)}/;\n"
        f"// {deep}\n"
        f"/* {deep} */\n"
        f"{HANDLER_EXPORT}"
    )
    assert compile_module(source).exports == ("handler",)


def test_exported_patterns_as_deep_as_the_limit_bind_their_names_in_order() -> None:
    depth = MAX_DEPTH - 1
    pattern = "{a: " * depth + "[handler, ...rest]" + "}" * depth
    value = "{a: " * depth + "[f, f]" + "}" * depth
    source = f"const f = () => 1;\nexport const {pattern} = {value};"
    assert compile_module(source).exports == ("handler", "rest")


def test_a_stack_is_read_into_its_frames_with_their_positions_in_the_source() -> None:
    stack = (
        "TypeError: at function.js:9:9 in the message\n"
        "second line of the message\n"
        "    at handler (function.js:3:11)\n"
        "    at function.js:12:4\n"
        "    at Array.map (<anonymous>)"
    )

    assert stack_frames(stack) == [
        StackFrame("at handler (function.js:3:11)", 3, 11),
        StackFrame("at function.js:12:4", 12, 4),
        StackFrame("at Array.map (<anonymous>)"),
    ]


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("a\nb", ["a", "b"]),
        ("a\r\nb\rc", ["a", "b", "c"]),
        ("a\u2028b\u2029c\n", ["a", "b", "c", ""]),
        ("", [""]),
    ],
)
def test_a_source_splits_into_the_lines_v8_numbers(source: str, lines: list[str]) -> None:
    assert source_lines(source) == lines


TREE_SITTER_PLACES = {
    "a missing bracket": (
        "export const handler = (event) => {\n  context.log(event.type;\n};",
        SyntaxProblem(2, 25, "missing )"),
    ),
    "a token where none fits": (
        "const a = 1;\nconst b = a b;\nexport const handler = () => b;",
        SyntaxProblem(2, 13, "unexpected 'b'"),
    ),
    # "é" is one UTF-16 code unit (two UTF-8 bytes), "😀" two (four bytes): the column counts
    # code units, as V8 and a browser's text do.
    "not ASCII before it": (
        "const s = 'é😀'; const t = s s;\nexport const handler = () => t;",
        SyntaxProblem(1, 30, "unexpected 's'"),
    ),
    "CR LF line ends": (
        "const a = 1;\r\nconst b = 2;\r\nconst c = a b;\r\nexport const handler = () => c;",
        SyntaxProblem(3, 13, "unexpected 'b'"),
    ),
    # V8 ends a line at U+2028 too; tree-sitter does not: the line is V8's.
    "a line separator": (
        "const a = 1;\u2028const b = a b;\nexport const handler = () => b;",
        SyntaxProblem(2, 13, "unexpected 'b'"),
    ),
}


@pytest.mark.parametrize("name", sorted(TREE_SITTER_PLACES))
def test_a_syntax_error_found_in_this_thread_is_placed_as_v8_places_it(name: str) -> None:
    """Without V8 (``compile_module``), the place is tree-sitter's first error, on the line V8
    numbers and at the column in UTF-16 code units, with words of tree-sitter's node."""
    source, problem = TREE_SITTER_PLACES[name]
    with pytest.raises(FunctionSourceNoHandler) as refused:
        compile_module(source)
    assert refused.value.syntax == problem


def test_a_refused_import_is_placed_in_code_units_on_v8s_lines() -> None:
    source = 'const é = "😀";\r\nconst x = 1; import y from "y";\nexport const handler = 1;'
    with pytest.raises(InvalidInput) as refused:
        compile_module(source)
    assert refused.value.messages[0] == "source: import is not allowed (line 2, column 14)"


def test_a_syntax_error_is_carried_as_the_message_its_params_and_a_place() -> None:
    """What an envelope shows of a syntax error (its message and params p0 to p2) and what a
    page points at (``syntax``) are one."""
    problem = SyntaxProblem(2, 21, "missing ) after argument list")
    refused = FunctionSourceNoHandler(problem)
    plain = FunctionSourceNoHandler("the module exports no handler")
    assert str(refused) == (
        "Function source is not an ES module exporting a handler: syntax error at line 2,"
        " column 21: missing ) after argument list"
    )
    assert refused.params == (2, 21, "missing ) after argument list")
    assert refused.syntax == problem
    assert str(plain) == (
        "Function source is not an ES module exporting a handler: the module exports no handler"
    )
    assert plain.params == ("the module exports no handler",)
    assert plain.syntax is None
