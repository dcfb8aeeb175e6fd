"""The node used while a `torch.func` transform is active (grad, vmap, jacrev, jvp, ...).

# Note [transforms]
`torch.func` only accepts a `setup_context`-style Function, and it calls `forward` itself, at the
innermost level, on unwrapped tensors. So here f runs inside `forward` (Note [where f runs] does
not apply), grad_fn leaves `forward` as an extra non-tensor output, and `setup_context` keeps it.
The tensors grad_fn closes over are then constants to every enclosing transform: enough for a
first derivative, but a second one would silently lose their term (the "higher-order trap":
`grad(grad(log1pexp))` would give 0.0). So backward checks whether an enclosing level still
differentiates the inputs (a live grad or jvp level under the current one, or plain autograd
recording the underlying tensor); only then it runs f again on the inputs as backward sees them,
with the random-number state of the first run, and calls the fresh grad_fn, whose closure tensors
now carry that level's derivatives. At first order f runs once.

Forward mode follows the custom rule: grad_fn is a vector-Jacobian product `u -> J^T u`, linear in
u, so `J v = d/du <grad_fn(u), v>`: one reverse pass of grad_fn at u = 0 (`torch.func.vjp`). Integer
and bool tensors have no tangents: they are constants of that rule, in and out. Dual tensors of
`torch.autograd.forward_ad` outside any transform take this node too, since the eager node has no
jvp; a backward under a dual level runs f again, so that grad_fn's closure tensors carry tangents
(forward over reverse). With dual tensors, f runs and the rule is applied at the inputs' primals
(`primals`): a decorated function that grad_fn calls would otherwise see the tangent and apply its
own rule to it, and two grad_fns that call each other's functions (or one that calls its own) did so
without end. Under a `torch.func` forward-mode transform inside reverse mode (`jacrev(jacfwd(f))`)
the same loop arises through the transform's levels; a jvp that reaches its own jvp again is refused
by name.

What f reaches outside its arguments (Note [lost gradients] in `_captures.py`): the tensors of the
transform that `functional_call` put in a module's parameter and buffer slots (and a plain tensor in
a parameter slot: one `vmap` does not batch) are more inputs of the node, after f's own, and sit in
their slots as `forward` sees them while f runs; the parameter slots' tensors are the call's
variables, and get grad_fn's gradients, the buffer slots' are constants; a parametrization's
original in a slot is refused (the weight f reads is computed from it: its gradient would need the
parametrization's chain rule). A tensor of a grad level that f captured instead has no autograd
graph to walk here, so the ops f runs are followed one by one (`Taint`): an output computed from it
is refused.

# Note [outer backward]
The Parameters f reads from its closure or module (not from a slot) are constants of every
transform, but plain autograd outside them differentiates them: a gradient penalty
(`torch.func.grad` of a critic, then the penalty's backward), `vmap(f)(x)` then backward, or a
backward under a dual level of `forward_ad`. They are found only while f runs, inside `forward`, so
they cannot be the node's inputs; each level's node would miss the term through f's outputs. So
right after the node, at the same level, `_Reads` takes its outputs, its tensors and those
Parameters: forward hands the outputs on. Backward, at the level where the Parameters need a
gradient (plain autograd: at a transform's level they need none), calls grad_fn once for them and
for the node's tensors, and hands the node no upstream (it then calls nothing); at every other level
it hands the upstream on. grad_fn is the one `backward` would use there (f runs again where a level
differentiates further), so the second order is exact too.

`Function.apply` runs `forward` under `no_grad`; f runs in the caller's grad mode instead, so
that tensors f computes from ones captured from an enclosing eager scope (`torch.cos(y)`, y
requiring grad) keep their graph, and an outer `torch.autograd.grad` around `torch.func.grad`
differentiates grad_fn's result through them, as TensorFlow's outer tape does.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.nn.utils import parametrize

from . import _autocast, _run, _structure
from ._captures import CapturedRule
from ._errors import PREFIX, CustomGradientNotImplementedError, describe, fn_name
from ._places import Slot, in_slots, parametrization_originals, transformed_slots
from ._record import InputMeta, Record, check_upstreams, input_meta, node_class, per_code
from ._rng import RngState
from ._run import Layout
from ._taint import Taint
from ._torch_internals import (
    VMAP_TAKES_NO_UPSTREAM,
    any_dual,
    differentiated_further,
    has_tangent_space,
    never_compiled,
    primals,
)
from ._variables import check_accepts
from ._watcher import run_watched


class _Call:
    """One call's non-tensor part, passed through `apply` to `forward` (an object, not a tuple:
    functorch takes tuples apart as pytrees)."""

    __slots__ = (
        "bound",
        "captured",
        "constants",
        "dual",
        "grad_enabled",
        "kwargs",
        "layout",
        "n_parameters",
        "slots",
    )

    def __init__(
        self,
        bound: Any,
        layout: Layout,
        constants: list[Any],
        kwargs: dict[str, Any],
        slots: list[Slot],
        dual: bool,
        captured: CapturedRule,
    ) -> None:
        self.bound = bound
        self.captured = captured  # `custom_gradient(captured=...)`
        self.layout = layout
        self.constants = constants  # the flattened arguments, with the tensors left out (None)
        self.kwargs = kwargs
        # The parameter slots, then the buffer slots, holding the transform's tensors
        # (`functional_call`): their tensors come after the inputs among the node's; the
        # parameters' are variables, the buffers' constants (Note [lost gradients] in
        # `_captures.py`).
        self.slots = slots
        self.n_parameters = sum(kind == "_parameters" for _, kind, _ in slots)
        self.dual = dual  # dual tensors of `forward_ad`, outside any transform
        # `Function.apply` runs forward under no_grad; f runs with the caller's mode instead.
        self.grad_enabled = torch.is_grad_enabled()

    def run_f(
        self, f: Callable[..., Any], tensors: Sequence[torch.Tensor]
    ) -> tuple[Any, Callable[..., Any], list[Any]]:
        """Run f on the node's tensors as it sees them: the inputs, then the slots' tensors,
        which sit in their slots while f runs."""
        n = len(self.layout.positions)
        leaves = _structure.put(self.constants, self.layout.positions, tensors[:n])
        args = _structure.unflatten(self.layout.spec, leaves)
        placed = list(tensors[n:])
        taint = Taint(tensors, f, self.bound, self.kwargs, self.captured)
        with in_slots(self.slots, placed), taint:
            result, grad_fn, found = run_watched(
                f, self.bound, args, self.kwargs, leaves, captures=False
            )
        variables: list[Any] = found
        taint.check(result)
        if self.n_parameters:
            # A slot's tensor, unwrapped, is the module's own Parameter when the transform was
            # given the module's Parameters (`dict(model.named_parameters())`): the watcher
            # found it too.
            own = placed[: self.n_parameters]
            variables = [*own, *(v for v in variables if not any(v is p for p in own))]
            check_accepts(f, self.bound, grad_fn, variables)
        return result, grad_fn, variables

    def n_given(self) -> int:
        """How many of the node's tensors get grad_fn's gradients: the inputs, then the
        parameter slots' tensors."""
        return len(self.layout.positions) + self.n_parameters

    def n_tensors(self) -> int:
        """How many tensors the node takes: the inputs, then the slots' tensors."""
        return len(self.layout.positions) + len(self.slots)


