"""Moving the tensors a grad_fn closes over into `ctx.save_for_backward`.

# Note [saved closures]
A grad_fn usually closes over tensors (`e = exp(x)` computed in f, or the inputs). Kept alive in
the closure, they would escape everything torch offers for saved tensors: saved-tensor hooks
(`save_on_cpu`, checkpointing) would not see them, an in-place edit after forward would give a
silently wrong gradient instead of torch's version-counter error, and they would live as long as
the graph node instead of being freed right after backward. So `capture` takes the tensors out of
grad_fn's closure cells and default arguments (also inside tuples and namedtuples, and in
functions defined inside f that grad_fn calls), and `Captured.rebuild` makes, for each backward, a
fresh function of the same code whose cells hold the tensors unpacked from `ctx.saved_tensors`.
The original cells are never written: sibling closures made inside f may share them. Cells that
hold no tensor are shared with the rebuilt function as they are, so `nonlocal` state still works.
A tensor held by several cells is saved once. Default values are those grad_fn had when f
returned it, as the cells are. A Parameter in a cell is saved too (torch's version check, the
hooks), but its cell is shared as it is: a hook unpacks another tensor object (checkpointing,
`save_on_cpu`), and grad_fn must find the very Parameter among `variables` (item 35).

A grad_fn whose closure and defaults hold no tensor (nor a function defined inside f) has
nothing to take out and is called as it is, unless it has default values, which are fixed then.

The usual grad_fn, whose cells hold tensors of their own and plain values (`flat_cells`) and
whose defaults hold no tensor, is taken apart the same way by the code a plan generates for it
(Note [plans] in `_plan.py`); `capture` is the general code's. Both make the function again
with `rebuild_source`, written once: `_Template.rebuild` runs it, the plans render it into
their generated backward (`_plan_node.py`).

Lists and dicts are mutable, and a grad_fn may add to one it closes over, so they are shared as
they are (a tuple holding one too). Where f made the cell (`own_cells`; not a list that outlives
the call, which grad_fn may add to on every backward), the tensors they hold when f returns are
saved as well, as a Parameter is: an in-place edit of one before backward (of f's output, which
may be that very tensor) is then torch's version error, as in plain autograd, not a gradient
computed from the edited value. So are the tensors among the attributes of an object that f
made for the call (`made_cells`: a cell of f's own given a call's result, not an argument; a
`SimpleNamespace`, an instance of a class: `attribute_tensors`). The plans leave such a
grad_fn to `capture`. A grad_fn that is not a plain Python function (a bound method, a
`functools.partial`, an object with `__call__`), and the attributes of an object f did not
make (`self`, an argument, `st = self.st`), are shared as they are: the tensors they hold stay
alive on the node, unchecked.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import inspect
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from . import _structure
from ._torch_internals import run_while_tracing

_FunctionType = types.FunctionType
_CellType = types.CellType
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
# A tensor or a Parameter, exactly: no subclass (the cheap paths of `capture` and of the eager
# call take these alone).
EXACT_TENSOR_TYPES = frozenset({_Tensor, torch.nn.Parameter})


def _holds_tensor(value: Any) -> bool:
    """A tensor, or a tuple (namedtuple) holding tensors with tuples alone inside it."""
    if isinstance(value, _Tensor):
        return True
    return (
        isinstance(value, tuple)
        and _tuples_only(value)
        and any(isinstance(leaf, _Tensor) for leaf in _structure.leaves(value))
    )


def _tuples_only(value: tuple[Any, ...]) -> bool:
    return all(
        _tuples_only(item) if isinstance(item, tuple) else not isinstance(item, (list, dict))
        for item in value
    )


class _Tensors:
    """A cell whose value is a tensor or a container of tensors: which saved tensors it holds."""

    __slots__ = ("indices", "spec")

    def __init__(self, indices: list[int | _Kept], spec: _structure.Spec) -> None:
        self.indices = indices  # an int indexes the saved tensors; any other leaf is kept
        self.spec = spec

    def refill(self, saved: Sequence[torch.Tensor]) -> Any:
        values = [saved[i] if isinstance(i, int) else i.value for i in self.indices]
        return _structure.unflatten(self.spec, values)


class _Template:
    """A plain function with the tensors in its closure and defaults taken out: everything
    needed to remake it but those tensors, which go to `saved`."""

    __slots__ = ("cells", "code", "defaults", "globals", "kwdefaults", "name", "qualname")

    def __init__(
        self,
        fn: types.FunctionType,
        inside: str,
        code: types.CodeType | None,
        saved: list[torch.Tensor],
        seen_tensors: dict[int, int],
        seen_functions: dict[int, _Template] | None,
    ) -> None:
        """`code`: f's (for `own_cells`); `seen_functions` is None at the top, until a function
        defined inside f is reached."""
        self.code = fn.__code__
        self.globals = fn.__globals__
        self.name = fn.__name__
        self.qualname = fn.__qualname__
        # Default values, each kept as it is or, holding tensors, as a _Tensors.
        defaults, kwdefaults = fn.__defaults__, fn.__kwdefaults__
        self.defaults = [_default(d, saved, seen_tensors) for d in defaults] if defaults else None
        self.kwdefaults = (
            {key: _default(d, saved, seen_tensors) for key, d in kwdefaults.items()}
            if kwdefaults
            else None
        )
        # Per cell: a cell kept as is, the index of a saved tensor, a _Tensors or a _Template.
        self.cells: list[Any] = []
        cells = self.cells
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name f assigns later)
                cells.append(cell)
                continue
            if isinstance(value, _Tensor):  # the usual case (also a Parameter)
                index = _index(value, saved, seen_tensors)
                cells.append(cell if isinstance(value, _Parameter) else index)
            elif (
                type(value) is _FunctionType
                and value.__closure__
                and value.__qualname__.startswith(inside)
            ):
                if seen_functions is None:
                    seen_functions = {id(fn): self}
                inner = seen_functions.get(id(value))  # reached again (recursion or siblings)
                if inner is None:
                    inner = seen_functions[id(value)] = _Template(
                        value, inside, code, saved, seen_tensors, seen_functions
                    )
                cells.append(inner)
            elif _holds_tensor(value):
                cells.append(_tensor_cell(value, saved, seen_tensors))
            else:
                cells.append(cell)
                if isinstance(value, _CONTAINERS) and code and name in own_cells(code):
                    for leaf in _structure.leaves(value):  # shared, its tensors saved too
                        if isinstance(leaf, _Tensor):
                            _index(leaf, saved, seen_tensors)
                elif code and name in made_cells(code):
                    for attribute in attribute_tensors(value):  # shared, saved too
                        _index(attribute, saved, seen_tensors)

    def rebuild(
        self, saved: Sequence[torch.Tensor], made: dict[int, types.FunctionType] | None = None
    ) -> Callable[..., Any]:
        """The function to call in this backward, its closure tensors refilled from `saved`.

        `made` is None at the top, until a function defined inside f is remade."""
        closure: list[Any] = []
        nested: list[tuple[_Template, Any]] = []
        for cell in self.cells:
            if type(cell) is int:
                closure.append(_CellType(saved[cell]))
            elif type(cell) is _Template:
                inner = _CellType()
                closure.append(inner)
                nested.append((cell, inner))
            elif type(cell) is _Tensors:
                closure.append(_CellType(cell.refill(saved)))
            else:
                closure.append(cell)
        defaults = self.defaults
        fn = _remake(
            self.code,
            self.globals,
            self.name,
            self.qualname,
            tuple(_refill(d, saved) for d in defaults) if defaults else None,
            tuple(closure),
            {k: _refill(d, saved) for k, d in self.kwdefaults.items()} if self.kwdefaults else None,
        )
        if made is not None:
            made[id(self)] = fn
        if nested:
            # Filled once this function exists, so functions that refer to each other resolve.
            if made is None:
                made = {id(self): fn}
            for template, inner in nested:
                inner.cell_contents = made.get(id(template)) or template.rebuild(saved, made)
        return fn


class _Unchanged:
    """What `capture` returns for a grad_fn it leaves as it is."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def rebuild(self, saved: Sequence[torch.Tensor]) -> Callable[..., Any]:
        return self.fn


