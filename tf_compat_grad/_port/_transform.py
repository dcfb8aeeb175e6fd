"""The LibCST transformer that applies the translation table (`_table`) to a module.

The module-level imports of `_bindings` bind the names it translates (`import tensorflow as tf`,
`tensorflow.compat.v2`, `from tensorflow import nn, custom_gradient`); every use of a name bound
by another tensorflow import is flagged. `tf.GradientTape` blocks are translated by `_tape`. A
construct it cannot translate with certainty is left as written, with a
`# tf_compat_grad port: <why>` comment on the line above its statement, and reported as flagged.
Comments and formatting elsewhere are kept by LibCST; a comment inside a translated call that the
translation has no place for moves above the statement.
"""

from __future__ import annotations

from functools import cache
from typing import TypeVar, cast

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from . import _tape
from ._report import MARK, Entry, PortResult
from ._table import IMPORTS, TABLE, Rule, Variant, placeholders

_Node = TypeVar("_Node", bound=cst.CSTNode)
_HOLE = "__tf_port_"  # placeholders become these names while a template is parsed


class PortSyntaxError(ValueError):
    """The input is not valid Python."""


def port_module(source: str, filename: str) -> PortResult:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise PortSyntaxError(
            f"{filename}:{error.raw_line}:{error.raw_column}: cannot parse the input: "
            f"{error.message}; `port` translates valid Python 3 source"
        ) from None
    porter = _Porter()
    code = MetadataWrapper(module).visit(porter).code
    entries = sorted(porter.entries, key=lambda e: e.line)
    return PortResult(code, tuple(entries))


# --- templates -----------------------------------------------------------------------------


@cache
def _parsed(template: str) -> cst.BaseExpression:
    return cst.parse_expression(template.replace("{", _HOLE).replace("}", ""))


@cache
def _roots(template: str) -> frozenset[str]:
    """The names a template needs imported (`torch`, `nn`, ...)."""
    finder = _RootNames()
    _parsed(template).visit(finder)
    return frozenset(finder.names & IMPORTS.keys())


class _RootNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # not the attribute's own name
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # not the keyword
        return False

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


# --- facts about arguments (see `_table`) ------------------------------------------------------


def _number(node: cst.BaseExpression) -> cst.Integer | cst.Float | None:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return node if isinstance(node, (cst.Integer, cst.Float)) and not node.lpar else None


def _numbers(node: cst.BaseExpression) -> list[cst.Integer | cst.Float] | None:
    """The numbers of a literal number or nested list/tuple of them; None if not one."""
    number = _number(node)
    if number is not None:
        return [number]
    if isinstance(node, (cst.List, cst.Tuple)):
        found: list[cst.Integer | cst.Float] = []
        for element in node.elements:
            if not isinstance(element, cst.Element):
                return None
            inner = _numbers(element.value)
            if inner is None:
                return None
            found.extend(inner)
        return found
    return None


def _intlike(node: cst.BaseExpression, ints: frozenset[str] = frozenset()) -> bool:
    """A Python int in torch: a literal int, an indexed `.shape`, `len(...)`, a name in `ints`
    (assigned only such values), or `+ - *` of them."""
    if isinstance(node, cst.Name):
        return node.value in ints
    number = _number(node)
    if number is not None:
        return isinstance(number, cst.Integer)
    if isinstance(node, cst.Subscript):  # x.shape[i], list(x.shape)[i]
        value = node.value
        if isinstance(value, cst.Call) and _dotted(value.func) == "list" and len(value.args) == 1:
            value = value.args[0].value
        return isinstance(value, cst.Attribute) and value.attr.value == "shape"
    if isinstance(node, cst.Call):
        return isinstance(node.func, cst.Name) and node.func.value == "len"
    if isinstance(node, cst.BinaryOperation) and isinstance(
        node.operator, (cst.Add, cst.Subtract, cst.Multiply)
    ):
        return _intlike(node.left, ints) and _intlike(node.right, ints)
    return False