@dataclasses.dataclass(eq=False, slots=True)
class _Aux:
    """What forward hands to setup_context besides the outputs."""

    grad_fn: Callable[..., Any]
    out_spec: _structure.Spec
    variables: list[Any]
    rng: RngState


def call_under_transform(
    node: type[torch.autograd.Function],
    f: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dual: bool = False,
    captured: CapturedRule = "refuse",
) -> Any:
    """Call f through `node`, the class `make_transform_node` made for it: under a `torch.func`
    transform, or (`dual`) outside one with dual tensors among the inputs."""
    flat_args, layout, inputs = _run.inputs(f, bound, args)
    constants = _structure.put(flat_args, layout.positions, [None] * len(inputs))
    slots, placed = transformed_slots(f, bound)
    for module, kind, name in slots:
        if kind == "_parameters" and isinstance(module, parametrize.ParametrizationList):
            raise CustomGradientNotImplementedError(_parametrized_refusal(f, name))
    call = _Call(bound, layout, constants, kwargs, slots, dual, captured)
    *outputs, aux = node.apply(call, *inputs, *placed)  # type: ignore[no-untyped-call]
    read = aux.variables[call.n_parameters :]
    if any(v.requires_grad for v in read):  # Note [outer backward]
        link = _Link(call, aux, len(outputs))
        outputs = _Reads.apply(  # type: ignore[no-untyped-call]
            link, *outputs, *inputs, *placed, *read
        )
    return _structure.unflatten(aux.out_spec, outputs)


