"""TensorFlow's control flow as it runs eagerly, in torch: `tf.while_loop` (a Python loop over
the loop variables) and `tf.control_dependencies` (a context that does nothing but call the
callables it is given), for `tf_compat_grad.tf_ops`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from ._structure import flatten, unflatten
from ._tf_math import convert_to_tensor


def control_dependencies(
    control_inputs: Iterable[Any] | None,
) -> contextlib.nullcontext[None]:
    """`tf.control_dependencies` run eagerly: the callables among `control_inputs` are called,
    the tensors are already computed; the context adds nothing."""
    for control in control_inputs or ():
        if callable(control):
            control()
    return contextlib.nullcontext()


def while_loop(
    cond: Callable[..., Any],
    body: Callable[..., Any],
    loop_vars: Any,
    shape_invariants: Any = None,
    parallel_iterations: int = 10,
    back_prop: bool = True,
    swap_memory: bool = False,
    maximum_iterations: Any = None,
    name: str | None = None,
) -> Any:
    """`tf.while_loop` run eagerly: `loop_vars = body(*loop_vars)` while `cond(*loop_vars)` (and
    fewer than `maximum_iterations` bodies have run; cond is called either way, as TF does),
    each body returning the structure it was given; then every leaf that is not a tensor
    becomes one, with TF's dtype for a Python number. `shape_invariants`, `parallel_iterations`,
    `back_prop` and `swap_memory` do nothing when TF runs eagerly, and nothing here.

    >>> import torch
    >>> while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 2.0), (0, torch.tensor(1.0)))
    (tensor(3, dtype=torch.int32), tensor(8.))
    """
    if not callable(cond):
        raise TypeError("'cond' must be callable.")
    if not callable(body):
        raise TypeError("'body' must be callable.")
    if parallel_iterations < 1:
        raise TypeError("'parallel_iterations' must be a positive integer.")
    if not loop_vars:
        raise ValueError("'loop_vars' must be provided.")
    limit = None if maximum_iterations is None else int(maximum_iterations)
    _, structure = flatten(list(loop_vars))
    count = 0
    while cond(*loop_vars) and (limit is None or count < limit):
        loop_vars = body(*loop_vars)
        count += 1
        if flatten(list(loop_vars))[1] != structure:
            raise ValueError(
                "tf.while_loop: the body returned loop variables of another structure than it "
                f"was given: {loop_vars!r}"
            )
    found, spec = flatten(loop_vars)
    return unflatten(spec, [convert_to_tensor(leaf) for leaf in found])
