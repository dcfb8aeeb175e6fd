"""The shape of a call that a plan serves (Note [plans] in `_plan.py`), learned from a call of
the general code, and the generated code written for it: `Source`, and the rendering of the
structures a plan unrolls (`_structure.flatten`'s, for lists, tuples, namedtuples and dicts
with string keys).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ._closure import (
    EXACT_TENSOR_TYPES,
    PLAIN_TYPES,
    edits_arguments,
    flat_cells,
    made_cells,
    own_cells,
    plain,
)
from ._run import UNBOUND
from ._torch_internals import is_functorch_wrapped

_Tensor = torch.Tensor
# Positional leaves that are not inputs, and keyword values, that hold no tensor for certain.
NUMBERS = frozenset({bool, int, float, complex, str})
KEYWORD_VALUES = frozenset(PLAIN_TYPES)

Tree = Any  # "t" (a tensor), "n" (a number), or (kind, what, children): see `_tree`


@dataclasses.dataclass(eq=False, repr=False, slots=True)
class Shape:
    """The shape of a call that a plan is generated for (Note [plans])."""

    bound: bool  # a method call
    args: tuple[Tree, ...]  # one tree per positional argument
    keywords: tuple[str, ...]  # the keyword arguments' names
    outputs: Tree  # the tree of f's outputs
    # Per closure cell of grad_fn: "t" a tensor, "p" a Parameter, "s", "o" (f's own) or "m" (a
    # value f made) shared;
    # None: no closure.
    cells: str | None
    defaults: int | None  # how many default values grad_fn has, None for none
    kwdefaults: bool  # grad_fn has keyword-only defaults

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
    if type(value) in NUMBERS:
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
            if type(value) not in KEYWORD_VALUES:
                raise _Unplannable
        trees = tuple(_tree(arg, _input_leaf) for arg in args)
    except _Unplannable:
        return None
    return (bound is not UNBOUND, trees, tuple(kwargs))


def shape_of(key: tuple[Any, ...], result: Any, grad_fn: Any, f: Any) -> Shape | None:
    """The shape of a call of f whose `input_key` is `key` and which returned `(result,
    grad_fn)`, or None when no plan can take it."""
    if "t" not in tree_leaves(key[1]) or type(grad_fn) is not types.FunctionType:
        return None
    code = getattr(f, "__code__", None)
    if edits_arguments(grad_fn.__code__) or (
        type(code) is types.CodeType and _edits_arguments_inside(code)
    ):
        return None  # the general code copies the upstreams: Note [upstreams edited in place]
    try:
        outputs = _tree(result, _output_leaf)
    except _Unplannable:
        return None
    defaults, kwdefaults = grad_fn.__defaults__, grad_fn.__kwdefaults__
    if (defaults and not plain(defaults)) or (kwdefaults and not plain(kwdefaults.values())):
        return None
    cells = None
    if grad_fn.__closure__ is not None:
        if type(code) is types.CodeType:
            cells = flat_cells(grad_fn, own_cells(code), made_cells(code))
        else:
            cells = flat_cells(grad_fn, frozenset(), frozenset())
        if cells is None:
            return None
    bound, args, keywords = key
    count = None if defaults is None else len(defaults)
    return Shape(bound, args, keywords, outputs, cells, count, kwdefaults is not None)


def _edits_arguments_inside(code: types.CodeType) -> bool:
    """Whether a function defined in f (another grad_fn f may return) edits an argument."""
    return any(type(c) is types.CodeType and edits_arguments(c) for c in code.co_consts)


def tree_leaves(trees: Any) -> list[str]:
    """The leaves of trees (or of one tree), in flattening order."""
    if type(trees) is str:
        return [trees]
    if type(trees) is tuple and trees and type(trees[0]) is str and trees[0] in _KINDS:
        return [leaf for child in trees[2] for leaf in tree_leaves(child)]
    return [leaf for tree in trees for leaf in tree_leaves(tree)]


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
            guard = f"type({expr}) is not {what.__name__}"
        elif kind == "namedtuple":
            guard = f"type({expr}) is not {self.constant(what)}"
        else:
            guard = f"type({expr}) is not dict or tuple({expr}) != {self.constant(what)}"
        self.add(indent, f"if {guard}:")
        self.add(indent + 1, f"return {fail}")
        if kind == "dict":
            for name, key in zip(names, sorted(what), strict=True):
                self.add(indent, f"{name} = {expr}[{key!r}]")
        elif kind == "seq":
            self.unpack_exactly(indent, names, expr, fail)
        elif names:
            self.add(indent, f"{', '.join(names)}, = {expr}")
        return [leaf for n, c in zip(names, children, strict=True) for leaf in self.unpack(indent, n, c, n, fail)]  # fmt: skip

    def unpack_exactly(self, indent: int, names: list[str], expr: str, fail: str) -> None:
        """Lines that bind `names` to the items of the list or tuple `expr`, returning `fail`
        when it holds another number of them (its length is not asked first: the unpacking
        tells it)."""
        if not names:
            self.add(indent, f"if {expr}:")
            self.add(indent + 1, f"return {fail}")
            return
        self.add(indent, "try:")
        self.add(indent + 1, f"{', '.join(names)}, = {expr}")
        self.add(indent, "except ValueError:  # another length")
        self.add(indent + 1, f"return {fail}")

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


def unflatten_source(tree: Tree, names: list[str], source: Source) -> str:
    """The expression that rebuilds `tree` from its leaves' names, as `_structure.unflatten`."""
    return _built(tree, iter(names), source)


def _built(node: Tree, names: Iterator[str], source: Source) -> str:
    """`unflatten_source`, taking its leaves' names from `names` (a module function: a nested
    one calling itself would be a reference cycle, left to the cyclic collector per plan)."""
    if type(node) is str:
        return next(names)
    kind, what, children = node
    parts = [_built(child, names, source) for child in children]
    if kind == "dict":
        by_key = dict(zip(sorted(what), parts, strict=True))
        return "{" + ", ".join(f"{key!r}: {by_key[key]}" for key in what) + "}"
    if kind == "namedtuple":
        return f"{source.constant(what)}({', '.join(parts)})"
    if what is list:
        return f"[{', '.join(parts)}]"
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
