"""The names a function decorated with `@tf.custom_gradient` reads from the functions around it.

TensorFlow gives a tensor f captures from an enclosing function (rather than takes as a
positional argument) no gradient through f's outputs, without a word; `custom_gradient` refuses
a call where such a tensor requires grad, unless it is decorated with `captured="constant"`,
which keeps TensorFlow's behaviour. The port writes that option where f's own code (its body,
with its comprehensions and lambdas, not a function defined inside it such as grad_fn) reads a
name bound in an enclosing function: a parameter or an assignment there, not a function, class
or import. Module-level names are not captures of this kind: a module-level tensor is a global
that the user's own code defines, and the library's refusal names it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import cast

import libcst as cst
from libcst.metadata import (
    Assignment,
    FunctionScope,
    GlobalScope,
    Scope,
    ScopeProvider,
)

from ._classes import _Classes
from ._syntax import _dotted

_NOT_VALUES = (cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom)


class _Captures(_Classes):
    """The part of the transformer that writes `captured="constant"` (the scopes it reads are
    among `_PorterState`'s metadata)."""

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        """`@tf.custom_gradient` on a function that reads names of the functions around it
        becomes `@custom_gradient(captured="constant")`: TensorFlow's behaviour for them
        (`_captures`)."""
        updated_node = super().leave_FunctionDef(original_node, updated_node)
        decorators = [d.decorator for d in original_node.decorators]
        names = [self.tf_name(d) for d in decorators]
        if "custom_gradient" not in names:
            return updated_node
        scopes = cast("Mapping[cst.CSTNode, Scope | None]", self.metadata[ScopeProvider])
        captured = enclosing_captures(scopes, original_node)
        if not captured:
            return updated_node
        i = names.index("custom_gradient")
        call = cst.ensure_type(cst.parse_expression('_(captured="constant")'), cst.Call)
        shown = ", ".join(f"`{name}`" for name in captured)
        self.translated(
            original_node.decorators[i],
            f"@{_dotted(decorators[i])} on a function that captures {shown} from the enclosing "
            "function",
            '@custom_gradient(captured="constant"): as in TensorFlow, a tensor among them gets '
            "no gradient through the function's outputs (without the option, a call where one "
            "requires grad is refused)",
        )
        new = [*updated_node.decorators]
        new[i] = new[i].with_changes(decorator=call.with_changes(func=new[i].decorator))
        return updated_node.with_changes(decorators=new)


def enclosing_captures(
    scopes: Mapping[cst.CSTNode, Scope | None], fn: cst.FunctionDef
) -> list[str]:
    """The names fn's own code reads from enclosing functions, in order of first reading."""
    own = scopes.get(fn.body)
    if not isinstance(own, FunctionScope):
        return []
    enclosing: set[Scope] = set()
    scope: Scope | None = own.parent
    while isinstance(scope, FunctionScope):
        enclosing.add(scope)
        scope = scope.parent
    found: set[str] = set()
    for inner in {s for s in scopes.values() if s is not None and _within(s, own)}:
        for access in inner.accesses:
            for referent in access.referents:
                if (
                    referent.scope in enclosing
                    and isinstance(referent, Assignment)
                    and not isinstance(referent.node, _NOT_VALUES)
                ):
                    found.add(referent.name)
    code = cst.Module([fn.with_changes(decorators=())]).code
    return sorted(found, key=lambda name: _position(code, name))


def _position(code: str, name: str) -> int:
    """Where `name` is first read in fn's code, for the report's order."""
    match = re.search(rf"\b{re.escape(name)}\b", code)
    return match.start() if match else len(code)


def _within(scope: Scope, own: FunctionScope) -> bool:
    """Whether `scope` is fn's own or one inside it that is not a `def` (a comprehension, a
    lambda)."""
    current = scope
    while current is not own:
        if isinstance(current, GlobalScope) or (
            isinstance(current, FunctionScope) and isinstance(current.node, cst.FunctionDef)
        ):
            return False
        current = current.parent
    return True
