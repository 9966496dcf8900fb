"""A hosted function's source, an ES module, turned into a script V8 can evaluate.

mini-racer evaluates scripts, not modules. The module is parsed with tree-sitter's JavaScript
grammar; brackets nested deeper than the limit are refused, ``import`` in any form is refused (a
function loads nothing), the ``export`` keywords are taken off the declarations they mark, and
the body is wrapped in an async function, so the module's top level keeps its own scope, strict
mode and top-level ``await``:

    (async function () {"use strict";<the module's body>
    ;return {handler: <the binding exported as handler>};
    })
    //# sourceURL=function.js

The script evaluates to that function; calling it runs the module's top level once and answers
its exports. The body starts on the script's first line, and what is taken off the body is
replaced by as many spaces (its line breaks kept), so a position in the script is the source's:
the same line, and the same column but on the first line, which the wrapper's opening moves
right (:func:`source_stack` moves it back), and on a line holding ``export default
<expression>``, whose binding is longer than the keywords. The script names itself
``function.js`` for the stacks V8 writes (when evaluated as a script of its own).

Before that, V8 itself checks the source (:func:`transform`'s ``v8``), so a source that is no
ES module is refused where V8 stops and in V8's words (``missing ) after argument list``), as a
browser would say it, with errors tree-sitter's grammar lets through (a name declared twice, an
octal literal in strict mode, a bad regular expression) among them. V8 reads a script made of
the source column for column (:func:`_check_script`), on its own line after a first statement
that throws, so evaluating it compiles all of it and runs none of it. Where V8 finds nothing
wrong but tree-sitter cannot read the source, or V8 is not asked (``compile_module``, in the
caller's process), the place is tree-sitter's first error or missing node, and the words are
ours. A source tree-sitter reads is first checked for what it loads (``import``), so that
refusal comes before V8's.

This module imports nothing but the standard library, tree-sitter and, in the compile worker
only, mini-racer, so that it can also run as the compile worker (``python -P _module_source.py
<max depth> <cpu seconds> <memory MiB>``: the source on standard input, the outcome as JSON on
standard output; see ``_compiler.py``) without loading the service. Its refusals are
:class:`Refused`; ``_compiler.py`` turns them into the package's errors.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Literal

import tree_sitter_javascript
from tree_sitter import Language, Node, Parser

_JAVASCRIPT = Language(tree_sitter_javascript.language())
_PREFIX = b'(async function () {"use strict";'
SCRIPT_NAME = "function.js"
"""The name a compiled script gives itself in stack traces."""
_LINE_BREAKS = "\n\r\u2028\u2029"
"""JavaScript's line terminators."""
_POSITION = re.compile(re.escape(SCRIPT_NAME) + r":(\d+):(\d+)")
_RUNTIME_FRAME = re.compile(r"^\s*at .*<anonymous>:\d+:\d+\)?\s*$")
"""A frame of code the runtime evaluated itself (nameless scripts), not of the function's."""
DEFAULT_BINDING = "__ledgerport_default"
"""What an anonymous ``export default`` becomes (the default export is not used)."""
_OPENING = frozenset({"(", "[", "{", "${"})
_CLOSING = frozenset({")", "]", "}"})
_CHECK_PREFIX = '"use strict";throw 0;\n'
"""What stands before the source in the script V8 checks: strict mode, as a module has it, and
a first statement that throws, so that evaluating the script compiles all of it and runs none
of it. On a line of its own, so a position after it is the source's, one line down."""
_ENCLOSING = frozenset(
    {
        "function_declaration",
        "function_expression",
        "generator_function",
        "generator_function_declaration",
        "arrow_function",
        "method_definition",
        "class_body",
    }
)
"""Nodes under which an ``await`` is not the module's top level (a class body's static blocks
and field initializers are not either)."""
_EXPORT_LISTS = frozenset({"export_clause", "namespace_export", "*"})
_STATEMENT_ENDS = frozenset({"", ";", "}"})
"""The tokens after which an ``export`` that tree-sitter could not place in a statement still
starts one (``""``: the source's first token)."""
_V8_HEADER = re.compile(r"(?:<anonymous>|undefined):(\d+): (\w+): (.*)")
"""The first line of mini-racer's text of an exception V8 raised as it compiled a script: the
line, the error's name and its message."""
_V8_CARET = re.compile(r"( *)\^+")
"""Its third line: as many spaces as the column (from 0, in UTF-16 code units), then carets."""
WORDS_MAX = 200
"""Characters of the parser's words kept: V8 quotes what it stopped at (a whole regular
expression, a name), which may be long."""
OUT_OF_MEMORY = 3
"""The compile worker's exit status when Python ran out of its memory."""
V8Check = Callable[[str], "str | None"]
"""What V8 says of a script: mini-racer's text of the exception V8 raised compiling it, or None
when it compiles."""