def _facts(param: str, node: cst.BaseExpression, ints: frozenset[str] = frozenset()) -> set[str]:
    facts = set()
    if isinstance(node, cst.Name) and node.value not in ("True", "False", "None"):
        facts.add(f"{param}:name")
    if _intlike(node, ints):
        facts.add(f"{param}:intlike")
    number = _number(node)
    if number is not None and float(number.evaluated_value) != 0:
        facts.add(f"{param}:nonzero")
    if (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "shape"
    ):
        facts.add(f"{param}:size")
    numbers = _numbers(node)
    if numbers is not None:
        facts.add(f"{param}:literal")
        integers = all(isinstance(n, cst.Integer) for n in numbers)
        if integers:
            facts.add(f"{param}:ints")
        if _number(node) is not None:
            facts.add(f"{param}:number")
            if integers:
                facts.update((f"{param}:axis", f"{param}:axes"))
        elif integers and numbers:
            facts.add(f"{param}:axes")
    return facts


def _simple(node: cst.BaseExpression) -> bool:
    """Whether an expression may be written twice: a name, a dotted name or a number, negated
    or not, or a literal list or tuple of those (`-delta`, `[1]`)."""
    while isinstance(node, cst.Attribute):
        node = node.value
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return _simple(node.expression)
    if isinstance(node, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and _simple(e.value) for e in node.elements)
    return isinstance(node, cst.Name) or _number(node) is not None


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


class _Untranslated(Exception):
    """Raised inside the transformer to leave a construct as it is, with the reason."""


# --- the transformer -------------------------------------------------------------------------


