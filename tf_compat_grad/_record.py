"""What the nodes of every path share: the record of one call, which the node's backward
reads, checking and repairing what grad_fn returns (items 21-31, 34, 36), and the node classes
named after the user's function.

TensorFlow passes whatever grad_fn returns straight through; torch's engine rejects Python
numbers, gradients on another device and shapes it cannot sum down. Here a gradient becomes a
tensor on its input's device, in its input's dtype, and of its input's shape when it is a broadcast
of it (summed down, as torch's engine does) or a single value (a number or 0-d tensor, expanded);
anything else, a smaller gradient with dimensions included, is an error that names the argument."""

from __future__ import annotations

import functools
import inspect
import os
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

from . import _autocast, _structure
from ._closure import code_of, edits_upstreams, unshared
from ._errors import (
    PREFIX,
    CustomGradientTypeError,
    CustomGradientValueError,
    describe,
    describe_value,
    fn_name,
    plural,
)
from ._places import SlotVariables, put_back
from ._run import Layout, is_numpy
from ._torch_internals import any_autocast_enabled

Tensor = torch.Tensor  # the name `EXACT_GRADIENT` reads (one name: Note [compile guards])

# What a gradient for one tensor input must look like: the input's shape, dtype and device.
InputMeta = tuple[torch.Size, torch.dtype, torch.device]


# Note [exact gradients]
# An input's metadata is noted when f returns, and a gradient that is already a tensor of that
# shape, dtype and device is passed on as it is; anything else goes to `repair`. Both are
# written once, as source: `input_meta` and `exact_gradient` evaluate them for the general
# code, and the plans render them into their generated forward and backward (`_plan.py`), the
# comparisons cheapest first. The plans note a CPU input's device as True (`NOTED_INPUT_META`):
# `is_cpu` makes no device object, where each read of `device` makes one, and it tells a CPU
# gradient as cheaply (`NOTED_EXACT_GRADIENT`); `NOTED_DEVICE` is the device again, for
# `repair`. The compile node whose forward runs f tests a gradient against the input's class
# (`EXACT_LIKE_INPUT`).
_SHAPE_DTYPE = "{t}.shape, {t}.dtype, "
INPUT_META = _SHAPE_DTYPE + "{t}.device"
NOTED_INPUT_META = _SHAPE_DTYPE + "{t}.is_cpu or {t}.device"
_EXACT = "{g}.dtype is {dtype} and {g}.shape == {shape} and "
_TENSOR = "type({g}) is Tensor and "
EXACT_GRADIENT = _TENSOR + _EXACT + "{g}.device == {device}"
NOTED_EXACT_GRADIENT = (
    _TENSOR + _EXACT + "({g}.is_cpu if {device} is True else {g}.device == {device})"
)
# The same test with the input's own class or `Tensor` (a tensor of either class and the
# input's metadata is what `repair` would return as it is): the compile node's traced backward
# reads no global for it where the gradient is of the input's class (Note [f inside the compile
# node] in `_compile_node.py`), and `Tensor` (two guards) where it is not (a Parameter's).
EXACT_LIKE_INPUT = (
    "({g}.__class__ is {kind} or {g}.__class__ is Tensor) and " + _EXACT + "{g}.device == {device}"
)
NOTED_DEVICE = "(CPU if {device} is True else {device})"  # over the name CPU: `CPU_DEVICE`
CPU_DEVICE = torch.device("cpu")
input_meta: Callable[[torch.Tensor], InputMeta] = eval(f"lambda t: ({INPUT_META.format(t='t')})")
exact_gradient: Callable[[Any, InputMeta], bool] = eval(
    "lambda g, meta: "
    + EXACT_GRADIENT.format(g="g", shape="meta[0]", dtype="meta[1]", device="meta[2]"),
    globals(),
)