@dataclass(frozen=True)
class SyntaxProblem:
    """Where a source stops being an ES module, and the parser's words for why.

    ``line`` counts from 1 as V8 does (:func:`source_lines`: a line ends at any JavaScript line
    terminator, CR LF counting as one); ``column`` counts UTF-16 code units from 1, as V8 and a
    browser's text do (one for each character but those outside the Basic Multilingual Plane,
    which take two). ``words`` are V8's (``missing ) after argument list``), or, where V8 was not
    asked or found nothing wrong, ours from tree-sitter's node (``missing )``, ``unexpected
    'x'``).
    """

    line: int
    column: int
    words: str

    def sentence(self) -> str:
        return f"syntax error at line {self.line}, column {self.column}: {self.words}"


@dataclass(frozen=True)
class CompiledModule:
    script: str
    """Evaluates to an async function that runs the module and answers ``{handler}``."""
    exports: tuple[str, ...]
    """The names the module exports, in source order."""


class Refused(Exception):
    """The source is refused: ``no_handler`` when it is not an ES module exporting ``handler``
    (``messages`` holds the one reason; ``syntax`` says where, for a syntax error), ``invalid``
    when it breaks an upload rule (one sentence per problem)."""

    def __init__(
        self,
        kind: Literal["no_handler", "invalid"],
        messages: list[str],
        syntax: SyntaxProblem | None = None,
    ) -> None:
        self.kind = kind
        self.messages = messages
        self.syntax = syntax
        super().__init__("; ".join(messages))


class _Positions:
    """The line and column (as :class:`SyntaxProblem` counts them) of byte offsets into a
    source, each the start of a character. Asked in ascending order, as the walks over a tree
    ask, it decodes each byte of the source once."""

    def __init__(self, code: bytes) -> None:
        self._code = code
        self._start()

    def _start(self) -> None:
        self._offset = 0
        self._line = 1
        self._column = 1
        self._after_cr = False

    def at(self, offset: int) -> tuple[int, int]:
        if offset < self._offset:
            self._start()
        text = self._code[self._offset : offset].decode(errors="replace")
        breaks = list(_SOURCE_LINE_BREAK.finditer(text))
        if breaks:
            # A CR that ended the text read before and the LF starting this one are one break.
            joined = self._after_cr and text.startswith("\n")
            self._line += len(breaks) - joined
            self._column = 1 + _units(text[breaks[-1].end() :])
        else:
            self._column += _units(text)
        if text:
            self._after_cr = text.endswith("\r")
        self._offset = offset
        return self._line, self._column

    def where(self, node: Node) -> str:
        line, column = self.at(node.start_byte)
        return f"line {line}, column {column}"


def _units(text: str) -> int:
    """The length of ``text`` in UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def _walk(root: Node) -> Iterator[tuple[Node, int]]:
    """Every node under ``root`` (itself included) in source order, with its depth below it. A
    tree cursor keeps its own path, so neither a node's children nor its parent (which
    tree-sitter finds by descending from the root) are looked up; the depth is counted here, as
    the cursor's own ``depth`` counts its whole path at each call."""
    cursor = root.walk()
    depth = 0
    while True:
        node = cursor.node
        assert node is not None  # a cursor always stands on a node
        yield node, depth
        if cursor.goto_first_child():
            depth += 1
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
            depth -= 1


