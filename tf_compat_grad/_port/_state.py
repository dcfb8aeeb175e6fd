"""The state the transformer keeps while it walks a module, and its bookkeeping: the report's
entries, the enclosing functions and statements (comments wait there to go above a statement),
the names that hold Python ints, fresh names for arguments evaluated once."""

from __future__ import annotations

from typing import TypeVar, cast

import libcst as cst
from libcst.metadata import PositionProvider, ScopeProvider

from . import _tape
from ._arguments import _intlike
from ._report import MARK, Entry
from ._syntax import _bound_once

_Node = TypeVar("_Node", bound=cst.CSTNode)


class _PorterState(cst.CSTTransformer):
    """The transformer's state and bookkeeping (see `_imports` and `_transform` for the rest)."""

    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider)  # lines; `_captures`

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[Entry] = []
        self.aliases: dict[str, str] = {}  # name -> the tensorflow module it is ("", "nn")
        self.direct: dict[str, str] = {}  # name -> the tensorflow name it is ("custom_gradient")
        self.tf_imports: list[cst.SimpleStatementLine] = []  # the statements binding them
        self.remaining = 0  # uses of those names left untranslated
        self.module: cst.Module = cst.Module([])
        self.variables: set[str] = set()  # module-level names of trainable tf.Variables
        self.all_variables: set[str] = set()  # module-level names of tf.Variables
        self.foreign: dict[str, str] = {}  # names bound by flagged tensorflow imports -> module
        self.needed: set[str] = set()  # keys of IMPORTS the translations use
        self.scope: list[str] = []
        self.statements: list[list[str]] = []  # comments to add above each open statement
        self.skip: set[int] = set()  # ids of tf.* nodes handled by their parent
        self.subscripted: set[int] = set()
        self.names: set[str] = set()  # every name the module uses
        self.uses: set[str] = set()  # the names (and strings) read outside import statements
        self.unused: set[int] = set()  # ids of the tensorflow imports removed as unused
        self.whole: set[int] = set()  # ids of expressions that need no parentheses
        self.assigned: list[dict[str, bool]] = [{}]  # per scope: name -> only ints assigned
        self.bound_once: list[set[str]] = [set()]  # per function: names bound exactly once
        self.functions: list[cst.FunctionDef] = []  # the enclosing functions, outermost first
        self.tapes: dict[int, _tape.Tape] = {}  # id of a translated `with` -> its tape
        self.tape_calls: dict[int, str | _tape.Tape] = {}  # id of a GradientTape(...) or
        # tape.gradient(...) call -> why it is not translated, or its tape
        self.count = 0
        self.removed: set[int] = set()  # ids of calls whose statement is removed
        self.layer_classes: dict[str, str] = {}  # classes that become `layers` classes -> base
        self.owners: list[str] = []  # per enclosing class: its `layers` base, or ""
        self.class_variables: list[set[str]] = []  # per enclosing class: its weights' names
        self.class_weights: dict[str, set[str]] = {}  # class name -> its weights' names
        self.still_used: set[str] = set()  # names read by the uses left untranslated
        self.partial: set[str] = set()  # names a translated `from` import binds to no rule

    # --- bookkeeping

    def ints(self) -> frozenset[str]:
        """The names that hold a Python int here (see `_intlike`): assigned only such values
        in the innermost function that assigns them."""
        found: dict[str, bool] = {}
        for scope in self.assigned:
            found.update(scope)
        return frozenset(name for name, is_int in found.items() if is_int)

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign | cst.RemovalSentinel:
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
    ) -> cst.AugAssign | cst.Assign:
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

    def untranslated(self, node: cst.CSTNode, tf: str, why: str) -> None:
        self.remaining += 1
        root = node.func if isinstance(node, cst.Call) else node
        while isinstance(root, (cst.Attribute, cst.Call)):
            root = root.value if isinstance(root, cst.Attribute) else root.func
        if isinstance(root, cst.Name):  # the import binding it stays
            self.still_used.add(root.value)
        self.flag(node, tf, why)

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
