"""f run again, recorded, for a second derivative.

# Note [f run again]
Where grad_fn reads what f computed (`e = exp(x)` in `log1pexp`, sigmoid's own output), f runs with
grad recording on (Note [where f runs] in `_eager.py`) only so that a backward with
`create_graph=True` differentiates grad_fn's ops through that work. Recording costs about a tenth of
the call, and most backwards are first-order. So where the history can be made again exactly, f runs
with grad mode off, as a hand-written `Function.forward` does, and a backward under grad mode
(`create_graph=True`: docs/torch_facts.md, "Grad mode in backward") calls f again, recorded, on the
same arguments, and uses the grad_fn of that run: its ops then see exactly the history recording
would have kept. A first-order backward uses grad_fn as saved (Note [saved closures] in
`_closure.py`). Two conditions make the run again exact:

- f is pure and deterministic, read from its code (`_unrecorded.rerunnable`, whose rule ends
  Note [f unrecorded]). Anything in doubt records: recording is always right.
- every tensor argument is a leaf that requires grad, asked per call (the plan's guard, the
  general code's `_runs_unrecorded`); otherwise the call records. Such a leaf is held alive by
  its `AccumulateGrad` node, which the node's edges hold anyway, so keeping the arguments for the
  run again costs no memory over a Function. They are kept on the context, not with
  `save_for_backward`, which would refuse a first-order backward after an edit of a leaf under
  `no_grad` (an optimizer step between forward and backward), which works when recording. The
  run again instead compares each tensor argument's version with the one it had at the call and
  refuses by name when it changed: the derivative would be taken at another value. An edit
  through `.data` (`x.data.copy_(...)`, `x.data = ...`) bumps no version, so it goes unseen
  here as it does for every tensor a hand-written Function saves: `.data` is autograd's
  unchecked way around its own history.

The run again happens with autocast off, as the call it repeats ran (a call under autocast records).
Unlike the runs again of `torch.func` and `recompute_grad`, which restore the random state
(docs/torch_facts.md, "Random state when f runs again"), this one is for f that draws nothing, so
that nothing but the arguments needs keeping. For the same reason the run again first asks the reach
proof's per-call check (`_reach_check.checks_maker`) whether f's code, its defaults and the globals
and functions it names are still those of the call, and refuses by name when one was rebound. (An
attribute of an imported module, `torch.sigmoid` patched between the call and the backward, is not
among them: the proofs take modules' functions as fixed.) The plans of kind "rerun" (`_plan.py`,
their node's backward in `_plan_node.py`) and the general code (`Rerun`, the captured grad_fn its
node rebuilds) take the same route, so that a call under non-reentrant `torch.utils.checkpoint`
saves the same tensors when recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _autocast
from ._closure import Captured
from ._errors import PREFIX, CustomGradientValueError, describe
from ._run import UNBOUND, inputs, split

# What the run again takes: f, the call's positional and keyword arguments, the version of
# each tensor among the positional arguments at the call, and the reach proof's check that what
# f reads (its code, defaults, the globals and functions it names) is still what it read then.
Again = tuple[
    Callable[..., Any], tuple[Any, ...], dict[str, Any], Sequence[int | None], Callable[[], bool]
]


def grad_fn_again(again: Again) -> Callable[..., Any]:
    """The grad_fn of f run again, recorded, on the arguments of its call (Note [f run
    again])."""
    f, args, kwargs, versions, unchanged = again
    if not unchanged():
        raise CustomGradientValueError(
            f"{PREFIX}a second derivative of {describe(f)} runs it again on its arguments "
            "(Note [f run again]), but what it reads was rebound after the call (its code, "
            "its default arguments, a global name or a function it calls), so the run again "
            "would not be the call's. Take the second derivative (`create_graph=True`) before "
            "rebinding them, or call it on a copy (`x.clone()`), whose call records f's ops."
        )
    _, layout, tensors = inputs(f, UNBOUND, args)
    for i, (tensor, version) in enumerate(zip(tensors, versions, strict=True)):
        if version is not None and tensor._version != version:  # `_run.versions`
            path = layout.paths()[layout.positions[i]]
            raise CustomGradientValueError(
                f"{PREFIX}a second derivative of {describe(f)} runs it again on its arguments "
                f"(Note [f run again]), but its argument `{path}` was edited in place after the "
                f"call (version {version} then, {tensor._version} now: an optimizer step or "
                "another in-place op under `torch.no_grad()`), so the derivative would be taken "
                "at another value. Take the second derivative (`create_graph=True`) before "
                "editing the tensor, or pass a copy (`x.clone()`), whose call records f's ops."
            )
    return split(f, _autocast.call_off(f, *args, **kwargs))[1]


class Rerun:
    """The captured grad_fn of a call of the general code whose f ran unrecorded, to run
    again: rebuilt as saved in a first-order backward, from f run again under grad mode."""

    __slots__ = ("again", "captured")

    def __init__(self, captured: Captured, again: Again) -> None:
        self.captured = captured
        self.again = again

    def rebuild(self, saved: Sequence[torch.Tensor]) -> Callable[..., Any]:
        if torch.is_grad_enabled():
            return grad_fn_again(self.again)
        return self.captured.rebuild(saved)


def all_leaves(tensors: Sequence[Any]) -> bool:
    """Whether each tensor is a leaf that requires grad (Note [f run again])."""
    for tensor in tensors:  # noqa: SIM110 (a loop costs less than all() and a generator)
        if not (tensor.requires_grad and tensor.is_leaf):
            return False
    return True
