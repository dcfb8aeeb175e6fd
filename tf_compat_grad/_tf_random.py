"""The random part of `tf_ops` (re-exported there): TensorFlow's random ops with their
arguments and distributions, drawing from torch's generator. TF's and torch's generators give
different numbers for the same seed, so a translation keeps the distribution, not the draws:
compare statistics, or pass the noise in where numbers must match."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._tf_math import convert_to_tensor


def _shape(shape: Any) -> tuple[int, ...]:
    """TF's `shape` argument (a list, a `torch.Size`, an int tensor) as a tuple."""
    if isinstance(shape, torch.Tensor):
        return tuple(int(d) for d in shape.flatten().tolist())
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(d) for d in shape)


def _dtype(dtype: torch.dtype | None) -> torch.dtype:
    return torch.float32 if dtype is None else dtype


def uniform(
    shape: Sequence[int] | torch.Tensor,
    minval: Any = 0,
    maxval: Any = None,
    dtype: torch.dtype | None = None,
    seed: int | None = None,
    name: str | None = None,
) -> torch.Tensor:
    """`tf.random.uniform`: floats uniform in [minval, maxval) (maxval 1 if None), float32
    unless `dtype=`, as `minval + u * (maxval - minval)` (so tensor bounds get gradients, as in
    TF); integers uniform in [minval, maxval) for an integer dtype (maxval required). `seed` is
    not used: seed torch (`torch.manual_seed`).

    >>> uniform([2, 3], minval=-0.5, maxval=0.5).shape
    torch.Size([2, 3])
    """
    dtype = _dtype(dtype)
    if not dtype.is_floating_point:
        if maxval is None:
            raise ValueError("tf.random.uniform: an integer dtype needs maxval, as in TF")
        return torch.randint(int(minval), int(maxval), _shape(shape), dtype=dtype)
    u = torch.rand(_shape(shape), dtype=dtype)
    low = convert_to_tensor(minval, dtype=dtype) if not isinstance(minval, torch.Tensor) else minval
    high = 1.0 if maxval is None else maxval
    return u * (high - low) + low


def normal(
    shape: Sequence[int] | torch.Tensor,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: torch.dtype | None = None,
    seed: int | None = None,
    name: str | None = None,
) -> torch.Tensor:
    """`tf.random.normal`: `mean + stddev * n`, n standard normal, float32 unless `dtype=`.

    >>> normal([4]).dtype
    torch.float32
    """
    n = torch.randn(_shape(shape), dtype=_dtype(dtype))
    drawn: torch.Tensor = n * stddev + mean
    return drawn


def truncated_normal(
    shape: Sequence[int] | torch.Tensor,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: torch.dtype | None = None,
    seed: int | None = None,
    name: str | None = None,
) -> torch.Tensor:
    """`tf.random.truncated_normal`: `mean + stddev * n`, n standard normal drawn again beyond
    two standard deviations, as in TF.

    >>> bool(truncated_normal([1000]).abs().max() <= 2)
    True
    """
    n = torch.nn.init.trunc_normal_(torch.empty(_shape(shape), dtype=_dtype(dtype)), 0, 1, -2, 2)
    drawn: torch.Tensor = n * stddev + mean
    return drawn
