"""A hosted function's source, an ES module, turned into a script V8 can evaluate.

mini-racer evaluates scripts, not modules. The module is parsed with tree-sitter's JavaScript
grammar; ``import`` in any form is refused (a function loads nothing), the ``export`` keywords
are taken off the declarations they mark, and the body is wrapped in an async function, so the
module's top level keeps its own scope, strict mode and top-level ``await``:

    (async function () {"use strict";<the module's body>
    ;return {handler: <the binding exported as handler>};
    })

The script evaluates to that function; calling it runs the module's top level once and answers
its exports. The body starts on the script's first line, so line numbers in errors and stack
traces are the source's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_javascript
from tree_sitter import Language, Node, Parser

from ledgerport.errors import InvalidInput

from ._errors import FunctionSourceNoHandler

_JAVASCRIPT = Language(tree_sitter_javascript.language())
_PREFIX = b'(async function () {"use strict";'
DEFAULT_BINDING = "__ledgerport_default"
"""What an anonymous ``export default`` becomes (the default export is not used)."""


@dataclass(frozen=True)
class CompiledModule:
    script: str
    """Evaluates to an async function that runs the module and answers ``{handler}``."""
    exports: tuple[str, ...]
    """The names the module exports, in source order."""


def _where(node: Node) -> str:
    row, column = node.start_point
    return f"line {row + 1}, column {column + 1}"


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _first_error(root: Node) -> Node | None:
    for node in _walk(root):
        if node.is_error or node.is_missing:
            return node
    return None


def _bound_names(pattern: Node) -> Iterator[str]:
    """The names a declarator's pattern binds (``a``, ``{a, b: c}``, ``[a, ...b]``)."""
    if pattern.type in ("identifier", "shorthand_property_identifier_pattern"):
        yield _text(pattern)
        return
    for child in pattern.named_children:
        if pattern.type == "pair_pattern" and child == pattern.child_by_field_name("key"):
            continue
        if child.type == "assignment_pattern":
            child = child.child_by_field_name("left") or child
        yield from _bound_names(child)


def _text(node: Node) -> str:
    return (node.text or b"").decode()


def _refuse_loading(root: Node) -> None:
    """A function loads nothing: ``import`` declarations, ``import()``, ``import.meta`` and
    re-exports from another module are refused."""
    problems: list[str] = []
    for node in _walk(root):
        if node.type == "import_statement":
            problems.append(f"source: import is not allowed ({_where(node)})")
        elif node.type == "call_expression" and node.child_by_field_name("function") is not None:
            function = node.child_by_field_name("function")
            if function is not None and function.type == "import":
                problems.append(f"source: import() is not allowed ({_where(node)})")
        elif node.type == "meta_property" and _text(node).startswith("import"):
            problems.append(f"source: import.meta is not allowed ({_where(node)})")
        elif node.type == "export_statement" and node.child_by_field_name("source") is not None:
            problems.append(
                f"source: exporting from another module is not allowed ({_where(node)})"
            )
        elif node.type == "return_statement" and node.parent == root:
            problems.append(f"source: return outside a function ({_where(node)})")
    if problems:
        if any("import" in problem or "another module" in problem for problem in problems):
            problems.append("a hosted function loads no modules: put everything in one source")
        raise InvalidInput(problems)


def compile_module(source: str) -> CompiledModule:
    """The script of ``source`` (see the module docstring).

    Raises FunctionSourceNoHandler when the source is not an ES module (a syntax error) or
    exports no ``handler``, and InvalidInput when it imports anything.
    """
    code = source.encode()
    root = Parser(_JAVASCRIPT).parse(code).root_node
    error = _first_error(root)
    if error is not None:
        raise FunctionSourceNoHandler(f"syntax error at {_where(error)}")
    _refuse_loading(root)
    exports: dict[str, str] = {}
    edits: list[tuple[int, int, bytes]] = []
    for statement in root.named_children:
        if statement.type != "export_statement":
            continue
        declaration = statement.child_by_field_name("declaration")
        value = statement.child_by_field_name("value")
        default = any(child.type == "default" for child in statement.children)
        if declaration is not None:
            edits.append((statement.start_byte, declaration.start_byte, b""))
            for name in _declared(declaration):
                exports["default" if default else name] = name
        elif value is not None:
            # export default <expression>
            edits.append(
                (statement.start_byte, value.start_byte, f"const {DEFAULT_BINDING} = ".encode())
            )
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
            edits.append((statement.start_byte, statement.end_byte, b""))
    if "handler" not in exports:
        raise FunctionSourceNoHandler("the module exports no handler")
    body = code
    for start, end, replacement in sorted(edits, reverse=True):
        body = body[:start] + replacement + body[end:]
    script = (
        _PREFIX + body + f"\n;return {{handler: {exports['handler']}}};\n}})".encode()
    ).decode()
    return CompiledModule(script, tuple(exports))


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
