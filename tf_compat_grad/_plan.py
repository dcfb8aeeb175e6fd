"""Plans: the eager fast path's per-call work, generated as code for one decorated function and
one number of positional tensor arguments.

# Note [plans]
A plain-autograd call of an unbound f with n tensors as its positional arguments does the same
few things every time: check the arguments, call f, split `(output, grad_fn)`, take the tensors
out of grad_fn's closure (Note [saved closures]), note each input's shape, dtype and device,
apply the node. Written as one function for that n (`make_call`), with the arguments unrolled
into locals, that is a third of the Python instructions of the general code and no `Record` per
call. The node's backward (`make_node`), generated per plan in the same spirit, rebuilds grad_fn
from its code, globals and defaults around the saved tensors (named as its code names it: a name
assigned to the function object after `def` is not kept) and compares each gradient with the
noted metadata, held flat; a variable's gradient is compared with its Parameter's metadata as
it is then (a Parameter outlives the call).

A plan is made on the first such call for each n, of one of two kinds. When the proof says
f reads no Parameter (Note [watching only when needed] in `_reach.py`), f is called directly while the
proof's per-call check holds. Otherwise f runs under the Parameter watcher, pushed and popped
without `TorchFunctionMode`'s Python frames, and the Parameters it read, less those passed to
it, are the call's variables (the watcher always gives the right answer, so a watched plan
stays one); while the check of Note [Parameters of f's own] holds, no gradient can be lost and
the walk of Note [lost gradients] is skipped. Whatever does not fit the plan goes to the general code: before f
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

from ._captures import CapturedRule, close_cache, open_cache, settle
from ._closure import EXACT_TENSOR_TYPES, plain
from ._record import InputMeta, input_meta, node_class
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
from ._variables import accepts_variables
from ._watcher import ParameterWatcher

_Tensor = torch.Tensor
_FunctionType = types.FunctionType
_CellType = types.CellType
_UNROLLED_CELLS = 3  # grad_fns with more cells take the general code
MAX_PLANS = 4  # numbers of arguments planned per decorated function; others take the general code

# What the node's backward reads from its context: grad_fn's code, globals and defaults, then
# (for a watched plan) the variables, then each input's shape, dtype and device, flat. The
# variables' own metadata is read in backward: a Parameter outlives the call.
Plan = tuple[Any, ...]
Checked = Callable[[tuple[InputMeta, ...], "list[Any] | None", Any, Sequence[bool]], list[Any]]


def make_node(f: Callable[..., Any], n: int, watched: bool, checked: Checked) -> Callable[..., Any]:
    """The `apply` of the node class of f's plan for n arguments."""

    def forward(ctx: Any, handoff: tuple[_Tensor, Plan, Sequence[_Tensor]], *inputs: Any) -> Any:
        outputs, ctx.plan, saved = handoff  # the output and saved tensors stay off ctx
        ctx.save_for_backward(*saved)
        return outputs

    backward = _backward_maker(n, watched)(
        checked, _Tensor, _FunctionType, _CellType, _exact, input_meta
    )
    node = node_class(f, forward=staticmethod(forward), backward=staticmethod(backward))
    call_backward_directly(node)
    return function_apply_c.__get__(None, node)  # type: ignore[no-any-return]


@functools.cache
def _backward_maker(n: int, watched: bool) -> Callable[..., Callable[..., Any]]:
    """The backward of a plan's node for n arguments: grad_fn rebuilt from the saved tensors,
    called, and its gradients returned when each is a tensor of its input's shape, dtype and
    device (the order of the comparisons: cheapest first); anything else goes to `checked`."""
    grads = [f"g{i}" for i in range(n)]
    metas = [(f"s{i}", f"d{i}", f"v{i}") for i in range(n)]
    flat = ", ".join(name for meta in metas for name in meta)
    exact = " and ".join(
        f"type({g}) is Tensor and {g}.dtype is {d} and {g}.shape == {s} and {g}.device == {v}"
        for g, (s, d, v) in zip(grads, metas, strict=True)
    )
    unpacked = ", ".join(grads) + ("," if n == 1 else "")
    passed = ", ".join(grads)
    meta_tuples = "".join(f"({s}, {d}, {v}), " for s, d, v in metas)
    if watched:
        wrap = (  # one input: its gradient may come bare
            "                if type(input_grads) is Tensor:\n"
            "                    input_grads = (input_grads,)\n"
            if n == 1
            else ""
        )
        head = f"code, namespace, defaults, variables, {flat} = ctx.plan"
        call = f"""        returned = grad_fn(upstream, variables=list(variables))
        if type(returned) is tuple and len(returned) == 2:
            input_grads, variable_grads = returned
            if type(variable_grads) is list and exact(variable_grads, variables):
{wrap}                if type(input_grads) is tuple and len(input_grads) == {n}:
                    {unpacked} = input_grads
                    if {exact}:
                        return None, {passed}, *variable_grads
        metas = ({meta_tuples}*map(meta, variables))
"""
    else:
        head = f"code, namespace, defaults, {flat} = ctx.plan"
        variables = "variables = None\n        "
        if n == 1:
            call = f"""        {variables}returned = grad_fn(upstream)
        g0 = returned
        if {exact}:
            return None, g0
        metas = ({meta_tuples})
"""
        else:
            call = f"""        {variables}returned = grad_fn(upstream)
        if type(returned) is tuple and len(returned) == {n}:
            {unpacked} = returned
            if {exact}:
                return None, {passed}
        metas = ({meta_tuples})
"""
    source = f"""def make(checked, Tensor, FunctionType, Cell, exact, meta):
    def backward(ctx, upstream):
        {head}
        saved = ctx.saved_tensors
        cells = (Cell(saved[0]),) if len(saved) == 1 else tuple(map(Cell, saved))
        grad_fn = FunctionType(code, namespace, None, defaults, cells)
{call}        return None, *checked(metas, variables, returned, ctx.needs_input_grad)
    return backward
"""
    namespace: dict[str, Any] = {}
    kind = "watched " if watched else ""
    exec(
        compile(source, f"<tf_compat_grad {kind}plan backward of {n} arguments>", "exec"), namespace
    )
    return namespace["make"]  # type: ignore[no-any-return]


