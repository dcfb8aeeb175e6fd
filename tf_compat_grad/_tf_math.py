"""The math part of `tf_ops` (re-exported there): TF's dtype rules for Python values,
division, reductions over axes known at run time only, elementwise ops with TF's ties, norms,
counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

Axis = int | Sequence[int] | torch.Tensor | None


def _python_dtype(value: Any) -> torch.dtype | None:
    """TF's dtype for a Python number or nested list of them: bool, int32 (int64 if an int does
    not fit), float32, complex128; None if it is not one."""
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int32 if -(2**31) <= value < 2**31 else torch.int64
    if isinstance(value, float):
        return torch.float32
    if isinstance(value, complex):
        return torch.complex128
    if isinstance(value, (list, tuple)):
        found = [_python_dtype(v) for v in value]
        if not found or any(d is None for d in found):
            return None if found else torch.float32
        order = [torch.bool, torch.int32, torch.int64, torch.float32, torch.complex128]
        return max((d for d in found if d is not None), key=order.index)
    return None


def convert_to_tensor(
    value: Any, dtype: torch.dtype | None = None, dtype_hint: Any = None
) -> torch.Tensor:
    """`tf.convert_to_tensor`: a tensor is returned as it is; Python numbers and lists get TF's
    dtypes (ints int32, floats float32, not torch's int64 and default dtype); NumPy values keep
    theirs. Asking a tensor for another dtype raises, as in TF (use `tf.cast`).

    >>> convert_to_tensor(3).dtype, convert_to_tensor([1.0, 2]).dtype
    (torch.int32, torch.float32)
    >>> convert_to_tensor(torch.ones(2, dtype=torch.float64)).dtype
    torch.float64
    """
    if isinstance(value, torch.Tensor):
        if dtype is not None and value.dtype != dtype:
            raise ValueError(
                f"tf_compat_grad.tf_ops.convert_to_tensor: a {value.dtype} tensor was asked to "
                f"become {dtype}; TF refuses this too: cast it (`.to({dtype})`)"
            )
        return value
    inferred = _python_dtype(value)
    hint = dtype_hint if isinstance(dtype_hint, torch.dtype) else None
    if (
        dtype is None
        and hint is not None
        and inferred not in (None, torch.bool, torch.complex128)
        and hint != torch.bool
        and (hint.is_floating_point or not inferred.is_floating_point)
    ):  # the hint is taken where the value converts to it, as in TF
        inferred = hint
    floats = inferred is not None and inferred.is_floating_point
    if dtype is not None and floats and not (dtype.is_floating_point or dtype.is_complex):
        raise TypeError(
            f"tf_compat_grad.tf_ops.convert_to_tensor: cannot convert {value!r} to {dtype} "
            "(TF refuses to truncate Python floats); cast the tensor instead"
        )
    return torch.as_tensor(value, dtype=dtype or inferred)


def keras_clip(x: Any, min_value: Any, max_value: Any) -> torch.Tensor:
    """`tf.keras.backend.clip`: `clip_by_value`, with Keras's fixes first: a number `max_value`
    below a number `min_value` becomes `min_value`, None is unbounded.

    >>> keras_clip(torch.tensor([-2.0, 0.5, 3.0]), 0.0, None)
    tensor([0.0000, 0.5000, 3.0000])
    """
    numbers = isinstance(min_value, (int, float)) and isinstance(max_value, (int, float))
    if numbers and max_value < min_value:
        max_value = min_value
    lower = -math.inf if min_value is None else min_value
    upper = math.inf if max_value is None else max_value
    return clip_by_value(x, lower, upper)


def divide(x: Any, y: Any) -> torch.Tensor:
    """`tf.math.divide` (`truediv`, `x / y` on tensors): integers become floats as TF makes
    them, 8- and 16-bit ones float32, 32- and 64-bit ones float64 (torch: the default dtype).

    >>> divide(torch.tensor([1, 2], dtype=torch.int32), torch.tensor([2, 4], dtype=torch.int32))
    tensor([0.5000, 0.5000], dtype=torch.float64)
    """
    x = convert_to_tensor(x)
    y = convert_to_tensor(y, dtype_hint=x.dtype)
    if x.dtype != y.dtype:
        raise TypeError(
            f"tf_compat_grad.tf_ops.divide: x is {x.dtype} and y {y.dtype}; TF divides tensors "
            "of one dtype: cast one of them"
        )
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        wide = x.dtype in (torch.int32, torch.int64, torch.uint32, torch.uint64)
        target = torch.float64 if wide else torch.float32
        x, y = x.to(target), y.to(target)
    return torch.div(x, y)


def _reduce(
    op: Callable[..., torch.Tensor], input_tensor: Any, axis: Axis, keepdims: bool
) -> torch.Tensor:
    """`op` over TF's `axis`: None is every dimension, an empty list none (torch would reduce
    every dimension for an empty `dim`)."""
    x = convert_to_tensor(input_tensor)
    dims = list(range(x.dim())) if axis is None else dims_of(axis)
    return op(x, dim=dims, keepdim=keepdims) if dims else x


def dims_of(axis: int | Sequence[int] | torch.Tensor) -> list[int]:
    """TF's `axis` (an int, a sequence, an int tensor) as a list of dims."""
    if isinstance(axis, torch.Tensor):
        return [int(a) for a in axis.flatten().tolist()]
    return [int(axis)] if isinstance(axis, int) else [int(a) for a in axis]


