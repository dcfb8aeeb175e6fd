"""The function under check: its example inputs, fresh copies of them per check, and the
`CustomGradient` behind the callable given (found here, once)."""

from __future__ import annotations

import contextlib
import inspect
import os
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from .. import _run, _structure
from .._decoration import wrapper_of
from .._decorator import CustomGradient
from .numerics import F64, _first_line, _float_outputs, _random_like, _seeded, _Tensor, _vjp
from .report import Example

# --- the function under check -------------------------------------------------------------


class _Inputs:
    """Fresh copies of the example arguments; the floating-point positional leaves (and the
    Parameters f reads) are the leaves gradients are taken for."""

    def __init__(self, subject: _Subject, dtype: torch.dtype | None, grad: bool = True) -> None:
        self.subject = subject
        leaves = [
            _copy(leaf, dtype, grad and i in subject.float_positions)
            for i, leaf in enumerate(subject.leaves)
        ]
        self.leaves = leaves
        self.kwargs = _structure.unflatten(
            subject.kwarg_spec, [_copy(v, dtype, False) for v in subject.kwarg_leaves]
        )
        self.inputs: list[_Tensor] = [leaves[i] for i in subject.float_positions]
        self.targets: list[_Tensor] = [*self.inputs, *subject.variables]
        self.tensors: list[_Tensor] = [leaves[i] for i in subject.tensor_positions]

    @property
    def args(self) -> tuple[Any, ...]:
        return self.subject.args_from(self.leaves)

    def call(self) -> Any:
        return self.subject.fn(*self.args, **self.kwargs)

    def call_with(self, tensors: Sequence[_Tensor]) -> Any:
        """Call with the positional tensor leaves replaced by `tensors` (for transforms)."""
        leaves = _structure.put(self.leaves, self.subject.tensor_positions, tensors)
        return self.subject.fn(*self.subject.args_from(leaves), **self.kwargs)


def _forward_f64(s: _Subject) -> tuple[_Inputs, list[_Tensor], list[_Tensor]]:
    """Fresh float64 inputs, the float outputs of one call on them, and upstreams drawn for
    them (seed 0)."""
    inputs = _Inputs(s, F64)
    outputs = _float_outputs(inputs.call())
    return inputs, outputs, _random_like(outputs, 0)


def autodiff_of_f(s: _Subject, upstreams: list[_Tensor]) -> list[_Tensor] | str:
    """The gradient autograd gives through f's own ops (its grad_fn ignored), in float64, for
    the upstreams of `_forward_f64`; or why there is none."""
    if s.cg is None:
        return "not a custom_gradient function: nothing to compare with"
    f = s.cg.__tf_compat_grad_calls__()
    with s.cast(F64):
        raw = _Inputs(s, F64)
        positional = raw.args[1:] if s.self_arg else raw.args
        with torch.enable_grad():
            result, _ = _run.split(f, _run.call_f(f, s.bound, positional, raw.kwargs))
        raw_outputs = [
            o for o in _structure.leaves(result) if isinstance(o, _Tensor) and o.is_floating_point()
        ]
        if len(raw_outputs) != len(upstreams) or not any(o.requires_grad for o in raw_outputs):
            return (
                "f's own ops do not reach its outputs differentiably "
                "(round, detach, integer ops, no_grad): only finite differences apply"
            )
        try:
            return _vjp(raw_outputs, upstreams, raw.targets)
        except RuntimeError as error:
            return f"f's own ops are not differentiable: {_first_line(error)}"


def _copy(value: Any, dtype: torch.dtype | None, grad: bool) -> Any:
    if not isinstance(value, _Tensor):
        return value
    copy = value.detach().clone(memory_format=torch.contiguous_format)
    if dtype is not None and copy.is_floating_point():
        copy = copy.to(dtype)
    return copy.requires_grad_(grad)


