"""The one `torch.autograd.Function` class generated per decorated function.

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

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _autocast, _gradients, _run, _structure
from ._closure import Captured
from ._errors import bug
from ._torch_internals import function_apply_c, is_functorch_wrapped

_Tensor = torch.Tensor


class Record:
    """What one call hands to its node's backward: how the arguments were laid out and which
    Parameters f read. Holds no tensor of the call's own."""

    __slots__ = (
        "arg_spec",
        "autocast",
        "bound",
        "captured",
        "f",
        "metas",
        "n_args",
        "outputs",
        "positions",
        "saved",
        "variables",
    )

    def __init__(
        self,
        f: Callable[..., Any],
        bound: bool,
        arg_spec: _structure.Spec,
        n_args: int,
        positions: Sequence[int],
        inputs: Sequence[torch.Tensor],
        variables: list[torch.nn.Parameter],
    ) -> None:
        self.f = f
        self.bound = bound  # called as a method: `self` is not among the arguments
        self.arg_spec = arg_spec
        self.n_args = n_args  # flattened positional arguments, tensors or not (item 11)
        self.positions = positions  # where each tensor input stands among them
        # One `_gradients.InputMeta` per tensor input, then per variable.
        self.metas = [(t.shape, t.dtype, t.device) for t in inputs]
        if variables:
            self.metas.extend((v.shape, v.dtype, v.device) for v in variables)
        self.variables = variables
        self.autocast = _autocast.current()  # grad_fn runs in the forward's autocast state
        # Handed over to the eager node's forward, which empties them (Note [saved closures]);
        # `outputs` is one tensor when f returned one tensor.
        self.captured: Captured | None = None
        self.saved: list[torch.Tensor] | None = None
        self.outputs: torch.Tensor | tuple[torch.Tensor, ...] | None = None

    def arg_names(self) -> str:
        return ", ".join(self._paths()) or "none"

    def _paths(self) -> list[str]:
        return _structure.leaf_paths(self.arg_spec, _run.positional_names(self.f, self.bound))

    def gradients(
        self, grad_fn: Callable[..., Any], upstream: Sequence[Any], needs: Sequence[bool]
    ) -> list[torch.Tensor | None]:
        """Call grad_fn; one checked gradient per tensor input, then per variable (item 21 on).

        `needs[i]` False gives None for that input without looking at what grad_fn returned.
        """
        f = self.f
        variables = self.variables
        if self.autocast:
            grad_fn = functools.partial(_autocast.call_in, self.autocast, grad_fn)
        if variables:
            returned = grad_fn(*upstream, variables=list(variables))
            input_grads, variable_grads = _gradients.split_variable_grads(returned, variables, f)
        else:
            input_grads, variable_grads = grad_fn(*upstream), ()
        # One gradient per flattened argument; a single bare tensor is the usual case.
        flat = [input_grads] if type(input_grads) is _Tensor else _structure.leaves(input_grads)
        positions = self.positions
        if len(flat) != self.n_args:
            raise _gradients.count_error(len(flat), self.n_args, f, self.arg_names())
        if len(positions) != len(flat):  # not every argument is a tensor
            flat = [flat[p] for p in positions]
        if variable_grads:
            flat.extend(variable_grads)
        metas = self.metas
        for i, grad in enumerate(flat):
            if type(grad) is not _Tensor or (grad.shape, grad.dtype, grad.device) != metas[i]:
                flat[i] = self._repair(grad, i, needs)
        return flat

    def _repair(self, grad: Any, i: int, needs: Sequence[bool]) -> torch.Tensor | None:
        """A gradient that is not already a tensor like its input: None when none is
        wanted or returned, else converted, moved, cast or reshaped, or an error."""
        if grad is None or not needs[i]:
            return None
        return _gradients.repair(grad, self.metas[i], self.f, self._input_name, i)

    def _input_name(self, i: int) -> str:
        if i < len(self.positions):
            return f"argument `{self._paths()[self.positions[i]]}`"
        k = i - len(self.positions)
        return f"`variables[{k}]` (Parameter of shape {list(self.variables[k].shape)})"


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


def node_class(f: Callable[..., Any], **methods: Any) -> type[torch.autograd.Function]:
    """A Function class named after f, so torch shows `log1pexpBackward`."""
    name = getattr(f, "__name__", "") or "custom_gradient"
    if name == "<lambda>":
        name = "lambda"
    namespace: dict[str, Any] = {
        **methods,
        "__qualname__": name,
        "__module__": getattr(f, "__module__", __name__),
        "__doc__": f"The autograd node of {name}, generated by tf_compat_grad.",
    }
    return type(name, (torch.autograd.Function,), namespace)