def _too_deep(root: Node, max_depth: int) -> Node | None:
    """The first bracket (``(``, ``[``, ``{``, ``${``) that opens more than ``max_depth`` levels
    deep, or None.

    The brackets counted are the parser's tokens, so those in strings, comments, regular
    expressions and template text do not count. The count runs over the leaves in source order
    and stops at the first bracket too deep: a deeply nested source is refused after
    ``max_depth`` brackets, before anything else walks its tree.
    """
    depth = 0
    cursor = root.walk()
    while True:
        if cursor.goto_first_child():
            continue
        leaf = cursor.node
        assert leaf is not None  # a cursor always stands on a node
        if leaf.type in _OPENING:
            depth += 1
            if depth > max_depth:
                return leaf
        elif leaf.type in _CLOSING:
            depth -= 1
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return None


def _first_error(root: Node) -> Node | None:
    """The first error or missing node in source order: down the first child that holds one."""
    node = root
    while node.has_error and not (node.is_error or node.is_missing):
        holder = next((child for child in node.children if child.has_error), None)
        if holder is None:
            break
        node = holder
    return node if node.has_error else None


def _bound_names(pattern: Node) -> Iterator[str]:
    """The names a declarator's pattern binds (``a``, ``{a, b: c}``, ``[a, ...b]``), in source
    order."""
    pending = [pattern]
    while pending:
        node = pending.pop()
        if node.type in ("identifier", "shorthand_property_identifier_pattern"):
            yield _text(node)
            continue
        parts = []
        for child in node.named_children:
            if node.type == "pair_pattern" and child == node.child_by_field_name("key"):
                continue
            if child.type == "assignment_pattern":
                child = child.child_by_field_name("left") or child
            parts.append(child)
        pending.extend(reversed(parts))


def _text(node: Node) -> str:
    return (node.text or b"").decode()


def _refuse_loading(root: Node, positions: _Positions) -> None:
    """A function loads nothing: ``import`` declarations, ``import()``, ``import.meta`` and
    re-exports from another module are refused."""
    problems: list[str] = []
    for node, depth in _walk(root):
        kind = node.type
        if kind == "import_statement":
            problems.append(f"source: import is not allowed ({positions.where(node)})")
        elif kind == "call_expression":
            function = node.child_by_field_name("function")
            if function is not None and function.type == "import":
                problems.append(f"source: import() is not allowed ({positions.where(node)})")
        elif kind == "meta_property" and _text(node).startswith("import"):
            problems.append(f"source: import.meta is not allowed ({positions.where(node)})")
        elif kind == "export_statement" and node.child_by_field_name("source") is not None:
            problems.append(
                f"source: exporting from another module is not allowed ({positions.where(node)})"
            )
        elif kind == "return_statement" and depth == 1:
            problems.append(f"source: return outside a function ({positions.where(node)})")
    if problems:
        if any("import" in problem or "another module" in problem for problem in problems):
            problems.append("a hosted function loads no modules: put everything in one source")
        raise Refused("invalid", problems)


