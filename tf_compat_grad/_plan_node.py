"""The node of a plan (Note [plans] in `_plan.py`): its backward, generated per call shape.

# Note [plan nodes]
The node's forward hands over f's outputs and saves the tensors grad_fn closes over; its
context holds the plan: the general checks (`checked`, which name this decoration's f), grad_fn's code, globals, defaults, then the variables (a watched plan;
else None), grad_fn's keyword defaults, its cells that hold no tensor (shared as they are, as
`_closure.capture` shares them), then each input's shape, dtype and device, flat. The backward
rebuilds grad_fn from those around the saved tensors (named as its code names it: a name
assigned to the function object after `def` is not kept), calls it, and returns its gradients
when each is exact (Note [exact gradients] in `_record.py`, rendered here); a variable's
gradient is compared with its Parameter as it is then (a Parameter outlives the call). Anything
else goes to the general checks (`checked`), which repair or reject it.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._plan import Shape, Source, _leaves
from ._record import EXACT_GRADIENT, input_meta, node_class, per_code
from ._structure import leaves
from ._torch_internals import call_backward_directly, function_apply_c


def make_node(f: Callable[..., Any], shape: Shape, watched: bool) -> Callable[..., Any]:
    """The `apply` of the node class of f's plan for `shape`, made once per code object of f
    (the general checks the backward hands over to come with each call's plan)."""
    return per_code(  # type: ignore[no-any-return]
        f, (shape.fields(), watched), lambda f: _make_node(f, shape, watched)
    )


def _make_node(f: Callable[..., Any], shape: Shape, watched: bool) -> Callable[..., Any]:

    def forward(ctx: Any, handoff: tuple[Any, Any, Sequence[torch.Tensor]], *inputs: Any) -> Any:
        outputs, ctx.plan, saved = handoff  # the outputs and saved tensors stay off ctx
        ctx.save_for_backward(*saved)
        return outputs

    backward = _backward(shape, watched)
    node = node_class(f, forward=staticmethod(forward), backward=staticmethod(backward))
    call_backward_directly(node)
    return function_apply_c.__get__(None, node)  # type: ignore[no-any-return]


def _backward(shape: Shape, watched: bool) -> Callable[..., Any]:
    kinds = _leaves(shape.args)
    positions = [i for i, k in enumerate(kinds) if k == "t"]
    metas = [(f"s{i}", f"d{i}", f"v{i}") for i in range(len(positions))]
    flat = ", ".join(name for meta in metas for name in meta)
    cells = shape.cells or ""
    shared = [f"c{i}" for i, k in enumerate(cells) if k == "s"]
    src = Source()
    add = src.add
    one = type(shape.outputs) is str  # one output: one upstream
    add(0, f"def backward(ctx, {'upstream' if one else '*upstream'}):")
    add(1, f"checked, code, namespace, defaults, variables, kwd, {''.join(c + ', ' for c in shared)}{flat} = ctx.plan")  # fmt: skip
    add(1, "saved = ctx.saved_tensors")
    if cells and "s" not in cells and len(cells) > 1:
        rebuilt = "tuple(map(Cell, saved))"
    elif cells:
        it = iter(range(len(cells)))
        parts = [f"Cell(saved[{next(it)}])" if k == "t" else f"c{i}" for i, k in enumerate(cells)]
        rebuilt = f"({', '.join(parts)},)"
    else:
        rebuilt = "None"
    add(1, f"grad_fn = FunctionType(code, namespace, None, defaults, {rebuilt})")
    if shape.kwdefaults:
        add(1, "grad_fn.__kwdefaults__ = dict(kwd)")
    upstream = "upstream" if one else "*upstream"
    grads = [f"g{i}" for i in range(len(positions))]
    exact = " and ".join(
        EXACT_GRADIENT.format(g=g, shape=s, dtype=d, device=v)
        for g, (s, d, v) in zip(grads, metas, strict=True)
    )
    passed = ", ".join(grads)
    if watched:  # variables when f read Parameters, else grad_fn called as unwatched
        add(1, "if variables:")
        add(2, f"returned = grad_fn({upstream}, variables=list(variables))")
        add(2, "if type(returned) is tuple and len(returned) == 2:")
        add(3, "given, variable_grads = returned")
        add(3, "if type(variable_grads) is list and exact_all(variable_grads, variables):")
        _exact_return(src, 4, "given", kinds, positions, exact, f"None, {passed}, *variable_grads")
        add(1, "else:")
        add(2, f"returned = grad_fn({upstream})")
        _exact_return(src, 2, "returned", kinds, positions, exact, f"None, {passed}")
        tail = "*map(meta, variables)"
    else:
        add(1, f"returned = grad_fn({upstream})")
        _exact_return(src, 1, "returned", kinds, positions, exact, f"None, {passed}")
        tail = ""
    add(1, f"metas = ({''.join(f'({s}, {d}, {v}), ' for s, d, v in metas)}{tail})")
    add(1, "return None, *checked(metas, variables, returned, ctx.needs_input_grad)")
    src.lines = ["    " + line for line in src.lines] + ["    return backward"]
    kind = "watched " if watched else ""
    return src.compile(  # type: ignore[no-any-return]
        f"<tf_compat_grad {kind}plan backward of {len(kinds)} arguments>",
        {
            "Tensor": torch.Tensor, "FunctionType": types.FunctionType,
            "Cell": types.CellType, "exact_all": _exact_all, "meta": input_meta,
            "leaves": leaves,
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
        add(indent, f"if len(flat) == {n}:")
        indent += 1
        names = [f"n{p}" for p in range(n)]
        for i, p in enumerate(positions):
            names[p] = f"g{i}"
        add(indent, f"{', '.join(names)}, = flat")
        # What stands for a number is dropped, unless a container: then the count differs.
        exact += "".join(
            f" and not isinstance({name}, (list, tuple, dict))" for name in names if name[0] == "n"
        )
    add(indent, f"if {exact}:")
    add(indent + 1, f"return {returned}")


def _exact_all_maker() -> Callable[[list[Any], Sequence[torch.nn.Parameter]], bool]:
    """Whether each of the variables' gradients is exact for its variable as it is now (a
    Parameter outlives the call)."""
    test = EXACT_GRADIENT.format(g="g", shape="v.shape", dtype="v.dtype", device="v.device")
    source = f"""def exact_all(grads, variables):
    if len(grads) != len(variables):
        return False
    for g, v in zip(grads, variables):
        if not ({test}):
            return False
    return True
"""
    namespace: dict[str, Any] = {"Tensor": torch.Tensor}
    exec(compile(source, "<tf_compat_grad exact variable gradients>", "exec"), namespace)
    return namespace["exact_all"]  # type: ignore[no-any-return]


_exact_all = _exact_all_maker()
