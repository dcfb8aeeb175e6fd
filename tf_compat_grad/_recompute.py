"""`recompute_grad` and `grad_pass_through`, built on `custom_gradient` as TensorFlow builds them
(items 48-60)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from typing_extensions import ParamSpec

from . import _structure
from ._decorator import CustomGradient, custom_gradient_object
from ._rng import RngState
from ._run import BOUND_KEYWORD, UNBOUND
from ._torch_internals import functorch_transforms_active

P = ParamSpec("P")
R = TypeVar("R")


def recompute_grad(f: Callable[P, R]) -> CustomGradient[P, R]:
    """Differentiate `f` by running it again in backward instead of keeping its intermediates.

    Forward runs f without recording anything, so f's intermediate tensors are freed at once;
    only the inputs and the random-number state are kept. Backward runs f once more with the
    same random draws (a dropout mask comes out the same) on an alias of each input, and
    differentiates that run. Each argument slot gets its own gradient, also when the inputs are
    the same tensor or share a graph. Inputs that do not reach the outputs get zeros, and
    trainable `nn.Parameter`s that f reads get their gradients, as in `tf.recompute_grad`.

    Differences from TensorFlow: Python numbers stay Python numbers when f runs again (TF turns
    them into float32 tensors, which breaks float64 code), and second derivatives work, also
    when the upstream gradient depends on the inputs (TF raises there): a backward with
    `create_graph=True` makes the gradients a recomputed block of their own, so it keeps none
    of f's intermediates and each further derivative runs f once more.

    Args:
        f: the function to run twice; its positional tensor arguments are the inputs.

    Returns:
        A function with f's signature; `__wrapped__` is f.

    Example:
        >>> import torch
        >>> from tf_compat_grad import recompute_grad
        >>> block = recompute_grad(lambda x: torch.tanh(x) * 2)
        >>> x = torch.tensor([0.5], requires_grad=True)
        >>> block(x).sum().backward()
        >>> torch.allclose(x.grad, 2 * (1 - torch.tanh(x.detach()) ** 2))
        True
    """

    @functools.wraps(f)
    def recompute(*args: Any, **kwargs: Any) -> tuple[Any, Callable[..., Any]]:
        call = _binder(f, kwargs)
        rng = RngState()
        with torch.no_grad():
            result = call(*args, **kwargs)
        flat_args, arg_spec = _structure.flatten(args)
        positions = [i for i, a in enumerate(flat_args) if isinstance(a, torch.Tensor)]
        tensors = tuple(flat_args[i] for i in positions)
        # What rerun and grad_fn close over holds no tensor: grad_fn's closure is not saved
        # through `save_for_backward` when it is a list (Note [saved closures]), and the inputs
        # must be freed, or offloaded by saved-tensor hooks, as any saved tensor is.
        others = _structure.put(flat_args, positions, [None] * len(positions))

        def rerun(*values: torch.Tensor) -> list[Any]:
            """f's flattened outputs, run on `values` in place of the tensor arguments."""
            leaves = _structure.put(others, positions, values)
            return _structure.leaves(call(*_structure.unflatten(arg_spec, leaves), **kwargs))

        def grad_fn(*upstream: torch.Tensor, variables: Any = None) -> Any:
            variables = list(variables or ())
            if functorch_transforms_active():
                # The tensors seen here are unwrapped for the transform: differentiate the
                # rerun with the transform's own vjp. Parameters are its constants.
                tensor_grads = _transformed_grads(rng, rerun, tensors, upstream)
                variable_grads = [torch.zeros_like(v) for v in variables]
            else:
                # Recording (create_graph): the gradients are a recomputed block of their own,
                # so that their own derivatives reach the inputs through the caller's graph.
                gradients = _GRADIENTS if torch.is_grad_enabled() else _gradients
                block = _Block(rng, rerun, len(upstream), variables, tensors)
                grads = list(gradients(*upstream, *tensors, block=block))
                tensor_grads, variable_grads = grads[: len(tensors)], grads[len(tensors) :]
            # Zeros for a tensor that reaches no output (item 50), None for the other arguments.
            input_grads = _structure.put([None] * len(others), positions, tensor_grads)
            if not variables:
                return input_grads
            return input_grads, variable_grads

        return result, grad_fn

    setattr(recompute, BOUND_KEYWORD, True)
    # The wrapper object, not a function (Note [a decorated function is a function] in `_decoration.py`): it
    # deep-copies an `nn.Module` f and pickles under another name than f's.
    wrapped: CustomGradient[P, R] = custom_gradient_object(recompute)
    wrapped.__wrapped__ = f
    wrapped._made_by = recompute_grad
    return wrapped


class _Block:
    """One recomputed call as its backward needs it, but the tensors: its rerun, random state,
    number of outputs, variables, and the leaf tensors among its inputs, each with its first
    slot. One object, so that no variable is a keyword argument of `_GRADIENTS`, whose own
    Parameter watcher must find them."""

    __slots__ = ("leaves", "n_outputs", "rerun", "rng", "variables")

    def __init__(
        self,
        rng: RngState,
        rerun: Callable[..., list[Any]],
        n_outputs: int,
        variables: list[torch.Tensor],
        inputs: tuple[torch.Tensor, ...],
    ) -> None:
        self.rng = rng
        self.rerun = rerun
        self.n_outputs = n_outputs
        self.variables = variables
        leaves: dict[int, tuple[int, torch.Tensor]] = {}  # by identity: the same tensor once
        for slot, t in enumerate(inputs):
            if t.requires_grad and t.is_leaf:
                leaves.setdefault(id(t), (slot, t))
        self.leaves = list(leaves.values())


