"""The linear-algebra and scan part of `tf_ops` (re-exported there): TF's `svd` (its output
order and `v`, not `v^H`), `band_part`, and `cumsum`/`cumprod` with `exclusive`, `reverse` and
an axis known at run time only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._tf_math import convert_to_tensor


def svd(
    tensor: Any, full_matrices: bool = False, compute_uv: bool = True
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`tf.linalg.svd`: `(s, u, v)` with `tensor = u @ diag(s) @ v^H` (torch's `linalg.svd`
    returns `(U, S, Vh)`); `s` alone if not `compute_uv`. Singular values descending, in both;
    the signs of singular vectors are the LAPACK routine's, which may differ from TF's (products
    such as `u @ diag(s) @ v^H`, and `det(u) * det(v)`, do not depend on them).

    >>> s, u, v = svd(torch.tensor([[3.0, 0.0], [0.0, -2.0]]))
    >>> s, torch.allclose(u @ torch.diag(s) @ v.mH, torch.tensor([[3.0, 0.0], [0.0, -2.0]]))
    (tensor([3., 2.]), True)
    """
    x = convert_to_tensor(tensor)
    if not compute_uv:
        values: torch.Tensor = torch.linalg.svdvals(x)
        return values
    u, s, vh = torch.linalg.svd(x, full_matrices=full_matrices)
    return s, u, vh.mH


def band_part(input: Any, num_lower: Any, num_upper: Any) -> torch.Tensor:
    """`tf.linalg.band_part`: the elements of the last two dimensions with `i - j <= num_lower`
    and `j - i <= num_upper` kept (a negative bound keeps that whole triangle), the others 0.

    >>> band_part(torch.ones(3, 3), 0, -1)
    tensor([[1., 1., 1.],
            [0., 1., 1.],
            [0., 0., 1.]])
    """
    x = convert_to_tensor(input)
    rows = torch.arange(x.shape[-2], device=x.device)[:, None]
    cols = torch.arange(x.shape[-1], device=x.device)[None, :]
    lower, upper = int(num_lower), int(num_upper)
    keep = torch.ones_like(rows - cols, dtype=torch.bool)
    if lower >= 0:
        keep = keep & (rows - cols <= lower)
    if upper >= 0:
        keep = keep & (cols - rows <= upper)
    return torch.where(keep, x, torch.zeros((), dtype=x.dtype, device=x.device))


def _scan(
    op: Callable[..., torch.Tensor], start: float, x: Any, axis: Any, exclusive: bool, reverse: bool
) -> torch.Tensor:
    x = convert_to_tensor(x)
    dim = int(axis) % max(x.dim(), 1)
    if reverse:
        x = torch.flip(x, [dim])
    y = op(x, dim=dim)
    if exclusive and x.shape[dim] > 0:
        first = torch.full_like(y.narrow(dim, 0, 1), start)
        y = torch.cat([first, y.narrow(dim, 0, x.shape[dim] - 1)], dim=dim)
    return torch.flip(y, [dim]) if reverse else y


def cumsum(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False) -> torch.Tensor:
    """`tf.cumsum`: `exclusive` starts from 0 (each element left out of its own sum),
    `reverse` sums from the end; `axis` may be known at run time only.

    >>> cumsum(torch.tensor([1.0, 2.0, 3.0]), exclusive=True, reverse=True)
    tensor([5., 3., 0.])
    """
    return _scan(torch.cumsum, 0.0, x, axis, exclusive, reverse)


def cumprod(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False) -> torch.Tensor:
    """`tf.math.cumprod`, as `cumsum` (`exclusive` starts from 1).

    >>> cumprod(torch.tensor([1.0, 2.0, 3.0]), exclusive=True)
    tensor([1., 1., 2.])
    """
    return _scan(torch.cumprod, 1.0, x, axis, exclusive, reverse)
