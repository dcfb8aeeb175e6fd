"""Plans: an eager call's per-call work, generated as code for one decorated function and one
call shape.

# Note [plans]
Calls of one decorated function mostly repeat one shape: the same kinds of positional arguments
(tensors, Python numbers, in the same lists, tuples and dicts), the same keyword arguments holding
numbers or strings, bound to an instance or not, and an f that returns the same structure of tensors
with a grad_fn whose closure cells hold tensors and plain values in the same places. The general
code (`EagerPath.call`) learns that shape from a call it handled (`_plan_shape.shape_of`) and
generates, once per shape, a function that does that call's work with every argument, output and
cell unrolled into locals (`plan_call`, bound to each decoration's f), and a node whose backward
is generated in the same spirit (`_plan_node.py`). A plan serves the calls it fits; it hands the
others to the newest plan before it, the last of which is the general code, which handles every
call and is the one fallback: before f runs the whole call (`general`), after f ran what f
returned (`EagerPath._unplanned`, and `EagerPath._fresh` without grad), so that f still runs once. Both give the results the general code gives; the plan
only skips what the shape makes unnecessary.

A plan's guard first asks the mode of Note [call modes] (`_torch_internals.py`), rendered into it,
then the arguments' shape. Without grad (`torch.no_grad()`) f runs with no node. Under grad mode and
no autocast it is of one of four kinds, chosen by the reach proof (Note [watching only when needed]
in `_reach.py`): "none" when f provably reads no Parameter, f then called directly while the proof's
per-call check holds; "unrecorded" when, besides, the arguments are tensors and numbers and grad_fn
can read nothing f computes, f then called with grad mode off and its outputs handed over as they
are (Note [f unrecorded] in `_unrecorded.py`); "rerun" when instead f's code is pure: a call whose
tensors are leaves that require grad runs as an unrecorded one and hands the node what runs f again
for a second derivative, any other call runs as in a plan of kind "none" (Note [f run again] in
`_rerun.py`); "watched" otherwise, f running under the Parameter watcher, pushed and popped without
`TorchFunctionMode`'s Python frames, the Parameters it read, less those passed to it, being the
call's variables (none: the node calls grad_fn without `variables=`, as the general code does).
While the check of Note [Parameters of f's own] holds (never for a method: the instance can hold
more), no gradient can be lost and the walk of Note [lost gradients] is skipped; a watched plan of
kind "unrecorded watched" then also calls f with grad mode off, where grad_fn can read nothing f
computes. Tensor-valued keyword arguments, anything the flattening of `tf.nest` treats as a
container other than lists, tuples, namedtuples and dicts with string keys, and grad_fns that are
not plain functions take the general code every time.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import types
from collections.abc import Callable
from typing import Any

import torch

from ._captures import settle
from ._closure import (
    EXACT_TENSOR_TYPES,
    PLAIN_TYPES,
    UNSHARED,
    UNSHARED_OWN,
    attribute_tensors,
    plain,
)
from ._places import close_cache, open_cache
from ._plan_node import BINDING, plan_fields, saves
from ._plan_shape import KEYWORD_VALUES, NUMBERS, Shape, Source, tree_leaves, unflatten_source
from ._record import check_upstreams
from ._run import BOUND_KEYWORD, UNBOUND, check_unedited, inputs
from ._torch_internals import (
    MODE_NAMES,
    UNTRANSFORMED,
    any_autocast_enabled,
    is_functorch_wrapped,
    pop_function_mode,
    push_function_mode,
    set_grad_mode,
)
from ._variables import accepts_variables
from ._watcher import ParameterWatcher

MAX_PLANS = 4  # call shapes planned per decorated function; others take the general code
_Tensor = torch.Tensor
_MISSING = object()


def plan_call(
    f: Callable[..., Any], shape: Shape, kind: str, apply: Callable[..., Any]
) -> Callable[..., Any]:
    """The call of f's plan for `shape` (Note [plans]) of one `kind`, over `apply` (its node's):
    "none" when f provably reads no Parameter, while the per-call check holds; "watched" when it
    runs under the watcher, skipping the walk of Note [lost gradients] while the check holds
    (unbound calls only), and settling by the rule `captured` otherwise. Made once per learned
    shape and kind, for every decoration of f's code: a decoration's entry is this call bound to
    its `binding` (a function decorated inside `forward` binds one on every call). The code is
    generated once per shape, kind and name of f."""
    code = getattr(f, "__code__", None)
    direct_keywords = type(code) is types.CodeType and not code.co_flags & inspect.CO_VARKEYWORDS
    return _call_maker(  # type: ignore[no-any-return]
        shape.fields(), kind, getattr(f, BOUND_KEYWORD, False), direct_keywords,
        getattr(f, "__qualname__", "f"),
    )(apply)  # fmt: skip


@functools.lru_cache(maxsize=256)
def _call_maker(
    fields: tuple[Any, ...], kind: str, bound_keyword: bool, direct_keywords: bool, qualname: str
) -> Callable[..., Any]:
    """What makes the call of a plan over its node's `apply` (`plan_call`)."""
    shape = Shape(*fields)
    src = Source()
    add = src.add
    back = "general(bound, args, kwargs)"
    add(0, "def call(plan, bound, args, kwargs):")
    add(1, f"{', '.join(BINDING)} = plan")
    keywords = shape.keywords
    add(1, f"if (not ({UNTRANSFORMED}) or bound is {'' if shape.bound else 'not '}UNBOUND")
    kw_guard = f"len(kwargs) != {len(keywords)}" if keywords else "kwargs"
    add(2, f"    or len(args) != {len(shape.args)} or {kw_guard}):")
    add(2, f"return {back}")
    tops = [f"x{i}" for i in range(len(shape.args))]
    if tops:
        add(1, f"{', '.join(tops)}, = args")
    leaves = [leaf for top, tree in zip(tops, shape.args, strict=True) for leaf in src.unpack(1, top, tree, top, back)]  # fmt: skip
    kinds = tree_leaves(shape.args)
    inputs = [name for name, k in zip(leaves, kinds, strict=True) if k == "t"]
    checks = [
        f"type({a}) not in EXACT or {a}.is_nested or is_wrapped({a})"
        if k == "t"
        else f"type({a}) not in NUMBERS"
        for a, k in zip(leaves, kinds, strict=True)
    ]
    given = [f"k{i}" for i in range(len(keywords))]
    if keywords:
        add(1, "; ".join(f"{v} = kwargs.get({k!r}, MISSING)" for v, k in zip(given, keywords, strict=True)))  # fmt: skip
        checks += [f"type({v}) not in KEYWORD" for v in given]
    add(1, f"if {' or '.join(checks)}:")
    add(2, f"return {back}")
    if not keywords:
        passed_keywords = ""
    elif direct_keywords and all(k.isidentifier() and not keyword.iskeyword(k) for k in keywords):
        # f takes no `**kwargs`, whose order the call would otherwise have to keep.
        passed_keywords = "".join(f", {k}={v}" for k, v in zip(keywords, given, strict=True))
    else:
        passed_keywords = ", **kwargs"
    passed = ", ".join(tops)
    if not shape.bound:
        f_call = f"f({passed}{passed_keywords})"
    elif bound_keyword:
        f_call = f"f({passed}, {BOUND_KEYWORD}=bound{passed_keywords})"
    else:
        f_call = f"f(bound{', ' if passed else ''}{passed}{passed_keywords})"

    # Without grad: f's outputs, no node (item 9); as `_run.fresh` makes them.
    add(1, "if not grad_enabled():")
    add(2, f"out = {f_call}")
    unplanned_fresh = "path._fresh(out)"
    add(2, "if type(out) is not tuple or len(out) != 2 or type(out[1]) is not FunctionType:")
    add(3, f"return {unplanned_fresh}")
    add(2, "result = out[0]")
    outs = src.unpack(2, "result", shape.outputs, "r", unplanned_fresh)
    add(2, f"if {' or '.join(f'type({r}) is not Tensor' for r in outs)}:")
    add(3, f"return {unplanned_fresh}")
    fresh = [f"({r}.view_as({r}) if {r}.requires_grad else {r}.detach())" for r in outs]
    add(2, f"return {unflatten_source(shape.outputs, fresh, src)}")

    watched = kind in ("watched", "unrecorded watched")
    # Whether f runs unrecorded: always, while the watched f reads its own Parameters only
    # (Note [f unrecorded] in `_unrecorded.py`), or where it is to run again (Note [f run
    # again] in `_rerun.py`).
    unrecorded = {
        "unrecorded": "True", "unrecorded watched": "own", "rerun": "again is not None"
    }.get(kind)  # fmt: skip
    rest = "out, bound, args, kwargs, watcher" if watched else "out, bound, args, kwargs, None"
    if kind == "rerun":
        rest += ", again"
    unplanned = f"path._unplanned({rest})"
    add(1, f"if any_autocast(){'' if watched else ' or not holds()'}:")
    add(2, f"return {back}")
    # The inputs' version counters before f runs: f may not edit one in place (`_run.py`).
    versions = [f"e{i}" for i in range(len(inputs))]
    # (A tensor made under `torch.inference_mode` has none: the general code takes it.)
    add(1, "try:")
    add(2, "; ".join(f"{e} = {a}._version" for e, a in zip(versions, inputs, strict=True)))
    add(1, "except RuntimeError:")
    add(2, f"return {back}")
    if watched:
        add(1, "watcher = Watcher()")
        add(1, "own = False" if shape.bound else "own = holds()  # Note [Parameters of f's own]")
        if unrecorded:  # before the watcher: it would see the call
            add(1, "if own:")
            add(2, "set_grad(False)")
        add(1, "push(watcher)")
        add(1, "if not own:")
        add(2, "open_cache()")
        add(1, "try:")
        add(2, f"out = {f_call}")
        add(1, "finally:")
        add(2, "pop()")
        add(2, "if not own:  # else `places` stays None: nothing to settle")
        add(3, "watcher.places = close_cache()")
        if unrecorded:
            add(2, "else:")
            add(3, "set_grad(True)")
    elif kind == "unrecorded":  # Note [f unrecorded] in `_unrecorded.py`
        _add_unrecorded(src, 1, f_call)
    elif kind == "rerun":  # Note [f run again] in `_rerun.py`: for leaves that require grad
        add(1, f"if {' and '.join(f'{a}.requires_grad and {a}.is_leaf' for a in inputs)}:")
        _add_unrecorded(src, 2, f_call)
        add(2, f"again = (f, args, kwargs, ({', '.join(versions)},), holds)")
        add(1, "else:")
        add(2, f"out = {f_call}")
        add(2, "again = None")
    else:
        add(1, f"out = {f_call}")
    add(1, f"if {' or '.join(f'{a}._version != {e}' for a, e in zip(inputs, versions, strict=True))}:")  # fmt: skip
    add(2, f"unedited(f, bound, args, ({', '.join(versions)},))")
    add(1, "if type(out) is not tuple:")
    add(2, f"return {unplanned}")
    src.unpack_exactly(1, ["result", "grad_fn"], "out", unplanned)
    outs = src.unpack(1, "result", shape.outputs, "r", unplanned)
    add(1, f"if type(grad_fn) is not FunctionType or {' or '.join(f'type({r}) is not Tensor' for r in outs)}:")  # fmt: skip
    add(2, f"return {unplanned}")
    if watched:
        add(1, "if watcher.places:")
        add(2, f"return {unplanned}")
        add(1, "variables = [*watcher.found.values()]")
        # A Parameter passed as an argument is an input.
        add(1, f"if {' or '.join(f'type({a}) is not Tensor' for a in inputs)}:")
        add(2, f"variables = [v for v in variables if {' and '.join(f'v is not {a}' for a in inputs)}]")  # fmt: skip
        add(1, "if not own:")
        add(2, f"variables = settle(f, bound, kwargs, result, ({', '.join(inputs)},), variables, (), path.captured)")  # fmt: skip
        add(2, "if type(variables) is not list:  # slots' tensors (`_places.SlotVariables`)")
        add(3, f"return {unplanned}")
        add(1, "if variables:")
        add(2, "if not (grad_fn.__code__ is accepted[0] or accepts(grad_fn, accepted)):")
        add(3, f"return {unplanned}")
    add(1, f"{'elif' if watched else 'if'} not ({' or '.join(f'{a}.requires_grad' for a in inputs)}):")  # fmt: skip
    add(2, f"return {unflatten_source(shape.outputs, fresh, src)}  # nothing to record (item 39)")
    variables, more_inputs = ("variables", ", *variables") if watched else ("None", "")
    # Note [outputs that alias an input] (`_run.py`): such outputs take the general code.
    alias = [f"{r}._base is not None" for r in outs]
    alias += [f"{r} is {a}" for r in outs for a in inputs]
    alias += [f"{r} is {q}" for i, r in enumerate(outs) for q in outs[i + 1 :]]
    add(1, f"if {' or '.join(alias)}:")
    add(2, f"return {unplanned}")
    if len(outs) > 1:  # grad_fn takes one upstream per output (`check_upstreams`)
        which = "bool(variables)" if watched else "0"
        add(1, f"if grad_fn.__code__ is not upstreams_ok[{which}] or grad_fn.__dict__:")
        add(
            2, f"upstreams(f, grad_fn, {len(outs)}, {variables if watched else '()'}, upstreams_ok)"
        )
    add(1, "closure = grad_fn.__closure__")
    add(1, "defaults = grad_fn.__defaults__")
    guard = ["closure is None"] if shape.cells is None else []  # else: the unpacking below
    if shape.defaults is None:
        guard.append("defaults is None")
    else:  # plain values: `variables=None`, numbers
        guard.append(f"defaults is not None and len(defaults) == {shape.defaults}")
        guard += [f"type(defaults[{i}]) in PLAIN" for i in range(shape.defaults)]
    if shape.kwdefaults:
        add(1, "kwd = grad_fn.__kwdefaults__")
        guard.append("kwd is not None and plain(kwd.values())")
    else:
        guard.append("grad_fn.__kwdefaults__ is None")
    add(1, f"if not ({' and '.join(guard)}):")
    add(2, f"return {unplanned}")
    cells = shape.cells or ""
    cell_names = [f"c{i}" for i in range(len(cells))]
    values = [f"v{i}" for i in range(len(cells))]
    if cells:
        add(1, "try:")
        add(2, f"{', '.join(cell_names)}, = closure")
        add(2, "; ".join(f"{v} = {c}.cell_contents" for c, v in zip(cell_names, values, strict=True)))  # fmt: skip
        add(1, "except (ValueError, TypeError):  # an empty cell, other cells, or none")
        add(2, f"return {unplanned}")
        saved = [v for v, k in zip(values, cells, strict=True) if k in "tp"]
        exact = {"t": "Tensor", "p": "Parameter"}  # a Parameter's cell is shared: `closure_source`
        cell_checks = [f"type({v}) is not {exact[k]}" for v, k in zip(values, cells, strict=True) if k in "tp"]  # fmt: skip
        cell_checks += [f"{a} is {b}" for i, a in enumerate(saved) for b in saved[i + 1 :]]
        cell_checks += [
            f"(type({v}) not in PLAIN and {_UNSHARED_CELL[k].format(v=v)})"
            for v, k in zip(values, cells, strict=True)
            if k in _UNSHARED_CELL
        ]
        if cell_checks:
            add(1, f"if {' or '.join(cell_checks)}:")
            add(2, f"return {unplanned}")
    else:
        saved = []
    plan = ", ".join(value for _, value in plan_fields(shape, watched, inputs, kind == "rerun"))
    handoff = f"({plan},)"
    if saves(shape):
        handoff += f", ({', '.join(saved)},)"
    into = f"{', '.join(inputs)}{more_inputs}"
    # Unrecorded, f's outputs have no history to cut.
    if unrecorded is None:
        handed = [f"{r}.detach()" for r in outs]
    elif unrecorded == "True":
        handed = outs
    else:
        handed = [f"({r} if {unrecorded} else {r}.detach())" for r in outs]
    if type(shape.outputs) is str:
        add(1, f"return apply(({handed[0]}, {handoff}), {into})")
    else:
        detached = ", ".join(handed)
        outputs = shape.outputs
        if outputs[0] == "seq" and outputs[1] is tuple and all(c == "t" for c in outputs[2]):
            add(1, f"return apply((({detached},), {handoff}), {into})")  # a tuple, as f's
        else:
            got = [f"o{i}" for i in range(len(outs))]
            add(1, f"{', '.join(got)}, = apply((({detached},), {handoff}), {into})")
            add(1, f"return {unflatten_source(outputs, got, src)}")
    src.lines = ["    " + line for line in src.lines] + ["    return call"]
    # What the call's grad_fns passed, whichever decoration's: the code of the last that took
    # `variables=`, of the last whose parameters take the upstreams (without variables, with).
    if watched:
        src.lines.insert(0, "    accepted = [None]")
    if len(outs) > 1:
        src.lines.insert(0, "    upstreams_ok = [None, None]")
    name = "" if kind == "none" else f"{kind} "
    filename = f"<tf_compat_grad {name}plan of {qualname}>"
    # The names of every plan and the constants are bound here, once per form; each learned
    # shape binds its node's `apply` (`plan_call`), each decoration its binding (`BINDING`).
    src.lines = ["    def bind(apply):", *("    " + line for line in src.lines), "    return bind"]
    return src.maker(filename, _CALL_NAMES)(**_CALL_NAMES, **src.constants)  # type: ignore[no-any-return]