def make_transform_node(f: Callable[..., Any]) -> type[torch.autograd.Function]:
    """The `setup_context`-style Function class for f; see Note [transforms]. Its methods take
    f from the call's `Layout`, so the class is made once per code object: a function decorated
    again (inside `forward`, on every call) reuses it, and it holds no decoration's closure."""
    return per_code(f, "transform", _make_transform_node)  # type: ignore[no-any-return]


def _make_transform_node(named_after: Callable[..., Any]) -> type[torch.autograd.Function]:
    def forward(call: _Call, *inputs: torch.Tensor) -> tuple[Any, ...]:
        f = call.layout.f
        rng = RngState()
        with torch.set_grad_enabled(call.grad_enabled):
            # f runs on the primals of dual inputs, so that the decorated functions its grad_fn
            # calls in jvp see no tangent: they would compute theirs, through their own
            # grad_fn, without end (two functions whose grad_fns call each other).
            args = primals(inputs) if call.dual else inputs
            result, grad_fn, variables = call.run_f(f, args)
        outputs, out_spec = _run.outputs(f, result, (*args, *variables))
        check_upstreams(f, grad_fn, len(outputs), variables)
        return (*outputs, _Aux(grad_fn, out_spec, variables, rng))

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Any, ...]) -> None:
        call: _Call = inputs[0]
        aux: _Aux = output[-1]
        tensors = inputs[1:]
        ctx.call = call
        ctx.aux = aux
        n = len(call.layout.positions)
        ctx.record = Record.of_call(call.layout, tensors[:n], aux.variables)
        # The same tensors for both: torch's generated vmap rule keeps the batch dims of one.
        # Not the outputs: saved, an in-place edit of one (`y.mul_(2)`) would be refused with
        # torch's version error, where plain autograd allows it; jvp needs only their metadata.
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        ctx.outputs = list(map(input_meta, output[:-1]))
        # `_Reads` hands backward no upstream where it gave the inputs their gradients (older
        # torch: zeros, made by autograd, for which grad_fn runs again and gives zeros).
        ctx.set_materialize_grads(not VMAP_TAKES_NO_UPSTREAM)

    def backward(ctx: Any, *upstream: Any) -> tuple[torch.Tensor | None, ...]:
        n: int = ctx.call.n_tensors()
        if all(u is None for u in upstream):  # `_Reads` gave the inputs their gradients
            return (None,) * (1 + n)
        # Unused outputs' upstreams are zeros, as autograd would have made them (the last
        # output is the `_Aux`).
        outputs = zip(upstream[:-1], ctx.outputs, strict=True)
        given = [_zeros(o) if u is None else u for u, o in outputs]
        inputs = ctx.saved_tensors[:n]
        grad_fn = _grad_fn_for(ctx, inputs)
        return (None, *_gradients(ctx, grad_fn, given, ctx.needs_input_grad[1:], inputs))

    def jvp(ctx: Any, *tangents: Any) -> tuple[Any, ...]:
        saved = ctx.saved_tensors
        if ctx.call.dual:  # the rule is applied at the primals, as in forward
            saved = primals(saved)
        inputs = saved[: ctx.call.n_tensors()]
        grad_fn = _grad_fn_for(ctx, inputs, forward_mode=True)
        needs = [has_tangent_space(x) for x in inputs]
        outputs = ctx.outputs
        varying = [dtype.is_floating_point or dtype.is_complex for _, dtype, _ in outputs]
        if not any(needs) or not any(varying):
            return (
                *(_zeros(o) if v else None for o, v in zip(outputs, varying, strict=True)),
                None,
            )

        def vjp(*upstream: torch.Tensor) -> tuple[torch.Tensor, ...]:
            given = iter(upstream)
            full = [next(given) if v else _zeros(o) for o, v in zip(outputs, varying, strict=True)]
            grads = _gradients(ctx, grad_fn, full, needs, inputs)
            return tuple(
                torch.zeros_like(x) if g is None else g
                for g, x, need in zip(grads, inputs, needs, strict=True)
                if need
            )

        zeros = [_zeros(o) for o, v in zip(outputs, varying, strict=True) if v]
        input_tangents = tuple(
            torch.zeros_like(x) if t is None else t
            for t, x, need in zip(tangents[1:], inputs, needs, strict=True)
            if need
        )
        if getattr(in_jvp, "active", False):
            raise CustomGradientNotImplementedError(_jvp_reentered(ctx.call.layout.f))
        in_jvp.active = True
        try:
            pullback = torch.func.vjp(vjp, *zeros)[1]
            output_tangents = iter(pullback(input_tangents))
        finally:
            in_jvp.active = False
        return (*(next(output_tangents) if v else None for v in varying), None)

    in_jvp = threading.local()  # whether this thread is applying the rule in jvp

    # Note [compile under torch.func]
    forward = never_compiled(forward)
    setup_context = never_compiled(setup_context)
    backward = never_compiled(backward)
    jvp = never_compiled(jvp)
    # Function.apply would otherwise call inspect.signature(forward) on every call.
    forward.__signature__ = inspect.signature(forward)  # type: ignore[attr-defined]
    return node_class(
        named_after,
        forward=staticmethod(forward),
        setup_context=staticmethod(setup_context),
        backward=staticmethod(backward),
        jvp=staticmethod(jvp),
        generate_vmap_rule=True,
    )


