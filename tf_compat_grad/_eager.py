"""The eager path: a decorated call under plain autograd, and its `torch.autograd.Function`
class, generated per decorated function (`node_class` names the classes of every path).

# Note [where f runs]
TensorFlow runs f while the tape records, so the ops of f are differentiable: a second derivative
flows through the tensors grad_fn closes over (`e = exp(x)` in `log1pexp`), and only the custom
op's outputs have their producer replaced by grad_fn (items 8, 38, 40). A torch
`Function.forward` runs with grad recording off, which would turn such tensors into constants and
silently drop that second-order term (the "higher-order trap"). So in eager autograd f runs
*before* the node, with grad recording on, and the node's forward only hands over f's outputs
(detached, so gradients reach the inputs through grad_fn alone) and saves the tensors grad_fn
closes over (Note [saved closures]). A backward with `create_graph=True` then differentiates
grad_fn's ops through those tensors' own graphs, exactly as TensorFlow does. Where grad_fn
provably reads nothing f computed, nothing needs that history, and f runs with recording off
(Note [f unrecorded] in `_unrecorded.py`). Where f is provably pure and the call's tensors are
leaves that require grad, f runs with recording off too, and a backward with
`create_graph=True` runs it again, recorded, for the history its grad_fn reads (Note [f run
again] in `_rerun.py`); otherwise f runs once per call whatever the order of differentiation.

# Note [decorated again]
TensorFlow code often defines its custom gradient inside `call`, so a `forward` decorates the
same code again on every call. What depends only on the code is made once per code object
(`_record.per_code`, whose entries go with the code object and hold no decoration's f): the
node classes, whose methods take f from the call, a plan's generated code, and the shapes of
the calls the decorations of that code have learned, with their plans' calls and node classes;
one lookup per decoration finds them all (`Shared`, within `_decoration.Decoration`). A new
decoration plans those shapes, with its own f, closure and reach proof (the answer of the
code's last analysis where its closure and defaults allow, Note [a proof per code] in
`_reach_check.py`), so that it starts on a plan: each plan's call bound to a tuple of what it
reads of the decoration (`_plan_node.BINDING`); a plan's guards hold for whatever closure it
serves (Note [plans]). It plans them at its first call with grad, or without grad where that
proof then says f reads no Parameter (not as it is made: what f reads may be rebound before
its first call); else without grad the first calls take the general code until one has passed
the `variables` check (item 33).

Nothing a decoration makes refers back to it: its plans hold its `EagerPath`, which holds the
wrapper weakly; the route out of a compiled graph holds the path; the attributes the wrapper
shares with the function `custom_gradient` returns name it weakly (`_decoration.wrapper_of`).
So a decoration is freed by reference counting, and decorating on every call leaves the cyclic
garbage collector nothing to find (a decorated method is still a cycle, with its class's function).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from types import MethodType
from typing import Any

import torch

from . import _functorch, _plan, _plan_node, _plan_shape, _run, _structure
from ._captures import CapturedRule
from ._closure import EXACT_TENSOR_TYPES, Captured, capture
from ._errors import PREFIX, CustomGradientNotImplementedError, describe
from ._plan_shape import KEYWORD_VALUES, NUMBERS
from ._reach import ParameterReach
from ._record import InputMeta, Record, check_upstreams, node_class
from ._rerun import Again, Rerun, all_leaves
from ._run import UNBOUND, Layout
from ._torch_internals import (
    any_autocast_enabled,
    any_dual,
    call_backward_directly,
    function_apply_c,
    functorch_transforms_active,
    is_functorch_wrapped,
    jit_tracing_state,
    set_grad_mode,
    untransformed,
)
from ._watcher import ParameterWatcher, run_watched, watched_result

_Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled


class Shared:
    """What the eager paths of every decoration of one code share (Note [decorated again]):
    the node class of Note [where f runs] (its methods do not use f) with its C `apply`, the
    `torch.func` node class, and the shapes the decorations have learned."""

    __slots__ = ("c_apply", "learned", "node", "transform_node")

    def __init__(self, f: Callable[..., Any]) -> None:
        self.node = _make_node(f)
        # `Function.apply` first takes the arguments apart as a pytree, to unwrap tensors left
        # over from a finished `torch.func` transform; a call checks for those instead, for a
        # fraction of the cost, and otherwise applies the node through torch's C entry point.
        self.c_apply = function_apply_c.__get__(None, self.node)
        self.transform_node = _functorch.make_transform_node(f)
        self.learned: list[_Learned] = []


def _make_node(f: Callable[..., Any]) -> type[torch.autograd.Function]:

    def forward(
        ctx: Any,
        record: Record,
        handoff: tuple[Any, Captured | Rerun, list[torch.Tensor]],
        *inputs: Any,
    ) -> Any:
        # f's outputs (one tensor when f returned one), and grad_fn without the tensors it
        # closes over and those tensors (Note [saved closures]): passed with the call, so
        # that the record, which the node keeps, does not keep them by another path.
        outputs, ctx.captured, saved = handoff
        ctx.save_for_backward(*saved)
        ctx.record = record
        return outputs

    def backward(ctx: Any, *upstream: Any) -> tuple[torch.Tensor | None, ...]:
        grad_fn = ctx.captured.rebuild(ctx.saved_tensors)
        return (
            None,
            None,
            *ctx.record.gradients(grad_fn, upstream, ctx.needs_input_grad, first=2),
        )

    node = node_class(f, forward=staticmethod(forward), backward=staticmethod(backward))
    call_backward_directly(node)
    return node


class EagerPath:
    """The calls of one decorated function outside `torch.compile`: under plain autograd through
    its node (Note [where f runs]), under `torch.no_grad()` with no node, and under a `torch.func`
    transform or with dual tensors through the transform node (Note [transforms]).

    `call` handles every call, and learns from each one the shape of a plan (Note [plans] in
    `_plan.py`), which serves the calls of that shape from then on: the `_entry` of `holder`
    (the wrapper, held weakly: Note [decorated again]) is the newest plan, which hands the
    calls it does not fit to the plan before it, and the first to `call`.
    """

    __slots__ = (
        "_checked", "_f", "_holder", "_pending", "_planned", "_shared", "captured",
        "reach",
    )  # fmt: skip

    def __init__(
        self, f: Callable[..., Any], shared: Shared, captured: CapturedRule, holder: Any
    ) -> None:
        self._f = f
        self._holder = weakref.ref(holder)
        holder._entry = self.call
        self._shared = shared
        self._checked = False  # a call has passed the `variables` check (item 33)
        self.reach = ParameterReach(f)
        self._planned: tuple[tuple[Any, ...], ...] = ()  # the `Shape.key`s that have a plan
        # What a call does with a tensor its outputs depend on that it was not given
        # (`custom_gradient(captured=...)`, Note [lost gradients] in `_captures.py`).
        self.captured = captured
        # Whether this decoration is still to plan the shapes every decoration of f's code has
        # learned (Note [decorated again]): at its first call with grad, or without grad where
        # its proof then says f reads no Parameter (without grad a plan runs f unchecked, and
        # the first calls check `variables`: item 33). Not as it is made: what f reads may be
        # rebound before its first call.
        self._pending = bool(shared.learned)

    def call(self, bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._pending and (_grad_enabled() or self.reach.reads_none()):
            self._pending = False
            holder: Any = self._holder()
            for learned in self._shared.learned:
                self._plan(learned, holder)
            return holder._entry(bound, args, kwargs)
        f = self._f
        if not untransformed():  # Note [call modes]
            if jit_tracing_state() is not None:
                raise _jit_trace_error(f)
            if functorch_transforms_active():
                return _functorch.call_under_transform(
                    self._shared.transform_node, f, bound, args, kwargs, captured=self.captured
                )
        flat_args, layout, inputs = _run.inputs(f, bound, args)
        if any_dual(inputs):
            return _functorch.call_under_transform(
                self._shared.transform_node, f, bound, args, kwargs, True, self.captured
            )
        if not _grad_enabled():
            return self._call_without_grad(bound, args, kwargs, flat_args, layout)
        versions = _run.versions(inputs)
        # `Function.apply` first unwraps tensors left over from a finished transform.
        wrapped = any(map(is_functorch_wrapped, inputs))
        again: Again | None = None
        if not wrapped and self._runs_unrecorded(bound, args, kwargs):  # Note [f unrecorded]
            set_grad_mode(False)
            try:
                if self.reach.proof == "own":  # no gradient can be lost: nothing to settle
                    result, grad_fn, variables = run_watched(
                        f, bound, args, kwargs, flat_args, captures=False
                    )
                else:
                    result, grad_fn = _run.split(f, f(*args, **kwargs))
                    variables = _NO_VARIABLES
            finally:
                set_grad_mode(True)
            if not self.reach.unrecorded:  # Note [f run again] in `_rerun.py`
                again = (f, args, kwargs, versions, self.reach.calm)
        else:
            result, grad_fn, variables = run_watched(
                f, bound, args, kwargs, flat_args, self.reach, captured=self.captured
            )
        self._checked = True
        _run.check_unedited(f, layout, inputs, versions)
        apply = self._shared.node.apply if wrapped else self._shared.c_apply
        out = self._finish(result, grad_fn, variables, layout, inputs, apply, again)
        self._learn(bound, args, kwargs, result, grad_fn, layout)
        return out

    def _runs_unrecorded(self, bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether f runs with grad mode off (Note [f unrecorded] in `_unrecorded.py`): an
        unbound call of tensors (none left over from a `torch.func` transform: the caller
        asks) and Python numbers, while the reach proof says f reads no Parameter, or only
        those of its own cells, and can name no plain tensor that requires grad, and its code
        keeps nothing it computes; or else f reads no Parameter and can run again for a second
        derivative, the call's tensors are leaves that require grad and autocast is off (Note
        [f run again] in `_rerun.py`). The plans of kinds "unrecorded", "unrecorded watched"
        and "rerun" ask the same."""
        if not (
            bound is UNBOUND
            and all(type(a) in _FLAT for a in args)
            and all(type(v) in KEYWORD_VALUES for v in kwargs.values())
        ):
            return False
        reach = self.reach
        reach.possible(kwargs.values())  # analyses f again if what it read has changed
        return (
            reach.unrecorded
            or (
                reach.rerun
                and not any_autocast_enabled()
                and all_leaves([a for a in args if type(a) not in NUMBERS])
            )
        ) and reach.calm()

    def _learn(
        self,
        bound: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result: Any,
        grad_fn: Any,
        layout: Layout,
    ) -> None:
        """Make the plan for the shape of a call the general code handled, unless there is one
        or no plan can take it (Note [plans])."""
        if len(self._planned) >= _plan.MAX_PLANS:
            return
        key = _plan_shape.input_key(bound, args, kwargs)
        if key is None or key in self._planned:
            return
        shape = _plan_shape.shape_of(key, result, grad_fn, self._f)
        if shape is None:
            return
        learned = _Learned(shape, shape.bound or self.reach.possible(kwargs.values()), layout)
        self._plan(learned, self._holder())
        shared = self._shared.learned
        if len(shared) < _plan.MAX_PLANS and all(key != s.key for s in shared):
            shared.append(learned)

    def _plan(self, learned: _Learned, holder: Any) -> None:
        """Put the plan for a learned shape in front of the plans there are (`holder._entry`);
        watched (Note [plans]), or of kind "none", which a call takes while f provably reads no
        Parameter."""
        planned, key = self._planned, learned.key
        if key in planned or len(planned) >= _plan.MAX_PLANS:
            return
        self._planned = (*planned, key)
        reach = self.reach
        # First: a new decoration whose code's proof was not kept (Note [a proof per code]) is
        # analysed here, before its kind is read from the proof.
        watched = reach.planned_possible() or learned.watched
        flat = learned.flat
        unrecorded = flat and reach.unrecorded
        if watched:
            own = reach.proof == "own" and unrecorded
            kind, holds = ("unrecorded watched" if own else "watched"), reach.reads_own
        elif unrecorded:
            kind, holds = "unrecorded", reach.reads_none
        else:
            kind = "rerun" if flat and reach.rerun else "none"  # Note [f run again]
            holds = reach.reads_none
        call = learned.made.get(kind)
        if call is None:
            apply = _plan_node.make_node(self._f, learned.shape, watched, kind == "rerun")
            call = learned.made[kind] = _plan.plan_call(self._f, learned.shape, kind, apply)
        # bound to this decoration's binding, in the order of `_plan_node.BINDING`
        holder._entry = MethodType(call, (self._f, holds, holder._entry, self, learned.spec))

    def _unplanned(
        self,
        out: Any,
        bound: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        watcher: ParameterWatcher | None,
        again: Again | None = None,
    ) -> Any:
        """The rest of a plan's call whose f returned what the plan does not handle (`watcher`:
        what watched f, for a watched plan; `again`: how to run f again, for a call of a plan of
        kind "rerun" whose f ran unrecorded)."""
        f = self._f
        flat_args, layout, inputs = _run.inputs(f, bound, args)
        variables: list[torch.nn.Parameter] = _NO_VARIABLES
        if watcher is None:
            result, grad_fn = _run.split(f, out)
        else:
            result, grad_fn, variables = watched_result(
                f, bound, out, watcher, flat_args, kwargs, self.captured
            )
        return self._finish(result, grad_fn, variables, layout, inputs, self._shared.c_apply, again)

    def _fresh(self, out: Any) -> Any:
        """The rest of a plan's call without grad whose f returned what the plan does not
        handle."""
        return _run.fresh(self._f, _run.split(self._f, out)[0])

    def _checked_gradients(
        self,
        spec: _LayoutSpec,
        metas: tuple[InputMeta, ...],
        variables: list[torch.nn.Parameter] | None,
        returned: Any,
        needs: Sequence[bool],
    ) -> list[Any]:
        """The general checks of what a plan's grad_fn returned (Note [plans]); `spec`: the
        plan's `Layout` less f."""
        variables = variables or _NO_VARIABLES
        layout = Layout(self._f, *spec)
        return Record(layout, list(metas), variables, ()).checked(returned, needs, first=1)

    def _finish(
        self,
        result: Any,
        grad_fn: Callable[..., Any],
        variables: list[torch.nn.Parameter],
        layout: Layout,
        inputs: Sequence[torch.Tensor],
        apply: Callable[..., Any],
        again: Again | None = None,
    ) -> Any:
        """Apply the node to a call whose f has run (or return f's outputs when no gradient can
        flow); `again`: how to run f again, when it ran unrecorded to run again."""
        f = self._f
        if not variables:
            for tensor in inputs:
                if tensor.requires_grad:
                    break
            else:
                return _run.fresh(f, result)  # nothing to record: f's own autodiff (item 39)
        record = Record.of_call(layout, inputs, variables)
        sources = (*inputs, *variables)
        captured: Captured | Rerun
        captured, saved = capture(grad_fn, getattr(f, "__qualname__", "") + ".<locals>.", f)
        if again is not None:
            captured = Rerun(captured, again)
        if type(result) is _Tensor:  # one output: the node returns it as it is
            output = _run.detached(result, sources)
            return apply(record, (output, captured, saved), *inputs, *variables)
        outputs, out_spec = _run.outputs(f, result, sources)
        check_upstreams(f, grad_fn, len(outputs), variables)
        handoff = (outputs, captured, saved)
        return _structure.unflatten(out_spec, apply(record, handoff, *inputs, *variables))

    def _call_without_grad(
        self,
        bound: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        flat_args: Sequence[Any],
        layout: Layout,
    ) -> Any:
        """No gradient can be asked for: f's outputs, no node (item 9).

        TensorFlow checks grad_fn's `variables` parameter even without a tape (item 33). Finding
        the Parameters f reads costs a watch over every op of f, so in this mode it is done
        only until one call of this function has passed the check.
        """
        f = self._f
        if self._checked:
            result, grad_fn = _run.split(f, _run.call_f(f, bound, args, kwargs))
        else:
            result, grad_fn, _ = run_watched(f, bound, args, kwargs, flat_args, self.reach)
            self._checked = True
        out = _run.fresh(f, result)
        self._learn(bound, args, kwargs, result, grad_fn, layout)
        return out