def _exact(grads: list[Any], variables: Sequence[torch.nn.Parameter]) -> bool:
    """Whether each of the variables' gradients is a tensor of its variable's shape, dtype and
    device."""
    if len(grads) != len(variables):
        return False
    for grad, variable in zip(grads, variables, strict=True):
        if (
            type(grad) is not _Tensor
            or grad.dtype is not variable.dtype
            or grad.shape != variable.shape
            or grad.device != variable.device
        ):
            return False
    return True


Call = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]


def make_call(
    n: int,
    kind: str,
    f: Callable[..., Any],
    holds: Callable[[], bool],
    apply: Callable[..., Any],
    general: Call,
    unplanned: Callable[[Any, tuple[Any, ...], ParameterWatcher | None], Any],
    captured: CapturedRule = "refuse",
) -> Call:
    """The call of f's plan for n positional tensor arguments (Note [plans]) of one `kind`:
    "none" when f provably reads no Parameter, while the per-call check `holds`; "watched" when
    it runs under the watcher, skipping the walk of Note [lost gradients] while `holds`, and
    settling by the rule `captured` otherwise."""
    return _maker(n, kind)(
        f, holds, apply, general, unplanned, UNBOUND, torch.is_grad_enabled,
        jit_tracing_state, functorch_transforms_active, forward_ad, is_functorch_wrapped,
        any_autocast_enabled, EXACT_TENSOR_TYPES, _Tensor, _FunctionType, plain,
        ParameterWatcher, push_function_mode, pop_function_mode, _accepts, open_cache,
        close_cache, settle if captured == "refuse" else functools.partial(settle, captured=captured),
    )  # fmt: skip


@functools.cache
def _maker(n: int, kind: str) -> Callable[..., Call]:
    assert n > 0, "a call without tensor arguments has no node"
    args = [f"a{i}" for i in range(n)]
    unpacked = ", ".join(args) + ("," if n == 1 else "")
    passed = ", ".join(args)
    argument_checks = "".join(
        f"type({a}) not in EXACT or {a}.is_nested or is_wrapped({a}) or " for a in args
    )
    metas = ", ".join(f"{a}.shape, {a}.dtype, {a}.device" for a in args)
    if kind == "watched":
        # f runs under the watcher; the Parameters it read, less those passed to it, are
        # variables, and then the node is needed whatever the inputs need.
        proof = ""
        run = f"""\
        watcher = Watcher()
        own = holds()  # Note [Parameters of f's own]: no gradient can be lost
        push(watcher)
        if not own:
            open_cache()
        try:
            out = f({passed})
        finally:
            pop()
            watcher.places = None if own else close_cache()
        found = watcher.found
        if not found or watcher.places:
            return unplanned(out, args, watcher)
        variables = [*found.values()]
        if {" or ".join(f"type({a}) is not Tensor" for a in args)}:  # a Parameter argument
            variables = [v for v in variables if {" and ".join(f"v is not {a}" for a in args)}]
        if variables and type(out) is tuple and len(out) == 2:
            result, grad_fn = out
            if not own:
                variables = settle(f, UNBOUND, {{}}, result, args, variables)
            if (type(result) is Tensor and type(grad_fn) is FunctionType
                    and (grad_fn.__code__ is accepted[0] or accepts(grad_fn, accepted))):
"""
        plan_head = "defaults, variables, "
        more_inputs, rest = ", *variables", "args, watcher"
    else:
        proof = "not holds() or "
        run = f"""\
        out = f({passed})
        if type(out) is tuple and len(out) == 2:
            result, grad_fn = out
            if (type(result) is Tensor and type(grad_fn) is FunctionType
                    and ({" or ".join(f"{a}.requires_grad" for a in args)})):
"""
        plan_head = "defaults, "
        more_inputs, rest = "", "args, None"
    cells = "".join(
        _cells_branch(k, f"{passed}{more_inputs}") for k in range(1, _UNROLLED_CELLS + 1)
    )
    source = f"""\
def make(f, holds, apply, general, unplanned, UNBOUND, grad_enabled, jit_tracing_state,
         transforms_active, forward_ad, is_wrapped, any_autocast, EXACT, Tensor, FunctionType,
         plain, Watcher, push, pop, accepts, open_cache, close_cache, settle):
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
                    plan = (grad_fn.__code__, grad_fn.__globals__, {plan_head}{metas})
                    try:
                        k = len(closure)
{cells}\
                    except ValueError:  # an empty cell (a name f assigns later)
                        pass
        return unplanned(out, {rest})
    return call
"""
    namespace: dict[str, Any] = {}
    name = "" if kind == "none" else f"{kind} "
    exec(compile(source, f"<tf_compat_grad {name}plan of {n} arguments>", "exec"), namespace)
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