# A grad_fn with its closure tensors taken out; see Note [saved closures].
Captured = _Template | _Unchanged


def capture(
    grad_fn: Callable[..., Any], inside: str, f: Callable[..., Any]
) -> tuple[Captured, list[torch.Tensor]]:
    """Split `grad_fn` into a tensor-free `Captured` and the tensors to save for backward.

    `inside` is the qualified-name prefix of functions defined inside f
    (``f.__qualname__ + ".<locals>."``): function-valued cells defined there are captured too.
    """
    if type(grad_fn) is not _FunctionType:
        return _Unchanged(grad_fn), []
    saved: list[torch.Tensor] = []
    code = getattr(f, "__code__", None)
    template = _Template(
        grad_fn, inside, code if type(code) is types.CodeType else None, saved, {}, None
    )
    if not saved and grad_fn.__defaults__ is None and grad_fn.__kwdefaults__ is None:
        return _Unchanged(grad_fn), saved  # nothing to take out or to fix
    return template, saved


@functools.lru_cache(maxsize=1024)
def own_cells(code: types.CodeType) -> frozenset[str]:
    """The names of the cells that f's code (and the code made inside it) makes for each call:
    a container in one holds what that call put there, not what other calls left."""
    names = set(code.co_cellvars)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            names |= own_cells(const)
    return frozenset(names)