def _prod(x: torch.Tensor, dim: list[int], keepdim: bool) -> torch.Tensor:
    for d in sorted((d % x.dim() for d in dim), reverse=True):  # torch.prod takes one dim
        x = torch.prod(x, dim=d, keepdim=True)
    return x if keepdim else x.squeeze(dim)


def reduce_sum(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_sum` over an axis known at run time only (`axis=list(range(1, n))`).

    >>> reduce_sum(torch.ones(2, 3), axis=[]).shape, reduce_sum(torch.ones(2, 3), [0, 1])
    (torch.Size([2, 3]), tensor(6.))
    """
    return _reduce(torch.sum, input_tensor, axis, keepdims)


def reduce_mean(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_mean`, as `reduce_sum`."""
    return _reduce(torch.mean, input_tensor, axis, keepdims)


def reduce_max(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_max`, as `reduce_sum` (ties share the gradient equally, as in TF)."""
    return _reduce(torch.amax, input_tensor, axis, keepdims)


def reduce_min(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_min`, as `reduce_max`."""
    return _reduce(torch.amin, input_tensor, axis, keepdims)


def reduce_prod(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_prod`, as `reduce_sum`."""
    return _reduce(_prod, input_tensor, axis, keepdims)


def reduce_logsumexp(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_logsumexp`, as `reduce_sum`."""
    return _reduce(torch.logsumexp, input_tensor, axis, keepdims)


def reduce_any(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_any`, as `reduce_sum`."""
    return _reduce(torch.any, input_tensor, axis, keepdims)


def reduce_all(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.reduce_all`, as `reduce_sum`."""
    return _reduce(torch.all, input_tensor, axis, keepdims)


def clip_by_norm(t: Any, clip_norm: Any, axes: Axis = None) -> torch.Tensor:
    """`tf.clip_by_norm`: TF's formula, `t * clip_norm / max(norm, clip_norm)`, with the L2 norm
    over every element (or `axes`), a tie's gradient going to the norm as TF's `maximum` gives
    it; an all-zero t stays zero.

    >>> clip_by_norm(torch.tensor([[3.0, 4.0], [0.3, 0.4]]), 1.0, axes=1)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    t = convert_to_tensor(t)
    dims = list(range(t.dim())) if axes is None else dims_of(axes)
    norm = torch.linalg.vector_norm(t, dim=dims, keepdim=True)
    result: torch.Tensor = t * clip_norm / torch.where(norm >= clip_norm, norm, clip_norm)
    return result


def l2_normalize(x: Any, axis: Axis = None, epsilon: float = 1e-12) -> torch.Tensor:
    """`tf.math.l2_normalize`: TF's formula, `x * rsqrt(max(sum(x**2), epsilon))`; epsilon
    bounds the squared norm, not the norm; a tie's gradient goes to the sum.

    >>> l2_normalize(torch.tensor([3.0, 4.0]))
    tensor([0.6000, 0.8000])
    """
    x = convert_to_tensor(x)
    dims = None if axis is None else dims_of(axis)
    squares = torch.sum(torch.square(x), dim=dims, keepdim=True)
    return torch.mul(x, torch.rsqrt(torch.where(squares >= epsilon, squares, epsilon)))


def _operands(x: Any, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Two operands as TF converts them: a Python number takes the other's dtype."""
    if isinstance(x, torch.Tensor) and not isinstance(y, torch.Tensor):
        return x, torch.as_tensor(y, dtype=x.dtype)
    if isinstance(y, torch.Tensor) and not isinstance(x, torch.Tensor):
        return torch.as_tensor(x, dtype=y.dtype), y
    return convert_to_tensor(x), convert_to_tensor(y)


def div_v1(x: Any, y: Any) -> torch.Tensor:
    """`tf.compat.v1.div`, Python 2's `/`: floor division of integers, true division otherwise
    (a Python number takes the other operand's dtype, as in TF).

    >>> div_v1(torch.tensor([7, -7], dtype=torch.int32), 2), div_v1(torch.tensor([7.0]), 2)
    (tensor([ 3, -4], dtype=torch.int32), tensor([3.5000]))
    """
    x, y = _operands(x, y)
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return torch.div(x, y)
    return torch.floor_divide(x, y)


def maximum(x: Any, y: Any) -> torch.Tensor:
    """`tf.maximum`: on ties the whole gradient goes to x (`torch.maximum` splits it); a NaN
    in x or y gives NaN, as in TF (the gradient at a NaN x goes to x here, to y in TF).

    >>> maximum(torch.tensor([1.0, 2.0]), 2.0)
    tensor([2., 2.])
    """
    x, y = _operands(x, y)
    return torch.where((x >= y) | x.isnan(), x, y)


def minimum(x: Any, y: Any) -> torch.Tensor:
    """`tf.minimum`: as `maximum`, ties to x.

    >>> minimum(torch.tensor([1.0, 2.0]), 2.0)
    tensor([1., 2.])
    """
    x, y = _operands(x, y)
    return torch.where((x <= y) | x.isnan(), x, y)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any) -> torch.Tensor:
    """`tf.clip_by_value`: the gradient passes at the bounds, as in TF (`torch.clamp` passes
    it there up to torch 2.13 and not from 2.14).

    >>> clip_by_value(torch.tensor([-2.0, 0.5, 3.0]), -1.0, 1.0)
    tensor([-1.0000,  0.5000,  1.0000])
    """
    t = convert_to_tensor(t)
    low, high = _operands(t, clip_value_min)[1], _operands(t, clip_value_max)[1]
    return torch.where(t < low, low, torch.where(t > high, high, t))


def divide_no_nan(x: Any, y: Any) -> torch.Tensor:
    """`tf.math.divide_no_nan`: 0 where y == 0, with a zero (not NaN) gradient there.

    >>> divide_no_nan(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0]))
    tensor([0.0000, 0.5000])
    """
    x, y = _operands(x, y)
    return torch.where(y == 0, 0.0, x / torch.where(y == 0, 1.0, y))


def bincount(
    arr: Any, minlength: Any = None, maxlength: Any = None, dtype: torch.dtype = torch.int32
) -> torch.Tensor:
    """`tf.math.bincount` without weights: how often each value 0, 1, ... occurs in `arr`
    (flattened; a float `arr` is cast to int32 first), at least `minlength` and at most
    `maxlength` counts (larger values are not counted), as `dtype` (int32 unless given).
    A negative value raises, as in TF.

    >>> bincount(torch.tensor([1, 1, 3]), minlength=5)
    tensor([0, 2, 0, 1, 0], dtype=torch.int32)
    >>> bincount(torch.tensor([1, 1, 3]), maxlength=2, dtype=torch.float64)
    tensor([0., 2.], dtype=torch.float64)
    """
    flat = convert_to_tensor(arr).reshape(-1)
    if flat.is_floating_point() or flat.dtype == torch.bool:
        flat = flat.to(torch.int32)
    if flat.numel() and int(flat.min()) < 0:
        raise ValueError(
            f"tf_compat_grad.tf_ops.bincount: arr holds {int(flat.min())}; TF's bincount counts "
            "non-negative values only (InvalidArgumentError: Input arr must be non-negative)"
        )
    size = int(flat.max()) + 1 if flat.numel() else 0
    size = max(size, 0 if minlength is None else int(minlength))
    if maxlength is not None:
        size = min(size, int(maxlength))
    return torch.bincount(flat[flat < size].long(), minlength=size).to(dtype)


def _variance(x: torch.Tensor, dim: list[int], keepdim: bool) -> torch.Tensor:
    deviations = torch.square(x - torch.mean(x, dim=dim, keepdim=True))
    return torch.mean(deviations, dim=dim, keepdim=keepdim)


def reduce_variance(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.math.reduce_variance`: TF's formula, the mean of squared deviations (population
    variance), so that second derivatives match too.

    >>> reduce_variance(torch.tensor([1.0, 3.0]))
    tensor(1.)
    """
    return _reduce(_variance, input_tensor, axis, keepdims)


def reduce_std(input_tensor: Any, axis: Axis = None, keepdims: bool = False) -> torch.Tensor:
    """`tf.math.reduce_std`: the square root of `reduce_variance`.

    >>> reduce_std(torch.tensor([1.0, 3.0]))
    tensor(1.)
    """
    return torch.sqrt(reduce_variance(input_tensor, axis, keepdims))


def where_v1(condition: Any, x: Any, y: Any) -> torch.Tensor:
    """`tf.compat.v1.where(condition, x, y)`, which does not broadcast: x and y of one shape,
    and the condition of that shape too, or a vector that picks rows.

    >>> where_v1(torch.tensor([True, False]), torch.ones(2, 2), torch.zeros(2, 2))
    tensor([[1., 1.],
            [0., 0.]])
    """
    condition = convert_to_tensor(condition)
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    if x.shape != y.shape or not (
        condition.shape == x.shape
        or (condition.dim() == 1 and x.dim() >= 1 and condition.shape[0] == x.shape[0])
    ):
        raise ValueError(
            f"tf_compat_grad.tf_ops.where_v1: condition {tuple(condition.shape)}, x "
            f"{tuple(x.shape)}, y {tuple(y.shape)}: TF1's where needs x and y of one shape and "
            "the condition of that shape or a vector over their first dimension (TF raises too)"
        )
    if condition.shape != x.shape:
        condition = condition.reshape(-1, *[1] * (x.dim() - 1))
    return torch.where(condition, x, y)
