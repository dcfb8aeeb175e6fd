"""TensorFlow's control flow and graph API as they run eagerly, in torch: `tf.while_loop` (a
Python loop over the loop variables), `tf.control_dependencies` (a context that does nothing but
call the callables it is given), `tf.name_scope` and `tf.device` (contexts that change no
number), `tf.cond` (the branch the predicate picks), `tf.nest`'s functions (on the library's
`tf.nest` order), and `tf.gradients` (`torch.autograd.grad` of the recorded graph), for
`tf_compat_grad.tf_ops`; `tape_gradient`, the gradient of a translated `tf.GradientTape` with
respect to a structure of tensors."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

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


@contextlib.contextmanager
def name_scope(name: Any, default_name: Any = None, values: Any = None) -> Iterator[str]:
    """`tf.name_scope` (TF2's `(name)` and TF1's `(name, default_name, values)`): op names do
    not exist in torch; the context changes nothing and gives the scope's name, `"name/"`."""
    yield f"{name or default_name or ''}/"


def device(device_name: Any) -> contextlib.nullcontext[None]:
    """`tf.device`: TF places the block's ops on a device; torch runs an op where its inputs
    are, so the block runs as it is (move the tensors with `.to(device)` where needed)."""
    return contextlib.nullcontext()


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str | None = None,
    gate_gradients: bool = False,
    aggregation_method: Any = None,
    stop_gradients: Any = None,
    unconnected_gradients: Any = "none",
    colocate_gradients_with_ops: bool = False,
) -> list[torch.Tensor | None]:
    """`tf.gradients` (a graph's symbolic gradient) on torch's recorded graph: the gradients of
    the sum of `ys` (each weighted by its `grad_ys`, ones if None) with respect to each of `xs`,
    a list; None for an x that `ys` do not depend on (zeros with `unconnected_gradients="zero"`),
    as in TF. Differentiable again (`create_graph=True`), as TF's graph is. TF differentiates
    with respect to any tensor of its graph; torch only with respect to tensors that require
    grad, so an x that does not is refused. `gate_gradients`, `aggregation_method` and TF1's
    `colocate_gradients_with_ops` change no number.

    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> gradients([x * x], [x])[0].detach()
    tensor([2., 4.])
    """
    if stop_gradients is not None:
        raise NotImplementedError(
            "tf_compat_grad.tf_ops.gradients: `stop_gradients=` is not translated; apply "
            "`.detach()` to those tensors where ys are computed"
        )
    targets = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    sources = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    weights = grad_ys if isinstance(grad_ys, (list, tuple)) else [grad_ys] * len(targets)
    for i, x in enumerate(sources):
        if not isinstance(x, torch.Tensor) or not x.requires_grad:
            raise ValueError(
                f"tf_compat_grad.tf_ops.gradients: xs[{i}] does not require grad, so torch has "
                "not recorded how ys depend on it (TF's graph records every tensor); make it "
                "require grad (`x.requires_grad_()`) before ys are computed from it"
            )
    pairs = [
        (y, torch.ones_like(y) if w is None else torch.as_tensor(w, dtype=y.dtype))
        for y, w in zip(targets, weights, strict=True)
        if isinstance(y, torch.Tensor) and y.requires_grad
    ]
    found: list[torch.Tensor | None] = [None] * len(sources)
    if pairs:
        found = list(
            torch.autograd.grad(
                [y for y, _ in pairs],
                sources,
                [w for _, w in pairs],
                retain_graph=True,
                create_graph=True,
                allow_unused=True,
            )
        )
    if str(getattr(unconnected_gradients, "value", unconnected_gradients)).lower() == "zero":
        found = [
            torch.zeros_like(x) if g is None else g for x, g in zip(sources, found, strict=True)
        ]
    return found


def tape_gradient(target: torch.Tensor, sources: Any, output_gradients: Any = None) -> Any:
    """`tape.gradient(target, sources, output_gradients)` of a `tf.GradientTape` that `port`
    translated (its watched tensors require grad): the gradient of `target` (weighted by
    `output_gradients`, ones if None) with respect to each tensor of `sources`, a nest of lists
    and tuples kept as it is; None for a tensor it does not depend on, as in TF.
    Differentiable again (`create_graph=True`), as TF's under an outer tape.

    >>> x, w = torch.tensor(2.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)
    >>> (gx,), [gw] = tape_gradient(x * w, ((x,), [w]))
    >>> gx.item(), gw.item()
    (3.0, 2.0)
    """
    leaves, spec = flatten(sources)
    if not leaves:
        return unflatten(spec, [])
    upstream = torch.ones_like(target) if output_gradients is None else output_gradients
    found = torch.autograd.grad(
        target, leaves, upstream, retain_graph=True, create_graph=True, allow_unused=True
    )
    return unflatten(spec, list(found))


def cond(
    pred: Any,
    true_fn: Callable[[], Any] | None = None,
    false_fn: Callable[[], Any] | None = None,
    strict: bool = False,
    name: str | None = None,
    fn1: Callable[[], Any] | None = None,
    fn2: Callable[[], Any] | None = None,
) -> Any:
    """`tf.cond` run eagerly: the branch the predicate picks is called, the other is not
    (TF1's `fn1`, `fn2` are accepted).

    >>> cond(torch.tensor(2.0) > 1, lambda: "true", lambda: "false")
    'true'
    """
    true_fn, false_fn = true_fn or fn1, false_fn or fn2
    if true_fn is None or false_fn is None:
        raise TypeError("tf.cond: true_fn and false_fn are required")
    return true_fn() if bool(pred) else false_fn()


def map_structure(func: Callable[..., Any], *structure: Any, **kwargs: Any) -> Any:
    """`tf.nest.map_structure`: `func` applied to the leaves of the structures (lists, tuples,
    dicts, in `tf.nest`'s order), the first structure's shape kept.

    >>> map_structure(lambda a, b: a + b, (1, [2]), (10, [20]))
    (11, [22])
    """
    kwargs.pop("check_types", None), kwargs.pop("expand_composites", None)
    if kwargs:
        raise TypeError(f"tf.nest.map_structure: unexpected argument {sorted(kwargs)[0]!r}")
    flats = [flatten(s) for s in structure]
    if any(spec != flats[0][1] for _, spec in flats):
        raise ValueError("tf.nest.map_structure: the structures do not have the same nesting")
    leaves = [func(*values) for values in zip(*(f for f, _ in flats), strict=True)]
    return unflatten(flats[0][1], leaves)


def nest_flatten(structure: Any, expand_composites: bool = False) -> list[Any]:
    """`tf.nest.flatten`: the leaves, in `tf.nest`'s order (dicts by sorted key)."""
    return flatten(structure)[0]


def pack_sequence_as(structure: Any, flat_sequence: Any, expand_composites: bool = False) -> Any:
    """`tf.nest.pack_sequence_as`: `flat_sequence` in the shape of `structure`."""
    return unflatten(flatten(structure)[1], list(flat_sequence))
