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
grad_fn's ops through those tensors' own graphs, exactly as TensorFlow does, and f runs once per
call whatever the order of differentiation.

Item numbers refer to docs/tensorflow_semantics.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _functorch, _run, _structure
from ._closure import capture
from ._errors import PREFIX, CustomGradientNotImplementedError, bug, describe
from ._parameters import ParameterReach, run_watched
from ._record import Record, node_class
from ._run import UNBOUND
from ._torch_internals import (
    any_dual,
    function_apply_c,
    functorch_transforms_active,
    is_functorch_wrapped,
    jit_tracing_state,
)

_Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled


def make_node(f: Callable[..., Any]) -> type[torch.autograd.Function]:
    """The eager Function class for f (Note [where f runs])."""

    def forward(
        ctx: Any, record: Record, *inputs: torch.Tensor
    ) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if record.saved is None or record.outputs is None:
            raise bug("a call record reached its node's forward twice")
        ctx.save_for_backward(*record.saved)
        ctx.record = record
        outputs = record.outputs
        record.saved = record.outputs = None  # the node must not keep them by another path
        return outputs

    def backward(ctx: Any, *upstream: Any) -> tuple[torch.Tensor | None, ...]:
        record: Record = ctx.record
        if record.captured is None:
            raise bug("an eager node has no captured grad_fn")
        grad_fn = record.captured.rebuild(ctx.saved_tensors)
        return (None, *record.gradients(grad_fn, upstream, ctx.needs_input_grad[1:]))

    return node_class(f, forward=staticmethod(forward), backward=staticmethod(backward))


def eager_apply(node: type[torch.autograd.Function]) -> Callable[..., Any]:
    """`node.apply` for use outside `torch.func` transforms, through torch's C entry point.

    `Function.apply` first takes the arguments apart as a pytree to unwrap tensors left over
    from a finished `torch.func` transform; none of ours is one unless a tensor escaped a
    transform, which is checked here instead, for a fraction of the cost.
    """
    c_apply = function_apply_c.__get__(None, node)

    def apply(record: Record, *inputs: torch.Tensor) -> Any:
        for tensor in inputs:
            if is_functorch_wrapped(tensor):
                return node.apply(record, *inputs)  # type: ignore[no-untyped-call]
        return c_apply(record, *inputs)

    return apply


class EagerPath:
    """The calls of one decorated function outside `torch.compile`: under plain autograd through
    its node (Note [where f runs]), under `torch.no_grad()` with no node, and under a `torch.func`
    transform or with dual tensors through the transform node (Note [transforms])."""

    __slots__ = ("_apply", "_checked", "_f", "_inside", "_transform_node", "reach")

    def __init__(self, f: Callable[..., Any]) -> None:
        self._f = f
        self._apply = eager_apply(make_node(f))
        self._transform_node = _functorch.make_transform_node(f)
        self._inside = getattr(f, "__qualname__", "") + ".<locals>."
        self._checked = False  # a call has passed the `variables` check (item 33)
        self.reach = ParameterReach(f)

    def call(self, bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        f = self._f
        if jit_tracing_state() is not None:
            raise _jit_trace_error(f)
        if functorch_transforms_active():
            return _functorch.call_under_transform(self._transform_node, f, bound, args, kwargs)
        flat_args, arg_spec, positions, inputs = _run.inputs(f, bound, args)
        if any_dual(inputs):
            return _functorch.call_under_transform(
                self._transform_node, f, bound, args, kwargs, dual=True
            )
        if not _grad_enabled():
            return self._call_without_grad(bound, args, kwargs, flat_args)
        result, grad_fn, variables = run_watched(f, bound, args, kwargs, flat_args, self.reach)
        self._checked = True
        if not variables:
            for tensor in inputs:
                if tensor.requires_grad:
                    break
            else:
                return _run.fresh(f, result)  # nothing to record: f's own autodiff (item 39)
        record = Record(
            f, bound is not UNBOUND, arg_spec, len(flat_args), positions, inputs, variables
        )
        record.captured, record.saved = capture(grad_fn, self._inside)
        if type(result) is _Tensor:  # one output: the node returns it as it is
            record.outputs = result.detach()
            return self._apply(record, *inputs, *variables)
        record.outputs, out_spec = _run.outputs(f, result)
        return _structure.unflatten(out_spec, self._apply(record, *inputs, *variables))

    def _call_without_grad(
        self, bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any], flat_args: Sequence[Any]
    ) -> Any:
        """No gradient can be asked for: f's outputs, no node (item 9).

        TensorFlow checks grad_fn's `variables` parameter even without a tape (item 33). Finding
        the Parameters f reads costs a watch over every op of f, so in this mode it is done
        only until one call of this function has passed the check.
        """
        f = self._f
        if self._checked:
            return _run.fresh(f, _run.split(f, _run.call_f(f, bound, args, kwargs))[0])
        result, _, _ = run_watched(f, bound, args, kwargs, flat_args, self.reach)
        self._checked = True
        return _run.fresh(f, result)


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
