"""The node of a plan (Note [plans] in `_plan.py`): its backward, generated per call shape.

# Note [plan nodes]
The node's forward hands over f's outputs and saves the tensors grad_fn closes over, with
`ctx.save_for_backward`'s own assignment (none when there are none). Its context holds the plan
(`plan_fields`): the decoration's binding (`BINDING`: the general checks, which name its f), what runs f again
(a plan of kind "rerun", None for a call that recorded: Note [f run again] in `_rerun.py`), the
variables (a watched plan), then grad_fn as it is when it closes over no tensor and has no default
values (Note [saved closures]), else its code, globals, name, qualified name, defaults, keyword
defaults and the cells that hold no tensor (shared as they are, as `_closure.capture` shares them),
then each input's shape, dtype and device (True for the CPU, Note [exact gradients] in
`_record.py`), flat. The backward makes grad_fn again from those around the saved tensors
(`_closure.rebuild_source`), or, under grad mode with f to run again, takes the grad_fn of that run,
calls it, and returns its gradients when each is exact (Note [exact gradients] in `_record.py`,
rendered here); a variable's gradient is compared with its Parameter as it is then (a Parameter
outlives the call). Anything else goes to the general checks (the binding's), which repair or reject it.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._closure import closure_source, rebuild_source
from ._plan_shape import Shape, Source, tree_leaves
from ._record import (
    CPU_DEVICE,
    NOTED_DEVICE,
    NOTED_EXACT_GRADIENT,
    NOTED_INPUT_META,
    input_meta,
    node_class,
    per_code,
)
from ._rerun import grad_fn_again
from ._structure import leaves
from ._torch_internals import SAVED_TENSORS, call_backward_directly, function_apply_c

# What a decoration's plan reads that differs between decorations (its binding, a tuple: `plan`,
# unpacked by the call, read in place by the node's backward): f, the per-call check that the plan's kind still holds, the entry
# a call the plan does not fit is handed to (the plan before it, the last the general code), the
# decoration's `EagerPath` (the general steps after f ran: `_unplanned`, `_fresh`,
# `_checked_gradients`; the rule `captured`), and the plan's `Layout` less f, for the general
# checks of what grad_fn returned.
BINDING = ("f", "holds", "general", "path", "spec")
_PATH, _SPEC = BINDING.index("path"), BINDING.index("spec")


def kept(shape: Shape) -> bool:
    """Whether the plan calls grad_fn as it is: nothing to take out of it or to fix."""
    return not saves(shape) and shape.defaults is None and not shape.kwdefaults


def saves(shape: Shape) -> bool:
    """Whether the plan's node saves tensors (those grad_fn closes over, Parameters too)."""
    return "t" in (shape.cells or "") or "p" in (shape.cells or "")


def plan_fields(
    shape: Shape, watched: bool, inputs: Sequence[str], rerun: bool = False
) -> list[tuple[str, str]]:
    """The plan a call hands to the node, in order (Note [plan nodes]): per field, its name in
    the backward and its expression in the call, over the call's names (`grad_fn`, `defaults`,
    `kwd`, the cells `c0`, `c1`, ..., the tensor inputs `inputs`, and for a plan of kind
    "rerun" `again`)."""
    fields = [("plan", "plan")]
    if rerun:
        fields.append(("again", "again"))
    if watched:
        fields.append(("variables", "variables"))
    if kept(shape):
        fields.append(("grad_fn", "grad_fn"))
    else:
        fields += [
            ("code", "grad_fn.__code__"), ("namespace", "grad_fn.__globals__"),
            ("name", "grad_fn.__name__"), ("qualname", "grad_fn.__qualname__"),
            ("defaults", "defaults"),
        ]  # fmt: skip
        if shape.kwdefaults:
            fields.append(("kwd", "dict(kwd)"))
        fields += [(f"c{i}", f"c{i}") for i, k in enumerate(shape.cells or "") if k in "spom"]
    for i, a in enumerate(inputs):
        shape_, dtype, device = NOTED_INPUT_META.format(t=a).split(", ")
        fields += [(f"s{i}", shape_), (f"d{i}", dtype), (f"v{i}", device)]
    return fields