class _Porter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[Entry] = []
        self.aliases: dict[str, str] = {}  # name -> the tensorflow module it is ("", "nn")
        self.direct: dict[str, str] = {}  # name -> the tensorflow name it is ("custom_gradient")
        self.tf_imports: list[cst.SimpleStatementLine] = []  # the statements binding them
        self.remaining = 0  # uses of those names left untranslated
        self.module: cst.Module = cst.Module([])
        self.variables: set[str] = set()  # module-level names of tf.Variables
        self.foreign: dict[str, str] = {}  # names bound by flagged tensorflow imports -> module
        self.needed: set[str] = set()  # keys of IMPORTS the translations use
        self.scope: list[str] = []
        self.statements: list[list[str]] = []  # comments to add above each open statement
        self.skip: set[int] = set()  # ids of tf.* nodes handled by their parent
        self.subscripted: set[int] = set()
        self.names: set[str] = set()  # every name the module uses
        self.whole: set[int] = set()  # ids of expressions that need no parentheses
        self.assigned: list[dict[str, bool]] = [{}]  # per scope: name -> only ints assigned
        self.bound_once: list[set[str]] = [set()]  # per function: names bound exactly once
        self.functions: list[cst.FunctionDef] = []  # the enclosing functions, outermost first
        self.tapes: dict[int, _tape.Tape] = {}  # id of a translated `with` -> its tape
        self.tape_calls: dict[int, str | _tape.Tape] = {}  # id of a GradientTape(...) or
        # tape.gradient(...) call -> why it is not translated, or its tape
        self.count = 0

    # --- bookkeeping

    def ints(self) -> frozenset[str]:
        """The names that hold a Python int here (see `_intlike`): assigned only such values
        in the innermost function that assigns them."""
        found: dict[str, bool] = {}
        for scope in self.assigned:
            found.update(scope)
        return frozenset(name for name, is_int in found.items() if is_int)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        is_int = _intlike(updated_node.value, self.ints())
        for target in updated_node.targets:
            names = [target.target] if isinstance(target.target, cst.Name) else []
            for name in names:
                scope = self.assigned[-1]
                once = self.bound_once[-1]
                scope[name.value] = scope.get(name.value, True) and is_int and name.value in once
        return updated_node

    def leave_AugAssign(
        self, original_node: cst.AugAssign, updated_node: cst.AugAssign
    ) -> cst.AugAssign:
        if isinstance(updated_node.target, cst.Name):  # rebound: not known to be an int
            self.assigned[-1][updated_node.target.value] = False
        return updated_node

    def fresh(self, wanted: str = "", numbered: bool = False) -> str:
        """`wanted` if the module does not use it (or `wanted2`, `wanted3`, ... if `numbered`),
        else `_t1`, `_t2`, ... the first unused: the name of an argument evaluated once and used
        twice, of a watched tensor."""
        for suffix in ["", *(str(n) for n in range(2, 100 if numbered else 2))]:
            if wanted and wanted + suffix not in self.names:
                self.names.add(wanted + suffix)
                return wanted + suffix
        while True:
            self.count += 1
            name = f"_t{self.count}"
            if name not in self.names:
                self.names.add(name)
                return name

    def line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def function(self) -> str:
        return ".".join(self.scope) or "<module>"

    def translated(self, node: cst.CSTNode, tf: str, torch: str) -> None:
        self.entries.append(Entry(self.line(node), self.function(), "translated", tf, torch))

    def flag(self, node: cst.CSTNode, tf: str, why: str) -> None:
        self.entries.append(Entry(self.line(node), self.function(), "flagged", tf, why=why))
        self.comment_above(f"{MARK} {tf} not translated: {why}")

    def comment_above(self, text: str) -> None:
        if self.statements and text not in self.statements[-1]:
            self.statements[-1].append(text)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.statements.append([])
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.scope.append(node.name.value)
            self.assigned.append({})
        if isinstance(node, cst.FunctionDef):
            self.functions.append(node)
            self.bound_once.append(_bound_once(node.body))
        return super().on_visit(node)

    def on_leave(
        self, original_node: _Node, updated_node: _Node
    ) -> _Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]:
        result = super().on_leave(original_node, updated_node)
        if isinstance(original_node, (cst.FunctionDef, cst.ClassDef)):
            self.scope.pop()
            self.assigned.pop()
        if isinstance(original_node, cst.FunctionDef):
            self.functions.pop()
            self.bound_once.pop()
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            comments = self.statements.pop()
            if comments and isinstance(
                result, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
            ):
                above = [cst.EmptyLine(comment=cst.Comment(c)) for c in comments]
                lines = [*result.leading_lines, *above]
                return cast(_Node, result.with_changes(leading_lines=lines))
        return result

    # --- imports

    def visit_Module(self, node: cst.Module) -> None:
        """Find the names bound to tensorflow by the import statements it translates, before
        their uses are visited (see `_bindings`); every other tensorflow import is flagged."""

        class Names(cst.CSTVisitor):
            def visit_Name(inner, name: cst.Name) -> None:
                self.names.add(name.value)

        node.visit(Names())
        for statement in node.body:
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
                bindings = _bindings(statement.body[0])
                if bindings:
                    self.tf_imports.append(statement)
                    for name, (kind, target) in bindings.items():
                        (self.aliases if kind == "module" else self.direct)[name] = target

        class Foreign(cst.CSTVisitor):  # names bound by the tensorflow imports it flags
            def visit_Import(inner, node: cst.Import) -> None:
                for alias in node.names:
                    if _dotted(alias.name).split(".")[0] == "tensorflow":
                        name = _alias_name(alias).split(".")[0]
                        self.foreign.setdefault(name, _dotted(alias.name))

            def visit_ImportFrom(inner, node: cst.ImportFrom) -> None:
                module = _dotted(node.module)
                if node.relative or module.split(".")[0] != "tensorflow":
                    return
                if isinstance(node.names, cst.ImportStar):
                    return
                for alias in node.names:
                    self.foreign.setdefault(_alias_name(alias), module)

        node.visit(Foreign())
        self.module = node
        for statement in node.body:  # NAME = tf.Variable(...): trainable, watched when read
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
                small = statement.body[0]
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Call)
                    and self.tf_name(small.value.func) == "Variable"
                    and not any(
                        a.keyword is not None and a.keyword.value == "trainable"
                        for a in small.value.args
                    )
                ):
                    self.variables.add(small.targets[0].target.value)
        for name in [*self.aliases, *self.direct]:
            self.foreign.pop(name, None)

    def visit_Import(self, node: cst.Import) -> bool:
        return False  # its names are not uses

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if any(original_node is s for s in self.tf_imports):
            return updated_node  # replaced in leave_Module
        for small in original_node.body:
            if isinstance(small, cst.Import) and any(
                _dotted(a.name).split(".")[0] == "tensorflow" for a in small.names
            ):
                self.flag(original_node, _code(small), _IMPORTS_WHY)
            elif (
                isinstance(small, cst.ImportFrom)
                and not small.relative
                and _dotted(small.module).split(".")[0] == "tensorflow"
            ):
                self.flag(original_node, f"from {_dotted(small.module)} import ...", _IMPORTS_WHY)
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self.tf_imports:
            return updated_node
        indices = [
            next(i for i, s in enumerate(original_node.body) if s is statement)
            for statement in self.tf_imports
        ]
        body = list(updated_node.body)
        olds = [cst.ensure_type(body[i], cst.SimpleStatementLine) for i in indices]
        shown = [updated_node.code_for_node(old.body[0]) for old in olds]
        present = {updated_node.code_for_node(s).strip() for s in body}
        lines = _import_lines(self.needed, present)
        new = [cst.parse_statement(text) for text in lines]
        if self.remaining:  # kept, with their comments, the new imports after the first
            why = (
                f"kept: {self.remaining} untranslated use(s) of tensorflow remain, marked '{MARK}'"
            )
            for index, old, statement, original in zip(
                indices, olds, shown, self.tf_imports, strict=True
            ):
                self.entries.append(
                    Entry(self.line(original), "<module>", "flagged", statement, why=why)
                )
                above = cst.EmptyLine(comment=cst.Comment(f"{MARK} {statement} {why}"))
                body[index] = old.with_changes(leading_lines=[*old.leading_lines, above])
            if lines:
                self.translated(self.tf_imports[0], shown[0], "; ".join(lines))
            replaced: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = [
                body[indices[0]],
                *new,
            ]
        else:  # the first import takes the first TF import's comments, the others go
            for statement, original in zip(shown, self.tf_imports, strict=True):
                self.translated(original, statement, "; ".join(lines) or "(removed)")
                lines = []
            if new:
                new[0] = olds[0].with_changes(
                    body=cst.ensure_type(new[0], cst.SimpleStatementLine).body
                )
            replaced = list(new)
            for index in reversed(indices[1:]):
                del body[index]
        body[indices[0] : indices[0] + 1] = replaced
        return updated_node.with_changes(body=body)

    # --- names and calls

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.value))  # only the whole dotted name is looked up
        self.skip.add(id(node.attr))

    def visit_Param(self, node: cst.Param) -> None:
        self.skip.add(id(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.skip.add(id(node.name))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.skip.add(id(node.name))

    def visit_Call(self, node: cst.Call) -> None:
        self.skip.add(id(node.func))  # looked up with its arguments in leave_Call
        name = self.tf_name(node.func)
        shape = _SHAPE_ARGUMENT.get(TABLE[name].names[0]) if name in TABLE else None
        if shape is not None:  # a `tf.shape(x)` there may be a torch.Size
            position, keyword = shape
            for index, arg in enumerate(node.args):
                if (arg.keyword is None and index == position) or (
                    arg.keyword is not None and arg.keyword.value == keyword
                ):
                    self.subscripted.add(id(arg.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.subscripted.add(id(node.value))

    def tf_name(self, node: cst.BaseExpression) -> str | None:
        """`reduce_sum` for `tf.reduce_sum` (tf an alias of tensorflow), `nn.relu` for `nn.relu`
        (`from tensorflow import nn`), `custom_gradient` for `custom_gradient` (imported from
        tensorflow), else None."""
        parts = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        if node.value in self.aliases and parts:
            prefix = self.aliases[node.value]
            return ".".join([*([prefix] if prefix else []), *reversed(parts)])
        if node.value in self.direct and not parts:
            return self.direct[node.value]
        return None

    def untranslated(self, node: cst.CSTNode, tf: str, why: str) -> None:
        self.remaining += 1
        self.flag(node, tf, why)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if id(original_node) in self.skip:
            return updated_node
        if original_node.value in self.aliases:
            self.untranslated(
                original_node,
                original_node.value,
                "the tensorflow module used as a value: translate this use by hand",
            )
            return updated_node
        if original_node.value in self.direct:
            return self.translate_value(original_node, updated_node)
        self.foreign_use(original_node, original_node)
        return updated_node

    def foreign_use(self, original: cst.CSTNode, node: cst.BaseExpression) -> None:
        """Flag a use of a name bound by a tensorflow import that is not translated."""
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root.value in self.foreign:
            self.flag(
                original,
                _dotted(node) or root.value,
                f"`{root.value}` comes from `{self.foreign[root.value]}`, whose import is not "
                "translated",
            )

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if id(original_node) in self.skip:
            return updated_node
        if self.tf_name(updated_node) is None:
            self.foreign_use(original_node, updated_node)
        return self.translate_value(original_node, updated_node)

    def translate_value(
        self, original_node: cst.BaseExpression, updated_node: cst.BaseExpression
    ) -> cst.BaseExpression:
        """A tensorflow name used as a value, not called: `tf.float32`, `@tf.custom_gradient`."""
        name = self.tf_name(updated_node)
        if name is None:
            return updated_node
        shown = _dotted(updated_node)
        rule = TABLE.get(name)
        if rule is None or not rule.value:
            if rule is None:
                why = "not in the translation table"
            elif rule.variants:
                why = "used as a value, not called: only its calls are translated"
            else:
                why = rule.otherwise
            self.untranslated(original_node, shown, why)
            return updated_node
        self.translated(original_node, shown, rule.value)
        self.needed |= _roots(rule.value)
        return _parsed(rule.value)

    # --- @tf.function and TF-only tensor methods

    def visit_Decorator(self, node: cst.Decorator) -> None:
        if self.tf_name(node.decorator) == "function":
            self.skip.add(id(node.decorator))
            self.skip.add(id(getattr(node.decorator, "attr", None)))

    def leave_Decorator(
        self, original_node: cst.Decorator, updated_node: cst.Decorator
    ) -> cst.Decorator | cst.RemovalSentinel:
        if self.tf_name(original_node.decorator) != "function":
            return updated_node
        self.translated(original_node, "@" + _dotted(original_node.decorator), "(removed)")
        for comment in _comments(original_node):  # kept, above the definition
            self.comment_above(comment)
        return cst.RemoveFromParent()

    def tensor_method(self, original: cst.Call, call: cst.Call) -> cst.BaseExpression | None:
        """`x.get_shape()` -> `x.shape`, `x.shape.as_list()` -> `list(x.shape)`: TF-only
        methods (eager shapes are fully known: ints in both)."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "set_shape":
            self.flag(
                original,
                ".set_shape()",
                "a TF-only shape assertion (eager shapes are known): check the shape with an "
                "`assert` or delete the call",
            )
            return None
        if call.args or not isinstance(func, cst.Attribute):
            return None
        if func.attr.value == "get_shape":
            result: cst.BaseExpression = cst.Attribute(func.value, cst.Name("shape"))
        elif (
            func.attr.value == "as_list"
            and isinstance(func.value, cst.Attribute)
            and func.value.attr.value == "shape"
        ):
            result = cst.Call(cst.Name("list"), [cst.Arg(func.value)])
        else:
            return None
        self.translated(original, f".{func.attr.value}()", _code(result))
        return result

    # --- tf.GradientTape (see `_tape`)

    def visit_With(self, node: cst.With) -> None:
        call = node.items[0].item if node.items else None
        if not isinstance(call, cst.Call) or self.tf_name(call.func) != "GradientTape":
            return
        body = self.functions[-1].body if self.functions else self.module
        found = _tape.check(node, body, self.functions, "GradientTape", frozenset(self.variables))
        if isinstance(found, str):
            self.tape_calls[id(call)] = found
            asname = node.items[0].asname
            if asname is not None and isinstance(asname.name, cst.Name):
                for gradient in _tape.gradient_calls(body, asname.name.value)[0]:
                    self.tape_calls[id(gradient)] = (
                        f"the gradient of the untranslated tape of line {self.line(node)}"
                    )
            return
        name, watched, watches = found
        mapping = {w: self.fresh(f"{w}_watched", numbered=True) for w in dict.fromkeys(watched)}
        tape = _tape.Tape(name, mapping, node, watches)
        self.tapes[id(node)] = tape
        self.tape_calls[id(call)] = tape
        for gradient in _tape.gradient_calls(body, name)[0]:
            self.tape_calls[id(gradient)] = tape

    def leave_With(
        self, original_node: cst.With, updated_node: cst.With
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        tape = self.tapes.get(id(original_node))
        if tape is None:
            return updated_node
        body = cst.ensure_type(updated_node.body, cst.IndentedBlock)
        assignments = [
            cst.parse_statement(
                f"{new} = {old} if {old}.requires_grad else {old}.detach().requires_grad_()"
            )
            for old, new in tape.watched.items()
        ]
        rest = [s.visit(_Rename(tape.watched)) for s in body.body[tape.watches :]]
        first = body.body[0]
        if assignments and isinstance(first, cst.SimpleStatementLine):  # keep its comments
            assignments[0] = cst.ensure_type(assignments[0], cst.SimpleStatementLine).with_changes(
                leading_lines=first.leading_lines
            )
        self.needed.add("torch")
        return updated_node.with_changes(
            items=[cst.WithItem(cst.parse_expression("torch.enable_grad()"))],
            body=body.with_changes(body=[*assignments, *rest]),
        )

    def tape_gradient(
        self, original: cst.Call, call: cst.Call, tape: _tape.Tape
    ) -> cst.BaseExpression:
        positional = [a for a in call.args if a.keyword is None]
        names = ["target", "sources", "output_gradients"][: len(positional)]
        given = {n: a.value for n, a in zip(names, positional, strict=False)}
        given |= {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        sources = given["sources"]
        items = sources.elements if isinstance(sources, (cst.List, cst.Tuple)) else [sources]
        renamed = [
            cst.Element(cst.Name(tape.watched.get(cst.ensure_type(i.value, cst.Name).value, "")))
            if cst.ensure_type(i.value, cst.Name).value in tape.watched
            else cst.Element(i.value)
            for i in (e if isinstance(e, cst.BaseElement) else cst.Element(e) for e in items)
        ]
        upstream = (
            "{output_gradients}" if "output_gradients" in given else ("torch.ones_like({target})")
        )
        template = (
            f"torch.autograd.grad({{target}}, {{sources}}, grad_outputs={upstream}, "
            "create_graph=True, allow_unused=True)"
        )
        if isinstance(sources, cst.List):
            template = f"list({template})"
        elif isinstance(sources, cst.Tuple):
            template = f"tuple({template})"
        else:
            template = f"{template}[0]"
        args = {**given, "sources": cst.List(renamed)}
        used = placeholders(template)
        twice = sorted(p for p in set(used) if used.count(p) > 1 and not _simple(args[p]))
        result = _Fill(args, {p: self.fresh() for p in twice}).fill(template)
        self.translated(original, f"{tape.name}.gradient", _code(result))
        self.needed.add("torch")
        return result

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        tape = self.tape_calls.get(id(original_node))
        if isinstance(tape, _tape.Tape):
            if tape.block.items[0].item is original_node:
                shown = _dotted(updated_node.func)
                self.translated(original_node, shown, "torch.enable_grad()")
                return updated_node
            return self.tape_gradient(original_node, updated_node, tape)
        if isinstance(tape, str):
            self.untranslated(original_node, _dotted(updated_node.func), tape)
            return updated_node
        name = self.tf_name(updated_node.func)
        if name is None:
            method = self.tensor_method(original_node, updated_node)
            if method is None:
                self.foreign_use(original_node, updated_node.func)
            return updated_node if method is None else method
        shown = _dotted(updated_node.func)
        rule = TABLE.get(name)
        if rule is None:
            self.untranslated(original_node, shown, "not in the translation table")
            return updated_node
        if rule.params is None:  # a value: the call keeps its arguments
            self.translated(original_node, shown, rule.value)
            self.needed |= _roots(rule.value)
            return updated_node.with_changes(func=_parsed(rule.value))
        try:
            variant, args = _choose(
                rule, updated_node, id(original_node) in self.subscripted, self.ints()
            )
        except _Untranslated as why:
            self.untranslated(original_node, shown, str(why))
            return updated_node
        used = placeholders(variant.template)
        twice = sorted(p for p in set(used) if used.count(p) > 1 and not _simple(args[p]))
        if "branches" in variant.when:  # each branch evaluates them once
            twice = []
        result = _Fill(args, {p: self.fresh() for p in twice}).fill(variant.template)
        lost = [c for c in _comments(updated_node) if c not in _comments(result)]
        for comment in lost:
            self.comment_above(comment)
        self.translated(original_node, shown, _code(result))
        self.needed |= _roots(variant.template)
        return self.in_place(original_node, result)

    def in_place(self, original: cst.CSTNode, result: cst.BaseExpression) -> cst.BaseExpression:
        """`result`, parenthesized unless it is an atom or stands where any expression can
        (an argument, an assigned or returned value, an element): `2 * tf.clip_by_norm(...)`
        must stay a product of the whole translation."""
        if isinstance(result, (*_ATOMS, cst.UnaryOperation)) or id(original) in self.whole:
            return result
        return _wrapped(result, ())

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))
        self.whole.add(id(node.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        self.whole.add(id(node.value))

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.whole.add(id(node.value))

    def visit_Element(self, node: cst.Element) -> None:
        self.whole.add(id(node.value))


_IMPORTS_WHY = (
    "translated imports: `import tensorflow as tf`, `import tensorflow.compat.v2 as tf`, and "
    "`from tensorflow[.MODULE] import NAME` of table names and their modules (`nn`, `math`), "
    "each a statement of its own at module level; `tensorflow.compat.v1` has other semantics"
)

# The rules (by their first name) whose argument may be a whole `tf.shape(x)`, a torch.Size:
# the argument's position and keyword.
_SHAPE_ARGUMENT = {
    "reshape": (1, "shape"),
    "ones": (0, "shape"),
    "zeros": (0, "shape"),
    "fill": (0, "dims"),
    "broadcast_to": (1, "shape"),
}
_V2_MODULES = ("tensorflow", "tensorflow.compat.v2")


def _bindings(small: cst.BaseSmallStatement) -> dict[str, tuple[str, str]]:
    """The names an import statement binds to tensorflow, each a ("module", prefix) or a
    ("name", table name); empty if it is not one the translator takes (see `_IMPORTS_WHY`)."""
    if isinstance(small, cst.Import):
        if len(small.names) != 1:
            return {}
        alias = small.names[0]
        module = _dotted(alias.name)
        if module == "tensorflow" or (module in _V2_MODULES and alias.asname is not None):
            return {_alias_name(alias): ("module", "")}
        prefix = module.removeprefix("tensorflow.")
        if (
            module.startswith("tensorflow.")
            and alias.asname is not None
            and any(known.startswith(prefix + ".") for known in TABLE)
        ):
            return {_alias_name(alias): ("module", prefix)}  # import tensorflow.math as tfm
        return {}
    if not isinstance(small, cst.ImportFrom) or small.relative or small.module is None:
        return {}
    module = _dotted(small.module)
    if isinstance(small.names, cst.ImportStar):
        return {}
    if module == "tensorflow.compat":
        base = None
    elif module in _V2_MODULES:
        base = ""
    elif module.startswith("tensorflow."):
        base = module.removeprefix("tensorflow.")
    else:
        return {}
    found: dict[str, tuple[str, str]] = {}
    for alias in small.names:
        name = _dotted(alias.name)
        if base is None:  # from tensorflow.compat import v2 [as tf]
            if name != "v2":
                return {}
            found[_alias_name(alias)] = ("module", "")
            continue
        full = f"{base}.{name}" if base else name
        if full in TABLE:
            found[_alias_name(alias)] = ("name", full)
        elif any(known.startswith(full + ".") for known in TABLE):
            found[_alias_name(alias)] = ("module", full)
        else:
            return {}
    return found


def _choose(
    rule: Rule, call: cst.Call, subscripted: bool, ints: frozenset[str] = frozenset()
) -> tuple[Variant, dict[str, cst.BaseExpression]]:
    """The variant of `rule` that fits the call's arguments, and the arguments by parameter."""
    assert rule.params is not None
    if not rule.variants:
        raise _Untranslated(rule.otherwise)
    given: dict[str, cst.BaseExpression] = {}
    for position, arg in enumerate(call.args):
        if arg.star:
            raise _Untranslated(f"`{arg.star}` arguments cannot be matched to parameters")
        if arg.keyword is None:
            if position >= len(rule.params):
                raise _Untranslated(
                    f"positional argument {position + 1} is not translated (pass it by keyword)"
                )
            param = rule.params[position]
        else:
            param = arg.keyword.value
        given[param] = arg.value
    facts = {"subscripted", "branches"} if subscripted else {"branches"}
    for param in rule.drop:
        given.pop(param, None)
    for param, default in rule.flags.items():
        if param not in given:
            continue
        value = given[param]
        if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
            if param in rule.dynamic:
                continue  # an expression: an ordinary argument
            raise _Untranslated(f"`{param}=` must be a literal True or False")
        del given[param]
        if (value.value == "True") != default:
            facts.add(f"{param}={value.value}")
    for param, text in rule.strings.items():
        if param not in given:
            continue
        string = given.pop(param)
        if not isinstance(string, cst.SimpleString) or string.prefix:
            raise _Untranslated(f"`{param}=` must be a literal string")
        if string.raw_value != text:
            facts.add(f"{param}={string.raw_value}")
    for param, value in given.items():
        facts |= _facts(param, value, ints)
    for fact, why in rule.refuse.items():
        if fact in facts:
            raise _Untranslated(why)
    for variant in rule.variants:
        used = placeholders(variant.template)
        flag_facts = {f for f in facts if "=" in f}
        if set(used) == set(given) and variant.when <= facts and flag_facts <= variant.when:
            return variant, given
    known = {p for v in rule.variants for p in placeholders(v.template)}
    unknown = sorted(set(given) - known - set(rule.flags))
    if unknown:
        raise _Untranslated(f"argument `{unknown[0]}` is not translated")
    raise _Untranslated(rule.otherwise or "this combination of arguments is not translated")


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


def _import_lines(needed: set[str], present: set[str]) -> list[str]:
    """The import statements the translations need, in a fixed order, less those present."""
    lines = [IMPORTS[n] for n in ("torch", "nn") if n in needed]
    ours = sorted(n for n in needed if IMPORTS[n].startswith("from tf_compat_grad"))
    if ours:
        lines.append(f"from tf_compat_grad import {', '.join(ours)}")
    return [line for line in lines if line not in present]
