"""`torch.export` of a decorated call: its outputs through an op that refuses a backward.

# Note [export]
`torch.export` records f's forward ops, under `no_grad` (docs/torch_facts.md, "torch.jit.trace
and torch.export"), and no grad_fn: the program it makes is for inference. A backward through
`exported.module()` would silently give nothing, or autodiff of f's forward, through that call.
So under export f's outputs pass through one custom op, `tf_compat_grad::exported` (`_EXPORTED`),
that copies them and depends on the call's tensor inputs and the Parameters f read: the
exported graph holds it with f's name as a constant, an inference run computes the same values,
and the first backward that reaches it raises an error naming f. The op is defined once, with
torch.library's plain API (no schema inference, a fraction of a millisecond at import), so a
program saved with `torch.export.save` loads wherever tf_compat_grad is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _run, _structure
from ._errors import PREFIX, CustomGradientNotImplementedError, describe
from ._watcher import run_watched


def call_exported(f: Callable[..., Any], bound: Any, args: tuple[Any, ...], kwargs: Any) -> Any:
    """Call f while `torch.export` traces it outside Dynamo (Note [export])."""
    flat_args, _, inputs = _run.inputs(f, bound, args)
    # In the caller's grad mode: a `no_grad` here is recorded into the exported program (torch
    # 2.4 records grad-mode changes), whose f would then run without a graph, and a Parameter
    # that f reads would get no gradient, silently, where its backward must be refused.
    result, _, variables = run_watched(f, bound, args, kwargs, flat_args)
    # Not detached (as `_run.outputs` would): the Parameters f reads are no Parameters in the
    # traced program of torch < 2.6, so the outputs' own graph is what makes a backward reach
    # the refusal; detached, such a Parameter got no gradient, silently.
    flat, out_spec = _structure.flatten(result)
    outputs = [_run.as_output(f, o, i, out_spec) for i, o in enumerate(flat)]
    return _structure.unflatten(out_spec, exported(describe(f), outputs, [*inputs, *variables]))


def exported(
    described: str, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """f's outputs through `tf_compat_grad::exported`; `described`: f by name, file and line."""
    return list(_EXPORTED(list(outputs), list(inputs), described))


class _RefuseBackward(torch.autograd.Function):
    """The autograd kernel of `tf_compat_grad::exported`: the outputs copied, and a backward
    that names the function (Note [export])."""

    @staticmethod
    def forward(ctx: Any, function: str, n_outputs: int, *tensors: torch.Tensor) -> Any:
        ctx.function = function
        return tuple(t.clone() for t in tensors[:n_outputs])

    @staticmethod
    def backward(ctx: Any, *upstream: Any) -> Any:
        raise CustomGradientNotImplementedError(exported_backward_error(ctx.function))


def exported_backward_error(function: str) -> str:
    """The refusal of a backward through the exported call of `function` (Note [export])."""
    return (
        f"{PREFIX}backward reached {function} in a program made by torch.export, which records "
        "the function's forward ops and not its grad_fn, so the gradient would be wrong (none, "
        "or autodiff of the forward). Exported programs are for inference: differentiate the "
        "module itself (torch.compile it to train compiled), or run the exported program under "
        "`torch.no_grad()` or with inputs and Parameters that do not require grad"
    )


def _define_exported_op() -> Any:
    library = torch.library.Library("tf_compat_grad", "DEF")  # type: ignore[no-untyped-call]
    library.define("exported(Tensor[] outputs, Tensor[] inputs, str function) -> Tensor[]")  # type: ignore[no-untyped-call]
    library.impl("exported", _copies, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
    library.impl("exported", _refusing_backward, "Autograd")  # type: ignore[no-untyped-call]
    return library


def _copies(outputs: list[torch.Tensor], inputs: Any, function: str) -> list[torch.Tensor]:
    return [t.clone() for t in outputs]


def _refusing_backward(
    outputs: list[torch.Tensor], inputs: list[torch.Tensor], function: str
) -> list[torch.Tensor]:
    return list(_RefuseBackward.apply(function, len(outputs), *outputs, *inputs))  # type: ignore[no-untyped-call]


_LIBRARY = _define_exported_op()  # kept: the op lives as long as its library object
_EXPORTED = torch.ops.tf_compat_grad.exported
