"""The one `tf.GradientTape` pattern `port` translates: a tape inside a function, watching names,
whose gradients are taken after the block.

    with tf.GradientTape() as tape:          with torch.enable_grad():
        tape.watch(x)                            x_watched = x if x.requires_grad else x.detach().requires_grad_()
        y = g(x)                       ->        y = g(x_watched)
    dx = tape.gradient(y, x)                 dx = torch.autograd.grad(y, [x_watched], grad_outputs=torch.ones_like(y), create_graph=True, allow_unused=True)[0]

It is exact when the block reads no tensor that depends on a watched one through ops outside the
block (TF's tape did not record those; torch's graph has them): the block may read only the watched
names, names it assigns, parameters of the enclosing functions and names no enclosing function
assigns (module-level names; at module level, functions, classes, imports and `tf.Variable`s). The
sources of `tape.gradient` must be watched names, names the block assigns, or module-level
`tf.Variable`s (nn.Parameters after the port, watched by TF when read): TF gives any other source no
gradient. `create_graph=True` keeps the gradient differentiable, as TF's is under an outer tape;
`allow_unused=True` gives None for an unconnected source, as TF. `tape = tf.GradientTape(...)`
followed by `with tape:` is read as `with tf.GradientTape(...) as tape:` (`as_with`). A watched
`*args` parameter becomes a tuple of watched tensors; sources that are a nested tuple or list of
names (`(args, variables)`), or name such a tuple, go to `tf_ops.tape_gradient`, which keeps their
structure. In a custom gradient's grad_fn, its `variables` parameter may be a source: the Parameters
f read, which torch's graph reaches only through the block's ops, as TF's tape watched them.
Anything else about the tape (another method, `watch_accessed_variables=`, `unconnected_gradients=`,
a list of targets, the tape used elsewhere) leaves it untranslated.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ._syntax import Binder, _imported_names, _Variables, parameters


@dataclass
class Tape:
    name: str  # the tape's name
    watched: dict[str, str]  # watched name -> the name of its watched tensor
    block: cst.With
    watches: int  # how many `tape.watch` statements open the block
    sequences: frozenset[str] = frozenset()  # watched `*args` parameters: tuples of tensors


def _is_tape_call(node: cst.BaseExpression) -> bool:
    func = node.func if isinstance(node, cst.Call) else None
    return (isinstance(func, cst.Attribute) and func.attr.value == "GradientTape") or (
        isinstance(func, cst.Name) and func.value == "GradientTape"
    )


class _AsWith(cst.CSTTransformer):
    """`tape = tf.GradientTape(...)` then `with tape:` -> `with tf.GradientTape(...) as tape:`,
    a blank line in place of the assignment (the lines after it keep their numbers)."""

    def _body(self, statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        found: list[cst.BaseStatement] = []
        for statement in statements:
            before = found[-1] if found else None
            if not isinstance(before, cst.SimpleStatementLine):
                found.append(statement)
                continue
            assign = before.body[0]
            if (
                isinstance(statement, cst.With)
                and len(statement.items) == 1
                and statement.items[0].asname is None
                and isinstance(statement.items[0].item, cst.Name)
                and isinstance(assign, cst.Assign)
                and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)
                and assign.targets[0].target.value == statement.items[0].item.value
                and _is_tape_call(assign.value)
                and len(before.body) == 1
            ):
                name = statement.items[0].item
                item = cst.WithItem(assign.value, asname=cst.AsName(name))
                lines = [
                    *before.leading_lines,
                    cst.EmptyLine(indent=False),
                    *statement.leading_lines,
                ]
                found[-1] = statement.with_changes(items=[item], leading_lines=lines)
                continue
            found.append(statement)
        return found

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        return updated_node.with_changes(body=self._body(list(updated_node.body)))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=self._body(list(updated_node.body)))


def as_with(module: cst.Module) -> cst.Module:
    return module.visit(_AsWith())


class _Names(_Variables, Binder):
    """Names read and names bound in a piece of code (not attribute names or keywords)."""

    def __init__(self) -> None:
        self.read: set[str] = set()
        self.bound: set[str] = set()
        self.nested = False  # a def, class or lambda inside
        self.defined: set[str] = set()  # bound by def and class statements, imports

    def visit_FunctionDef(self, node: cst.FunctionDef | cst.ClassDef) -> bool:
        self.nested = True
        self.bound.add(node.name.value)
        self.defined.add(node.name.value)
        return False

    visit_ClassDef = visit_FunctionDef

    def visit_Import(self, node: cst.Import | cst.ImportFrom) -> bool:
        names = _imported_names(node)
        self.bound |= names
        self.defined |= names
        return False

    visit_ImportFrom = visit_Import

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.nested = True
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self.bind(node.target)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> bool:
        self.bind(node.name)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.read.add(node.value)

    def bind(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.bound.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind(element.value)
        else:  # x[i] = ..., x.a = ...: reads x
            target.visit(self)


def names(node: cst.CSTNode) -> _Names:
    found = _Names()
    node.visit(found)
    return found


def watch_names(statement: cst.BaseStatement, tape: str) -> list[str] | None:
    """The names of a `tape.watch(x)` / `tape.watch([x, y])` statement; None if it is not one."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
        return None
    call = small.value
    if not (
        isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == tape
        and call.func.attr.value == "watch"
        and len(call.args) == 1
        and call.args[0].keyword is None
        and not call.args[0].star
    ):
        return None
    return _name_list(call.args[0].value)


