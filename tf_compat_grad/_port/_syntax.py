"""Small LibCST helpers of the translator: dotted names, an expression's code on one line,
the comments under a node, the names a function body binds once, renaming reads of names."""

from __future__ import annotations

import libcst as cst


def _code(node: cst.CSTNode, limit: int = 80) -> str:
    """An expression's code on one line, shortened for the report."""
    text = " ".join(cst.Module([]).code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dotted(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value if isinstance(node, cst.Name) else ""


def _comments(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class Finder(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(comment.value)

    node.visit(Finder())
    return found


def _bound_once(body: cst.CSTNode) -> set[str]:
    """The names a function body binds exactly once (an int there stays an int: no loop or
    later statement rebinds it)."""
    counts: dict[str, int] = {}

    class Counter(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self.bind(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self.bind(node.target)
            self.bind(node.target)  # never once

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self.bind(node.target)

        def visit_For(self, node: cst.For) -> None:
            self.bind(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            self.bind(node.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            self.bind(node.target)

        def bind(self, target: cst.BaseExpression) -> None:
            if isinstance(target, cst.Name):
                counts[target.value] = counts.get(target.value, 0) + 1
            elif isinstance(target, (cst.Tuple, cst.List)):
                for element in target.elements:
                    self.bind(element.value)

    body.visit(Counter())
    return {name for name, count in counts.items() if count == 1}


class _Rename(cst.CSTTransformer):
    """Renames the reads of some names (not attribute names or keywords)."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return True

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.names.get(original_node.value)
        return updated_node if new is None else updated_node.with_changes(value=new)
