"""The `tf.nn` part of `tf_ops` (re-exported there): activations and losses with TF's
formulas, batch normalization and moments, NHWC convolutions and pools with TF's padding."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ._tf_math import convert_to_tensor, dims_of


def selu(features: torch.Tensor) -> torch.Tensor:
    """`tf.nn.selu` as TF's kernel computes it: at 0 the gradient is `scale` (the positive
    branch), where `torch.selu`'s is `scale * alpha`.

    >>> selu(torch.tensor([-1.0, 0.0, 1.0]))
    tensor([-1.1113,  0.0000,  1.0507])
    """
    return torch.where(
        features < 0,
        1.7580993408473768 * (torch.exp(features) - 1.0),
        1.0507009873554805 * features,
    )


def gelu(features: torch.Tensor, approximate: bool = False) -> torch.Tensor:
    """`tf.nn.gelu` with TF's formulas, whose constants 1/sqrt(2) (erf form, the default) and
    0.044715 (tanh form) are rounded to float32 also for float64 features.

    >>> gelu(torch.tensor([1.0]))
    tensor([0.8413])
    """
    if approximate:
        inner = 0.7978845608028654 * (features + 0.044714998453855515 * torch.pow(features, 3))
        return 0.5 * features * (1.0 + torch.tanh(inner))
    return 0.5 * features * (1.0 + torch.erf(features * 0.7071067690849304))


def softmax(logits: torch.Tensor, axis: Any = None) -> torch.Tensor:
    """`tf.nn.softmax` over an axis known at run time only (an int, a 0-d or 1-element int
    tensor); None is the last axis, as in TF.

    >>> softmax(torch.zeros(2, 2), None)
    tensor([[0.5000, 0.5000],
            [0.5000, 0.5000]])
    """
    return torch.softmax(logits, dim=_one_axis(axis, "softmax"))


def log_softmax(logits: torch.Tensor, axis: Any = None) -> torch.Tensor:
    """`tf.nn.log_softmax` over an axis known at run time only, as `softmax`."""
    return torch.log_softmax(logits, dim=_one_axis(axis, "log_softmax"))


def _one_axis(axis: Any, op: str) -> int:
    if axis is None:
        return -1
    dims = dims_of(axis)
    if len(dims) != 1:
        raise ValueError(f"tf_compat_grad.tf_ops.{op}: TF takes one axis, got {axis!r}")
    return dims[0]


def sigmoid_cross_entropy_with_logits(labels: Any, logits: torch.Tensor) -> torch.Tensor:
    """`tf.nn.sigmoid_cross_entropy_with_logits`: TF's formula, `max(x, 0) - x * z +
    log1p(exp(-abs(x)))` with its `where`s (at x = 0 the gradient is 0.5 - z), the labels
    differentiable too.

    >>> sigmoid_cross_entropy_with_logits(torch.tensor([1.0]), torch.tensor([0.0]))
    tensor([0.6931])
    """
    positive = logits >= 0
    relu_logits = torch.where(positive, logits, 0.0)
    negative_abs = torch.where(positive, -logits, logits)
    return torch.sub(relu_logits, logits * labels) + torch.log1p(torch.exp(negative_abs))


def moments(
    x: torch.Tensor, axes: int | Sequence[int], shift: None = None, keepdims: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """`tf.nn.moments`: (mean, variance) with TF's formula, the variance's mean a stopped
    gradient (which shows in second derivatives).

    >>> moments(torch.tensor([1.0, 3.0]), axes=[0])
    (tensor(2.), tensor(1.))
    """
    dims = dims_of(axes)
    mean = torch.mean(x, dim=dims, keepdim=True)
    variance = torch.mean(torch.square(x - mean.detach()), dim=dims, keepdim=True)
    if keepdims:
        return mean, variance
    return mean.squeeze(dims), variance.squeeze(dims)


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


class _SoftmaxCrossEntropy(torch.autograd.Function):
    """TF's `SoftmaxCrossEntropyWithLogits` op: its gradients are the kernel's `softmax -
    labels` for the logits (no dependence on the labels, as TF's registered gradient has none)
    and `-log_softmax(logits)` for the labels, both differentiable again in the logits."""

    @staticmethod
    def forward(ctx: Any, labels: torch.Tensor, logits: torch.Tensor, axis: int) -> torch.Tensor:
        ctx.save_for_backward(labels, logits)
        ctx.axis = axis
        return -torch.sum(labels * torch.log_softmax(logits, dim=axis), dim=axis)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        labels, logits = ctx.saved_tensors
        upstream = grad.unsqueeze(ctx.axis)
        # no dependence on the labels, but a zero gradient for them (not None), as TF gives
        constant = labels.detach() + 0 * labels
        grad_logits = upstream * (torch.softmax(logits, dim=ctx.axis) - constant)
        return upstream * -torch.log_softmax(logits, dim=ctx.axis), grad_logits, None


def softmax_cross_entropy_with_logits(
    labels: Any, logits: torch.Tensor, axis: int = -1
) -> torch.Tensor:
    """`tf.nn.softmax_cross_entropy_with_logits` (TF2's): `-sum(labels * log_softmax(logits))`
    over `axis`, with TF's gradients: `softmax - labels` for the logits (TF's kernel; the true
    derivative when each row of labels sums to 1, as probabilities do) and `-log_softmax` for
    the labels; their own gradients as TF's (none in the labels).

    >>> softmax_cross_entropy_with_logits(torch.tensor([[1.0, 0.0]]), torch.zeros(1, 2))
    tensor([0.6931])
    """
    target = convert_to_tensor(labels).to(logits.dtype)
    loss: torch.Tensor = _SoftmaxCrossEntropy.apply(target, logits, axis)  # type: ignore[no-untyped-call]
    return loss


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

    def summed(t: torch.Tensor) -> torch.Tensor:  # each window's sum over the input's elements
        padded = _padded(t, padding, kernel, stride, [1, 1])
        return F.avg_pool2d(padded, kernel, stride, divisor_override=1)

    return _back(summed(x) / summed(torch.ones_like(x[:1, :1])), data_format)
