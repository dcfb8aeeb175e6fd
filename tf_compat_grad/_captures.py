"""Tensors that f's outputs depend on without being its arguments or its variables: the
gradient that would flow into them through those outputs is given (a tensor in a Parameter's
place is that Parameter) or refused, never lost. Here: the rule (`captured=`), `settle`, which
applies it after f runs, and the refusals, which name the tensor as f's code reaches it. The
walk of the outputs' graph is `_walk.py`'s, the Parameter places `_places.py`'s, and the
op-by-op taint under a `torch.func` transform `_taint.py`'s.

# Note [lost gradients]
The node's inputs are f's positional tensors and its variables (items 11, 32); gradients leave
f's outputs through grad_fn into those alone (item 38). A tensor that requires grad and that
f's outputs depend on by any other way (a closure cell, a global, an attribute of `self` or of
another object, a keyword argument) would lose the gradient that f's own ops would send it:
TensorFlow drops it without a word (items 15, 20, 39). Here that is refused, unless the tensor
sits in a Parameter's place, where TensorFlow's meaning is clear: it is that Parameter, so it
is one of the variables and gets grad_fn's gradient. Two kinds of place:

- a module's parameter slot holding a plain tensor (`torch.func.functional_call` and
  `stack_module_state` put their tensors there);
- a parametrized weight (`torch.nn.utils.parametrize`, `parametrizations.*`): `self.weight` is
  computed from the parametrization's originals, and those originals get the gradient of the
  weight through the parametrization's own ops (the chain rule), not grad_fn's gradient of the
  weight as if it were theirs. While watched f runs, parametrize's cache is on, so that the
  weight f read is kept; the originals it is computed from leave `variables` and the weight
  takes the place of the first of them.

Which gradients would be lost is read off the autograd graph, after f runs: a walk from f's
outputs that stops at the inputs' and the variables' edges; every leaf that requires grad and
is reached otherwise would lose a gradient (`W = base * 2` in a closure reaches `base`). So the
line sits exactly where a gradient is lost, not wider: a captured tensor that only grad_fn uses
(a residual, an outer variable of a higher-order derivative) is not on the outputs' graph, and
one computed from an input (`x + u`, whose gradient grad_fn replaces) reaches the input's edge
and stops there. When no input needs a gradient, f's own autodiff would take over (item 39):
a captured tensor would get f's gradient and grad_fn never be called, two rules for one
function; that is refused too.

`custom_gradient(captured="constant")` asks for TensorFlow's behaviour instead: the walk still
puts tensors in Parameter places among the variables, but a gradient it finds lost is not
refused, since the node's outputs are detached from f's graph and so give such a tensor none,
as TensorFlow does; grad_fn's own use of it is untouched and differentiates at second order. The
call is still refused when no input or variable requires grad: no node would be recorded and
TensorFlow would give the tensor f's own autodiff (item 39), not the constant the option promises.
Under a transform, `Taint` (`_taint.py`) then does not refuse (the node's outputs are the transform's own), but an
op torch cannot run under `vmap` is refused by name.

The walk runs only when a tensor that f can reach outside its arguments requires grad: the
reach proof lists the plain tensors f's code can name and its per-call check looks at their
`requires_grad` (Note [watching only when needed] in `_reach.py`); a keyword argument or a watched call (which
can read anything) always walks.

# Note [lost gradients under compile]
While Dynamo traces a call, f runs under `no_grad` (Note [compile] in `_compile.py`), so there is
no graph to walk, and the graph of a tensor made before the compiled region is not Dynamo's to
read. The watcher of a compiled call (`CompiledWatcher` in `_watcher.py`) follows instead, op by
op, which tensors f computes from a tensor that requires grad and that it was not given (no
argument, no Parameter it reads as a variable): a closure cell, a global, a keyword argument, an
attribute. It compares tensors by identity, which Dynamo folds into constants, so a call with no
such tensor keeps its single graph at no cost when it runs; and Dynamo guards on every tensor f
uses, its `requires_grad` too, so a change retraces the call. When f's outputs are computed from
such a tensor, whether its gradient would be lost depends on its own graph (`x + u`, computed
from the input, loses nothing): the graph breaks there, and `settle` runs outside Dynamo on those
tensors, as in eager mode: it refuses with eager's message, or makes a tensor in a Parameter's
slot a variable, or lets the call go on. Under `fullgraph=True` the break is the error, which
names f and the two fixes."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import torch
from torch.nn.utils import parametrize

from ._errors import (
    PREFIX,
    CustomGradientNotImplementedError,
    CustomGradientValueError,
    describe,
)
from ._places import Slot, SlotVariables, in_place_of_originals, parameter_slots, reachable
from ._torch_internals import is_functorch_wrapped
from ._walk import among, tensors, walk

_Tensor = torch.Tensor

# What a call does with a tensor that f's outputs depend on without being a positional argument
# or a variable (`custom_gradient(captured=...)`): refuse the call, or keep TensorFlow's
# behaviour, which is no gradient for it through f's outputs (Note [lost gradients]).
CapturedRule = Literal["refuse", "constant"]
CAPTURED_RULES: tuple[CapturedRule, ...] = ("refuse", "constant")


def settle(
    f: Callable[..., Any],
    bound: Any,
    kwargs: dict[str, Any],
    result: Any,
    inputs: Iterable[Any],
    variables: list[Any],
    places: Mapping[Any, _Tensor] | tuple[()],
    captured: CapturedRule = "refuse",
) -> list[Any]:
    """The variables of a call whose f has run and returned `result`: `variables`, with the
    tensors in Parameter places that the outputs reach put in (`places`: the parametrized
    weights cached while f ran, by their keys in parametrize's cache, or none; slots of modules
    f can reach are looked at when needed).
    Raises when a gradient would still be lost (Note [lost gradients]), unless `captured` is
    "constant" and an input or a variable requires grad, so that the node is recorded and the
    outputs' gradients go through grad_fn alone, as in TensorFlow."""
    roots = [t for t in tensors(result) if t.requires_grad]
    if not roots:
        return variables
    inputs = [t for t in inputs if isinstance(t, _Tensor)]
    keys, weights = (list(places), list(places.values())) if places else ((), ())
    lost, hit = walk(roots, [*inputs, *variables, *weights])
    first = len(inputs) + len(variables)
    hit_places = [i - first for i in hit if i >= first]
    cached: dict[Any, _Tensor] = {}
    if hit_places:
        cached = {keys[i]: weights[i] for i in hit_places}
        variables = in_place_of_originals(variables, list(cached.values()))
        lost, _ = walk(roots, [*inputs, *variables])
    found: list[tuple[Slot, _Tensor]] = []
    if lost:
        located = [
            (slot, t)
            for slot, t in parameter_slots(f, bound)
            if not among(t, (*inputs, *variables))
        ]
        lost, hit = walk(roots, [*inputs, *variables, *(t for _, t in located)])
        first = len(inputs) + len(variables)
        found = [located[i - first] for i in sorted(hit) if i >= first]
    if found or cached:
        variables = SlotVariables([*variables, *(t for _, t in found)], found, cached)
    if lost and (captured == "refuse" or not any(t.requires_grad for t in (*inputs, *variables))):
        raise lost_error(f, bound, kwargs, lost[0], captured)
    return variables