class _Subject:
    """The function under check with its example, and what the forward found out."""

    def __init__(self, fn: Callable[..., Any], example: Example, surrogate: str | None) -> None:
        self.fn = fn
        self.example = example
        self.cg, self.prefix, self.self_arg = _unwrap(fn)
        # Why the gradient deliberately differs from the true derivative, if it does (Note
        # [surrogates] in `finite_difference_checks.py`).
        self.surrogate = surrogate or (self.cg.surrogate if self.cg is not None else None)
        positional = example.args[1:] if self.self_arg else example.args
        self.leaves, self.spec = _structure.flatten(tuple(positional))
        self.kwarg_leaves, self.kwarg_spec = _structure.flatten(dict(example.kwargs))
        self.tensor_positions = [i for i, x in enumerate(self.leaves) if isinstance(x, _Tensor)]
        self.float_positions = [
            i for i in self.tensor_positions if self.leaves[i].is_floating_point()
        ]
        self.variables: list[torch.nn.Parameter] = []  # found by the forward check
        self.float_outputs = 0
        self.true_gradient: bool | None = None  # set by the numerical check
        # Whether the numerical check found the gradient wrong where finite differences and
        # autodiff of f agree; None when it did not run.
        self.wrong: bool | None = None
        self.names = self._names()

    @property
    def bound(self) -> Any:
        if self.prefix:
            return self.prefix[0]
        return self.example.args[0] if self.self_arg else _run.UNBOUND

    def args_from(self, leaves: Sequence[Any]) -> tuple[Any, ...]:
        positional = tuple(_structure.unflatten(self.spec, leaves))
        return (self.example.args[0], *positional) if self.self_arg else positional

    def _names(self) -> list[str]:
        target = self.cg.__tf_compat_grad_calls__() if self.cg is not None else self.fn
        bound = self.cg is not None and (bool(self.prefix) or self.self_arg)
        try:
            top = _run.positional_names(target, bound)
        except TypeError:  # unhashable callable
            top = ()
        if self.cg is None and self.self_arg:
            top = top[1:]
        return _structure.leaf_paths(self.spec, top)

    def target_name(self, i: int) -> str:
        if i < len(self.float_positions):
            return self.names[self.float_positions[i]] or "x"
        return f"variables[{i - len(self.float_positions)}]"

    def element(self, i: int, k: int, shape: torch.Size) -> str:
        name = self.target_name(i)
        if len(shape) == 0:
            return f"`{name}`"
        return f"`{name}[{', '.join(str(j) for j in _unravel(k, shape))}]`"

    def elements_of(self, tensors: Sequence[_Tensor]) -> Callable[[int, int], str]:
        """What names element k of `tensors[i]` (one tensor per target), for `_Diff`."""
        return lambda i, k: self.element(i, k, tensors[i].shape)

    def modules(self) -> list[torch.nn.Module]:
        candidates = [self.bound, *self.kwarg_leaves, getattr(self.fn, "__self__", None)]
        return [m for m in candidates if isinstance(m, torch.nn.Module)]

    @contextlib.contextmanager
    def cast(self, dtype: torch.dtype) -> Iterator[None]:
        """The Parameters and buffers f reads cast to `dtype` for the duration (restored)."""
        tensors: dict[int, _Tensor] = {id(v): v for v in self.variables}
        for module in self.modules():
            tensors.update((id(t), t) for t in module.parameters())
            tensors.update((id(t), t) for t in module.buffers())
        changed: list[tuple[_Tensor, _Tensor]] = []
        try:
            for t in tensors.values():
                if t.is_floating_point() and t.dtype != dtype:
                    changed.append((t, t.data))
                    t.data = t.data.to(dtype)
            yield
        finally:
            for t, data in reversed(changed):
                t.data = data


def decorated(obj: Any) -> CustomGradient[Any, Any] | None:
    """The `CustomGradient` behind obj: obj itself, or the one a decorated function or the
    function a class holds for a decorated method names (`__tf_compat_grad__`), also behind a
    bound method, a staticmethod or a classmethod (`__func__`); None for anything else."""
    for candidate in (obj, getattr(obj, "__func__", None)):
        if isinstance(candidate, CustomGradient):
            return candidate
        cg = wrapper_of(candidate)
        if isinstance(cg, CustomGradient):
            return cg
    return None


def _unwrap(
    fn: Callable[..., Any],
) -> tuple[CustomGradient[Any, Any] | None, tuple[Any, ...], bool]:
    """The `CustomGradient` behind `fn`, the bound instance, and whether `fn` is a method
    taken from its class (its first argument is then the instance)."""
    cg = decorated(fn)
    if cg is None:
        return None, (), False
    if isinstance(fn, types.MethodType):
        return cg, (fn.__self__,), False
    # The function a class holds for a decorated method (taken from the class, unbound): its
    # first argument is the instance. Not a staticmethod object, which `decorated` sees through.
    return cg, (), fn is cg._method


def _unravel(k: int, shape: Sequence[int]) -> tuple[int, ...]:
    index: list[int] = []
    for size in reversed(shape):
        index.append(k % size)
        k //= size
    return tuple(reversed(index))


def resolve_example(example: Any) -> Example:
    """An `Example` from what `custom_gradient(example=...)` holds."""
    if callable(example) and not isinstance(example, (Example, _Tensor)):
        with _seeded(0):
            example = example()
    if isinstance(example, Example):
        return example
    if isinstance(example, tuple):
        return Example(*example)
    return Example(example)


def location(fn: Callable[..., Any]) -> str:
    cg, _, _ = _unwrap(fn)
    target = inspect.unwrap(
        cg.__tf_compat_grad_calls__() if cg is not None else getattr(fn, "__func__", fn)
    )
    code = getattr(target, "__code__", None)
    if code is None:
        return ""
    path = code.co_filename
    try:
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            path = relative
    except ValueError:  # another drive
        pass
    return f"{path}:{code.co_firstlineno}"


def function_name(fn: Callable[..., Any]) -> str:
    cg, _, _ = _unwrap(fn)
    target = cg if cg is not None else fn
    return str(
        getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(fn)
    )