@functools.lru_cache(maxsize=1024)
def made_cells(code: types.CodeType) -> frozenset[str]:
    """`own_cells` but f's arguments and those given anything but a call's result (`st =
    self.st`): a value in one was made for this call, not its caller's (Note [saved closures])."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return own_cells(code) - frozenset(code.co_varnames[:count]) - _given(code)


def _given(code: types.CodeType) -> frozenset[str]:
    """The cells that code (or code made inside it) stores anything but a call's result in."""
    names, before = set(), ""
    for ins in dis.get_instructions(code):
        if ins.opname == "STORE_DEREF" and not before.startswith("CALL"):
            names.add(ins.argval)
        before = ins.opname
    nested = [_given(const) for const in code.co_consts if type(const) is types.CodeType]
    return frozenset(names.union(*nested))


def attribute_tensors(value: Any) -> list[torch.Tensor]:
    """The tensors among an object's attributes (its `__dict__`, its slots, and lists, tuples
    and dicts there; a module or a class has none here; an `nn.Module` its `__dict__`'s alone,
    its Parameters and buffers read when backward runs), which `capture` saves where f made it."""
    if isinstance(value, types.ModuleType):
        return []
    attributes = getattr(value, "__dict__", None)
    found = list(attributes.values()) if type(attributes) is dict else []
    if isinstance(value, torch.nn.Module):
        return [a for a in found if isinstance(a, _Tensor)]
    for kind in type(value).__mro__:
        if "__slots__" in kind.__dict__:
            for slot in kind.__dict__.values():
                if type(slot) is types.MemberDescriptorType:
                    with contextlib.suppress(AttributeError):  # (a slot not set)
                        found.append(slot.__get__(value))
    return [leaf for a in found for leaf in _structure.leaves(a) if isinstance(leaf, _Tensor)]


def rebuild_source(closure: str, kwdefaults: str | None) -> list[str]:
    """The lines that make grad_fn again for one backward, as `grad_fn`, from its `code`,
    `namespace`, `name`, `qualname` and `defaults`, the expression `closure` and the keyword
    defaults `kwdefaults` (an expression, None for none): the one rule of Note [saved closures]
    for the general code and the plans."""
    lines = [
        f"grad_fn = FunctionType(code, namespace, name, defaults, {closure})",
        "grad_fn.__qualname__ = qualname",
    ]
    if kwdefaults is not None:
        lines.append(f"grad_fn.__kwdefaults__ = {kwdefaults}")
    return lines


def closure_source(cells: str) -> str:
    """The closure of a grad_fn made again from `flat_cells`' description (`cells`, not empty):
    a new cell around each saved tensor, in order (`saved`), and each other cell as it is
    (`c0`, `c1`, ... by position), a Parameter's too (Note [saved closures])."""
    parts, n = [], 0
    for i, k in enumerate(cells):
        parts.append(f"Cell(saved[{n}])" if k == "t" else f"c{i}")  # "p": saved, yet shared
        n += k in "tp"
    return f"({', '.join(parts)},)"


