"""The linear-algebra, scan and indexing part of `tf_ops` (re-exported there): TF's `svd` (its
output order and `v`, not `v^H`), `band_part`, `cumsum`/`cumprod` with `exclusive`, `reverse`
and an axis known at run time only, `gather` along an axis, `gather_nd`, `scatter_nd` and
`clip_by_global_norm`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

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


def _indices(indices: Any) -> torch.Tensor:
    return torch.as_tensor(indices).long()


def gather(
    params: Any, indices: Any, validate_indices: Any = None, axis: Any = None, batch_dims: int = 0
) -> torch.Tensor:
    """`tf.gather` along `axis` (0 if None): the result's shape is `params.shape[:axis] +
    indices.shape + params.shape[axis + 1:]`; repeated indices sum their gradients, as in TF.

    >>> gather(torch.tensor([[1, 2, 3], [4, 5, 6]]), [[2, 0]], axis=1).tolist()
    [[[3, 1]], [[6, 4]]]
    """
    if batch_dims:
        raise NotImplementedError("tf_compat_grad.tf_ops.gather: batch_dims is not translated")
    x, index = convert_to_tensor(params), _indices(indices)
    dim = int(axis or 0) % x.dim()
    found = torch.index_select(x, dim, index.flatten().to(x.device))
    return found.reshape(*x.shape[:dim], *index.shape, *x.shape[dim + 1 :])


def gather_nd(params: Any, indices: Any, batch_dims: int = 0) -> torch.Tensor:
    """`tf.gather_nd`: the slices of `params` at the index vectors of `indices`' last dimension.

    >>> gather_nd(torch.tensor([[1, 2], [3, 4]]), [[1, 0], [0, 1]]).tolist()
    [3, 2]
    """
    if batch_dims:
        raise NotImplementedError("tf_compat_grad.tf_ops.gather_nd: batch_dims is not translated")
    x, index = convert_to_tensor(params), _indices(indices)
    return x[tuple(index.unbind(-1))]


def scatter_nd(indices: Any, updates: Any, shape: Any) -> torch.Tensor:
    """`tf.scatter_nd`: zeros of `shape` with `updates` added at the index vectors (repeated
    indices sum, as in TF).

    >>> scatter_nd([[1], [3], [1]], torch.tensor([1.0, 2.0, 3.0]), [4])
    tensor([0., 4., 0., 2.])
    """
    values = convert_to_tensor(updates)
    size = [int(d) for d in (shape.tolist() if isinstance(shape, torch.Tensor) else shape)]
    zeros = torch.zeros(size, dtype=values.dtype, device=values.device)
    return zeros.index_put(tuple(_indices(indices).unbind(-1)), values, accumulate=True)


def tensor_scatter_nd_update(tensor: Any, indices: Any, updates: Any) -> torch.Tensor:
    """`tf.tensor_scatter_nd_update`: `tensor` with the slices at the index vectors replaced
    by `updates` (their gradients to `updates`; none to the replaced elements).

    >>> tensor_scatter_nd_update(torch.zeros(3), [[0], [2]], torch.tensor([1.0, 2.0]))
    tensor([1., 0., 2.])
    """
    x = convert_to_tensor(tensor)
    return x.index_put(tuple(_indices(indices).unbind(-1)), convert_to_tensor(updates))


def tensor_scatter_nd_add(tensor: Any, indices: Any, updates: Any) -> torch.Tensor:
    """`tf.tensor_scatter_nd_add`: `tensor` with `updates` added at the index vectors
    (repeated indices sum, as in TF)."""
    x = convert_to_tensor(tensor)
    index = tuple(_indices(indices).unbind(-1))
    return x.index_put(index, convert_to_tensor(updates), accumulate=True)


def clip_by_global_norm(
    t_list: Any, clip_norm: Any, use_norm: Any = None
) -> tuple[list[torch.Tensor | None], torch.Tensor]:
    """`tf.clip_by_global_norm`: each tensor times `clip_norm / max(global_norm, clip_norm)`
    (None stays None), and the global norm, as TF computes them.

    >>> clipped, norm = clip_by_global_norm([torch.tensor([3.0]), torch.tensor([4.0])], 1.0)
    >>> [c.item() for c in clipped], norm.item()
    ([0.6000000238418579, 0.800000011920929], 5.0)
    """
    tensors = [None if t is None else convert_to_tensor(t) for t in t_list]
    present = [t for t in tensors if t is not None]
    norm = (
        torch.sqrt(sum((torch.sum(t * t) for t in present), torch.tensor(0.0)))
        if use_norm is None
        else convert_to_tensor(use_norm)
    )
    limit = convert_to_tensor(clip_norm, dtype=norm.dtype)
    scale = limit * torch.minimum(1.0 / norm, torch.ones_like(norm) / limit) + (norm - norm)
    return [None if t is None else t * scale.to(t.dtype) for t in tensors], norm


def top_k(input: Any, k: int = 1, sorted: bool = True, index_type: Any = None) -> TopK:
    """`tf.math.top_k`: `(values, indices)` of the k largest along the last dimension, ties in
    index order as TF breaks them (a stable sort; `torch.topk` leaves ties unspecified), int32
    indices as TF.

    >>> top_k(torch.tensor([1.0, 3.0, 3.0, 2.0]), k=2)
    TopK(values=tensor([3., 3.]), indices=tensor([1, 2], dtype=torch.int32))
    """
    x = convert_to_tensor(input)
    values, indices = torch.sort(x, dim=-1, descending=True, stable=True)
    dtype = torch.int32 if index_type is None else index_type
    return TopK(values[..., : int(k)], indices[..., : int(k)].to(dtype))


class TopK(NamedTuple):
    """`tf.math.top_k`'s result: `values` and `indices`, as TF names them."""

    values: torch.Tensor
    indices: torch.Tensor
