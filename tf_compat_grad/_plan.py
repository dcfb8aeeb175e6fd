"""Plans: an eager call's per-call work, generated as code for one decorated function and one
call shape.

# Note [plans]
Calls of one decorated function mostly repeat one shape: the same kinds of positional arguments
(tensors, Python numbers, in the same lists, tuples and dicts), the same keyword arguments
holding numbers or strings, bound to an instance or not, and an f that returns the same
structure of tensors with a grad_fn whose closure cells hold tensors and plain values in the
same places. The general code (`EagerPath.call`) learns that shape from a call it handled
(`shape_of`) and generates, once per shape, a function that does that call's work with every
argument, output and cell unrolled into locals (`make_call`), and a node whose backward is
generated in the same spirit (`_plan_node.py`). A plan serves the calls it fits; it hands the
others to the newest plan before it, the last of which is the general code, which handles every
call and is the one fallback: before f runs the whole call (`general`), after f ran what f
returned (`unplanned`, and `unplanned_fresh` without grad), so that f still runs once. Both
give the results the general code gives; the plan only skips what the shape makes unnecessary.

A plan's guard first asks the mode of Note [call modes] (`_torch_internals.py`), rendered into
it, then the arguments' shape. Without grad (`torch.no_grad()`) f runs with no node. Under
grad mode and no autocast it is of one of two kinds, chosen by the reach proof (Note [watching
only when needed] in `_reach.py`): "none" when f provably reads no Parameter, f then called
directly while the proof's per-call check holds; "watched" otherwise, f running under the
Parameter watcher, pushed and popped without `TorchFunctionMode`'s Python frames, the Parameters
it read, less those passed to it, being the call's variables (none: the node calls grad_fn
without `variables=`, as the general code does). While the check of Note
[Parameters of f's own] holds (never for a method: the instance can hold more), no gradient can
be lost and the walk of Note [lost gradients] is skipped. Tensor-valued keyword arguments,
anything the flattening of `tf.nest` treats as a container other than lists, tuples,
namedtuples and dicts with string keys, and grad_fns that are not plain functions take the
general code every time.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ._captures import CapturedRule, close_cache, open_cache, settle
from ._closure import EXACT_TENSOR_TYPES, PLAIN_TYPES, plain
from ._record import INPUT_META, check_upstreams
from ._run import BOUND_KEYWORD, UNBOUND, check_unedited, inputs
from ._torch_internals import (
    MODE_NAMES,
    UNTRANSFORMED,
    any_autocast_enabled,
    is_functorch_wrapped,
    pop_function_mode,
    push_function_mode,
)
from ._variables import accepts_variables
from ._watcher import ParameterWatcher

MAX_PLANS = 4  # call shapes planned per decorated function; others take the general code
_Tensor = torch.Tensor
# Positional leaves that are not inputs, and keyword values, that hold no tensor for certain.
_NUMBERS = frozenset({bool, int, float, complex, str})
_KEYWORD_VALUES = frozenset(PLAIN_TYPES)
# Cell values that `capture` does not share with the rebuilt grad_fn as they are.
_UNSHARED = (_Tensor, tuple, types.FunctionType)
_MISSING = object()

Tree = Any  # "t" (a tensor), "n" (a number), or (kind, what, children): see `_tree`


class Shape:
    """The shape of a call that a plan is generated for (Note [plans])."""

    __slots__ = ("args", "bound", "cells", "defaults", "keywords", "kwdefaults", "outputs")

    def __init__(
        self,
        bound: bool,
        args: tuple[Tree, ...],
        keywords: tuple[str, ...],
        outputs: Tree,
        cells: str | None,
        defaults: int | None,
        kwdefaults: bool,
    ) -> None:
        self.bound = bound  # a method call
        self.args = args  # one tree per positional argument
        self.keywords = keywords  # the keyword arguments' names
        self.outputs = outputs  # the tree of f's outputs
        self.cells = cells  # per closure cell of grad_fn: "t" a tensor, "s" shared; None: none
        self.defaults = defaults  # how many default values grad_fn has, None for none
        self.kwdefaults = kwdefaults  # grad_fn has keyword-only defaults

    def fields(self) -> tuple[Any, ...]:
        """All of the shape, to key what is generated for it."""
        return (*self.key(), self.outputs, self.cells, self.defaults, self.kwdefaults)

    def key(self) -> tuple[Any, ...]:
        """What tells the calls that a plan's guard tells apart before f runs."""
        return (self.bound, self.args, self.keywords)