def _gradients(*tensors: torch.Tensor, block: _Block) -> tuple[torch.Tensor, ...]:
    """The gradients of the block's rerun weighted by the upstream gradients (the first tensors,
    one per output), for each input (the other tensors), then for each variable; zeros for one
    that reaches no output (item 50).

    f runs again on an alias of each input, one per argument slot, as TensorFlow runs it on
    `identity(args)`, and the gradients are those of the aliases: the same tensor passed twice
    gets each slot's own gradient. Called from a backward that does not record, the aliases are
    detached, so differentiating never walks (nor frees) the caller's graph between connected
    inputs. Recording, this runs as the rerun of `_GRADIENTS`, on that block's detached aliases:
    aliases that keep their graph (`view_as`) make the gradients differentiable in them.

    An input that f also reads directly (a Parameter of the module passed as an argument too)
    gets the gradient of those reads in its first slot, when it is a leaf; a non-leaf input read
    so is a constant there, like any tensor f closes over that leads to no variable."""
    upstream, inputs = tensors[: block.n_outputs], tensors[block.n_outputs :]
    if torch.is_grad_enabled():
        aliases = [t.view_as(t) for t in inputs]
    else:
        aliases = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
    with torch.enable_grad():
        outputs = block.rng.rerun(lambda: block.rerun(*aliases))
    candidates = [*aliases, *block.variables, *(t for _, t in block.leaves)]
    sources = [t for t in candidates if t.requires_grad]
    pairs = [
        (o, u)
        for o, u in zip(outputs, upstream, strict=True)
        if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    if pairs and sources:
        found = iter(
            torch.autograd.grad(
                [o for o, _ in pairs],
                sources,
                [u for _, u in pairs],
                create_graph=torch.is_grad_enabled(),
                allow_unused=True,
            )
        )
        grads = [next(found) if t.requires_grad else None for t in candidates]
    else:
        grads = [None] * len(candidates)
    n = len(aliases) + len(block.variables)
    for (slot, _), direct in zip(block.leaves, grads[n:], strict=True):
        through_slot = grads[slot]
        if direct is not None:
            grads[slot] = direct if through_slot is None else through_slot + direct
    return tuple(
        torch.zeros_like(t) if g is None else g
        for t, g in zip(candidates[:n], grads[:n], strict=True)
    )


# The gradients as a block of their own, for a backward that records (create_graph): its inputs
# are the upstream gradients and the caller's tensors, so the second derivative reaches them
# through the caller's graph, and each order recomputes once more.
_GRADIENTS = recompute_grad(_gradients)


def _transformed_grads(
    rng: RngState,
    rerun: Callable[..., list[Any]],
    tensors: tuple[torch.Tensor, ...],
    upstream: tuple[torch.Tensor, ...],
) -> list[torch.Tensor]:
    """The input gradients under a `torch.func` transform: `torch.func.vjp` of the rerun."""
    pullback = rng.rerun(lambda: torch.func.vjp(lambda *ts: tuple(rerun(*ts)), *tensors))[1]
    return list(pullback(tuple(upstream)))


def _binder(f: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[..., Any]:
    """f, with the instance bound first when the wrapper is used as a method (it then arrives by
    keyword, so that `self` is no input)."""
    bound = kwargs.pop(BOUND_KEYWORD, UNBOUND)
    return f if bound is UNBOUND else functools.partial(f, bound)


def grad_pass_through(f: Callable[P, R]) -> CustomGradient[P, R]:
    """Compute f, but pass the upstream gradients through unchanged, as `tf.grad_pass_through`.

    The gradient of output i goes to positional input i, so f must have as many flattened
    outputs as flattened positional inputs (else the count error of `custom_gradient`).
    Parameters f reads get no gradient. A 0-d upstream (f reduced its input to one value) is
    expanded to its input's shape (TF passes a scalar through for a vector input unchanged); any
    other upstream must have its input's shape or be a broadcast of it (item 29).

    Example:
        >>> import torch
        >>> from tf_compat_grad import grad_pass_through
        >>> rounded = grad_pass_through(torch.round)
        >>> x = torch.tensor([0.4, 1.6], requires_grad=True)
        >>> rounded(x).sum().backward()
        >>> x.grad
        tensor([1., 1.])
    """

    @functools.wraps(f)
    def pass_through(*args: Any, **kwargs: Any) -> tuple[Any, Callable[..., Any]]:
        call = _binder(f, kwargs)

        def grad_fn(*upstream: torch.Tensor, variables: Any = None) -> Any:
            if variables:
                return upstream, [None] * len(variables)
            return upstream

        return call(*args, **kwargs), grad_fn

    setattr(pass_through, BOUND_KEYWORD, True)
    wrapped: CustomGradient[P, R] = custom_gradient_object(
        pass_through, surrogate="grad_pass_through: the upstream gradient passes through unchanged"
    )
    wrapped.__wrapped__ = f
    wrapped._made_by = grad_pass_through
    return wrapped