_NO_VARIABLES: list[torch.nn.Parameter] = []  # never written to
_FLAT = EXACT_TENSOR_TYPES | NUMBERS  # the arguments of a call f may run unrecorded with

_LayoutSpec = tuple[bool, Any, int, Sequence[int]]  # a `Layout`'s arguments after f


class _Learned:
    """A call shape a decoration of f's code learned (Note [decorated again]): its plan is
    watched or not, its call's `Layout` less f, and the call of its plan (`_plan.plan_call`, over
    its node), made when first asked for, by kind, which each decoration binds (`EagerPath._plan`)."""

    __slots__ = ("flat", "key", "made", "shape", "spec", "watched")

    def __init__(self, shape: _plan_shape.Shape, watched: bool, layout: Layout) -> None:
        self.shape = shape
        self.key = shape.key()
        self.watched = watched
        # Unbound, of tensors and numbers: the call may run f unrecorded (Note [f unrecorded]),
        # the question of `EagerPath._runs_unrecorded`.
        self.flat = not shape.bound and all(a in ("t", "n") for a in shape.args)
        self.spec: _LayoutSpec = (layout.bound, layout.spec, layout.n_args, layout.positions)
        self.made: dict[str, Callable[..., Any]] = {}


def _jit_trace_error(f: Callable[..., Any]) -> CustomGradientNotImplementedError:
    """`torch.jit.trace` records the ops f runs and replays the node with this call's record:
    the graph would return this call's outputs again, or (no input requiring grad, so no node)
    autograd would differentiate f's own ops (docs/torch_facts.md, "torch.jit.trace and
    torch.export"). Named as the user wrote it: the function that `recompute_grad`'s (or
    `grad_pass_through`'s) wrapper wraps, a partial as such."""
    return CustomGradientNotImplementedError(
        f"{PREFIX}torch.jit.trace cannot trace {describe(inspect.unwrap(f))}: a traced graph "
        "keeps the ops the decorated function runs but not its grad_fn, so a gradient through "
        "the graph would not be the custom one. To deploy the model, export it with "
        "`torch.export.export(model, args)` instead (the exported program computes the "
        "outputs, and no gradient)."
    )
