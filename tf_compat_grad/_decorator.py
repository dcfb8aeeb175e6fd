"""`custom_gradient`: the decorator, the wrapper object, and binding for methods."""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

import torch
from typing_extensions import ParamSpec

from . import _structure, _transforms
from ._closure import capture
from ._errors import (
    PREFIX,
    CustomGradientTypeError,
    CustomGradientValueError,
    describe,
    describe_value,
    plural,
)
from ._function import UNBOUND, Record, make_node
from ._transforms import make_transform_node
from ._variables import ParameterWatcher

P = ParamSpec("P")
R = TypeVar("R")

_Tensor = torch.Tensor
_UNBOUND = UNBOUND
_transforms_active = torch._C._are_functorch_transforms_active
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS
_INPUT_LEAF_TYPES = (bool, int, float, complex, str, bytes)


class CustomGradient(Generic[P, R]):
    """A function whose gradient is the grad_fn it returns; made by `custom_gradient`.

    Calling it returns f's outputs only. Used as a method (or `nn.Module.forward`), the instance
    is bound and is not an input.
    """

    __wrapped__: Callable[P, tuple[R, Callable[..., Any]]]

    def __init__(self, f: Callable[P, tuple[R, Callable[..., Any]]]) -> None:
        functools.update_wrapper(self, f)
        self._node = make_node(self)
        self._transform_node = make_transform_node(self)
        self._inside = getattr(f, "__qualname__", "") + ".<locals>."
        self._names: dict[bool, list[str]] = {}
        owner = self

        @functools.wraps(f)
        def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return owner._call(self, args, kwargs)

        method.__tf_compat_grad__ = self  # type: ignore[attr-defined]
        self._method = method

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._call(_UNBOUND, args, kwargs)  # type: ignore[no-any-return]

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self._method, instance)

    def __set_name__(self, owner: type, name: str) -> None:
        # A plain function on the class, not this descriptor: Dynamo recursed on a `__get__`
        # descriptor installed as `nn.Module.forward` (torch_notes, "More facts").
        setattr(owner, name, self._method)

    def __repr__(self) -> str:
        return f"<custom_gradient {describe(self.__wrapped__)}>"

    def positional_names(self, bound: bool) -> list[str]:
        """The names of f's positional parameters (`self` left out when bound), for messages."""
        names = self._names.get(bound)
        if names is None:
            names = self._names[bound] = _positional_names(self.__wrapped__, bound)
        return names

    # Note [where f runs] (in _function.py) explains the order of the steps below.
    def _call(self, bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _transforms_active():
            flat_args, arg_spec = self._inputs(bound, args)
            return _transforms.call(self._transform_node, self, bound, flat_args, arg_spec, kwargs)
        if not torch.is_grad_enabled():
            f = self.__wrapped__
            out = f(*args, **kwargs) if bound is _UNBOUND else f(bound, *args, **kwargs)
            return _fresh(self._split(out)[0], f)
        flat_args, arg_spec = self._inputs(bound, args)
        result, grad_fn, variables = self.run(bound, args, kwargs, flat_args)
        positions = [i for i, leaf in enumerate(flat_args) if isinstance(leaf, _Tensor)]
        inputs = [flat_args[i] for i in positions]
        if not variables and not any(t.requires_grad for t in inputs):
            return _fresh(result, self.__wrapped__)  # nothing to record: f's autodiff (item 39)
        flat_out, out_spec = _structure.flatten(result)
        record = Record(
            self, bound is not _UNBOUND, arg_spec, len(flat_args), positions, inputs, variables
        )
        record.outputs = self.outputs(flat_out, out_spec)
        record.captured, record.saved = capture(grad_fn, self._inside)
        node_outputs = self._node.apply(record, *inputs, *variables)  # type: ignore[no-untyped-call]
        return _structure.unflatten(out_spec, node_outputs)

    def _inputs(self, bound: Any, args: tuple[Any, ...]) -> tuple[list[Any], _structure.Spec]:
        """The flattened positional arguments (item 11), each checked to be usable (item 13)."""
        flat_args, arg_spec = _structure.flatten(args)
        for i, leaf in enumerate(flat_args):
            if not isinstance(leaf, (_Tensor, *_INPUT_LEAF_TYPES)) and not _is_numpy(leaf):
                self._reject_input(leaf, i, arg_spec, bound is not _UNBOUND)
        return flat_args, arg_spec

    def run(
        self, bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any], flat_args: list[Any]
    ) -> tuple[Any, Callable[..., Any], list[torch.nn.Parameter]]:
        """Call f once, watching for Parameters: its outputs, grad_fn and variables."""
        f = self.__wrapped__
        watcher = ParameterWatcher()
        with watcher:
            out = f(*args, **kwargs) if bound is _UNBOUND else f(bound, *args, **kwargs)
        result, grad_fn = self._split(out)
        variables = watcher.variables(exclude=flat_args + _structure.leaves(kwargs))
        if variables:
            self._check_accepts_variables(grad_fn, variables)
        return result, grad_fn, variables

    def outputs(self, flat_out: list[Any], out_spec: _structure.Spec) -> tuple[_Tensor, ...]:
        """f's flattened outputs as new tensors with no graph (items 10 and 38)."""
        f = self.__wrapped__
        return tuple(_as_output(o, i, out_spec, f).detach() for i, o in enumerate(flat_out))

    def _split(self, out: Any) -> tuple[Any, Callable[..., Any]]:
        """f's `(outputs, grad_fn)`, with TensorFlow's error types (items 6 and 7)."""
        if type(out) is tuple and len(out) == 2:
            result, grad_fn = out
        elif isinstance(out, (tuple, list)):
            raise CustomGradientValueError(
                f"{PREFIX}{describe(self.__wrapped__)} must return a pair (outputs, grad_fn), "
                f"but it returned a {type(out).__name__} of {plural(len(out), 'item')}. "
                "Return `y, grad_fn`; put several outputs in a tuple: `(y1, y2), grad_fn`."
            ) from None
        elif isinstance(out, _Tensor) and out.dim() == 1 and len(out) == 2:
            result, grad_fn = out  # TensorFlow unpacks it too, then rejects grad_fn below
        else:
            raise CustomGradientTypeError(
                f"{PREFIX}{describe(self.__wrapped__)} must return a pair (outputs, grad_fn), "
                f"but it returned {describe_value(out)}. Return `y, grad_fn`, where grad_fn "
                "takes the upstream gradients and returns the input gradients."
            ) from None
        if not callable(grad_fn):
            raise CustomGradientTypeError(
                f"{PREFIX}the second item returned by {describe(self.__wrapped__)} must be its "
                f"gradient function (grad_fn), but it is {describe_value(grad_fn)}, which is not "
                "callable. Return `y, grad_fn` with `def grad_fn(dy): ...` defined inside f."
            ) from None
        return result, grad_fn

    def _reject_input(self, leaf: Any, index: int, spec: _structure.Spec, bound: bool) -> None:
        path = _structure.leaf_paths(spec, self.positional_names(bound))[index]
        raise CustomGradientValueError(
            f"{PREFIX}{describe(self.__wrapped__)} got {describe_value(leaf)} for positional "
            f"argument `{path}`. Positional arguments are the inputs of a custom gradient and "
            "must be tensors, Python numbers, strings or numpy arrays, possibly nested in "
            "lists, tuples, dicts and namedtuples (TensorFlow: 'Attempt to convert a value ... "
            "with an unsupported type ... to a Tensor'). Pass it by keyword instead: keyword "
            "arguments reach f but are not inputs."
        ) from None

    def _check_accepts_variables(
        self, grad_fn: Callable[..., Any], variables: list[torch.nn.Parameter]
    ) -> None:
        """Item 33: a grad_fn must take `variables` when f reads Parameters."""
        if _accepts_variables(grad_fn):
            return
        found = ", ".join(f"Parameter of shape {list(v.shape)}" for v in variables)
        raise CustomGradientTypeError(
            f"{PREFIX}grad_fn of {describe(self.__wrapped__)} must accept keyword argument "
            f"'variables', since function uses variables: {describe(self.__wrapped__)} reads "
            f"{plural(len(variables), 'trainable Parameter')} that it is not passed ({found}). "
            "Define `def grad_fn(*upstream, variables=None)` and return `(input_grads, "
            "[one gradient per variable])`, or pass the Parameters as positional arguments."
        ) from None