def make_node(
    f: Callable[..., Any], shape: Shape, watched: bool, rerun: bool = False
) -> Callable[..., Any]:
    """The `apply` of the node class of f's plan for `shape`, made once per code object of f
    (the general checks the backward hands over to come with each call's plan); `rerun`: of a
    plan of kind "rerun"."""
    return per_code(  # type: ignore[no-any-return]
        f, (shape.fields(), watched, rerun), lambda f: _make_node(f, shape, watched, rerun)
    )


def _make_node(
    f: Callable[..., Any], shape: Shape, watched: bool, rerun: bool
) -> Callable[..., Any]:
    backward = _backward(shape, watched, rerun)
    forward = _SAVING_FORWARD if saves(shape) else _FORWARD
    node = node_class(f, forward=staticmethod(forward), backward=staticmethod(backward))
    call_backward_directly(node)
    return function_apply_c.__get__(None, node)  # type: ignore[no-any-return]


def _forward(saving: bool) -> Callable[..., Any]:
    """The node's forward: f's outputs handed over, the plan on ctx (the outputs and saved
    tensors stay off it), the saved tensors set as `ctx.save_for_backward` sets them."""
    saved = f", ctx.{SAVED_TENSORS}" if saving else ""
    src = Source()
    src.add(1, "def forward(ctx, handoff, *inputs):")
    src.add(2, f"outputs, ctx.plan{saved} = handoff")
    src.add(2, "return outputs")
    src.add(1, "return forward")
    return src.compile(f"<tf_compat_grad plan forward{' saving' if saving else ''}>", {})  # type: ignore[no-any-return]


_SAVING_FORWARD, _FORWARD = _forward(True), _forward(False)


def _backward(shape: Shape, watched: bool, rerun: bool) -> Callable[..., Any]:
    kinds = tree_leaves(shape.args)
    positions = [i for i, k in enumerate(kinds) if k == "t"]
    fields = plan_fields(shape, watched, [f"x{p}" for p in positions], rerun)
    metas = [(f"s{i}", f"d{i}", f"v{i}") for i in range(len(positions))]
    src = Source()
    add = src.add
    upstream = "upstream" if type(shape.outputs) is str else "*upstream"  # one per output
    add(0, f"def backward(ctx, {upstream}):")
    add(1, f"{', '.join(name for name, _ in fields)}, = ctx.plan")
    indent = 1
    if rerun:  # Note [f run again] in `_rerun.py`: a backward with `create_graph=True`
        add(1, "if again is not None and grad_enabled():")
        if saves(shape):  # freed by a backward without `retain_graph`: torch's error, as recorded
            add(2, "ctx.saved_tensors")
        add(2, "grad_fn = grad_fn_again(again)")
        if not kept(shape):
            add(1, "else:")
            indent = 2
    if not kept(shape):
        if saves(shape):
            add(indent, "saved = ctx.saved_tensors")
        closure = closure_source(shape.cells) if shape.cells else "None"
        for line in rebuild_source(closure, "dict(kwd)" if shape.kwdefaults else None):
            add(indent, line)
    grads = [f"g{i}" for i in range(len(positions))]
    exact = " and ".join(
        NOTED_EXACT_GRADIENT.format(g=g, shape=s, dtype=d, device=v)
        for g, (s, d, v) in zip(grads, metas, strict=True)
    )
    passed = ", ".join(grads)
    if watched:  # variables when f read Parameters, else grad_fn called as unwatched
        add(1, "if variables:")
        add(2, f"returned = grad_fn({upstream}, variables=list(variables))")
        add(2, "if type(returned) is tuple and len(returned) == 2:")
        add(3, "given, variable_grads = returned")
        exact_all = "exact_all[len(variables)](variable_grads, variables)"
        add(3, f"if type(variable_grads) is list and {exact_all}:")
        _exact_return(src, 4, "given", kinds, positions, exact, f"None, {passed}, *variable_grads")
        add(1, "else:")
        add(2, f"returned = grad_fn({upstream})")
        _exact_return(src, 2, "returned", kinds, positions, exact, f"None, {passed}")
        tail, variables = "*map(meta, variables)", "variables"
    else:
        add(1, f"returned = grad_fn({upstream})")
        _exact_return(src, 1, "returned", kinds, positions, exact, f"None, {passed}")
        tail, variables = "", "None"
    devices = [NOTED_DEVICE.format(device=v) for _, _, v in metas]
    add(1, f"metas = ({''.join(f'({s}, {d}, {v}), ' for (s, d, _), v in zip(metas, devices, strict=True))}{tail})")  # fmt: skip
    checked = f"plan[{_PATH}]._checked_gradients(plan[{_SPEC}], metas, {variables}, returned, ctx.needs_input_grad)"  # fmt: skip
    add(1, f"return None, *{checked}")
    src.lines = ["    " + line for line in src.lines] + ["    return backward"]
    kind = "watched " if watched else "rerun " if rerun else ""
    return src.compile(  # type: ignore[no-any-return]
        f"<tf_compat_grad {kind}plan backward of {len(kinds)} arguments>",
        {
            "Tensor": torch.Tensor, "FunctionType": types.FunctionType,
            "Cell": types.CellType, "exact_all": _exact_all, "meta": input_meta,
            "leaves": leaves, "CPU": CPU_DEVICE, "grad_enabled": torch.is_grad_enabled,
            "grad_fn_again": grad_fn_again,
        },
    )  # fmt: skip