def transform(source: str, *, max_depth: int, v8: V8Check | None = None) -> CompiledModule:
    """The script of ``source`` (see the module docstring), checked by ``v8`` when given.

    Raises Refused: ``invalid`` when brackets nest deeper than ``max_depth``, the source imports
    anything or V8 runs out of stack reading it, ``no_handler`` when it is not an ES module (a
    syntax error, with its :class:`SyntaxProblem`) or exports no ``handler``.
    """
    code = source.encode()
    root = Parser(_JAVASCRIPT).parse(code).root_node
    positions = _Positions(code)
    deep = _too_deep(root, max_depth)
    if deep is not None:
        raise Refused(
            "invalid",
            [
                f"source must nest brackets at most {max_depth} levels deep"
                f" (level {max_depth + 1} at {positions.where(deep)})"
            ],
        )
    error = _first_error(root)
    if error is None:
        _refuse_loading(root, positions)
    problem = None if v8 is None else _v8_problem(v8(_check_script(code, root)))
    if problem is None and error is not None:
        problem = _tree_sitter_problem(error, positions)
    if problem is not None:
        raise Refused("no_handler", [problem.sentence()], problem)
    exports: dict[str, str] = {}
    edits: list[tuple[int, int, str]] = []
    for statement in root.named_children:
        if statement.type != "export_statement":
            continue
        declaration = statement.child_by_field_name("declaration")
        value = statement.child_by_field_name("value")
        default = any(child.type == "default" for child in statement.children)
        if declaration is not None:
            edits.append((statement.start_byte, declaration.start_byte, ""))
            for name in _declared(declaration):
                exports["default" if default else name] = name
        elif value is not None:
            # export default <expression>
            edits.append((statement.start_byte, value.start_byte, f"const {DEFAULT_BINDING} = "))
            exports["default"] = DEFAULT_BINDING
        else:
            for clause in statement.named_children:
                if clause.type != "export_clause":
                    continue
                for specifier in clause.named_children:
                    local = specifier.child_by_field_name("name")
                    alias = specifier.child_by_field_name("alias") or local
                    if local is not None and alias is not None:
                        exports[_text(alias).strip("\"'")] = _text(local)
            edits.append((statement.start_byte, statement.end_byte, ""))
    if "handler" not in exports:
        raise Refused("no_handler", ["the module exports no handler"])
    # The edits never overlap (one per export statement): the body is cut once, in order.
    tail = f"\n;return {{handler: {exports['handler']}}};\n}})\n//# sourceURL={SCRIPT_NAME}\n"
    script = (_PREFIX + _edited(code, sorted(edits)) + tail.encode()).decode()
    return CompiledModule(script, tuple(exports))


def _tree_sitter_problem(error: Node, positions: _Positions) -> SyntaxProblem:
    """The problem tree-sitter's first ``error`` node (an error or a missing node) names."""
    line, column = positions.at(error.start_byte)
    if error.is_missing:
        return SyntaxProblem(line, column, f"missing {error.type}")
    leaf: Node | None = error
    while leaf is not None and leaf.child_count:
        leaf = leaf.child(0)
    token = "" if leaf is None else _SOURCE_LINE_BREAK.split(_text(leaf))[0][:40]
    return SyntaxProblem(line, column, f"unexpected '{token}'" if token else "unexpected token")


def _check_script(code: bytes, root: Node) -> str:
    """The script V8 checks ``code`` as: the prefix (``_CHECK_PREFIX``), then the source,
    column for column, with what a script cannot hold at its top level but a module can made
    what a script can: ``import`` declarations and export lists blanked, the ``export`` keyword
    blanked (``export default <expression>`` made ``0, <expression>``), an ``await`` outside
    any function made ``void`` (``for await`` a plain ``for``), and, anywhere, ``import.meta``
    made ``Object.meta``. An ``export`` inside a function is left for V8 to refuse, as it
    refuses it in a module.

    ``root`` may hold errors: what tree-sitter made of the tokens before the first of them is
    what V8 reads too, so V8 stops at that first error (or at an earlier one of its own). A
    tree without errors has no ``import.meta`` (``_refuse_loading`` refused it), so the walk
    skips functions, and, in a source that never says ``await``, all but the top-level
    statements."""
    edits: list[tuple[int, int, str]] = []
    anywhere = root.has_error
    awaits = anywhere or b"await" in code
    cursor = root.walk()
    # The path down to the cursor's node: each ancestor, and whether what is under it is
    # inside a function or a class body.
    path: list[tuple[Node, bool]] = []
    last_token = ""
    exported = False  # whether that last token is an ``export`` taken off
    while True:
        node = cursor.node
        assert node is not None  # a cursor always stands on a node
        kind = node.type
        parent, enclosed = path[-1] if path else (None, False)
        parent_kind = "" if parent is None else parent.type
        whole = not enclosed and (
            kind == "import_statement"
            or (
                kind == "export_statement"
                and any(child.type in _EXPORT_LISTS for child in node.children)
            )
        )
        if whole:
            edits.append((node.start_byte, node.end_byte, ""))
        elif node.child_count == 0:
            replacement = None
            if kind == "import" and parent_kind == "meta_property":
                replacement = "Object"
            elif enclosed:
                pass
            elif kind == "export" and (
                parent_kind == "export_statement" or last_token in _STATEMENT_ENDS
            ):
                replacement = ""
            elif kind == "default" and last_token == "export" and exported:
                declared = parent is not None and parent.child_by_field_name("declaration")
                replacement = "" if declared else "0,"
            elif kind == "await":
                replacement = "" if parent_kind == "for_in_statement" else "void "
            if replacement is not None:
                edits.append((node.start_byte, node.end_byte, replacement))
            if kind != "comment":
                last_token = kind
                exported = kind == "export" and replacement is not None
        descend = not whole and (
            anywhere
            or (awaits and not enclosed and kind not in _ENCLOSING)
            or kind in ("program", "export_statement")
        )
        if descend and cursor.goto_first_child():
            path.append((node, enclosed or kind in _ENCLOSING))
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return _CHECK_PREFIX + _edited(code, edits).decode()
            path.pop()