def _grad_fn_for(
    ctx: Any, inputs: Sequence[torch.Tensor], forward_mode: bool = False
) -> Callable[..., Any]:
    """The grad_fn to apply at this level: the first run's, or a fresh one from f run again on
    `inputs` as this backward (or jvp) sees them where a level differentiates further (Note
    [transforms])."""
    aux: _Aux = ctx.aux
    f = ctx.call.layout.f
    further = differentiated_further(inputs)
    if forward_mode and further == "jvp":
        raise CustomGradientNotImplementedError(
            f"{PREFIX}forward mode over forward mode (e.g. `jacfwd(jacfwd(f))`) through "
            f"{describe(f)} would lose the second-order terms of the tensors "
            "its grad_fn closes over, so it is refused rather than computed wrong. Use "
            "`torch.func.hessian` (forward over reverse) or `jacrev(jacrev(f))` instead."
        )
    if not forward_mode and any_dual(inputs):
        further = "jvp"  # forward over reverse: a dual level differentiates backward's result
    if further:
        call: _Call = ctx.call
        state = ctx.record.autocast
        rerun: tuple[Any, Callable[..., Any], Any] = aux.rng.rerun(
            lambda: _autocast.call_in(state, call.run_f, f, inputs)
        )
        if not rerun[2]:
            return rerun[1]
        # grad_fn gets the very tensors its own run of f read (item 34): the slots' tensors as
        # this level sees them, then the Parameters the first run read. A Parameter passed as
        # an argument is this level's wrapper of it now, so the watcher also finds the
        # Parameter itself where f reads it: it is an input, not a variable, as at first.
        own, found = rerun[2][: call.n_parameters], rerun[2][call.n_parameters :]
        first = aux.variables[call.n_parameters :]
        read = [*own, *(v for v in found if any(v is p for p in first))]
        return functools.partial(_with_variables, rerun[1], read)
    return aux.grad_fn


def _gradients(
    ctx: Any,
    grad_fn: Callable[..., Any],
    upstream: Sequence[Any],
    needs: Sequence[bool],
    tensors: Sequence[torch.Tensor],
    read: Sequence[bool] = (),
) -> list[torch.Tensor | None]:
    """grad_fn's checked gradients for the transform node's tensors (`needs`: one per tensor),
    then, where `read` says so, for the Parameters f read outside a slot.

    The parameter slots' tensors are the transform's own: their gradients are returned. The
    buffers in slots are constants: None. The Parameters f read are constants of the transform
    and get their gradient only from `_Reads` (Note [outer backward]). The slots' tensors as this
    level sees them (after the inputs among `tensors`) are put back while grad_fn runs: one that
    reads `self.weight` then reads the tensor f computed with, not the Parameter that
    `functional_call` has put back since. For the grad_fn of f's first run, the parameter
    slots get the very tensors that run read, which grad_fn may hold too: it finds the one
    `self.weight` gives it among `variables` by identity (item 35)."""
    call: _Call = ctx.call
    record: Record = ctx.record
    given = call.n_given()
    n = call.n_parameters
    wanted = [*needs[:given], *(read or (False for _ in record.variables[n:]))]
    placed = list(tensors[len(record.layout.positions) :])
    if grad_fn is ctx.aux.grad_fn:
        placed[:n] = record.variables[:n]
    with in_slots(call.slots, placed):
        found = record.gradients(grad_fn, upstream, wanted)
    constants = (None for _ in range(call.n_tensors() - given))
    return [*found[:given], *constants, *(found[given:] if read else ())]


@dataclasses.dataclass(eq=False, slots=True)
class _Link:
    """What `_Reads` is passed of the transform node's call, through `apply`."""

    call: _Call
    aux: _Aux
    n_outputs: int