class _Unplannable(Exception):
    pass


def _tree(value: Any, leaf: Callable[[Any], str]) -> Tree:
    """`value` as `_structure.flatten` sees it, containers of the kinds a plan unrolls only."""
    kind = type(value)
    if kind is list or kind is tuple:
        return ("seq", kind, tuple(_tree(v, leaf) for v in value))
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise _Unplannable
        return ("dict", tuple(value), tuple(_tree(value[k], leaf) for k in sorted(value)))
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return ("namedtuple", kind, tuple(_tree(v, leaf) for v in value))
    return leaf(value)


def _input_leaf(value: Any) -> str:
    if (
        type(value) in EXACT_TENSOR_TYPES
        and not value.is_nested
        and not is_functorch_wrapped(value)
    ):
        return "t"
    if type(value) in _NUMBERS:
        return "n"
    raise _Unplannable


def _output_leaf(value: Any) -> str:
    if type(value) is _Tensor:
        return "t"
    raise _Unplannable


def input_key(bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """`Shape.key` of a call, or None when no plan can take it."""
    try:
        for value in kwargs.values():
            if type(value) not in _KEYWORD_VALUES:
                raise _Unplannable
        trees = tuple(_tree(arg, _input_leaf) for arg in args)
    except _Unplannable:
        return None
    return (bound is not UNBOUND, trees, tuple(kwargs))


def shape_of(key: tuple[Any, ...], result: Any, grad_fn: Any) -> Shape | None:
    """The shape of a call whose `input_key` is `key` and whose f returned `(result,
    grad_fn)`, or None when no plan can take it."""
    if "t" not in _leaves(key[1]) or type(grad_fn) is not types.FunctionType:
        return None
    try:
        outputs = _tree(result, _output_leaf)
    except _Unplannable:
        return None
    defaults, kwdefaults = grad_fn.__defaults__, grad_fn.__kwdefaults__
    if (defaults and not plain(defaults)) or (kwdefaults and not plain(kwdefaults.values())):
        return None
    cells: str | None = None
    if grad_fn.__closure__ is not None:
        cells, tensors = "", set()
        for cell in grad_fn.__closure__:
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name f assigns later)
                return None
            if type(value) in EXACT_TENSOR_TYPES and id(value) not in tensors:
                tensors.add(id(value))
                cells += "t"
            elif type(value) in PLAIN_TYPES or not isinstance(value, _UNSHARED):
                cells += "s"
            else:
                return None
    bound, args, keywords = key
    count = None if defaults is None else len(defaults)
    return Shape(bound, args, keywords, outputs, cells, count, kwdefaults is not None)


def _leaves(trees: Any) -> list[str]:
    """The leaves of trees (or of one tree), in flattening order."""
    if type(trees) is str:
        return [trees]
    if type(trees) is tuple and trees and type(trees[0]) is str and trees[0] in _KINDS:
        return [leaf for child in trees[2] for leaf in _leaves(child)]
    return [leaf for tree in trees for leaf in _leaves(tree)]


_KINDS = frozenset({"seq", "dict", "namedtuple"})