def _is_number_like(value: object, real: bool) -> bool:
    """A Python number or numeric numpy value, real when the input is real."""
    if isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, complex):
        return not real
    kinds = "biuf" if real else "biufc"
    return is_numpy(value) and value.dtype.kind in kinds  # type: ignore[attr-defined]


def _reject(
    grad: Any, dtype: torch.dtype, f: Callable[..., Any], name: Callable[[], str]
) -> NoReturn:
    raise CustomGradientTypeError(
        f"{PREFIX}grad_fn of {describe(f)} returned {describe_value(grad)} as the gradient for "
        f"{name()}, a tensor of dtype {dtype}. Expected a tensor, a "
        f"{'real ' if not dtype.is_complex else ''}Python number, a numeric numpy array or "
        "None. Return a tensor of the input's shape, or None for no gradient."
    ) from None


def repair(
    grad: Any, meta: InputMeta, f: Callable[..., Any], names: Callable[[int], str], index: int
) -> torch.Tensor:
    """`grad`, which is not already a tensor like the input `meta` describes, as one;
    `names(index)` names the input."""
    shape, dtype, device = meta
    name = functools.partial(names, index)
    tensor: torch.Tensor
    real = not dtype.is_complex
    if isinstance(grad, torch.Tensor):
        tensor = grad
        if real and tensor.is_complex():
            _reject(grad, dtype, f, name)
        if tensor.dtype != dtype or tensor.device != device:
            if tensor.device.type == "meta" and device.type != "meta":
                raise CustomGradientTypeError(
                    f"{PREFIX}grad_fn of {describe(f)} returned a gradient on the meta device, "
                    f"which holds no data, for {name()}, which is on {device}. Return a "
                    f"gradient with data (on {device}, or any device: it is moved)."
                ) from None
            tensor = tensor.to(device=device, dtype=dtype)
    else:
        if not _is_number_like(grad, real):
            _reject(grad, dtype, f, name)
        try:
            tensor = torch.as_tensor(grad, dtype=dtype, device=device)
        except (TypeError, RuntimeError):
            _reject(grad, dtype, f, name)
    if tensor.shape != shape:
        return _fit_shape(tensor, shape, f, name)
    return tensor


def _fit_shape(
    grad: torch.Tensor, target: torch.Size, f: Callable[..., Any], name: Callable[[], str]
) -> torch.Tensor:
    """A 0-d gradient stands for one value per element (item 29); a broadcast of the input is
    summed down, as torch's engine does. A smaller gradient with dimensions is refused, as
    torch's engine refuses it for any `autograd.Function`: expanding it would hide a reduction
    over the wrong axis."""
    if not grad.dim():
        return grad.expand(target)
    # Whether grad's shape is a broadcast of the input's, compared in Python: Dynamo traces
    # `torch.broadcast_shapes` into the graph, where a refused shape failed as Dynamo's own error.
    shape, n = grad.shape, len(target)
    if len(shape) >= n and all(
        t in (s, 1) for s, t in zip(shape[len(shape) - n :], target, strict=True)
    ):
        return grad.sum_to_size(target)
    raise CustomGradientValueError(
        f"{PREFIX}grad_fn of {describe(f)} returned a gradient of shape {list(grad.shape)} "
        f"for {name()}, which has shape {list(target)}. A gradient must have its input's shape, "
        "or be a broadcast of it (it is then summed down), or be a Python number or 0-d tensor "
        f"(one value for every element). Return a gradient of shape {list(target)}."
    ) from None