def _accepts_variables(grad_fn: Callable[..., Any]) -> bool:
    code = getattr(grad_fn, "__code__", None)
    if type(grad_fn) is types.FunctionType and code is not None:
        if code.co_flags & _CO_VARKEYWORDS:
            return True
        named = code.co_varnames[
            code.co_posonlyargcount : code.co_argcount + code.co_kwonlyargcount
        ]
        return "variables" in named
    try:
        parameters = inspect.signature(grad_fn).parameters.values()
    except (TypeError, ValueError):
        return True  # unreadable signature: let the call itself tell
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "variables" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in parameters
    )


def _is_numpy(value: object) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic))


def _as_output(value: Any, index: int, spec: _structure.Spec, f: Callable[..., Any]) -> _Tensor:
    """An output leaf as a tensor: Python numbers and numpy arrays are converted (item 10)."""
    if isinstance(value, _Tensor):
        return value
    if isinstance(value, (bool, int, float, complex)) or _is_numpy(value):
        return torch.as_tensor(value)
    path = _structure.leaf_paths(spec)[index] or "the output"
    raise CustomGradientTypeError(
        f"{PREFIX}{describe(f)} returned {describe_value(value)} as output `{path}`. Outputs "
        "must be tensors or Python numbers, possibly nested in lists, tuples, dicts and "
        "namedtuples."
    ) from None


