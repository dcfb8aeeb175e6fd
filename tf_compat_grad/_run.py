"""Calling the user's f: checking its inputs, calling it, splitting what it returns into
outputs and grad_fn (items 5-7, 10-13). Running it watched for the Parameters it reads is
`_watcher.run_watched`.

Everything here takes the user's function itself, not the decorator object, so the nodes that
`torch.func` and `torch.compile` trace reach only plain functions and constants."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _structure
from ._errors import (
    PREFIX,
    CustomGradientTypeError,
    CustomGradientValueError,
    describe,
    describe_value,
    plural,
)
from ._torch_internals import dual_level_active, is_dynamo_compiling

UNBOUND: Any = object()  # the `bound` of a call that is not a method call

_Tensor = torch.Tensor
_INPUT_LEAF_TYPES = (_Tensor, bool, int, float, complex, str, bytes)


BOUND_KEYWORD = "_tf_compat_grad_bound"  # an f that takes the bound instance by this keyword


def call_f(f: Callable[..., Any], bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if bound is UNBOUND:
        return f(*args, **kwargs)
    if getattr(f, BOUND_KEYWORD, False):  # recompute_grad's wrapper: `self` is not an argument
        return f(*args, **{BOUND_KEYWORD: bound}, **kwargs)
    return f(bound, *args, **kwargs)


class Layout:
    """Where the tensor inputs stand among a call's flattened positional arguments (item 11).

    `inputs` builds it from the arguments; a plan keeps the one of the call it was learned from
    (Note [plans]). Every path hands it unchanged to its node's `Record` (the compile path
    through `apply` as plain constants, Note [compile]).
    """

    __slots__ = ("bound", "f", "n_args", "positions", "spec", "tensors_only")

    def __init__(
        self,
        f: Callable[..., Any],
        bound: bool,
        spec: _structure.Spec,
        n_args: int,
        positions: Sequence[int],
    ) -> None:
        self.f = f
        self.bound = bound  # called as a method: `self` is not among the arguments
        self.spec = spec
        self.n_args = n_args  # flattened positional arguments, tensors or not
        self.positions = positions  # where each tensor input stands among them
        self.tensors_only = len(positions) == n_args

    def paths(self) -> list[str]:
        """Each flattened argument's path as the user wrote it (`x`, `params['w'][1]`)."""
        # Traced (a refusal in a compiled backward), without the cache: Dynamo warns of one
        names = positional_names.__wrapped__ if is_dynamo_compiling() else positional_names
        return _structure.leaf_paths(self.spec, names(self.f, self.bound))

    def arg_names(self) -> str:
        return ", ".join(self.paths()) or "none"


def inputs(
    f: Callable[..., Any], bound: Any, args: tuple[Any, ...]
) -> tuple[Sequence[Any], Layout, Sequence[_Tensor]]:
    """The flattened positional arguments (item 11), each checked to be usable (item 13), their
    layout, and the tensors among them."""
    for arg in args:
        if not isinstance(arg, _Tensor) or arg.is_nested:
            break
    else:  # the usual case: tensors only (Parameters too), which are the inputs as they are
        n = len(args)
        return args, Layout(f, bound is not UNBOUND, _structure.tuple_spec(n), n, range(n)), args
    flat_args, arg_spec = _structure.flatten(args)
    for i, leaf in enumerate(flat_args):
        if isinstance(leaf, _Tensor) and leaf.is_nested and leaf.layout is torch.strided:
            path = _structure.leaf_paths(arg_spec, positional_names(f, bound is not UNBOUND))[i]
            raise CustomGradientTypeError(
                f"{PREFIX}{describe(f)} got a strided nested tensor for positional argument "
                f"`{path}`; an autograd.Function cannot take one as an input. Pass its "
                "components as a list of tensors, or use a jagged nested tensor "
                "(`layout=torch.jagged`)."
            ) from None
        if not isinstance(leaf, _INPUT_LEAF_TYPES) and not is_numpy(leaf):
            path = _structure.leaf_paths(arg_spec, positional_names(f, bound is not UNBOUND))[i]
            raise CustomGradientValueError(
                f"{PREFIX}{describe(f)} got {describe_value(leaf)} for positional argument "
                f"`{path}`. Positional arguments are the inputs of a custom gradient and must be "
                "tensors, Python numbers, strings or numpy arrays, possibly nested in lists, "
                "tuples, dicts and namedtuples (TensorFlow: 'Attempt to convert a value ... with "
                "an unsupported type ... to a Tensor'). Pass it by keyword instead: keyword "
                "arguments reach f but are not inputs."
            ) from None
    positions = [i for i, leaf in enumerate(flat_args) if isinstance(leaf, _Tensor)]
    layout = Layout(f, bound is not UNBOUND, arg_spec, len(flat_args), positions)
    return flat_args, layout, [flat_args[i] for i in positions]