def _add_unrecorded(src: Source, indent: int, f_call: str) -> None:
    """Lines that call f with grad mode off (Note [f unrecorded] in `_unrecorded.py`)."""
    src.add(indent, "set_grad(False)")
    src.add(indent, "try:")
    src.add(indent + 1, f"out = {f_call}")
    src.add(indent, "finally:")
    src.add(indent + 1, "set_grad(True)")


def _accepts_variables(grad_fn: types.FunctionType, accepted: list[types.CodeType | None]) -> bool:
    """Whether grad_fn takes `variables=`, which its code decides: the code is kept in
    `accepted` when it does, so that the next call with it is one comparison."""
    if accepts_variables(grad_fn):
        accepted[0] = grad_fn.__code__
        return True
    return False


def _unedited(
    f: Callable[..., Any], bound: Any, args: tuple[Any, ...], versions: tuple[int, ...]
) -> None:
    """Refuse the call if f edited an argument that requires grad in place (`_run.py`)."""
    _, layout, tensors = inputs(f, bound, args)
    check_unedited(f, layout, tensors, versions)


def _upstreams(
    f: Callable[..., Any],
    grad_fn: types.FunctionType,
    n_outputs: int,
    variables: Any,
    ok: list[Any],
) -> None:
    """`check_upstreams` for a plan of n outputs; `ok`: the code of the last grad_fn it passed,
    without variables and with (one with no attributes, which could change its signature)."""
    check_upstreams(f, grad_fn, n_outputs, variables)
    ok[bool(variables)] = None if grad_fn.__dict__ else grad_fn.__code__


