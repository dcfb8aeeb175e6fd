"""Plans: the eager fast path's per-call work, generated as code for one decorated function and
one number of positional tensor arguments.

# Note [plans]
A plain-autograd call of an unbound f with n tensors as its positional arguments does the same
few things every time: check the arguments, call f, split `(output, grad_fn)`, take the tensors
out of grad_fn's closure (Note [saved closures]), note each input's shape, dtype and device,
apply the node. Written as one function for that n (`make_call`), with the arguments unrolled
into locals, that is a third of the Python instructions of the general code and no `Record` per
call; the node's backward (`make_node`) checks grad_fn's gradients against the noted metadata in
the same spirit. A plan is made on the first such call for each n, of one of two kinds: when
the proof says f reads no Parameter (Note [watching only when needed]), f is called directly
while the proof's per-call check holds; otherwise f runs under the Parameter watcher, pushed
and popped without `TorchFunctionMode`'s Python frames, and the Parameters it read, less those
passed to it, are the call's variables (the watcher always gives the right answer, so a
watched plan stays one). Whatever does not fit the plan goes to the general code: before f
runs, the whole call (`general`); after f runs, what f returned (`unplanned`), so that f still
runs once. Both give the same results as the plan; the plan only skips work that the shape of
the call makes unnecessary.

What the plan handles after f: one tensor output, and a plain-function grad_fn whose 1 to
`_UNROLLED_CELLS` closure cells each hold a different tensor and whose defaults hold no tensor
(`_closure._TensorCells` is the general code's form of the same). Its backward hands anything
but n gradients that are already tensors of their inputs' shape, dtype and device to the
general checks (`checked`), which repair or reject them.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd import forward_ad

from ._closure import EXACT_TENSOR_TYPES, plain
from ._parameters import ParameterWatcher, accepts_variables
from ._record import InputMeta, node_class
from ._run import UNBOUND
from ._torch_internals import (
    any_autocast_enabled,
    call_backward_directly,
    function_apply_c,
    functorch_transforms_active,
    is_functorch_wrapped,
    jit_tracing_state,
    pop_function_mode,
    push_function_mode,
)

_Tensor = torch.Tensor
_FunctionType = types.FunctionType
_CellType = types.CellType
_UNROLLED_CELLS = 3  # grad_fns with more cells take the general code
MAX_PLANS = 4  # numbers of arguments planned per decorated function; others take the general code

# What the node's backward reads from its context: grad_fn without its closure tensors (code,
# globals, name, qualified name, defaults), the metadata of the inputs and then of the
# variables, and the variables (None when f read no Parameter).
Plan = tuple[
    types.CodeType, dict[str, Any], str, str, Any, tuple[InputMeta, ...], "list[Any] | None"
]
Checked = Callable[[tuple[InputMeta, ...], "list[Any] | None", Any, Sequence[bool]], list[Any]]


def make_node(f: Callable[..., Any], checked: Checked) -> Callable[..., Any]:
    """The `apply` of the node class of f's plans: one for every n."""

    def forward(ctx: Any, handoff: tuple[_Tensor, Plan, Sequence[_Tensor]], *inputs: Any) -> Any:
        outputs, ctx.plan, saved = handoff  # the output and saved tensors stay off ctx
        ctx.save_for_backward(*saved)
        return outputs

    def backward(ctx: Any, upstream: Any) -> tuple[_Tensor | None, ...]:
        code, namespace, name, qualname, defaults, metas, variables = ctx.plan
        grad_fn = _FunctionType(
            code, namespace, name, defaults, tuple(map(_CellType, ctx.saved_tensors))
        )
        grad_fn.__qualname__ = qualname
        grads: tuple[Any, ...] = ()
        if variables is None:
            returned = grad_fn(upstream)
            if type(returned) is _Tensor:  # the usual case, tested first
                if len(metas) == 1 and (
                    (returned.shape, returned.dtype, returned.device) == metas[0]
                ):
                    return None, returned
            elif type(returned) is tuple:
                grads = returned
        else:
            returned = grad_fn(upstream, variables=list(variables))
            if type(returned) is tuple and len(returned) == 2:
                input_grads, variable_grads = returned
                if type(variable_grads) is list and len(variable_grads) == len(variables):
                    if type(input_grads) is _Tensor:
                        grads = (input_grads, *variable_grads)
                    elif type(input_grads) is tuple:
                        grads = (*input_grads, *variable_grads)
        if len(grads) == len(metas):
            for grad, meta in zip(grads, metas, strict=True):
                if type(grad) is not _Tensor or (grad.shape, grad.dtype, grad.device) != meta:
                    break
            else:
                return None, *grads
        return None, *checked(metas, variables, returned, ctx.needs_input_grad)

    node = node_class(f, forward=staticmethod(forward), backward=staticmethod(backward))
    call_backward_directly(node)
    return function_apply_c.__get__(None, node)  # type: ignore[no-any-return]


Call = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


def make_call(
    n: int,
    watched: bool,
    f: Callable[..., Any],
    reads_none: Callable[[], bool],
    apply: Callable[..., Any],
    general: Call,
    unplanned: Callable[[Any, tuple[Any, ...], ParameterWatcher | None], Any],
) -> Call:
    """The call of f's plan for n positional tensor arguments (Note [plans]): `watched` when f
    may read a Parameter, so that it runs under the watcher."""
    return _maker(n, watched)(
        f, reads_none, apply, general, unplanned, UNBOUND, torch.is_grad_enabled,
        jit_tracing_state, functorch_transforms_active, forward_ad, is_functorch_wrapped,
        any_autocast_enabled, EXACT_TENSOR_TYPES, _Tensor, _FunctionType, plain,
        ParameterWatcher, push_function_mode, pop_function_mode, _accepts,
    )  # fmt: skip