def _edited(code: bytes, edits: list[tuple[int, int, str]]) -> bytes:
    """``code`` with each ``(start, end, replacement)`` of ``edits`` (in order, none
    overlapping) made: the replacement, then what keeps the lines and columns after it."""
    pieces = []
    kept = 0
    for start, end, replacement in edits:
        pieces += [code[kept:start], _blanked(code[start:end], replacement)]
        kept = end
    pieces.append(code[kept:])
    return b"".join(pieces)


def _v8_problem(said: str | None) -> SyntaxProblem | None:
    """The problem V8 found in a check script (``_check_script``'s), from mini-racer's text of
    it (None: V8 found none): its first line names the script's line and V8's message, its
    third has a caret under the column. A RangeError without a place is V8's parser running
    out of stack (a chain of thousands of ``a => b =>`` or ``else if``, which no bracket
    counts): refused as too deep. Text of another form says nothing V8 can be quoted on."""
    if said is None:
        return None
    lines = said.split("\n")
    header = _V8_HEADER.fullmatch(lines[0])
    if header is None:
        return None
    line, name, message = int(header[1]) - 1, header[2], header[3]
    if line < 1 and name == "RangeError":
        raise Refused(
            "invalid",
            [
                "source must nest less deeply: V8 runs out of stack reading it (a chain of"
                " thousands of levels, such as a => b => ..., else if ... or a = b = ...)"
            ],
        )
    caret = _V8_CARET.fullmatch(lines[2]) if len(lines) > 2 else None
    if line < 1 or caret is None:
        return None
    words = message if name == "SyntaxError" else f"{name}: {message}"
    if len(words) > WORDS_MAX:
        words = words[: WORDS_MAX - 1] + "\u2026"
    return SyntaxProblem(line, len(caret[1]) + 1, words)


def _blanked(original: bytes, replacement: str) -> bytes:
    """What stands for ``original`` in the script: ``replacement``, then spaces and
    ``original``'s own line breaks, so that what follows keeps its line and, when
    ``replacement`` is no longer than what it replaces on its first line, its column (columns
    count UTF-16 code units, as V8's do)."""
    blank = "".join(
        char if char in _LINE_BREAKS else " " * (2 if ord(char) > 0xFFFF else 1)
        for char in original.decode()
    )
    first_line = next((i for i, char in enumerate(blank) if char in _LINE_BREAKS), len(blank))
    return (replacement + blank[min(first_line, len(replacement)) :]).encode()


def source_stack(stack: str) -> str:
    """A stack V8 wrote for a run of a compiled script, with positions into the uploaded
    source: ``function.js:1:<column>`` moved back past the wrapper's opening, and the frames of
    the runtime's own code left out."""

    def moved(position: re.Match[str]) -> str:
        line, column = int(position.group(1)), int(position.group(2))
        if line == 1:
            column = max(column - len(_PREFIX), 1)
        return f"{SCRIPT_NAME}:{line}:{column}"

    return "\n".join(
        _POSITION.sub(moved, line) for line in stack.split("\n") if not _RUNTIME_FRAME.match(line)
    )


_FRAME = re.compile(r"^\s*at ")
_SOURCE_LINE_BREAK = re.compile("\r\n|[" + _LINE_BREAKS + "]")