def any_needs_grad(kwargs: dict[str, Any]) -> bool:
    """Whether a tensor among the keyword arguments requires grad (else none can lose one)."""
    for value in kwargs.values():
        if isinstance(value, _Tensor):
            if value.requires_grad:
                return True
        elif isinstance(value, (list, tuple, dict)) and any(
            t.requires_grad for t in tensors(value)
        ):
            return True
    return False


def _candidates(
    f: Callable[..., Any], bound: Any, kwargs: dict[str, Any]
) -> list[tuple[str, _Tensor]]:
    """The tensors f can read that require grad, each named as f's code reaches it."""
    found: list[tuple[str, _Tensor]] = []
    for name, value in kwargs.items():
        found.extend((f"keyword `{name}`", t) for t in tensors(value))
    for name, value in reachable(f, bound):
        where = "" if name == "self" else ("closure " if _is_cell(f, name) else "global ")
        if isinstance(value, _Tensor):
            found.append((f"{where}`{name}`", value))
        elif isinstance(value, torch.nn.Module):
            for prefix, module in value.named_modules():
                path = f"{name}.{prefix}." if prefix else f"{name}."
                for attribute, member in _tensor_attributes(module):
                    found.append((f"{where}`{path}{attribute}`", member))
        elif hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType)):
            for attribute, member in vars(value).items():
                if isinstance(member, _Tensor):
                    found.append((f"{where}`{name}.{attribute}`", member))
    return [(label, t) for label, t in found if t.requires_grad or is_functorch_wrapped(t)]


def _is_cell(f: Callable[..., Any], name: str) -> bool:
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    return code is not None and name in code.co_freevars


