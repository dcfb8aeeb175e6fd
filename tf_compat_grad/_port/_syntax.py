"""Small LibCST helpers of the translator: dotted names, an expression's code on one line,
the comments under a node, a function's parameters, the names its body binds once, the values
it assigns a name, the names an import binds, a visitor of the names of variables, renaming
reads of names."""

from __future__ import annotations

import libcst as cst

# `x op= v` -> `x = x op v`: TF's augmented assignment on a tensor makes a new tensor.
_OPERATORS: dict[type[cst.BaseAugOp], type[cst.BaseBinaryOp]] = {
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
    cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide,
    cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo,
    cst.PowerAssign: cst.Power,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.BitAndAssign: cst.BitAnd,
    cst.BitOrAssign: cst.BitOr,
    cst.BitXorAssign: cst.BitXor,
    cst.LeftShiftAssign: cst.LeftShift,
    cst.RightShiftAssign: cst.RightShift,
}
_CONTAINERS = (
    cst.List,
    cst.Tuple,
    cst.Set,
    cst.Dict,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


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


def _alias_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return _dotted(alias.name)


def _imported_names(small: cst.BaseSmallStatement) -> set[str]:
    """The names an import statement binds (`tf`, `nn`; `tensorflow` for `import
    tensorflow.math`)."""
    if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(
        small.names, cst.ImportStar
    ):
        return {_alias_name(a).split(".")[0] for a in small.names}
    return set()


def _values(node: cst.CSTNode, kind: type[cst.Comment | cst.Name]) -> list[str]:
    """The text of each comment, or each name, in node, in order."""
    found: list[str] = []

    class Finder(cst.CSTVisitor):
        def on_visit(self, child: cst.CSTNode) -> bool:
            if isinstance(child, kind):
                found.append(child.value)
            return True

    node.visit(Finder())
    return found


class _Variables(cst.CSTVisitor):
    """A visitor whose `visit_Name` sees only the names of variables: not attribute names
    (`x` of `a.x`) or keywords (`x` of `f(x=1)`)."""

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


class Binder(cst.CSTVisitor):
    """A visitor that hands `bind` the target of each annotated, `for`, `as` and walrus
    binding (assignments are each subclass's own)."""

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self.bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> bool | None:
        self.bind(node.name)
        return None

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.bind(node.target)

    def bind(self, target: cst.BaseExpression) -> None:
        raise NotImplementedError


def _bound_once(body: cst.CSTNode) -> set[str]:
    """The names a function body binds exactly once (an int there stays an int: no loop or
    later statement rebinds it)."""
    counts: dict[str, int] = {}

    class Counter(Binder):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self.bind(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self.bind(node.target)
            self.bind(node.target)  # never once

        def bind(self, target: cst.BaseExpression) -> None:
            if isinstance(target, cst.Name):
                counts[target.value] = counts.get(target.value, 0) + 1
            elif isinstance(target, (cst.Tuple, cst.List)):
                for element in target.elements:
                    self.bind(element.value)

    body.visit(Counter())
    return {name for name, count in counts.items() if count == 1}


def _assigned_values(function: cst.FunctionDef, name: str) -> list[cst.BaseExpression] | None:
    """The values `name = VALUE` assigns in the function (nested functions included), or None
    if it is bound otherwise too: a parameter, a loop or `with` target, an unpacking, an
    annotated, walrus, global, nonlocal or imported name."""
    if name in parameters(function):
        return None
    values: list[cst.BaseExpression] = []
    other = False

    class Finder(Binder):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    values.append(node.value)
                else:
                    self.bind(target.target)

        def visit_Global(self, node: cst.Global | cst.Nonlocal) -> None:
            for n in node.names:
                self.bind(n.name)

        visit_Nonlocal = visit_Global

        def bind(self, target: cst.BaseExpression) -> None:
            nonlocal other
            other = other or name in _values(target, cst.Name)

    function.body.visit(Finder())
    return None if other else values


def parameters(function: cst.FunctionDef) -> set[str]:
    """The names of a function's parameters."""
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    return {p.name.value for p in every}


class _Rename(cst.CSTTransformer):
    """Renames the reads of some names (not attribute names or keywords)."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.names.get(original_node.value)
        return updated_node if new is None else updated_node.with_changes(value=new)