def split(f: Callable[..., Any], out: Any) -> tuple[Any, Callable[..., Any]]:
    """f's `(outputs, grad_fn)`, with the error types of TensorFlow's unpacking (items 6, 7)."""
    if isinstance(out, (tuple, list)) and len(out) == 2:
        result, grad_fn = out
    elif isinstance(out, _Tensor) and out.dim() > 0 and len(out) == 2:
        raise CustomGradientTypeError(  # TensorFlow unpacks it, then finds no callable grad_fn
            f"{PREFIX}{describe(f)} must return a pair (outputs, grad_fn), but it returned a "
            f"single {describe_value(out)}. Return `y, grad_fn`."
        ) from None
    elif isinstance(out, (tuple, list)) or (isinstance(out, _Tensor) and out.dim() > 0):
        count = len(out)
        raise CustomGradientValueError(
            f"{PREFIX}{describe(f)} must return a pair (outputs, grad_fn), but it returned "
            f"{describe_value(out) if isinstance(out, _Tensor) else type(out).__name__}, which "
            f"unpacks into {plural(count, 'item')}. Return `y, grad_fn`; put several outputs in "
            "a tuple: `(y1, y2), grad_fn`."
        ) from None
    else:
        if inspect.iscoroutine(out):
            out.close()  # an `async def` f: the coroutine will never be awaited
        raise CustomGradientTypeError(
            f"{PREFIX}{describe(f)} must return a pair (outputs, grad_fn), but it returned "
            f"{describe_value(out)}. Return `y, grad_fn`, where grad_fn takes the upstream "
            "gradients and returns the input gradients."
        ) from None
    if not callable(grad_fn):
        raise CustomGradientTypeError(
            f"{PREFIX}the second item returned by {describe(f)} must be its gradient function "
            f"(grad_fn), but it is {describe_value(grad_fn)}, which is not callable (TensorFlow: "
            "'unsupported callable'). Return `y, grad_fn` with `def grad_fn(dy): ...` defined "
            "inside f."
        ) from None
    return result, grad_fn


def outputs(
    f: Callable[..., Any], result: Any, sources: Sequence[_Tensor] = ()
) -> tuple[tuple[_Tensor, ...], Any]:
    """f's flattened outputs as new tensors with no graph (items 10 and 38), and their spec;
    copies of those that alias one of `sources` (Note [outputs that alias an input])."""
    if type(result) is _Tensor:
        return (detached(result, sources),), _structure.LEAF
    flat_out, out_spec = _structure.flatten(result)
    outputs = []
    seen: set[int] = set()  # the earlier outputs
    bases: set[int] = set()  # the tensors they are views of
    for i, o in enumerate(flat_out):
        o = as_output(f, o, i, out_spec)
        base = o._base
        # An output that is an earlier one, a view of one, or the tensor one is a view of
        # (`(y, y)`, `(y, y[0])`) would share its memory: a copy too.
        if id(o) in seen or id(o) in bases or (base is not None and id(base) in seen):
            outputs.append(o.detach().clone())
        else:
            outputs.append(detached(o, sources))
        seen.add(id(o))
        if base is not None:
            bases.add(id(base))
    return tuple(outputs), out_spec


def detached(output: _Tensor, sources: Sequence[_Tensor]) -> _Tensor:
    """An output of f without its graph, copied if it aliases one of `sources`.

    # Note [outputs that alias an input]
    f may return an input, or a view of one (`return x, grad_fn`, `x[:2]`). Detached, the
    output would share the input's memory outside autograd: an in-place edit of the output
    (`y.mul_(2)`, `y[0] = 0`) would change the input with no record of it, and every later use
    of the input would get a wrong gradient. TensorFlow's outputs are new tensors (item 10), so
    such an output is a copy of it. `sources` are the call's inputs and variables; an output
    that repeats an earlier one (`(y, y)`) is a copy too.
    """
    if aliases(output, sources):
        return output.detach().clone()
    return output.detach()


