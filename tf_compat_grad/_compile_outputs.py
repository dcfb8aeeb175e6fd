"""How f's outputs go into the compile nodes (`_compile_node.py`) and come out of them.

# Note [compile outputs]
f's outputs go into the node as inputs of `apply`, and its forward hands them over detached:
an input an `autograd.Function` returns as it is becomes a view of it (Dynamo adds `view_as`),
which may not be edited in place. One `detach` is the whole cost in the graph over a
hand-written Function: an output f made under `no_grad` is passed as it is (detaching it first
was a second op per output). An output that is an input, a view of one, or an earlier output
is copied (`handed_outputs`), as in eager mode: Dynamo refuses a tensor passed twice to `apply`,
and before, an edit in place of `return x, grad_fn`'s output changed x. Inside the node (Note
[f inside the compile node] in `_compile_node.py`) the outputs are f's own, made under `no_grad`, and only those that
alias are copied. A tree of outputs in plain lists, tuples and dicts is numbered while traced
(`_numbered`), its rebuilding a trace-time constant (`_tree_number`, `rebuilt`).
Inside the node, whether the outputs go over as f made them is read from the fake tensors Dynamo
holds (`handed_noted`: Note [compile guards] in `_compile.py`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._compile_exits import parameters_of
from ._record import upstreams_refusal_of_code
from ._run import as_output
from ._structure import flatten, unflatten
from ._torch_internals import (
    Noted,
    run_while_tracing,
    traced_function,
    traced_items,
    traced_tree,
)


def handed_outputs(
    f: Callable[..., Any], result: Any, sources: Sequence[torch.Tensor], kind: tuple[str, bool]
) -> tuple[list[torch.Tensor], Any, bool]:
    """f's result flattened as a node takes it, how `rebuilt` rebuilds it, and whether
    `torch.export` traces the call (Note [export] in `_export.py`); `sources`: the call's
    tensor inputs and variables; `kind`: what `split_kind` answered. Each output as it is where f made
    it (under `no_grad`), detached where it requires grad, and copied where it aliases one of `sources` or an earlier
    output (Note [compile outputs])."""
    rebuild: Any
    rebuild, exporting = kind
    if rebuild == "one":
        flat = [result]
    elif rebuild == "tuple" and _all_tensor_classes([o.__class__ for o in result]):
        flat = result
    else:  # a tree: its spec and its rebuilding are trace-time constants, kept by number
        # (Dynamo cannot read a class in a constant made in `InsideNode`'s traced forward)
        found: list[Any] = []
        odd: list[Any] = []  # containers other than plain lists, tuples and dicts
        numbered = _numbered(result, found, odd)
        if odd:  # its spec traced, as `flatten` makes it
            flat, spec = flatten(result)
            rebuild = ("spec", spec)
        else:
            number, order = _tree_number(numbered)
            rebuild, flat = ("numbered", number), [found[i] for i in order]
        if not _all_tensor_classes([o.__class__ for o in flat]):
            spec = flatten(numbered if not odd else result)[1]  # for `as_output`'s messages
            flat = [as_output(f, o, i, spec) for i, o in enumerate(flat)]
    handed: list[torch.Tensor] = []
    for o in flat:
        base = o._base
        # `_run.aliases` written out (a global function costs a guard), then earlier outputs
        if any(
            o is s or (base is not None and (base is s or base is s._base)) for s in sources
        ) or any(o is e or base is e or e._base is o for e in flat[: handed.__len__()]):
            handed.append(o.detach().clone())  # as eager copies them (Note [outputs that
            # alias an input] in `_run.py`)
        else:
            handed.append(o.detach() if o.requires_grad else o)
    return handed, rebuild, exporting


def rebuilt(rebuild: Any, outputs: Sequence[torch.Tensor]) -> Any:
    """f's outputs in the structure `handed_outputs` described (or `InsideNode` numbered): a
    tree by the number of its template (`numbered_plan`), by its template (`"placed"`: asked
    by number through the route question, which spares that global's guard), or by its spec."""
    if rebuild == "one":
        return outputs[0]
    if rebuild == "tuple":
        return (*outputs,)
    how, plan = rebuild  # (Dynamo 2.15 cannot read the class of a number made while tracing)
    if how == "numbered":
        how, plan = "placed", numbered_plan(plan)
    if how != "placed":
        return unflatten(plan, outputs)  # a spec traced by `flatten`

    def placed(template: Any) -> Any:  # (nested: a global function costs a guard)
        """The tree `_template` describes, each leaf number replaced by that output."""
        tag, content = template
        if tag == "leaf":
            return outputs[content]
        if tag == "dict":
            return {k: placed(t) for k, t in content}
        items = [placed(t) for t in content]
        return items if tag == "list" else tuple(items)

    return placed(plan)


def _numbered(tree: Any, leaves: list[Any], odd: list[Any]) -> Any:
    """tree with each leaf replaced by its index in `leaves`, where it is appended; a container
    other than a plain list, tuple or dict is appended to `odd` (Dynamo traces it, reading no
    global but itself: Note [compile guards])."""
    # (`__class__`, classes of literals, `__len__`: each builtin read costs a guard, and
    # `type` of a tensor a guard on `Tensor` too)
    kind = tree.__class__
    if kind is ().__class__:
        return (*[_numbered(x, leaves, odd) for x in tree],)
    if kind is [].__class__:
        return [_numbered(x, leaves, odd) for x in tree]
    if kind is {}.__class__:
        return {k: _numbered(v, leaves, odd) for k, v in tree.items()}
    if isinstance(tree, ([].__class__, ().__class__, {}.__class__)):
        odd.append(tree)
    leaves.append(tree)
    return leaves.__len__() - 1


@run_while_tracing
def _tree_number(numbered: Any) -> tuple[int, tuple[int, ...]]:
    """For a tree numbered by `_numbered`: the number of its plan (`numbered_plan`: how
    `rebuilt` rebuilds it from the flattened leaves, as `unflatten` would) and the order of its
    leaves in `flatten`'s order."""
    order, spec = flatten(numbered)
    return _plan_number(_template(unflatten(spec, range(len(order))))), tuple(order)


def _template(tree: Any) -> Any:
    """A tree of plain containers of numbers as tagged tuples, which Dynamo reads without
    guards (the type of a trace-time constant has none)."""
    if isinstance(tree, dict):
        return ("dict", tuple((k, _template(v)) for k, v in tree.items()))
    if isinstance(tree, (list, tuple)):
        return ("list" if isinstance(tree, list) else "tuple", tuple(map(_template, tree)))
    return ("leaf", tree)


# How trees of outputs are rebuilt, one per trace of a call that returned a tree (a few hundred
# bytes each; not shared between traces: `==` would take a key `True` for a key `1`).
_PLANS: dict[int, Any] = {}
_NEXT_PLAN = itertools.count()  # (`next` of it is atomic: traces in two threads get two)


@run_while_tracing
def _plan_number(plan: Any) -> int:
    number = next(_NEXT_PLAN)
    _PLANS[number] = plan
    return number


@run_while_tracing
def numbered_plan(number: int) -> Any:
    return _PLANS[number]


# Trace-time constants of the hand-over, read from classes (Note [compile guards]).


@run_while_tracing
def _all_tensor_classes(kinds: list[type]) -> bool:
    return all(kind is torch.Tensor for kind in kinds)


_HANDED = Noted()  # what `handed_noted` noted for the question


def handed_noted(
    ctx: Any = None, sources: str = "inputs"
) -> tuple[Any, tuple[tuple[Any, ...], ...]] | None:
    """Given to `comptime` in `InsideNode.forward` and `call_compiled` once f's result is split
    (the locals `result`, `grad_fn`, `kind`, `described` and the tensors named `sources`): notes
    whether its outputs, a tree of tensors in plain tuples, lists and dicts, go over as f made
    them (`handed_outputs`, run on the fake tensors Dynamo holds, hands each back as it is: none
    aliases one of `sources` or requires grad) and grad_fn takes one upstream per output
    (`upstreams_refusal_of_code` on its code), so that neither is traced (their globals cost a
    guard each): then how the outputs are rebuilt and the path of keys to each, in order. Asked without a context (by the question,
    `question` in `_compile.compiling_call`): that answer, None where nothing was noted."""
    if ctx is None:
        return _HANDED.take()  # type: ignore[no-any-return]
    _HANDED.clear()
    try:
        kind = ctx.get_local("kind").as_python_constant()
        result = traced_tree(ctx, "result")
        held = traced_items(ctx, sources)
        if result is None or held is None:
            return None
        paths = _paths(result, ())
        handed, rebuild, _ = handed_outputs(None, result, [t for _, t in held[1]], kind)  # type: ignore[arg-type]
        if any(id(o) not in paths or paths[id(o)][0] is not o for o in handed):
            return None  # an output copied, or made a tensor
        if handed.__len__() > 1 and _upstreams_refused(ctx, handed.__len__()):
            return None
    except Exception:  # (a tracker of another kind, or Dynamo's internals changed)
        return None
    found = tuple(paths[id(o)][1] for o in handed)
    if kind[0] == "tuple" and all(path.__len__() == 1 for path in found):
        rebuild = "tuple"  # as traced: a fake tensor's class is not `Tensor`
    _HANDED.note((rebuild, found))
    return None


def _paths(tree: Any, path: tuple[Any, ...]) -> dict[int, tuple[Any, tuple[Any, ...]]]:
    """Each leaf of a tree of plain containers by its `id`: the leaf and its path of keys."""
    if isinstance(tree, dict):
        items: Any = tree.items()
    elif isinstance(tree, (tuple, list)):
        items = enumerate(tree)
    else:
        return {id(tree): (tree, path)}
    found = {}
    for key, value in items:
        found.update(_paths(value, (*path, key)))
    return found


def _upstreams_refused(ctx: Any, n_outputs: int) -> bool:
    """Whether `upstreams_checked` would refuse grad_fn (the frame's local) for n_outputs
    upstreams, or cannot tell from what Dynamo holds of it."""
    held = traced_function(ctx, "grad_fn")
    readable: Any
    if held.__class__ is tuple:  # defined in the traced code
        code, has_defaults = held
        readable = code, None if has_defaults else 0, 0, ()
    else:
        readable = None if held is None else parameters_of(held)
    if readable is None:
        return True
    described = ctx.get_local("described").as_python_constant()
    code, n_defaults, n_bound, keywords = readable
    refusal = upstreams_refusal_of_code(
        code, n_defaults, n_bound, keywords, n_outputs, False, described
    )
    return bool(refusal)