class Source:
    """Generated code being written: lines, and the constants it names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}

    def constant(self, value: Any) -> str:
        name = f"K{len(self.constants)}"
        self.constants[name] = value
        return name

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def unpack(self, indent: int, expr: str, tree: Tree, prefix: str, fail: str) -> list[str]:
        """Lines that check the containers of `tree` at `expr` (a name), returning `fail`
        when one differs, and bind its leaves; the leaves' names, in flattening order."""
        if type(tree) is str:
            return [expr]
        kind, what, children = tree
        names = [f"{prefix}_{i}" for i in range(len(children))]
        if kind == "seq":
            guard = f"type({expr}) is not {what.__name__} or len({expr}) != {len(children)}"
        elif kind == "namedtuple":
            guard = f"type({expr}) is not {self.constant(what)}"
        else:
            guard = f"type({expr}) is not dict or tuple({expr}) != {self.constant(what)}"
        self.add(indent, f"if {guard}:")
        self.add(indent + 1, f"return {fail}")
        if kind == "dict":
            for name, key in zip(names, sorted(what), strict=True):
                self.add(indent, f"{name} = {expr}[{key!r}]")
        elif names:
            self.add(indent, f"{', '.join(names)}, = {expr}")
        return [leaf for n, c in zip(names, children, strict=True) for leaf in self.unpack(indent, n, c, n, fail)]  # fmt: skip

    def compile(self, filename: str, names: dict[str, Any]) -> Any:
        """The function `make` returns, made with `names` and the constants."""
        return self.maker(filename, names)(**names, **self.constants)

    def maker(self, filename: str, names: Iterable[str]) -> Callable[..., Any]:
        """`make`, which takes `names` and the constants by keyword."""
        source = f"def make({', '.join([*names, *self.constants])}):\n" + "\n".join(self.lines) + "\n"  # fmt: skip
        return _compiled(source, filename)


