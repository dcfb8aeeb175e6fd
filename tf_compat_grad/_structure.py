"""Flattening nested arguments and outputs the way `tf.nest` does.

Containers are lists, tuples, namedtuples and dicts (any `dict` subclass); everything else,
`None` included, is a leaf. Dicts flatten in sorted key order and are rebuilt in their original
key order, namedtuples in field order, lists and tuples in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

# A spec is either `LEAF` or `(kind, aux, child_specs)`.
LEAF = None
_LIST, _TUPLE, _NAMEDTUPLE, _DICT = range(4)

Spec = Any
_CONTAINERS = (list, tuple, dict)


def _flat(sequence: list[Any] | tuple[Any, ...]) -> bool:
    """No container inside."""
    for item in sequence:  # noqa: SIM110 (a loop costs less than all() and a generator)
        if isinstance(item, _CONTAINERS):
            return False
    return True


def tuple_spec(n: int) -> Spec:
    """The spec of a tuple of `n` leaves."""
    return (_TUPLE, None, (LEAF,) * n)


def flatten(tree: Any) -> tuple[list[Any], Spec]:
    """Return the leaves of `tree` in `tf.nest.flatten` order, and a spec to rebuild it."""
    if type(tree) is tuple and _flat(tree):
        return list(tree), tuple_spec(len(tree))  # the usual positional arguments
    leaves: list[Any] = []
    spec = _flatten_into(tree, leaves)
    return leaves, spec


def _flatten_into(tree: Any, leaves: list[Any]) -> Spec:
    if not isinstance(tree, _CONTAINERS):
        leaves.append(tree)
        return LEAF
    kind = type(tree)
    if kind is list:
        return (_LIST, None, tuple(_flatten_into(x, leaves) for x in tree))
    if kind is tuple:
        return (_TUPLE, None, tuple(_flatten_into(x, leaves) for x in tree))
    if isinstance(tree, dict):
        try:
            keys = sorted(tree)
        except TypeError:  # keys of mixed types: tf.nest raises, we keep insertion order
            keys = list(tree)
        return (
            _DICT,
            (kind, keys, list(tree)),
            tuple(_flatten_into(tree[k], leaves) for k in keys),
        )
    if isinstance(tree, tuple) and hasattr(kind, "_fields"):  # a namedtuple
        return (_NAMEDTUPLE, kind, tuple(_flatten_into(x, leaves) for x in tree))
    if isinstance(tree, list):
        return (_LIST, None, tuple(_flatten_into(x, leaves) for x in tree))
    return (_TUPLE, None, tuple(_flatten_into(x, leaves) for x in tree))


def leaves(tree: Any) -> list[Any]:
    """The leaves of `tree` in `tf.nest.flatten` order."""
    if not isinstance(tree, _CONTAINERS):
        return [tree]
    if (type(tree) is tuple or type(tree) is list) and _flat(tree):
        return list(tree)  # the usual gradients
    out: list[Any] = []
    _flatten_into(tree, out)
    return out


def unflatten(spec: Spec, leaves: Sequence[Any]) -> Any:
    """Rebuild the structure described by `spec` from `leaves` (inverse of `flatten`)."""
    it = iter(leaves)
    return _build(spec, it)


def _build(spec: Spec, it: Iterator[Any]) -> Any:
    if spec is LEAF:
        return next(it)
    kind, aux, children = spec
    values = [_build(child, it) for child in children]
    if kind == _LIST:
        return values
    if kind == _TUPLE:
        return tuple(values)
    if kind == _NAMEDTUPLE:
        return aux(*values)
    container_type, sorted_keys, original_keys = aux
    by_key = dict(zip(sorted_keys, values, strict=True))
    return container_type((k, by_key[k]) for k in original_keys)


def put(leaves: Sequence[Any], positions: Sequence[int], values: Iterable[Any]) -> list[Any]:
    """A copy of `leaves` with `values` at `positions`, in order: a call's flattened arguments
    with its tensors replaced (by the tensors a transform sees, a rerun's aliases, or their
    gradients)."""
    filled = list(leaves)
    for position, value in zip(positions, values, strict=True):
        filled[position] = value
    return filled


def leaf_paths(spec: Spec, top_names: Sequence[str] | None = None) -> list[str]:
    """Readable paths of the leaves, e.g. ``params['w'][1]``.

    With `top_names`, the children of the top-level sequence are named by them (the parameter
    names of a function whose positional arguments `spec` describes).
    """
    paths: list[str] = []
    if top_names is not None and spec is not LEAF and spec[0] in (_LIST, _TUPLE):
        for i, child in enumerate(spec[2]):
            name = top_names[i] if i < len(top_names) else f"args[{i}]"
            _paths_into(child, name, paths)
    else:
        _paths_into(spec, "", paths)
    return paths


def _paths_into(spec: Spec, prefix: str, paths: list[str]) -> None:
    if spec is LEAF:
        paths.append(prefix)
        return
    kind, aux, children = spec
    if kind == _DICT:
        for key, child in zip(aux[1], children, strict=True):
            _paths_into(child, f"{prefix}[{key!r}]", paths)
    elif kind == _NAMEDTUPLE:
        for field, child in zip(aux._fields, children, strict=True):
            _paths_into(child, f"{prefix}.{field}", paths)
    else:
        for i, child in enumerate(children):
            _paths_into(child, f"{prefix}[{i}]", paths)
