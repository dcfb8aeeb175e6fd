"""The walk of the autograd graph from f's outputs (Note [lost gradients] in `_captures.py`):
the leaves that require grad it reaches other than through the given stops (the inputs' and
the variables' edges), and which of the stops it reached. `settle` asks it which gradients would
be lost and which tensors in Parameter places the outputs reach, `_places` which variables a
parametrized weight is computed from, and a refusal which named tensor a lost leaf is reached
through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from . import _structure

_Tensor = torch.Tensor


def tensors(result: Any) -> list[_Tensor]:
    """The tensors among the leaves of `result` (f's outputs: the walk's roots)."""
    if type(result) is _Tensor:
        return [result]
    return [t for t in _structure.leaves(result) if isinstance(t, _Tensor)]


def among(tensor: _Tensor, tensors: Iterable[_Tensor]) -> bool:
    """Whether `tensor` is one of `tensors`, by identity."""
    return any(tensor is t for t in tensors)


def walk(roots: Sequence[_Tensor], stops: Sequence[_Tensor]) -> tuple[list[_Tensor], set[int]]:
    """The leaves requiring grad that the roots' graph reaches other than through one of the
    `stops` (first reached first), and the indices of the stops it reached."""
    # A stop is the edge into its producer, or for a leaf its id (an int, never an edge).
    stop_at: dict[Any, int] = {}
    for i, tensor in enumerate(stops):
        producer = tensor.grad_fn
        stop_at.setdefault(id(tensor) if producer is None else (producer, tensor.output_nr), i)
    lost: dict[int, _Tensor] = {}
    hit: set[int] = set()
    seen: set[Any] = set()
    leaves = [root for root in roots if root.grad_fn is None]
    pending: list[tuple[Any, int]] = [
        (root.grad_fn, root.output_nr) for root in reversed(roots) if root.grad_fn is not None
    ]
    while pending:  # depth first, each node's inputs in order
        edge = pending.pop()
        node: Any = edge[0]
        if node is None:
            continue
        stop = stop_at.get(edge)
        if stop is not None:
            hit.add(stop)
        elif node not in seen:
            seen.add(node)
            if type(node) is _ACCUMULATE:
                leaves.append(node.variable)
            else:
                pending.extend(reversed(node.next_functions))
    for leaf in leaves:
        stop = stop_at.get(id(leaf))
        if stop is not None:
            hit.add(stop)
        elif leaf.requires_grad:
            lost.setdefault(id(leaf), leaf)
    return list(lost.values()), hit


# The autograd node of a leaf: its `variable` is the leaf.
_ACCUMULATE: Any = type(torch.empty(0, requires_grad=True).view(0).grad_fn.next_functions[0][0])  # type: ignore[union-attr]
