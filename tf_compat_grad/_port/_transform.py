"""The LibCST transformer that applies the translation table (`_table`) to a module.

Only `import tensorflow as NAME` (or `import tensorflow`) binds the names it translates. A
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


class _Fill(cst.CSTTransformer):
    """Puts the arguments into a parsed template, parenthesized where the context needs it."""

    def __init__(self, args: dict[str, cst.BaseExpression]) -> None:
        self.args = {_HOLE + name: value for name, value in args.items()}

    def _hole(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        return self.args.get(node.value) if isinstance(node, cst.Name) else None

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


def _facts(param: str, node: cst.BaseExpression) -> set[str]:
    facts = set()
    if (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "shape"
    ):
        facts.add(f"{param}:size")
    numbers = _numbers(node)
    if numbers is not None:
        facts.add(f"{param}:literal")
        ints = all(isinstance(n, cst.Integer) for n in numbers)
        if ints:
            facts.add(f"{param}:ints")
        if _number(node) is not None:
            facts.add(f"{param}:number")
            if ints:
                facts.update((f"{param}:axis", f"{param}:axes"))
        elif ints and numbers:
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


class _Untranslated(Exception):
    """Raised inside the transformer to leave a construct as it is, with the reason."""


# --- the transformer -------------------------------------------------------------------------


class _Porter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[Entry] = []
        self.aliases: set[str] = set()  # names bound to the tensorflow module
        self.needed: set[str] = set()  # keys of IMPORTS the translations use
        self.scope: list[str] = []
        self.statements: list[list[str]] = []  # comments to add above each open statement
        self.skip: set[int] = set()  # ids of tf.* nodes handled by their parent
        self.subscripted: set[int] = set()
        self.tf_import: cst.SimpleStatementLine | None = None  # the original statement

    # --- bookkeeping

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
        return super().on_visit(node)

    def on_leave(
        self, original_node: _Node, updated_node: _Node
    ) -> _Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]:
        result = super().on_leave(original_node, updated_node)
        if isinstance(original_node, (cst.FunctionDef, cst.ClassDef)):
            self.scope.pop()
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
        """Find the names bound to tensorflow by `import tensorflow [as NAME]` statements of
        their own at module level, before their uses are visited (other imports are flagged)."""
        for statement in node.body:
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
                small = statement.body[0]
                if (
                    isinstance(small, cst.Import)
                    and len(small.names) == 1
                    and _dotted(small.names[0].name) == "tensorflow"
                ):
                    self.aliases.add(_alias_name(small.names[0]))

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        for small in original_node.body:
            if isinstance(small, cst.Import) and any(
                _dotted(a.name).split(".")[0] == "tensorflow" for a in small.names
            ):
                plain = [_dotted(a.name) == "tensorflow" for a in small.names]
                alone = len(original_node.body) == 1 and plain == [True]
                at_top = len(self.statements) == 1  # this statement's own entry
                if alone and at_top and self.tf_import is None:
                    self.tf_import = original_node  # replaced in leave_Module
                else:
                    self.flag(
                        original_node,
                        _code(small),
                        "only one `import tensorflow as tf`, a statement of its own at module "
                        "level, is translated",
                    )
            elif isinstance(small, cst.ImportFrom) and _dotted(small.module).startswith(
                "tensorflow"
            ):
                self.flag(
                    original_node,
                    f"from {_dotted(small.module)} import ...",
                    "names imported from tensorflow are not translated; use "
                    "`import tensorflow as tf` and `tf.NAME`",
                )
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self.tf_import is None:
            return updated_node
        index = next(i for i, s in enumerate(original_node.body) if s is self.tf_import)
        body = list(updated_node.body)
        old = body[index]
        assert isinstance(old, cst.SimpleStatementLine)
        statement = updated_node.code_for_node(old.body[0])
        present = {updated_node.code_for_node(s).strip() for s in body}
        lines = _import_lines(self.needed, present)
        remaining = _uses(updated_node, self.aliases, skip=old)
        if lines:
            self.translated(self.tf_import, statement, "; ".join(lines))
        new = [cst.parse_statement(text) for text in lines]
        if remaining:  # kept first, with its comments (formatters keep that order as it is)
            why = f"kept: {remaining} untranslated use(s) of tensorflow remain, marked '{MARK}'"
            self.entries.append(
                Entry(self.line(self.tf_import), "<module>", "flagged", statement, why=why)
            )
            above = cst.EmptyLine(comment=cst.Comment(f"{MARK} import tensorflow {why}"))
            new.insert(0, old.with_changes(leading_lines=[*old.leading_lines, above]))
        elif new:  # the first import takes the TF import's comments
            new[0] = old.with_changes(body=cst.ensure_type(new[0], cst.SimpleStatementLine).body)
        body[index : index + 1] = new
        return updated_node.with_changes(body=body)

    # --- names and calls

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.value))  # only the whole dotted name is looked up

    def visit_Call(self, node: cst.Call) -> None:
        self.skip.add(id(node.func))  # looked up with its arguments in leave_Call

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.subscripted.add(id(node.value))

    def tf_name(self, node: cst.BaseExpression) -> str | None:
        """`reduce_sum` for `tf.reduce_sum` (tf an alias of tensorflow), else None."""
        parts = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if isinstance(node, cst.Name) and node.value in self.aliases and parts:
            return ".".join(reversed(parts))
        return None

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if id(original_node) in self.skip:
            return updated_node
        name = self.tf_name(updated_node)
        if name is None:
            return updated_node
        shown = f"{_root(updated_node)}.{name}"
        rule = TABLE.get(name)
        if rule is None or not rule.value:
            if rule is None:
                why = "not in the translation table"
            elif rule.variants:
                why = "used as a value, not called: only its calls are translated"
            else:
                why = rule.otherwise
            self.flag(original_node, shown, why)
            return updated_node
        self.translated(original_node, shown, rule.value)
        self.needed |= _roots(rule.value)
        return _parsed(rule.value)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self.tf_name(updated_node.func)
        if name is None:
            return updated_node
        shown = f"{_root(updated_node.func)}.{name}"
        rule = TABLE.get(name)
        if rule is None:
            self.flag(original_node, shown, "not in the translation table")
            return updated_node
        if rule.params is None:  # a value: the call keeps its arguments
            self.translated(original_node, shown, rule.value)
            self.needed |= _roots(rule.value)
            return updated_node.with_changes(func=_parsed(rule.value))
        try:
            variant, args = _choose(rule, updated_node, id(original_node) in self.subscripted)
        except _Untranslated as why:
            self.flag(original_node, shown, str(why))
            return updated_node
        result = _Fill(args).fill(variant.template)
        lost = [c for c in _comments(updated_node) if c not in _comments(result)]
        for comment in lost:
            self.comment_above(comment)
        self.translated(original_node, shown, _code(result))
        self.needed |= _roots(variant.template)
        return result


def _choose(
    rule: Rule, call: cst.Call, subscripted: bool
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
    facts = {"subscripted"} if subscripted else set()
    for param in rule.drop:
        given.pop(param, None)
    for param, default in rule.flags.items():
        if param not in given:
            continue
        value = given.pop(param)
        if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
            raise _Untranslated(f"`{param}=` must be a literal True or False")
        if (value.value == "True") != default:
            facts.add(f"{param}={value.value}")
    for param, value in given.items():
        facts |= _facts(param, value)
    for fact, why in rule.refuse.items():
        if fact in facts:
            raise _Untranslated(why)
    for variant in rule.variants:
        used = placeholders(variant.template)
        flag_facts = {f for f in facts if "=" in f}
        if set(used) == set(given) and variant.when <= facts and flag_facts <= variant.when:
            twice = [p for p in set(used) if used.count(p) > 1 and not _simple(given[p])]
            if twice:
                raise _Untranslated(
                    f"argument `{twice[0]}` would be evaluated twice in the translation: "
                    "assign it to a variable first"
                )
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


def _root(node: cst.BaseExpression) -> str:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


def _import_lines(needed: set[str], present: set[str]) -> list[str]:
    """The import statements the translations need, in a fixed order, less those present."""
    lines = [IMPORTS[n] for n in ("torch", "nn") if n in needed]
    ours = sorted(n for n in needed if IMPORTS[n].startswith("from tf_compat_grad"))
    if ours:
        lines.append(f"from tf_compat_grad import {', '.join(ours)}")
    return [line for line in lines if line not in present]


def _uses(module: cst.Module, aliases: set[str], skip: cst.CSTNode) -> int:
    """How many names of `aliases` the module still uses, outside `skip`."""
    count = 0

    class Counter(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal count
            if node is skip:
                return False
            if isinstance(node, cst.Attribute):
                root: cst.BaseExpression = node
                while isinstance(root, cst.Attribute):
                    root = root.value
                if isinstance(root, cst.Name) and root.value in aliases:
                    count += 1
                    return False
            return True

    module.visit(Counter())
    return count