@dataclass(frozen=True)
class StackFrame:
    """A frame of a run's stack as :func:`source_stack` wrote it (``at handler
    (function.js:3:9)``), and, for a frame in the uploaded source, the position it names there:
    its line and column (from 1; the column counts UTF-16 code units, as V8's do)."""

    text: str
    line: int | None = None
    column: int | None = None


def stack_frames(stack: str) -> list[StackFrame]:
    """The frames of a run's stack (:func:`source_stack`'s), each with the first
    ``function.js:line:column`` it names; the error's own lines before them are left out."""
    frames = []
    for text in stack.split("\n"):
        if not _FRAME.match(text):
            continue
        position = _POSITION.search(text)
        if position is None:
            frames.append(StackFrame(text.strip()))
        else:
            line, column = int(position.group(1)), int(position.group(2))
            frames.append(StackFrame(text.strip(), line, column))
    return frames


def source_lines(source: str) -> list[str]:
    """The source's lines as V8 numbers them (line ``n`` is item ``n - 1``): split at every
    JavaScript line terminator, CR LF counting as one."""
    if not any(char in source for char in _LINE_BREAKS[1:]):
        return source.split("\n")  # the usual source: 7 to 20 times faster than the pattern
    return _SOURCE_LINE_BREAK.split(source)


def _declared(declaration: Node) -> Iterator[str]:
    """The names an exported declaration binds."""
    if declaration.type in ("lexical_declaration", "variable_declaration"):
        for declarator in declaration.named_children:
            name = declarator.child_by_field_name("name")
            if name is not None:
                yield from _bound_names(name)
        return
    name = declaration.child_by_field_name("name")
    if name is not None:
        yield _text(name)


def _serve_one() -> None:
    """The compile worker: one source in (UTF-8 on standard input), one outcome out (JSON on
    standard output): ``{"script", "exports"}`` or ``{"refused", "messages", "syntax"}``.

    Its arguments are the deepest nesting allowed, the seconds of CPU it may spend and the MiB
    of memory it may take once V8 is up. Past the seconds the kernel ends it with SIGPROF (the
    profiling timer counts this process's own CPU time, user and system, every thread's, so a
    loaded machine's waits are not counted). Past the memory an allocation fails: V8 then ends
    the process (``Fatal process out of memory``), and Python's MemoryError ends it with
    OUT_OF_MEMORY; one failing in mini-racer's own thread or in tree-sitter may crash it or
    leave it waiting for a verdict, which the service's wall limit ends. The limit is set once
    V8 is up, which reserves more than any source needs as it starts, and is a bound no source
    of the largest size comes near (measured: under 90 MiB)."""
    signal.setitimer(signal.ITIMER_PROF, float(sys.argv[2]))
    from py_mini_racer import JSEvalException, JSParseException, MiniRacer

    with MiniRacer() as racer:
        _limit_data(int(sys.argv[3]) * 1024 * 1024)

        def v8(script: str) -> str | None:
            try:
                racer.eval(script)
            except JSParseException as refused:
                return str(refused)
            except JSEvalException:
                pass  # compiled, then stopped by its first statement
            return None

        try:
            source = sys.stdin.buffer.read().decode()
            compiled = transform(source, max_depth=int(sys.argv[1]), v8=v8)
            outcome: dict[str, object] = {"script": compiled.script, "exports": compiled.exports}
        except Refused as refused:
            syntax = None if refused.syntax is None else asdict(refused.syntax)
            outcome = {"refused": refused.kind, "messages": refused.messages, "syntax": syntax}
        except MemoryError:
            os._exit(OUT_OF_MEMORY)
    sys.stdout.write(json.dumps(outcome))


def _limit_data(headroom: int) -> None:
    """Let this process's data segment (RLIMIT_DATA: the heap of V8 and of Python, V8's
    parser's zones, tree-sitter's trees) grow ``headroom`` bytes past what it holds now."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                limit = int(line.split()[1]) * 1024 + headroom
                resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
                return


if __name__ == "__main__":
    _serve_one()
