"""The node used while `torch.compile` traces a decorated function.

# Note [compile]
Dynamo traces plain functions, tensors and constants through an `autograd.Function`, but not
objects of our own classes made outside the traced region, nor the closure surgery of Note
[saved closures]. Compiled autograd has no double backward either, so the reasons f runs before
the eager node with grad recording on (Note [where f runs]) do not apply. Here f runs before the
node under `no_grad`, watched for Parameters as in eager mode, so the Parameters it reads are
inputs of the node and get their gradients; its outputs and grad_fn (a plain closure) go
through `apply` as arguments, and backward calls grad_fn with the same checks and repairs as in
eager mode. grad_fn's closure stays a closure: what it holds is the compiler's to save.

The watcher stays on here even when `ParameterReach` proves that f reads no Parameter: a proof
made once while tracing would be a constant of the compiled frame, and if f breaks the graph,
Dynamo compiles f as a frame of its own, so nothing guards the names the proof read. A global
rebound to a Parameter would then silently get no gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._C._functorch import TransformType
from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

from . import _run, _structure
from ._errors import PREFIX, CustomGradientNotImplementedError, describe
from ._function import Record, node_class
from ._run import UNBOUND

# (bound is not UNBOUND, arg_spec, number of flattened arguments, tensor positions, variables)
_Layout = tuple[bool, _structure.Spec, int, Sequence[int], list[torch.nn.Parameter]]


def call(
    node: type[torch.autograd.Function],
    f: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Call f through `node`, the class `make_compile_node` made for it."""
    if _differentiating_transform_active():
        raise _transform_error(f)
    flat_args, arg_spec, positions, inputs = _run.inputs(f, bound, args)
    with torch.no_grad():
        result, grad_fn, variables = _run.run(f, bound, args, kwargs, flat_args)
    outputs, out_spec = _run.outputs(f, result)
    if not variables and not any(t.requires_grad for t in inputs):
        return _structure.unflatten(out_spec, outputs)
    layout: _Layout = (bound is not UNBOUND, arg_spec, len(flat_args), positions, variables)
    node_outputs = node.apply(  # type: ignore[no-untyped-call]
        layout, grad_fn, len(outputs), *outputs, *inputs, *variables
    )
    return _structure.unflatten(out_spec, node_outputs)


def _differentiating_transform_active() -> bool:
    """Whether a `torch.func` transform other than one lone `vmap` is active. Dynamo can read
    only the innermost transform, so a vmap at a deeper level may be inside a grad."""
    if not torch._C._are_functorch_transforms_active():
        return False
    innermost = retrieve_current_functorch_interpreter()
    return innermost.key() != TransformType.Vmap or innermost.level() != 1


def _transform_error(f: Callable[..., Any]) -> CustomGradientNotImplementedError:
    # Dynamo reports it as "Observed exception" with this message under `fullgraph=True`, and
    # otherwise runs the frame eagerly, where the transform's own node gives the right result.
    return CustomGradientNotImplementedError(
        f"{PREFIX}{describe(f)} is differentiated by a `torch.func` transform (grad, jacrev, "
        "jvp, ...) inside a region that `torch.compile` traces. torch.compile does not apply "
        "the custom gradient of an autograd.Function under these transforms (it computes "
        "another gradient, or 0), so this is refused rather than computed wrong. Apply the "
        "transform outside torch.compile, or compile the function and differentiate it "
        "outside with autograd: `torch.autograd.grad(torch.compile(f)(x).sum(), x)`."
    )


def make_compile_node(f: Callable[..., Any]) -> type[torch.autograd.Function]:
    """The Function class for f under `torch.compile`; see Note [compile]."""

    def forward(
        layout: _Layout, grad_fn: Callable[..., Any], n_outputs: int, *tensors: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        return tuple(t.detach() for t in tensors[:n_outputs])

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        layout, grad_fn, n_outputs, *tensors = inputs
        bound, arg_spec, n_args, positions, variables = layout
        ctx.grad_fn = grad_fn
        ctx.n_outputs = n_outputs
        ctx.record = Record(
            f, bound, arg_spec, n_args, positions, tensors[n_outputs:][: len(positions)],
            variables,
        )  # fmt: skip

    def backward(ctx: Any, *upstream: Any) -> tuple[torch.Tensor | None, ...]:
        needs = ctx.needs_input_grad[3 + ctx.n_outputs :]
        grads = ctx.record.gradients(ctx.grad_fn, upstream, needs)
        return (None, None, None, *(None for _ in range(ctx.n_outputs)), *grads)

    return node_class(
        f,
        forward=staticmethod(forward),
        setup_context=staticmethod(setup_context),
        backward=staticmethod(backward),
    )