@functools.cache
def _maker(n: int, watched: bool) -> Callable[..., Call]:
    assert n > 0, "a call without tensor arguments has no node"
    args = [f"a{i}" for i in range(n)]
    unpacked = ", ".join(args) + ("," if n == 1 else "")
    passed = ", ".join(args)
    argument_checks = "".join(
        f"type({a}) not in EXACT or {a}.is_nested or is_wrapped({a}) or " for a in args
    )
    metas = "".join(f"({a}.shape, {a}.dtype, {a}.device), " for a in args)
    if watched:
        # f runs under the watcher; the Parameters it read, less those passed to it, are
        # variables, and then the node is needed whatever the inputs need.
        proof = ""
        run = f"""\
        watcher = Watcher()
        push(watcher)
        try:
            out = f({passed})
        finally:
            pop()
        found = watcher.found
        if not found:
            return unplanned(out, args, watcher)
        variables = [*found.values()]
        if {" or ".join(f"type({a}) is not Tensor" for a in args)}:  # a Parameter argument
            variables = [v for v in variables if {" and ".join(f"v is not {a}" for a in args)}]
        if variables and type(out) is tuple and len(out) == 2:
            result, grad_fn = out
            if (type(result) is Tensor and type(grad_fn) is FunctionType
                    and (grad_fn.__code__ is accepted[0] or accepts(grad_fn, accepted))):
"""
        metas += "*[(v.shape, v.dtype, v.device) for v in variables]"
        plan_variables, more_inputs, rest = "variables", ", *variables", "args, watcher"
    else:
        proof = "not reads_none() or "
        run = f"""\
        out = f({passed})
        if type(out) is tuple and len(out) == 2:
            result, grad_fn = out
            if (type(result) is Tensor and type(grad_fn) is FunctionType
                    and ({" or ".join(f"{a}.requires_grad" for a in args)})):
"""
        plan_variables, more_inputs, rest = "None", "", "args, None"
    cells = "".join(
        _cells_branch(k, f"{passed}{more_inputs}") for k in range(1, _UNROLLED_CELLS + 1)
    )
    source = f"""\
def make(f, reads_none, apply, general, unplanned, UNBOUND, grad_enabled, jit_tracing_state,
         transforms_active, forward_ad, is_wrapped, any_autocast, EXACT, Tensor, FunctionType,
         plain, Watcher, push, pop, accepts):
    accepted = [None]  # the code of the last grad_fn that accepted `variables=`

    def call(bound, args, kwargs):
        if (kwargs or bound is not UNBOUND or len(args) != {n} or not grad_enabled()
                or jit_tracing_state() is not None or transforms_active()
                or forward_ad._current_level >= 0):
            return general(bound, args, kwargs)
        {unpacked} = args
        if {argument_checks}{proof}any_autocast():
            return general(bound, args, kwargs)
{run}\
                closure = grad_fn.__closure__
                defaults = grad_fn.__defaults__
                if (closure is not None and grad_fn.__kwdefaults__ is None
                        and (defaults is None or plain(defaults))):
                    plan = (grad_fn.__code__, grad_fn.__globals__, grad_fn.__name__,
                            grad_fn.__qualname__, defaults, ({metas}), {plan_variables})
                    try:
                        k = len(closure)
{cells}\
                    except ValueError:  # an empty cell (a name f assigns later)
                        pass
        return unplanned(out, {rest})
    return call
"""
    namespace: dict[str, Any] = {}
    kind = "watched " if watched else ""
    exec(compile(source, f"<tf_compat_grad {kind}plan of {n} arguments>", "exec"), namespace)
    return namespace["make"]  # type: ignore[no-any-return]


def _accepts(grad_fn: types.FunctionType, accepted: list[types.CodeType | None]) -> bool:
    """Whether grad_fn takes `variables=`, which its code decides: the code is kept in
    `accepted` when it does, so that the next call with it is one comparison."""
    if accepts_variables(grad_fn):
        accepted[0] = grad_fn.__code__
        return True
    return False


def _cells_branch(k: int, inputs: str) -> str:
    """The part of a plan's call for a grad_fn with k closure cells."""
    cells = [f"c{i}" for i in range(k)]
    values = [f"v{i}" for i in range(k)]
    reads = "; ".join(f"{v} = {c}.cell_contents" for c, v in zip(cells, values, strict=True))
    tensors = " and ".join(f"type({v}) in EXACT" for v in values)
    distinct = "".join(
        f" and {a} is not {b}" for i, a in enumerate(values) for b in values[i + 1 :]
    )
    saved = ", ".join(values) + ("," if k == 1 else "")
    pad = " " * 24
    return (
        f"{pad}{'if' if k == 1 else 'elif'} k == {k}:\n"
        f"{pad}    {', '.join(cells)}{',' if k == 1 else ''} = closure\n"
        f"{pad}    {reads}\n"
        f"{pad}    if {tensors}{distinct}:\n"
        f"{pad}        return apply((result.detach(), plan, ({saved})), {inputs})\n"
    )