def _remake_maker() -> Callable[..., types.FunctionType]:
    body = "\n    ".join(rebuild_source("closure", "kwdefaults"))
    source = (
        "def remake(code, namespace, name, qualname, defaults, closure, kwdefaults):\n"
        f"    {body}\n    return grad_fn\n"
    )
    namespace: dict[str, Any] = {"FunctionType": _FunctionType}
    exec(compile(source, "<tf_compat_grad rebuild>", "exec"), namespace)
    return namespace["remake"]  # type: ignore[no-any-return]


_remake = _remake_maker()
# Cell values that `capture` does not share with the rebuilt grad_fn as they are.
UNSHARED = (_Tensor, tuple, _FunctionType)
# The containers whose tensors `capture` saves in a cell of f's own (Note [saved closures]).
_CONTAINERS = (list, dict, tuple)
# Cell values that `capture` does not share alone in a cell of f's own.
UNSHARED_OWN = (*UNSHARED, list, dict)


def flat_cells(
    grad_fn: types.FunctionType, own: frozenset[str], made: frozenset[str]
) -> str | None:
    """How the rebuild of grad_fn goes when `capture` would make each cell of its closure a
    saved tensor or share it as it is: per cell "t" (a tensor, exactly, held by no other
    cell), "p" (such a Parameter: saved, and its cell shared), "s" (a value `capture` shares),
    "o" (the same in a cell of f's own, `own`: `own_cells`, where a list or dict would not
    be shared alone) or "m" (the same in a cell of a value f made, `made`: `made_cells`, where
    an object holding tensors would not be either); None when a cell is anything else (empty,
    a tensor held twice or a subclass, a tuple, a function, a list or dict of f's own, an
    object f made that holds tensors), which only `capture` takes apart."""
    cells, tensors = "", set()
    for name, cell in zip(grad_fn.__code__.co_freevars, grad_fn.__closure__ or (), strict=True):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (a name f assigns later)
            return None
        if type(value) in EXACT_TENSOR_TYPES and id(value) not in tensors:
            tensors.add(id(value))
            cells += "p" if type(value) is _Parameter else "t"
        elif name in own:
            if type(value) not in PLAIN_TYPES and (
                isinstance(value, UNSHARED_OWN) or (name in made and attribute_tensors(value))
            ):
                return None
            cells += "m" if name in made else "o"
        elif type(value) in PLAIN_TYPES or not isinstance(value, UNSHARED):
            cells += "s"
        else:
            return None
    return cells


def plain(values: Iterable[Any]) -> bool:
    """Default values that hold no tensor for certain (`None`, numbers, strings)."""
    for value in values:  # noqa: SIM110 (a loop costs less than all() and a generator)
        if type(value) not in PLAIN_TYPES:
            return False
    return True


PLAIN_TYPES = frozenset({type(None), bool, int, float, complex, str})


def _index(tensor: torch.Tensor, saved: list[torch.Tensor], seen: dict[int, int]) -> int:
    """Where `tensor` stands in `saved`, saving it once however many cells hold it."""
    index = seen.get(id(tensor))
    if index is None:
        index = seen[id(tensor)] = len(saved)
        saved.append(tensor)
    return index


def _tensor_cell(value: Any, saved: list[torch.Tensor], seen: dict[int, int]) -> _Tensors:
    leaves, spec = _structure.flatten(value)
    indices: list[int | _Kept] = []
    for leaf in leaves:
        if isinstance(leaf, _Tensor):
            index = _index(leaf, saved, seen)  # a Parameter: saved, yet kept
            indices.append(_Kept(leaf) if isinstance(leaf, _Parameter) else index)
        else:
            indices.append(_Kept(leaf))
    return _Tensors(indices, spec)


def _default(value: Any, saved: list[torch.Tensor], seen: dict[int, int]) -> Any:
    return _tensor_cell(value, saved, seen) if _holds_tensor(value) else value


def _refill(value: Any, saved: Sequence[torch.Tensor]) -> Any:
    return value.refill(saved) if isinstance(value, _Tensors) else value