def check_upstreams(
    f: Callable[..., Any],
    grad_fn: Callable[..., Any],
    n_outputs: int,
    variables: Sequence[torch.nn.Parameter],
) -> None:
    """Refuse, when f returns, a grad_fn that cannot take one upstream gradient per flattened
    output (item 21), with `variables=` when f read Parameters (item 34): `def grad(upstream)`
    for two outputs would otherwise fail with a bare TypeError in backward. A `variables`
    parameter that the upstreams would fill is refused too. Only for several outputs (a single
    one is not looked at), and once per grad_fn's code. While Dynamo traces, which cannot trace
    `inspect.signature`, `upstreams_refusal_of_code` checks instead."""
    if n_outputs < 2:
        return
    code = getattr(grad_fn, "__code__", None)
    cacheable = type(grad_fn) is types.FunctionType and not grad_fn.__dict__
    key = (code, n_outputs, bool(variables))
    if cacheable and key in _TAKES_UPSTREAMS:
        return
    try:
        signature = inspect.signature(grad_fn)
    except (TypeError, ValueError):
        return  # no signature to read (a builtin): it is called as it is
    problem = _upstreams_problem(signature, n_outputs, bool(variables))
    if problem is None:
        if cacheable:
            _TAKES_UPSTREAMS.add(key)
        return
    raise CustomGradientTypeError(
        _upstreams_refusal(describe(f), describe(grad_fn), n_outputs, bool(variables), problem)
    ) from None


def upstreams_refusal_of_code(
    code: types.CodeType,
    n_defaults: int | None,
    n_bound: int,
    keywords: tuple[str, ...],
    n_outputs: int,
    variables: bool,
    described: str,
) -> str:
    """`check_upstreams` for a grad_fn known by what Dynamo can read of it (its code, and not its
    defaults when they hold tensors): the refusal's message, or "" when grad_fn may take the
    upstreams. `n_defaults`: how many positional parameters have one, None when unknown (then
    each may, so only what no defaults can change is refused); `n_bound` and `keywords`: the
    positional arguments and keywords bound before the upstreams (a `functools.partial`'s, the
    instance of a method or callable object). Keyword-only parameters count as having
    defaults. `described`: f by name, file and line."""
    cells = tuple(types.CellType() for _ in code.co_freevars)
    defaults = (None,) * (code.co_argcount if n_defaults is None else n_defaults)
    stand_in = types.FunctionType(code, {}, None, defaults, cells)
    keyword_only = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    stand_in.__kwdefaults__ = dict.fromkeys(keyword_only)
    bound = functools.partial(stand_in, *(None,) * n_bound, **dict.fromkeys(keywords))
    problem = _upstreams_problem(inspect.signature(bound), n_outputs, variables)
    if problem is None:
        return ""
    name = getattr(code, "co_qualname", code.co_name)  # Python >= 3.11 has the qualified name
    grad_fn = f"`{name}` ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
    return _upstreams_refusal(described, grad_fn, n_outputs, variables, problem)


def _upstreams_problem(signature: inspect.Signature, n_outputs: int, variables: bool) -> str | None:
    """Why a grad_fn of this signature cannot take n_outputs upstreams (and `variables=`)."""
    keyword: dict[str, Any] = {"variables": []} if variables else {}
    try:
        bound = signature.bind(*range(n_outputs), **keyword)
    except TypeError as error:
        return str(error)
    if "variables" in bound.arguments and not variables:
        return "the upstream gradients would fill its `variables` parameter"
    return None


def _upstreams_refusal(f: str, grad_fn: str, n_outputs: int, variables: bool, problem: str) -> str:
    return (
        f"{PREFIX}{f} returned {plural(n_outputs, 'output')}, so its grad_fn is called "
        f"with {plural(n_outputs, 'upstream gradient')}, one per flattened output in order"
        f"{' and `variables=`' if variables else ''}, but grad_fn {grad_fn} "
        f"cannot take them ({problem}). Give grad_fn one parameter per output, "
        "`def grad_fn(d_y1, d_y2):`, or take them all as `def grad_fn(*upstream):`."
    )


_TAKES_UPSTREAMS: set[tuple[Any, int, bool]] = set()  # (code, outputs, variables) that passed