def _tensor_attributes(module: torch.nn.Module) -> list[tuple[str, _Tensor]]:
    """A module's tensors by attribute name: parameter slots, buffers, plain attributes and
    parametrized weights."""
    found: list[tuple[str, _Tensor]] = [
        (n, t) for n, t in module._parameters.items() if t is not None
    ]
    found += [(n, t) for n, t in module._buffers.items() if t is not None]
    found += [(n, t) for n, t in vars(module).items() if isinstance(t, _Tensor)]
    if parametrize.is_parametrized(module):
        for n in module.parametrizations:  # type: ignore[union-attr]
            found.append((n, getattr(module, n)))
    return found


def lost_under_compile_reason(described: str) -> str:
    """Why a compiled call is checked outside the graph (Note [lost gradients under compile]);
    `described`: f by name, file and line."""
    return (
        f"{PREFIX}the output of {described} is computed from a tensor that requires grad but is "
        "neither a positional argument nor a variable (a closure cell, a global, a keyword "
        "argument, an attribute read through an object), and torch.compile cannot read the "
        "graph that tells whether its gradient would be lost, so the call is checked outside "
        "the compiled graph (a graph break; this error under fullgraph=True). Pass the tensor "
        "as a positional argument and return its gradient from grad_fn, or decorate with "
        '`@custom_gradient(captured="constant")` to keep TensorFlow\'s behaviour (no gradient '
        "for it through the outputs; for a tensor computed from the inputs alone, whose "
        "gradient grad_fn gives, no number changes)"
    )


def _label(f: Callable[..., Any], bound: Any, kwargs: dict[str, Any], leaf: _Tensor) -> str:
    """The tensor as f's code reaches it, or its shape."""
    named = (name for name, t in _candidates(f, bound, kwargs) if t is leaf)
    return next(named, f"a tensor of shape {list(leaf.shape)}")


def vmap_error(
    f: Callable[..., Any], bound: Any, kwargs: dict[str, Any], leaf: _Tensor
) -> CustomGradientNotImplementedError:
    """The refusal of an op of f on a captured tensor of the transform that torch cannot run
    under `vmap` in the node's forward (with `captured="constant"`)."""
    return CustomGradientNotImplementedError(
        f"{PREFIX}{describe(f)} computes with {_label(f, bound, kwargs, leaf)}, a tensor of a "
        "`torch.func` transform that it captures rather than is passed, and under `vmap` torch "
        "cannot run that op inside the custom node (its error is chained below). Pass the "
        "tensor as a positional argument, and return None as its gradient from grad_fn to keep "
        '`captured="constant"`\'s behaviour.'
    )


def lost_error(
    f: Callable[..., Any],
    bound: Any,
    kwargs: dict[str, Any],
    leaf: _Tensor,
    captured: CapturedRule = "refuse",
) -> CustomGradientValueError:
    """The refusal of a call whose outputs reach `leaf` other than through grad_fn (with
    `captured="constant"`: when no input or variable requires grad, so no node is recorded)."""
    candidates = _candidates(f, bound, kwargs)
    label = next((name for name, t in candidates if t is leaf), None)
    via = next(
        (name for name, t in candidates if t is not leaf and among(leaf, walk([t], ())[0])),
        None,
    )
    if via is None:
        what, target = label or f"a tensor of shape {list(leaf.shape)}", "it"
    else:
        source = label or f"the tensor of shape {list(leaf.shape)}"
        what, target = via, f"{source}, which it is computed from,"
    head = (
        f"{PREFIX}the output of {describe(f)} depends on {what}, a tensor that requires grad "
        "but is neither a positional argument nor a variable (a Parameter read without being "
        "passed)"
    )
    if captured == "constant":
        return CustomGradientValueError(
            f"{head}, and no positional argument or variable requires grad. With "
            '`captured="constant"` it is a constant of the function, but with nothing to '
            "record TensorFlow would differentiate the function's own ops into "
            f"{target} and never call grad_fn. Pass a tensor that requires grad as a "
            "positional argument, or `.detach()` the tensor where the function reads it, or "
            "call the function under `torch.no_grad()`."
        )
    return CustomGradientValueError(
        f"{head}: the gradient that would flow through the output into {target} would be "
        "lost, since that gradient goes through grad_fn to the positional arguments and "
        "variables only. Pass the tensor as a positional argument and return its gradient "
        'from grad_fn, or decorate with `@custom_gradient(captured="constant")` to keep '
        "TensorFlow's behaviour (no gradient for it through the function's outputs, while "
        "grad_fn's own use of it is still differentiated at second order). `.detach()` where "
        "the function reads it gives the same first-order gradients, but also detaches "
        "grad_fn's use of it."
    )