def _exact_return(
    src: Source, indent: int, expr: str, kinds: list[str], positions: list[int], exact: str,
    returned: str,
) -> None:  # fmt: skip
    """Lines that return `returned` when `expr`, what grad_fn returned for the inputs, holds one
    exact gradient per tensor input at its place among the flattened arguments."""
    add = src.add
    n = len(kinds)
    if n == 1:
        add(indent, f"g0 = {expr}")
    else:
        add(indent, f"flat = {expr} if type({expr}) is tuple else leaves({expr})")
        names = [f"n{p}" for p in range(n)]
        for i, p in enumerate(positions):
            names[p] = f"g{i}"
        add(indent, "try:")
        add(indent + 1, f"{', '.join(names)}, = flat")
        add(indent, "except ValueError:  # another count: the general checks name it")
        add(indent + 1, "pass")
        add(indent, "else:")
        indent += 1
        # What stands for a number is dropped, unless a container: then the count differs.
        exact += "".join(
            f" and not isinstance({name}, (list, tuple, dict))" for name in names if name[0] == "n"
        )
    add(indent, f"if {exact}:")
    add(indent + 1, f"return {returned}")


class _ExactAll(dict):  # type: ignore[type-arg]
    """`exact_all[n](grads, variables)`: whether each of n variables' gradients is exact for
    its variable as it is now (a Parameter outlives the call), by the test the inputs'
    gradients take (`NOTED_EXACT_GRADIENT`: a CPU device is asked as `is_cpu`, without making
    `torch.device` objects), unrolled; made once per count n (n >= 1: the backward asks only
    when there are variables)."""

    def __missing__(self, n: int) -> Callable[[list[Any], Sequence[torch.nn.Parameter]], bool]:
        gs, vs = [f"g{i}" for i in range(n)], [f"v{i}" for i in range(n)]
        test = " and ".join(
            NOTED_EXACT_GRADIENT.format(g=g, shape=f"{v}.shape", dtype=f"{v}.dtype", device=f"({v}.is_cpu or {v}.device)")
            for g, v in zip(gs, vs, strict=True)
        )  # fmt: skip
        src = Source()
        src.add(1, "def exact_all(grads, variables):")
        src.add(2, f"if len(grads) != {n}:")
        src.add(3, "return False")
        src.add(2, f"{', '.join(gs)}, = grads")
        src.add(2, f"{', '.join(vs)}, = variables")
        src.add(2, f"return {test}")
        src.add(1, "return exact_all")
        made = src.compile(f"<tf_compat_grad exact gradients of {n} variables>", {"Tensor": torch.Tensor})  # fmt: skip
        self[n] = made
        return made  # type: ignore[no-any-return]


_exact_all = _ExactAll()