def split_variable_grads(
    returned: Any, variables: Sequence[torch.nn.Parameter], f: Callable[..., Any]
) -> tuple[Any, Sequence[Any]]:
    """Unpack `(input_grads, variable_grads)`, returned when f read Parameters (item 34)."""
    if not isinstance(returned, (tuple, list)) or len(returned) != 2:
        raise CustomGradientTypeError(
            f"{PREFIX}grad_fn of {describe(f)} must return a pair (input_gradients, "
            f"variable_gradients) because {fn_name(f)} reads {plural(len(variables), 'Parameter')} "
            f"({_parameter_names(variables)}), but it returned {describe_value(returned)}. "
            "Return `dx, [dw, ...]` with one gradient per entry of `variables`."
        ) from None
    input_grads, variable_grads = returned
    if not isinstance(variable_grads, (list, tuple)):  # TF: list + tensor, a TypeError
        raise CustomGradientTypeError(
            f"{PREFIX}grad_fn of {describe(f)} must return the variables' gradients as a list: "
            f"expected a list of {len(variables)} ({_parameter_names(variables)}), got "
            f"{describe_value(variable_grads)}. Return `dx, [dw, ...]`, one entry per "
            "Parameter in `variables`, in that order (None for none)."
        ) from None
    if len(variable_grads) != len(variables):
        raise CustomGradientValueError(
            f"{PREFIX}grad_fn of {describe(f)} must return a gradient for each variable: "
            f"expected a list of {len(variables)} ({_parameter_names(variables)}), got "
            f"{plural(len(variable_grads), 'gradient')}. Return one entry per Parameter in "
            "`variables`, in that order (None for none)."
        ) from None
    return input_grads, variable_grads


def count_error(
    returned: int, count: int, f: Callable[..., Any], arg_names: str
) -> CustomGradientValueError:
    """grad_fn returned another number of gradients than f has positional inputs (item 26)."""
    return CustomGradientValueError(
        f"{PREFIX}grad_fn of {describe(f)} returned {plural(returned, 'gradient')}, but "
        f"{fn_name(f)} was called with {plural(count, 'positional input')} "
        f"({arg_names}). Return one gradient per positional input (None for one that "
        "needs none), in the order of the flattened arguments."
    )


def _parameter_names(variables: Sequence[torch.nn.Parameter]) -> str:
    return ", ".join(f"Parameter of shape {list(v.shape)}" for v in variables)


