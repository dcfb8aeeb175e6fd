"""TensorFlow ops with TensorFlow's semantics, written in torch: what `python -m tf_compat_grad
port` calls where one short torch expression would not say the same thing.

Each function takes TensorFlow's arguments (its names and defaults), computes TF's formula (so
values, gradients and second derivatives are TF's, checked against numbers recorded from
TensorFlow 2.21 in tests/test_port.py), and returns a torch tensor. Layouts are TF's: images are
NHWC and filters `(height, width, in, out)` unless `data_format="NCHW"`.

>>> import torch
>>> from tf_compat_grad import tf_ops
>>> tf_ops.clip_by_norm(torch.tensor([3.0, 4.0]), 1.0)
tensor([0.6000, 0.8000])
>>> tf_ops.convert_to_tensor([1, 2]).dtype, tf_ops.convert_to_tensor(0.5).dtype
(torch.int32, torch.float32)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

__all__ = [
    "avg_pool2d",
    "batch_normalization",
    "clip_by_norm",
    "conv2d",
    "convert_to_tensor",
    "divide",
    "l2_normalize",
    "max_pool2d",
    "reduce_all",
    "reduce_any",
    "reduce_logsumexp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "sparse_softmax_cross_entropy_with_logits",
    "where_v1",
]

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
    dims = list(range(x.dim())) if axis is None else _dims(axis)
    return op(x, dim=dims, keepdim=keepdims) if dims else x


def _dims(axis: int | Sequence[int] | torch.Tensor) -> list[int]:
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
    dims = list(range(t.dim())) if axes is None else _dims(axes)
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
    dims = None if axis is None else _dims(axis)
    squares = torch.sum(torch.square(x), dim=dims, keepdim=True)
    return torch.mul(x, torch.rsqrt(torch.where(squares >= epsilon, squares, epsilon)))


def batch_normalization(
    x: torch.Tensor,
    mean: Any,
    variance: Any,
    offset: Any,
    scale: Any,
    variance_epsilon: float,
) -> torch.Tensor:
    """`tf.nn.batch_normalization`: `x * inv + (offset - mean * inv)` with
    `inv = scale * rsqrt(variance + variance_epsilon)`, TF's order of operations.

    >>> batch_normalization(torch.tensor([1.0, 3.0]), 2.0, 1.0, None, None, 0.0)
    tensor([-1.,  1.])
    """
    inv = torch.rsqrt(convert_to_tensor(variance) + variance_epsilon)
    if scale is not None:
        inv = inv * scale
    shift = offset - mean * inv if offset is not None else -mean * inv
    return torch.add(x * inv, shift)


def sparse_softmax_cross_entropy_with_logits(labels: Any, logits: torch.Tensor) -> torch.Tensor:
    """`tf.nn.sparse_softmax_cross_entropy_with_logits`: `-log_softmax(logits)[label]` over
    the last axis, for logits of any rank; the gradient `softmax - one_hot(label)`, as TF's.

    >>> sparse_softmax_cross_entropy_with_logits(torch.tensor([0]), torch.zeros(1, 2))
    tensor([0.6931])
    """
    index = convert_to_tensor(labels).long().unsqueeze(-1)
    return -torch.gather(torch.log_softmax(logits, dim=-1), -1, index).squeeze(-1)


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


# --- convolutions and pools, TF's layouts and padding ---------------------------------------


def same_padding(
    size: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
) -> list[int]:
    """TF's "SAME" padding as `F.pad` takes it (the last dimension first): the output is
    `ceil(in / stride)` long, and an odd total pads one more at the end.

    >>> same_padding([5, 5], [3, 3], [2, 2], [1, 1])
    [1, 1, 1, 1]
    """
    pads: list[int] = []
    for n, k, s, d in reversed(list(zip(size, kernel, strides, dilation, strict=True))):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads += [total // 2, total - total // 2]
    return pads


def _spatial(value: int | Sequence[int] | None, data_format: str) -> list[int]:
    """TF's `strides`/`ksize`/`dilations` (one int, two, or four with the batch and channel
    entries) as the two spatial ones."""
    if value is None:
        return [1, 1]
    if isinstance(value, int):
        return [value, value]
    values = list(value)
    if len(values) == 1:
        return values * 2
    if len(values) == 4:
        return values[1:3] if data_format == "NHWC" else values[2:4]
    return values


def _nchw(x: torch.Tensor, data_format: str) -> torch.Tensor:
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"tf_compat_grad.tf_ops: data_format {data_format!r} is not NHWC or NCHW")
    return x.permute(0, 3, 1, 2) if data_format == "NHWC" else x


def _back(y: torch.Tensor, data_format: str) -> torch.Tensor:
    return y.permute(0, 2, 3, 1) if data_format == "NHWC" else y


def _padded(
    x: torch.Tensor,
    padding: str | Sequence[Any],
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    value: float = 0.0,
) -> torch.Tensor:
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return x
        if padding.upper() != "SAME":
            raise ValueError(f"tf_compat_grad.tf_ops: padding {padding!r} is not SAME or VALID")
        return F.pad(x, same_padding(x.shape[2:], kernel, strides, dilations), value=value)
    raise NotImplementedError(
        "tf_compat_grad.tf_ops: explicit padding lists are not translated; pad with F.pad first"
    )


def conv2d(
    input: torch.Tensor,
    filters: torch.Tensor,
    strides: int | Sequence[int],
    padding: str,
    data_format: str = "NHWC",
    dilations: int | Sequence[int] | None = None,
) -> torch.Tensor:
    """`tf.nn.conv2d`: NHWC input and `(height, width, in, out)` filters, as TF lays them out,
    TF's SAME padding (one more at the end when odd).

    >>> conv2d(torch.ones(1, 4, 4, 1), torch.ones(3, 3, 1, 1), 2, "SAME")[0, ..., 0]
    tensor([[9., 6.],
            [6., 4.]])
    """
    stride, dilation = _spatial(strides, data_format), _spatial(dilations, data_format)
    x = _padded(_nchw(input, data_format), padding, list(filters.shape[:2]), stride, dilation)
    y = F.conv2d(x, filters.permute(3, 2, 0, 1), stride=stride, dilation=dilation)
    return _back(y, data_format)


def max_pool2d(
    input: torch.Tensor,
    ksize: int | Sequence[int],
    strides: int | Sequence[int],
    padding: str,
    data_format: str = "NHWC",
) -> torch.Tensor:
    """`tf.nn.max_pool2d` (and `tf.nn.max_pool` on 4-D input): NHWC, TF's SAME padding (the
    padding never wins).

    >>> max_pool2d(torch.arange(9.0).reshape(1, 3, 3, 1), 2, 2, "SAME")[0, ..., 0]
    tensor([[4., 5.],
            [7., 8.]])
    """
    kernel, stride = _spatial(ksize, data_format), _spatial(strides, data_format)
    x = _padded(_nchw(input, data_format), padding, kernel, stride, [1, 1], -math.inf)
    return _back(F.max_pool2d(x, kernel, stride), data_format)


def avg_pool2d(
    input: torch.Tensor,
    ksize: int | Sequence[int],
    strides: int | Sequence[int],
    padding: str,
    data_format: str = "NHWC",
) -> torch.Tensor:
    """`tf.nn.avg_pool2d` (and `tf.nn.avg_pool` on 4-D input): NHWC; with SAME padding each
    window averages only the elements inside the input, as TF does.

    >>> avg_pool2d(torch.arange(9.0).reshape(1, 3, 3, 1), 2, 2, "SAME")[0, ..., 0]
    tensor([[2.0000, 3.5000],
            [6.5000, 8.0000]])
    """
    kernel, stride = _spatial(ksize, data_format), _spatial(strides, data_format)
    x = _nchw(input, data_format)
    total = F.avg_pool2d(
        _padded(x, padding, kernel, stride, [1, 1]), kernel, stride, divisor_override=1
    )
    ones = torch.ones_like(x[:1, :1])
    count = F.avg_pool2d(
        _padded(ones, padding, kernel, stride, [1, 1]), kernel, stride, divisor_override=1
    )
    return _back(total / count, data_format)
