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

This module imports nothing but the standard library and tree-sitter, so that it can also run as
the compile worker (``python -P _module_source.py <max depth>``: the source on standard input,
the outcome as JSON on standard output; see ``_compiler.py``) without loading the service. Its
refusals are :class:`Refused`; ``_compiler.py`` turns them into the package's errors.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
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


@dataclass(frozen=True)
class CompiledModule:
    script: str
    """Evaluates to an async function that runs the module and answers ``{handler}``."""
    exports: tuple[str, ...]
    """The names the module exports, in source order."""


class Refused(Exception):
    """The source is refused: ``no_handler`` when it is not an ES module exporting ``handler``
    (``messages`` holds the one reason), ``invalid`` when it breaks an upload rule (one sentence
    per problem)."""

    def __init__(self, kind: Literal["no_handler", "invalid"], messages: list[str]) -> None:
        self.kind = kind
        self.messages = messages
        super().__init__("; ".join(messages))


def _where(node: Node) -> str:
    row, column = node.start_point
    return f"line {row + 1}, column {column + 1}"


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


def _refuse_loading(root: Node) -> None:
    """A function loads nothing: ``import`` declarations, ``import()``, ``import.meta`` and
    re-exports from another module are refused."""
    problems: list[str] = []
    for node, depth in _walk(root):
        kind = node.type
        if kind == "import_statement":
            problems.append(f"source: import is not allowed ({_where(node)})")
        elif kind == "call_expression":
            function = node.child_by_field_name("function")
            if function is not None and function.type == "import":
                problems.append(f"source: import() is not allowed ({_where(node)})")
        elif kind == "meta_property" and _text(node).startswith("import"):
            problems.append(f"source: import.meta is not allowed ({_where(node)})")
        elif kind == "export_statement" and node.child_by_field_name("source") is not None:
            problems.append(
                f"source: exporting from another module is not allowed ({_where(node)})"
            )
        elif kind == "return_statement" and depth == 1:
            problems.append(f"source: return outside a function ({_where(node)})")
    if problems:
        if any("import" in problem or "another module" in problem for problem in problems):
            problems.append("a hosted function loads no modules: put everything in one source")
        raise Refused("invalid", problems)


def transform(source: str, *, max_depth: int) -> CompiledModule:
    """The script of ``source`` (see the module docstring).

    Raises Refused: ``invalid`` when brackets nest deeper than ``max_depth`` or the source
    imports anything, ``no_handler`` when it is not an ES module (a syntax error) or exports no
    ``handler``.
    """
    code = source.encode()
    root = Parser(_JAVASCRIPT).parse(code).root_node
    deep = _too_deep(root, max_depth)
    if deep is not None:
        raise Refused(
            "invalid",
            [
                f"source must nest brackets at most {max_depth} levels deep"
                f" (level {max_depth + 1} at {_where(deep)})"
            ],
        )
    error = _first_error(root)
    if error is not None:
        raise Refused("no_handler", [f"syntax error at {_where(error)}"])
    _refuse_loading(root)
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
    pieces = [_PREFIX]
    kept = 0
    for start, end, replacement in sorted(edits):
        pieces += [code[kept:start], _blanked(code[start:end], replacement)]
        kept = end
    tail = f"\n;return {{handler: {exports['handler']}}};\n}})\n//# sourceURL={SCRIPT_NAME}\n"
    pieces += [code[kept:], tail.encode()]
    script = b"".join(pieces).decode()
    return CompiledModule(script, tuple(exports))


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
    standard output): ``{"script", "exports"}`` or ``{"refused", "messages"}``. Its arguments
    are the deepest nesting allowed and the seconds of CPU it may spend: past them the kernel
    ends it with SIGPROF (the profiling timer counts this process's own CPU time, user and
    system, so a loaded machine's waits are not counted)."""
    signal.setitimer(signal.ITIMER_PROF, float(sys.argv[2]))
    source = sys.stdin.buffer.read().decode()
    try:
        compiled = transform(source, max_depth=int(sys.argv[1]))
        outcome: dict[str, object] = {"script": compiled.script, "exports": compiled.exports}
    except Refused as refused:
        outcome = {"refused": refused.kind, "messages": refused.messages}
    sys.stdout.write(json.dumps(outcome))


if __name__ == "__main__":
    _serve_one()