def aliases(tensor: _Tensor, sources: Sequence[_Tensor]) -> bool:
    """Whether tensor is one of sources or a view of one (or of the tensor one is a view of)."""
    base = tensor._base
    for source in sources:
        if tensor is source or (base is not None and (base is source or base is source._base)):
            return True
    return False


def versions(inputs: Sequence[_Tensor]) -> list[int | None]:
    """The inputs' version counters before f runs, for `check_unedited`. A tensor made under
    `torch.inference_mode` has none, and outside that mode nothing can edit it in place: None."""
    try:
        return [tensor._version for tensor in inputs]
    except RuntimeError:  # "Inference tensors do not track version counter"
        return [None if tensor.is_inference() else tensor._version for tensor in inputs]


def check_unedited(
    f: Callable[..., Any],
    layout: Layout,
    inputs: Sequence[_Tensor],
    versions: Sequence[int | None],
) -> None:
    """Refuse a call whose f edited in place an input that requires grad (`versions`: the
    inputs' version counters before f ran, from `versions`). Under grad mode autograd moves the
    input's history onto the edit, so the gradient grad_fn gives for the argument as passed
    would also go through the edit; under `no_grad` later uses of the input would not see it."""
    for i, (tensor, version) in enumerate(zip(inputs, versions, strict=True)):
        if version is not None and tensor._version != version and tensor.requires_grad:
            path = layout.paths()[layout.positions[i]]
            raise CustomGradientValueError(edited_message(describe(f), path)) from None


def edited_message(described: str, path: str) -> str:
    """Why a call whose f (`described`: by name, file and line) edited its argument at `path`
    in place is refused (`check_unedited`; under torch.compile, `_compile_exits.py`)."""
    return (
        f"{PREFIX}{described} edited its argument `{path}` in place (an in-place op "
        "such as `mul_`, an indexed assignment or `out=`). The caller's tensor would "
        "change under autograd: the gradient through the edit would join the one grad_fn "
        "gives for the argument as it was passed, or, for an edit under "
        "`torch.no_grad()`, later uses of the tensor would be differentiated as if it "
        "had not changed. Edit a copy (`.clone()` it in f first), or compute a new "
        "tensor."
    )


def fresh(f: Callable[..., Any], result: Any) -> Any:
    """f's outputs as new tensors that keep any graph f built (item 10), and any tangent of
    `torch.autograd.forward_ad` they carry (a dual tensor passed by keyword), with no node."""
    if type(result) is _Tensor:
        return result.view_as(result) if _keeps(result) else result.detach()
    flat, spec = _structure.flatten(result)
    tensors = (as_output(f, o, i, spec) for i, o in enumerate(flat))
    return _structure.unflatten(spec, [t.view_as(t) if _keeps(t) else t.detach() for t in tensors])


def _keeps(tensor: _Tensor) -> bool:
    """Whether `detach` would drop a derivative: a graph, or a tangent under a dual level."""
    return tensor.requires_grad or dual_level_active()


def as_output(f: Callable[..., Any], value: Any, index: int, spec: Any) -> _Tensor:
    """An output leaf as a tensor: Python numbers and numpy arrays are converted (item 10)."""
    if isinstance(value, _Tensor):
        return value
    if isinstance(value, (bool, int, float, complex)) or is_numpy(value):
        return torch.as_tensor(value)
    path = _structure.leaf_paths(spec)[index] or "the output"
    raise CustomGradientTypeError(
        f"{PREFIX}{describe(f)} returned {describe_value(value)} as output `{path}`. Outputs "
        "must be tensors or Python numbers, possibly nested in lists, tuples, dicts and "
        "namedtuples."
    ) from None


def is_numpy(value: object) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic))


@functools.lru_cache(maxsize=1024)
def positional_names(f: Callable[..., Any], bound: bool) -> tuple[str, ...]:
    """The names of f's positional parameters (`self` left out when bound), for messages."""
    try:
        parameters = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return ()
    if bound and parameters:
        parameters = parameters[1:]
    names: list[str] = []
    for p in parameters:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names.extend(f"{p.name}[{k}]" for k in range(64))
            break
    return tuple(names)