def gradient_calls(node: cst.CSTNode, tape: str) -> tuple[list[cst.Call], int]:
    """The `tape.gradient(...)` calls in `node`, and how many other uses of `tape` it has."""
    calls: list[cst.Call] = []
    uses = 0

    # Not `_Names`: every use of the tape counts, in a nested def or lambda too and as a target.
    class Finder(_Variables):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == tape
                and func.attr.value == "gradient"
            ):
                calls.append(node)

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal uses
            if node.value == tape:
                uses += 1

    node.visit(Finder())
    return calls, uses


def _name_list(node: cst.BaseExpression) -> list[str] | None:
    """The names of `x`, `[x, y]` or `(x, y)`; None if an item is not a name."""
    items = node.elements if isinstance(node, (cst.List, cst.Tuple)) else [node]
    found = []
    for item in items:
        value = item.value if isinstance(item, cst.BaseElement) else item
        if not isinstance(value, cst.Name):
            return None
        found.append(value.value)
    return found


def source_names(node: cst.BaseExpression) -> list[str] | None:
    """The names of `x`, `[x, y]`, `(args, [x, variables])`; None if an item is not a name."""
    if not isinstance(node, (cst.List, cst.Tuple)):
        return [node.value] if isinstance(node, cst.Name) else None
    found = []
    for item in node.elements:
        inner = source_names(item.value) if isinstance(item, cst.Element) else None
        if inner is None:
            return None
        found.extend(inner)
    return found


def nested(node: cst.BaseExpression) -> bool:
    """Whether sources are a list or tuple with a list or tuple inside."""
    return isinstance(node, (cst.List, cst.Tuple)) and any(
        isinstance(e.value, (cst.List, cst.Tuple)) for e in node.elements
    )


class _VariablesParameters(cst.CSTVisitor):
    """Whether a function of the scope has a parameter `variables` (a grad_fn's)."""

    def __init__(self) -> None:
        self.found = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.found |= "variables" in parameters(node)


