"""Templates of the translation table (`_table`) as LibCST expressions: parsed once, the names
they need imported, and `_Fill`, which puts a call's arguments into one."""

from __future__ import annotations

from functools import cache

import libcst as cst

from ._syntax import _Variables
from ._table import IMPORTS

_HOLE = "__tf_port_"  # placeholders become these names while a template is parsed


@cache
def _parsed(template: str) -> cst.BaseExpression:
    return cst.parse_expression(template.replace("{", _HOLE).replace("}", ""))


@cache
def _roots(template: str) -> frozenset[str]:
    """The names a template needs imported (`torch`, `nn`, ...)."""
    finder = _RootNames()
    _parsed(template).visit(finder)
    return frozenset(finder.names & IMPORTS.keys())


class _RootNames(_Variables):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Dict)
_OPERANDS = (*_ATOMS, cst.Integer, cst.Float, cst.SimpleString)


def _wrapped(node: cst.BaseExpression, atoms: tuple[type[cst.CSTNode], ...]) -> cst.BaseExpression:
    if isinstance(node, atoms) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


_KEEP_PARENS = (cst.Tuple, cst.GeneratorExp, cst.Yield)


class _Fill(cst.CSTTransformer):
    """Puts the arguments into a parsed template, parenthesized where the context needs it.

    An argument used more than once that is not a name or a number is evaluated once: its first
    use (the first evaluated: templates use no conditional expressions) binds it to the name
    `names[param]` in an assignment expression, the later uses read that name."""

    def __init__(
        self, args: dict[str, cst.BaseExpression], names: dict[str, str] | None = None
    ) -> None:
        self.args = {_HOLE + name: value for name, value in args.items()}
        self.later: dict[str, cst.BaseExpression] = {}  # the name a bound argument is read by
        self.first: dict[str, int] = {}  # the id of the hole that binds it
        for param, name in (names or {}).items():
            value = self.args[_HOLE + param]
            self.args[_HOLE + param] = cst.NamedExpr(
                target=cst.Name(name),
                value=value
                if isinstance(value, _KEEP_PARENS)
                else value.with_changes(lpar=[], rpar=[]),
                lpar=[cst.LeftParen()],
                rpar=[cst.RightParen()],
            )
            self.later[_HOLE + param] = cst.Name(name)

    def _hole(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        if not isinstance(node, cst.Name) or node.value not in self.args:
            return None
        key = node.value
        if key in self.later and self.first.setdefault(key, id(node)) != id(node):
            return self.later[key]
        return self.args[key]

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        value = self._hole(original_node)
        return updated_node if value is None else _wrapped(value, _OPERANDS)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        value = self._hole(original_node.value)
        return updated_node if value is None else updated_node.with_changes(value=value)

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        value = self._hole(original_node.value)
        if value is None:
            return updated_node
        return updated_node.with_changes(value=_wrapped(value, _ATOMS))

    def fill(self, template: str) -> cst.BaseExpression:
        result = _parsed(template).visit(self)
        assert isinstance(result, cst.BaseExpression)
        return result