class _Reads(torch.autograd.Function):
    """Applied to the transform node's outputs, its tensors and the Parameters f read (not in a
    slot), so that a backward outside the transforms reaches them (Note [outer backward])."""

    @staticmethod
    @never_compiled
    def forward(link: _Link, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(t.detach() for t in tensors[: link.n_outputs])

    @staticmethod
    @never_compiled
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        link: _Link = inputs[0]
        call = link.call
        ctx.call = call
        ctx.aux = link.aux
        ctx.n_outputs = link.n_outputs
        tensors = inputs[1 + link.n_outputs : 1 + link.n_outputs + call.n_tensors()]
        ctx.record = Record.of_call(
            call.layout, tensors[: len(call.layout.positions)], link.aux.variables
        )
        ctx.save_for_backward(*tensors)

    @staticmethod
    @never_compiled
    def backward(ctx: Any, *upstream: Any) -> tuple[Any, ...]:
        first = 1 + ctx.n_outputs  # the node's tensors, then the Parameters f read
        last = first + ctx.call.n_tensors()
        needs = ctx.needs_input_grad
        read = needs[last:]
        if not any(read):  # a level they are constants of: the transform node's backward
            return (None, *upstream, *(None for _ in needs[first:]))
        _refuse_originals(ctx.call, ctx.aux.variables[ctx.call.n_parameters :], read)
        # One call of grad_fn gives the node's tensors theirs too; the transform node then gets
        # no upstream, and gives none.
        inputs = ctx.saved_tensors
        grad_fn = _grad_fn_for(ctx, inputs)
        gradients = _gradients(ctx, grad_fn, upstream, needs[first:last], inputs, read)
        return (None, *(None for _ in upstream), *gradients)

    @staticmethod
    @never_compiled
    def jvp(ctx: Any, *tangents: Any) -> tuple[Any, ...]:
        return tangents[1 : 1 + ctx.n_outputs]

    generate_vmap_rule = True


def _zeros(meta: InputMeta) -> torch.Tensor:
    """Zeros of an output's shape, dtype and device (its metadata kept in `setup_context`)."""
    shape, dtype, device = meta
    return torch.zeros(shape, dtype=dtype, device=device)


def _with_variables(
    grad_fn: Callable[..., Any], read: list[Any], /, *upstream: Any, **_: Any
) -> Any:
    """grad_fn called with the variables its own run of f read, not the first run's."""
    return grad_fn(*upstream, variables=list(read))


def _refuse_originals(call: _Call, variables: Sequence[Any], read: Sequence[bool]) -> None:
    """Refuse an outer backward that would hand a parametrization's original grad_fn's gradient
    of the weight computed from it: under a transform the watcher finds the original (f runs
    without parametrize's cache, Note [lost gradients] in `_captures.py`)."""
    f = call.layout.f
    originals = parametrization_originals(f, call.bound)
    for variable, wanted in zip(variables, read, strict=True):
        for name, original in originals:
            if wanted and variable is original:
                raise CustomGradientNotImplementedError(_parametrized_refusal(f, name, True))


def _parametrized_refusal(f: Callable[..., Any], name: str, outer: bool = False) -> str:
    situation = (
        f", and a backward outside it reaches a parametrization's `{name}`"
        if outer
        else f" with a tensor of the transform in a parametrization's `{name}` (`functional_call` "
        "of a module with a parametrized weight)"
    )
    return (
        f"{PREFIX}{describe(f)} is called under a torch.func transform{situation}: the weight f "
        "reads is computed from it, and grad_fn's gradient of the weight would be handed to it "
        "as its own, without the parametrization's chain rule, so this is refused rather than "
        "computed wrong. Read the weight in an undecorated forward and pass it to the decorated "
        "function as a positional argument, or call the module eagerly, where the chain rule is "
        "applied."
    )


def _jvp_reentered(f: Callable[..., Any]) -> str:
    return (
        f"{PREFIX}forward mode through {describe(f)} reached its own forward-mode rule again "
        "while applying it: its grad_fn calls a decorated function that (itself, or through "
        f"another grad_fn) calls {fn_name(f)}, and under a `torch.func` forward-mode transform "
        "each of those calls applies its rule again, without end. It is refused rather than "
        "left to fail with a RecursionError. Use reverse mode for the inner derivative: "
        "`torch.func.hessian` or `jacrev(jacrev(f))` instead of `jacrev(jacfwd(f))`."
    )