def check_gradient_call(call: cst.Call, allowed: set[str]) -> str | None:
    """Why a `tape.gradient(...)` call is not translated, or None. Its sources must be in
    `allowed`: watched, computed in the block, or variables."""
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args) or len(positional) > 3:
        return "`tape.gradient` with starred or more than 3 positional arguments"
    names = ["target", "sources", "output_gradients"][: len(positional)]
    given = dict(zip(names, positional, strict=True)) | keywords
    unknown = set(given) - {"target", "sources", "output_gradients"}
    if unknown:
        return f"`tape.gradient(..., {sorted(unknown)[0]}=)` is not translated"
    if "target" not in given or "sources" not in given:
        return "`tape.gradient` needs a target and sources"
    if isinstance(given["target"].value, (cst.List, cst.Tuple, cst.Dict)):
        return "a list of targets is not translated (sum them first)"
    sources = source_names(given["sources"].value)
    if sources is None:
        return "the sources must be names or (nested) lists or tuples of names"
    unwatched = [s for s in sources if s not in allowed]
    if unwatched:
        return (
            f"the source `{unwatched[0]}` is not watched, computed in the block or a module-level "
            "tf.Variable: TF gives it no gradient, torch would if it requires grad"
        )
    return None


def check(
    block: cst.With,
    scope: cst.CSTNode,
    enclosing: list[cst.FunctionDef],
    tf_name: str | None,
    variables: frozenset[str] = frozenset(),
) -> tuple[str, list[str], int] | str:
    """(tape name, watched names, number of watch statements) when `block` is the pattern this
    module translates; else why not. `scope` is the innermost function's body, or the module;
    `tf_name` the table name of the block's context manager call, if it is one; `variables` the
    module-level names assigned a `tf.Variable` (trainable: TF's tape watches them when read)."""
    if len(block.items) != 1 or block.asynchronous:
        return "only `with tf.GradientTape() as tape:` alone in its `with` is translated"
    item = block.items[0]
    call = item.item
    if not isinstance(call, cst.Call) or tf_name != "GradientTape":
        return "not a tape"
    if item.asname is None or not isinstance(item.asname.name, cst.Name):
        return "a tape without `as NAME` is not translated"
    tape = item.asname.name.value
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword != "persistent":
            return (
                "only `persistent=` of `tf.GradientTape` is translated (not "
                "`watch_accessed_variables=`: torch has no tape to stop recording variables)"
            )
    body = block.body.body if isinstance(block.body, cst.IndentedBlock) else []
    watched: list[str] = []
    rest: list[cst.BaseStatement] = []
    for statement in body:
        found = watch_names(statement, tape)
        if found is None:
            rest.append(statement)
        elif rest:
            return "`tape.watch` after other statements of the block is not translated"
        else:
            watched.extend(found)
    inside = _Names()
    for statement in rest:
        statement.visit(inside)
    if inside.nested:
        return "a def, class or lambda inside the tape's block is not translated"
    if inside.bound & set(watched):
        return "a watched name assigned inside the block is not translated"
    if tape in inside.read:
        return "the tape used inside its block (other than `tape.watch` first) is not translated"
    allowed = set(watched) | inside.bound | variables
    local: set[str] = set()
    for function in enclosing:
        allowed |= parameters(function)
        local |= names(function.body).bound
    if not enclosing:  # at module level: what its statements assign (not defs, imports)
        module = names(scope)
        local |= module.bound - module.defined
    risky = sorted((inside.read - allowed) & local)
    if risky:
        return (
            f"the block reads `{risky[0]}`, computed outside it: TF's tape did not record how it "
            "depends on the watched tensors, torch's graph would"
        )
    calls, uses = gradient_calls(scope, tape)
    # `as tape`, each watch and each gradient call use the name once
    if uses != 1 + len(body) - len(rest) + len(calls):
        return "the tape is used other than by `tape.watch` and `tape.gradient`"
    sources = set(watched) | inside.bound | variables
    grad_fns = _VariablesParameters()
    scope.visit(grad_fns)
    if grad_fns.found:
        sources.add("variables")
    for gradient in calls:
        why = check_gradient_call(gradient, sources)
        if why is not None:
            return why
    return tape, watched, len(body) - len(rest)