@functools.lru_cache(maxsize=256)
def _compiled(source: str, filename: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["make"]  # type: ignore[no-any-return]


def rebuild(tree: Tree, names: list[str], source: Source) -> str:
    """The expression that rebuilds `tree` from its leaves' names, as `_structure.unflatten`."""
    it = iter(names)

    def build(node: Tree) -> str:
        if type(node) is str:
            return next(it)
        kind, what, children = node
        if kind == "dict":
            by_key = dict(zip(sorted(what), map(build, children), strict=True))
            return "{" + ", ".join(f"{key!r}: {by_key[key]}" for key in what) + "}"
        parts = [build(child) for child in children]
        if kind == "namedtuple":
            return f"{source.constant(what)}({', '.join(parts)})"
        if what is list:
            return f"[{', '.join(parts)}]"
        return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"

    return build(tree)


def call_binder(f: Callable[..., Any], shape: Shape, kind: str) -> Callable[..., Any]:
    """What binds a decoration's names to the call of f's plan for `shape` (Note [plans]) of one
    `kind` (`make_call`). The code is generated once per shape, kind and name of f: a function
    decorated again (inside `forward`, on every call) binds its own f and callbacks to the same
    code."""
    qualname = getattr(f, "__qualname__", "f")
    return _call_maker(shape.fields(), kind, getattr(f, BOUND_KEYWORD, False), qualname)


def make_call(
    f: Callable[..., Any],
    shape: Shape,
    bind: Callable[..., Any],
    holds: Callable[[], bool],
    apply: Callable[..., Any],
    checked: Callable[..., list[Any]],
    general: Callable[..., Any],
    unplanned: Callable[..., Any],
    unplanned_fresh: Callable[[Any], Any],
    captured: CapturedRule = "refuse",
) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
    """The call of f's plan for `shape` (Note [plans]) of the kind `bind` was made for
    (`call_binder`): "none" when f provably reads no Parameter, while the per-call check
    `holds`; "watched" when it runs under the watcher, skipping the walk of Note [lost
    gradients] while `holds` (unbound calls only), and settling by the rule `captured`
    otherwise. `apply` applies the plan's node, whose backward hands what it cannot pass to
    `checked`."""
    upstreams, upstreams_ok = _upstreams_check(f, len(_leaves(shape.outputs)))
    return bind(  # type: ignore[no-any-return]
        f, holds, apply, checked, general, unplanned, unplanned_fresh, upstreams, upstreams_ok,
        captured,
    )  # fmt: skip


@functools.lru_cache(maxsize=256)
def _call_maker(
    fields: tuple[Any, ...], kind: str, bound_keyword: bool, qualname: str
) -> Callable[..., Any]:
    """`bind` of the call of a plan (`make_call`), which takes the names of one decoration in
    the order of `_DECORATION_NAMES` (`call_binder`)."""
    shape = Shape(*fields)
    src = Source()
    add = src.add
    back = "general(bound, args, kwargs)"
    add(0, "def call(bound, args, kwargs):")
    keywords = shape.keywords
    kw_guard = (
        f"len(kwargs) != {len(keywords)}"
        + "".join(f" or type(kwargs.get({k!r}, MISSING)) not in KEYWORD" for k in keywords)
        if keywords
        else "kwargs"
    )
    add(1, f"if (not ({UNTRANSFORMED}) or bound is {'' if shape.bound else 'not '}UNBOUND")
    add(2, f"    or len(args) != {len(shape.args)} or {kw_guard}):")
    add(2, f"return {back}")
    tops = [f"x{i}" for i in range(len(shape.args))]
    if tops:
        add(1, f"{', '.join(tops)}, = args")
    leaves = [leaf for top, tree in zip(tops, shape.args, strict=True) for leaf in src.unpack(1, top, tree, top, back)]  # fmt: skip
    kinds = _leaves(shape.args)
    inputs = [name for name, k in zip(leaves, kinds, strict=True) if k == "t"]
    checks = [
        f"type({a}) not in EXACT or {a}.is_nested or is_wrapped({a})"
        if k == "t"
        else f"type({a}) not in NUMBERS"
        for a, k in zip(leaves, kinds, strict=True)
    ]
    add(1, f"if {' or '.join(checks)}:")
    add(2, f"return {back}")
    passed = ", ".join(tops)
    if not shape.bound:
        f_call = f"f({passed}{', **kwargs' if keywords else ''})"
    elif bound_keyword:
        f_call = f"f({passed}, {BOUND_KEYWORD}=bound{', **kwargs' if keywords else ''})"
    else:
        f_call = f"f(bound{', ' if passed else ''}{passed}{', **kwargs' if keywords else ''})"

    # Without grad: f's outputs, no node (item 9); as `_run.fresh` makes them.
    add(1, "if not grad_enabled():")
    add(2, f"out = {f_call}")
    add(2, "if type(out) is not tuple or len(out) != 2 or type(out[1]) is not FunctionType:")
    add(3, "return unplanned_fresh(out)")
    add(2, "result = out[0]")
    outs = src.unpack(2, "result", shape.outputs, "r", "unplanned_fresh(out)")
    add(2, f"if {' or '.join(f'type({r}) is not Tensor' for r in outs)}:")
    add(3, "return unplanned_fresh(out)")
    fresh = [f"({r}.view_as({r}) if {r}.requires_grad else {r}.detach())" for r in outs]
    add(2, f"return {rebuild(shape.outputs, fresh, src)}")

    watched = kind == "watched"
    rest = "out, bound, args, kwargs, watcher" if watched else "out, bound, args, kwargs, None"
    add(1, f"if any_autocast(){'' if watched else ' or not holds()'}:")
    add(2, f"return {back}")
    # The inputs' version counters before f runs: f may not edit one in place (`_run.py`).
    versions = [f"e{i}" for i in range(len(inputs))]
    add(1, "; ".join(f"{e} = {a}._version" for e, a in zip(versions, inputs, strict=True)))
    if watched:
        add(1, "watcher = Watcher()")
        add(1, "own = False" if shape.bound else "own = holds()  # Note [Parameters of f's own]")
        add(1, "push(watcher)")
        add(1, "if not own:")
        add(2, "open_cache()")
        add(1, "try:")
        add(2, f"out = {f_call}")
        add(1, "finally:")
        add(2, "pop()")
        add(2, "watcher.places = None if own else close_cache()")
    else:
        add(1, f"out = {f_call}")
    add(1, f"if {' or '.join(f'{a}._version != {e}' for a, e in zip(inputs, versions, strict=True))}:")  # fmt: skip
    add(2, f"unedited(f, bound, args, ({', '.join(versions)},))")
    add(1, "if type(out) is not tuple or len(out) != 2:")
    add(2, f"return unplanned({rest})")
    add(1, "result, grad_fn = out")
    outs = src.unpack(1, "result", shape.outputs, "r", f"unplanned({rest})")
    add(1, f"if type(grad_fn) is not FunctionType or {' or '.join(f'type({r}) is not Tensor' for r in outs)}:")  # fmt: skip
    add(2, f"return unplanned({rest})")
    if watched:
        add(1, "if watcher.places:")
        add(2, f"return unplanned({rest})")
        add(1, "variables = [*watcher.found.values()]")
        # A Parameter passed as an argument is an input.
        add(1, f"if {' or '.join(f'type({a}) is not Tensor' for a in inputs)}:")
        add(2, f"variables = [v for v in variables if {' and '.join(f'v is not {a}' for a in inputs)}]")  # fmt: skip
        add(1, "if not own:")
        add(2, f"variables = settle(f, bound, kwargs, result, ({', '.join(inputs)},), variables, (), captured)")  # fmt: skip
        add(2, "if type(variables) is not list:  # slots' tensors (`_captures.SlotVariables`)")
        add(3, f"return unplanned({rest})")
        add(1, "if variables:")
        add(2, "if not (grad_fn.__code__ is accepted[0] or accepts(grad_fn, accepted)):")
        add(3, f"return unplanned({rest})")
        add(1, f"elif not ({' or '.join(f'{a}.requires_grad' for a in inputs)}):")
        add(2, f"return {rebuild(shape.outputs, fresh, src)}  # nothing to record (item 39)")
        variables, more_inputs = "variables", ", *variables"
    else:
        add(1, f"if not ({' or '.join(f'{a}.requires_grad' for a in inputs)}):")
        add(2, f"return {rebuild(shape.outputs, fresh, src)}  # nothing to record (item 39)")
        variables, more_inputs = "None", ""
    # Note [outputs that alias an input] (`_run.py`): such outputs take the general code.
    alias = [f"{r}._base is not None" for r in outs]
    alias += [f"{r} is {a}" for r in outs for a in inputs]
    alias += [f"{r} is {q}" for i, r in enumerate(outs) for q in outs[i + 1 :]]
    add(1, f"if {' or '.join(alias)}:")
    add(2, f"return unplanned({rest})")
    if len(outs) > 1:  # grad_fn takes one upstream per output (`check_upstreams`)
        which = "bool(variables)" if watched else "0"
        add(1, f"if grad_fn.__code__ is not upstreams_ok[{which}] or grad_fn.__dict__:")
        add(2, f"upstreams(grad_fn, {variables if watched else '()'})")
    add(1, "closure = grad_fn.__closure__")
    add(1, "defaults = grad_fn.__defaults__")
    guard = ["closure is None" if shape.cells is None else "closure is not None"]
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
    add(2, f"return unplanned({rest})")
    cells = shape.cells or ""
    cell_names = [f"c{i}" for i in range(len(cells))]
    values = [f"v{i}" for i in range(len(cells))]
    if cells:
        add(1, "try:")
        add(2, f"{', '.join(cell_names)}, = closure")
        add(2, "; ".join(f"{v} = {c}.cell_contents" for c, v in zip(cell_names, values, strict=True)))  # fmt: skip
        add(1, "except ValueError:  # an empty cell, or another number of cells")
        add(2, f"return unplanned({rest})")
        saved = [v for v, k in zip(values, cells, strict=True) if k == "t"]
        shared = [c for c, k in zip(cell_names, cells, strict=True) if k == "s"]
        cell_checks = [f"type({v}) not in EXACT" for v in saved]
        cell_checks += [f"{a} is {b}" for i, a in enumerate(saved) for b in saved[i + 1 :]]
        cell_checks += [
            f"(type({v}) not in PLAIN and isinstance({v}, UNSHARED))"
            for v, k in zip(values, cells, strict=True)
            if k == "s"
        ]
        if cell_checks:
            add(1, f"if {' or '.join(cell_checks)}:")
            add(2, f"return unplanned({rest})")
    else:
        saved, shared = [], []
    metas = ", ".join(INPUT_META.format(t=a) for a in inputs)
    kwd = "dict(kwd)" if shape.kwdefaults else "None"
    plan = f"checked, grad_fn.__code__, grad_fn.__globals__, defaults, {variables}, {kwd}, {''.join(c + ', ' for c in shared)}{metas}"  # fmt: skip
    saved_tuple = f"({', '.join(saved)}{',' if len(saved) == 1 else ''})"
    if type(shape.outputs) is str:
        add(1, f"return apply((result.detach(), ({plan}), {saved_tuple}), {', '.join(inputs)}{more_inputs})")  # fmt: skip
    else:
        detached = ", ".join(f"{r}.detach()" for r in outs)
        got = [f"o{i}" for i in range(len(outs))]
        add(1, f"{', '.join(got)}, = apply((({detached},), ({plan}), {saved_tuple}), {', '.join(inputs)}{more_inputs})")  # fmt: skip
        add(1, f"return {rebuild(shape.outputs, got, src)}")
    src.lines = ["    " + line for line in src.lines] + ["    return call"]
    if watched:
        src.lines.insert(
            0, "    accepted = [None]  # the code of the last grad_fn that took `variables=`"
        )
    name = "" if kind == "none" else f"{kind} "
    filename = f"<tf_compat_grad {name}plan of {qualname}>"
    # The names of every plan and the constants are bound here, once per form; a decoration
    # binds its own (`make_call`).
    src.lines = ["    def bind(" + ", ".join(_DECORATION_NAMES) + "):"]  + ["    " + line for line in src.lines] + ["    return bind"]  # fmt: skip
    return src.maker(filename, _CALL_NAMES)(**_CALL_NAMES, **src.constants)  # type: ignore[no-any-return]


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


def _upstreams_check(
    f: Callable[..., Any], n_outputs: int
) -> tuple[Callable[[Any, Any], None], list[Any]]:
    """`check_upstreams` for a plan of n outputs, and the code of the last grad_fn it passed,
    without variables and with (one with no attributes, which could change its signature)."""
    ok: list[Any] = [None, None]  # without variables, with

    def upstreams(grad_fn: types.FunctionType, variables: Any) -> None:
        check_upstreams(f, grad_fn, n_outputs, variables)
        ok[bool(variables)] = None if grad_fn.__dict__ else grad_fn.__code__

    return upstreams, ok


# The names of a plan's call that are the same for every plan, then those of one decoration.
_CALL_NAMES: dict[str, Any] = {
    **MODE_NAMES, "UNBOUND": UNBOUND, "MISSING": _MISSING, "KEYWORD": _KEYWORD_VALUES,
    "NUMBERS": _NUMBERS, "EXACT": EXACT_TENSOR_TYPES, "PLAIN": PLAIN_TYPES,
    "UNSHARED": _UNSHARED, "Tensor": _Tensor, "FunctionType": types.FunctionType,
    "plain": plain, "is_wrapped": is_functorch_wrapped, "grad_enabled": torch.is_grad_enabled,
    "any_autocast": any_autocast_enabled, "Watcher": ParameterWatcher,
    "push": push_function_mode, "pop": pop_function_mode, "accepts": _accepts_variables,
    "open_cache": open_cache, "close_cache": close_cache, "settle": settle,
    "unedited": _unedited,
}  # fmt: skip
_DECORATION_NAMES = (
    "f", "holds", "apply", "checked", "general", "unplanned", "unplanned_fresh", "upstreams",
    "upstreams_ok", "captured",
)  # fmt: skip