# Per kind of shared cell (`flat_cells`), the test of a value `capture` would not share as it
# is: for an object f made, one holding tensors (`capture` saves them).
_UNSHARED_CELL = {
    "s": "isinstance({v}, UNSHARED)",
    "o": "isinstance({v}, UNSHARED_OWN)",
    "m": "(isinstance({v}, UNSHARED_OWN) or attribute_tensors({v}))",
}


# The names of a plan's call that are the same for every plan.
_CALL_NAMES: dict[str, Any] = {
    **MODE_NAMES, "UNBOUND": UNBOUND, "MISSING": _MISSING, "KEYWORD": KEYWORD_VALUES,
    "NUMBERS": NUMBERS, "EXACT": EXACT_TENSOR_TYPES, "PLAIN": PLAIN_TYPES,
    "UNSHARED": UNSHARED, "UNSHARED_OWN": UNSHARED_OWN, "Tensor": _Tensor, "Parameter": torch.nn.Parameter,
    "attribute_tensors": attribute_tensors,
    "FunctionType": types.FunctionType,
    "plain": plain, "is_wrapped": is_functorch_wrapped, "grad_enabled": torch.is_grad_enabled,
    "any_autocast": any_autocast_enabled, "Watcher": ParameterWatcher,
    "push": push_function_mode, "pop": pop_function_mode, "accepts": _accepts_variables,
    "open_cache": open_cache, "close_cache": close_cache, "settle": settle,
    "unedited": _unedited, "set_grad": set_grad_mode, "upstreams": _upstreams,
}  # fmt: skip