def _fresh(result: Any, f: Callable[..., Any]) -> Any:
    """f's outputs as new tensors that keep any graph f built (item 10), with no node."""
    if type(result) is _Tensor:
        return result.view_as(result) if result.requires_grad else result.detach()
    flat, spec = _structure.flatten(result)
    return _structure.unflatten(
        spec,
        [
            t.view_as(t) if t.requires_grad else t.detach()
            for t in (_as_output(o, i, spec, f) for i, o in enumerate(flat))
        ],
    )


def _positional_names(f: Callable[..., Any], bound: bool) -> list[str]:
    try:
        parameters = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return []
    if bound and parameters:
        parameters = parameters[1:]
    names = []
    for p in parameters:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names.extend(f"{p.name}[{k}]" for k in range(64))
            break
    return names


@overload
def custom_gradient(
    f: Callable[P, tuple[R, Callable[..., Any]]],
) -> CustomGradient[P, R]: ...


@overload
def custom_gradient(
    f: None = None,
) -> Callable[[Callable[P, tuple[R, Callable[..., Any]]]], CustomGradient[P, R]]: ...


def custom_gradient(f: Any = None) -> Any:
    """Decorate `f(*args) -> (outputs, grad_fn)` so autograd differentiates it with grad_fn.

    Works as `@custom_gradient`, `@custom_gradient()` and `custom_gradient(f=fn)`, like
    `tf.custom_gradient`. The inputs are the flattened positional arguments; grad_fn receives
    one upstream gradient per flattened output and returns one gradient per input (None for
    an input that needs none). If f reads trainable `nn.Parameter`s it is not passed, grad_fn is
    called with `variables=[...]` and returns `(input_grads, variable_grads)`.

    Args:
        f: the function to decorate; it returns its outputs and its gradient function.

    Returns:
        A `CustomGradient` that returns f's outputs and records grad_fn for autograd.

    Raises:
        TypeError: `f` is a class or not callable.

    Example:
        >>> import torch
        >>> from tf_compat_grad import custom_gradient
        >>> @custom_gradient
        ... def log1pexp(x):
        ...     e = torch.exp(x)
        ...     def grad(upstream):
        ...         return upstream * (1 - 1 / (1 + e))
        ...     return torch.log(1 + e), grad
        >>> x = torch.tensor(100.0, requires_grad=True)
        >>> log1pexp(x).backward()
        >>> x.grad
        tensor(1.)
    """
    if f is None:
        return custom_gradient
    if isinstance(f, type) or not callable(f):
        kind = "a class" if isinstance(f, type) else describe_value(f)
        raise CustomGradientTypeError(
            f"{PREFIX}custom_gradient decorates a function that returns (outputs, grad_fn), "
            f"but it was given {kind}, which is "
            f"{'not a function' if isinstance(f, type) else 'not callable'}. Decorate a function "
            "or a method; put @staticmethod or @classmethod above @custom_gradient."
        )
    return CustomGradient(f)