class _Kept:
    """A non-tensor leaf next to tensors in a captured container."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


# Note [upstreams edited in place]
# TensorFlow code often writes `dy *= scale` or `grad += other` in grad_fn: there it binds a new
# tensor. On a torch tensor it edits the upstream gradient in place, and autograd hands that
# very tensor to the other nodes that take the same gradient (both sides of an addition) and
# the caller's `grad_outputs`: their gradients would silently change. `edits_arguments` reads
# a grad_fn's code (and the functions defined in it) for an edit of one of its arguments: an
# augmented assignment to it, an in-place method (`mul_`) called on it, an indexed assignment
# into it, or an `out=` anywhere; the general code then calls grad_fn with copies of the
# upstreams (`Record.gradients`), and no plan takes it (`_plan_shape.shape_of`). The compile
# nodes' backwards ask the same question (`edits_upstreams`, a constant of the traced backward:
# Note [f inside the compile node] in `_compile_node.py`). An edit through another name (`g =
# dy; g *= 2`, a loop variable, a helper defined elsewhere) is not seen. A grad_fn with no
# `__code__` of its own (a `functools.partial`, an object with `__call__`) is read through the
# code it runs (`code_of`).


@functools.lru_cache(maxsize=1024)
def edits_arguments(code: types.CodeType) -> bool:
    """Whether a function of `code`, or one defined in it, may edit an argument in place (Note
    [upstreams edited in place])."""
    flags = code.co_flags
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(flags & inspect.CO_VARARGS) + bool(flags & inspect.CO_VARKEYWORDS)
    arguments = set(code.co_varnames[:count])
    instructions = list(dis.get_instructions(code))
    for i, ins in enumerate(instructions):
        name = ins.opname
        if name.startswith("INPLACE_") or (name == "BINARY_OP" and ins.argrepr.endswith("=")):
            after = instructions[i + 1 : i + 6]
            if any(a.opname in ("STORE_SUBSCR", "STORE_ATTR") for a in after):
                return True
            if after and after[0].opname.startswith("STORE") and _names(after[0]) & arguments:
                return True
        elif name in ("STORE_SUBSCR", "STORE_SLICE", "DELETE_SUBSCR"):
            if any(_names(b) & arguments for b in instructions[max(i - 3, 0) : i]):
                return True
        elif name in ("LOAD_ATTR", "LOAD_METHOD") and _in_place(ins.argval) and i:
            before = instructions[i - 1]  # `dy.mul_`, or `upstream[0].mul_`
            if before.opname == "BINARY_SUBSCR" and i >= 3:
                before = instructions[i - 3]
            if _names(before) & arguments:
                return True
    for const in code.co_consts:
        if type(const) is tuple and "out" in const:
            return True
        if type(const) is types.CodeType and edits_arguments(const):
            return True
    return False


@run_while_tracing
def edits_upstreams(code: Any) -> bool:
    """Whether a grad_fn of this code (its `__code__`, or `code_of` it) edits its arguments in
    place, which then get copies of the upstreams (Note [upstreams edited in place]). A
    constant while Dynamo traces: one answer per code object, no guard."""
    return type(code) is types.CodeType and edits_arguments(code)


def code_of(grad_fn: Any) -> Any:
    """The code that a grad_fn with no `__code__` of its own runs: a `functools.partial`'s
    function's, an object's `__call__`'s; None where there is none."""
    while isinstance(grad_fn, functools.partial):
        grad_fn = grad_fn.func
    code = getattr(grad_fn, "__code__", None)
    call = getattr(type(grad_fn), "__call__", None)  # noqa: B004 (its code is read)
    return code or getattr(call, "__code__", None)


def _names(ins: dis.Instruction) -> set[str]:
    """The local names an instruction loads or stores (two for the fused ones of 3.13)."""
    if not (ins.opname.startswith(("LOAD_FAST", "STORE_FAST", "LOAD_DEREF", "STORE_DEREF"))):
        return set()
    value = ins.argval
    return set(value) if type(value) is tuple else {value}


def _in_place(attribute: object) -> bool:
    return type(attribute) is str and attribute.endswith("_") and not attribute.startswith("__")


def unshared(upstream: Sequence[Any]) -> list[Any]:
    """Copies of the upstream tensors, for a grad_fn that edits its arguments in place."""
    return [u.clone() if isinstance(u, _Tensor) else u for u in upstream]