class Record:
    """What one call hands to its node's backward: its `Layout`, its inputs' metadata, which
    Parameters f read, and the autocast state. Holds no tensor of the call's own."""

    __slots__ = ("autocast", "layout", "metas", "variables")

    def __init__(
        self,
        layout: Layout,
        metas: list[InputMeta],
        variables: Sequence[torch.nn.Parameter],
        autocast: _autocast.State,
    ) -> None:
        self.layout = layout
        self.metas = metas  # one `InputMeta` per tensor input, then per variable
        self.variables = variables
        self.autocast = autocast  # grad_fn runs in the forward's autocast state

    @classmethod
    def of_call(
        cls,
        layout: Layout,
        inputs: Sequence[torch.Tensor],
        variables: Sequence[torch.nn.Parameter],
    ) -> Record:
        """The record of a call with these tensor inputs, in the current autocast state."""
        metas = list(map(input_meta, inputs))
        if variables:
            metas.extend(map(input_meta, variables))
        return cls(layout, metas, variables, _autocast.current() if any_autocast_enabled() else ())

    def gradients(
        self,
        grad_fn: Callable[..., Any],
        upstream: Sequence[Any],
        needs: Sequence[bool],
        raw: bool = False,
        first: int = 0,
    ) -> list[Any]:
        """Call grad_fn; one checked gradient per tensor input, then per variable (item 21 on).

        `needs[first + i]` False gives None for input i without looking at what grad_fn returned
        (`first`: how many arguments of the node come before its inputs).
        `raw`: what grad_fn returned for each, counted but neither checked nor repaired (the
        checker's view of grad_fn itself).
        """
        if edits_upstreams(getattr(grad_fn, "__code__", None) or code_of(grad_fn)):
            upstream = unshared(upstream)  # Note [upstreams edited in place] in `_closure.py`
        try:
            if self.autocast or self.variables:
                returned = self._call_in_state(grad_fn, upstream)
            else:
                returned = grad_fn(*upstream)
        except TypeError:  # eager's refusal of a grad_fn that cannot take the upstreams, where
            # a compiled call could not read its defaults (Note [upstreams under compile])
            check_upstreams(self.layout.f, grad_fn, len(upstream), self.variables)
            raise
        return self.checked(returned, needs, raw, first)

    def checked(
        self, returned: Any, needs: Sequence[bool], raw: bool = False, first: int = 0
    ) -> list[Any]:
        """What grad_fn returned (`(input_grads, variable_grads)` when f read Parameters, item
        34), as `gradients` gives it."""
        input_grads = returned
        variable_grads: Sequence[Any] = ()
        if self.variables:
            input_grads, variable_grads = split_variable_grads(
                returned, self.variables, self.layout.f
            )
        # One gradient per flattened argument; a single bare tensor is the usual case.
        flat = [input_grads] if type(input_grads) is Tensor else _structure.leaves(input_grads)
        layout = self.layout
        if len(flat) != layout.n_args:
            raise count_error(len(flat), layout.n_args, layout.f, layout.arg_names())
        if not layout.tensors_only:
            flat = [flat[p] for p in layout.positions]
        if variable_grads:
            flat.extend(variable_grads)
        if raw:
            return flat
        metas = self.metas
        for i, grad in enumerate(flat):
            if not exact_gradient(grad, metas[i]):
                flat[i] = self._repair(grad, i, needs, first)
        return flat

    def _call_in_state(self, grad_fn: Callable[..., Any], upstream: Sequence[Any]) -> Any:
        """What grad_fn returns, called in the forward's autocast state and with `variables=`
        when f read Parameters (item 34)."""
        if self.autocast:
            grad_fn = functools.partial(_autocast.call_in, self.autocast, grad_fn)
        variables = self.variables
        if not variables:
            return grad_fn(*upstream)
        if type(variables) is SlotVariables:
            with put_back(variables):
                return grad_fn(*upstream, variables=list(variables))
        return grad_fn(*upstream, variables=list(variables))

    def _repair(self, grad: Any, i: int, needs: Sequence[bool], first: int) -> torch.Tensor | None:
        """A gradient that is not already a tensor like its input: None when none is
        wanted or returned, else converted, moved, cast or reshaped, or an error."""
        if grad is None or not needs[first + i]:
            return None
        return repair(grad, self.metas[i], self.layout.f, self._input_name, i)

    def _input_name(self, i: int) -> str:
        positions = self.layout.positions
        if i < len(positions):
            return f"argument `{self.layout.paths()[positions[i]]}`"
        k = i - len(positions)
        return f"`variables[{k}]` (Parameter of shape {list(self.variables[k].shape)})"


def per_code(f: Callable[..., Any], key: Any, make: Callable[[Callable[..., Any]], Any]) -> Any:
    """`make(f)`, made once per code object of f, name and module it is named after, and `key`:
    a function decorated again (inside `forward`, on every call) reuses what an earlier
    decoration of the same code made. What `make` makes must not hold f: an entry goes with its
    code object, and no decoration's closure is kept alive by it."""
    code = getattr(f, "__code__", None)
    if type(code) is not types.CodeType:
        return make(f)
    made = _PER_CODE.get(weakref.ref(code))
    if made is None:  # the entry goes with its code object
        made = _PER_CODE[weakref.ref(code, _PER_CODE.pop)] = {}
    full = (getattr(f, "__name__", None), getattr(f, "__module__", None), key)
    value = made.get(full)
    if value is None:
        value = made[full] = make(f)
    return value


_PER_CODE: dict[weakref.ref[types.CodeType], dict[Any, Any]] = {}


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
