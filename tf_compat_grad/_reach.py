"""The reach proof: whether a decorated function can read an `nn.Parameter` at all, read from
what its code names, and the per-call check, generated once per analysis, that what the proof
read still holds (items 32-37).

# Note [watching only when needed]
The watcher sees every torch call inside f, which costs a Python call per op:
for a small op that is most of the decorator's overhead. Most custom gradients are pure
functions of their arguments, and whether f can reach a Parameter at all can be read from what
its code names: its globals, its closure, the attributes it looks up on modules, and the same
for the functions it calls. `ParameterReach.possible` answers "maybe" unless every object f's
code can name is known to hold no Parameter: numbers, strings, plain tensors, torch's and the
standard library's modules and functions, tuples of those, and Python functions that name only
such things. Anything else (an `nn.Module`, a list or dict, an object of a user class, a bound
method of one, a name like `Parameter` or `getattr` that can reach anything) answers "maybe",
and then f is watched. The answer is cached with the objects it was based on and recomputed as
soon as a global, a module attribute or a closure cell it read is rebound, or a function it read
gets new code, new default values or new attributes; a new function of the same code (a
function decorated inside `forward`) takes it after one check of its own closure (Note [a proof
per code] in `_reach_check.py`). Relative imports, introspection (`__dict__`,
`__globals__`, `inspect.getmodule`, frames) and numpy arrays of Python objects answer "maybe".
The plain tensors the analysis met are listed too: the plans' per-call check also asks that
none of them requires grad, since f's outputs may then depend on a tensor whose gradient would
be lost (Note [lost gradients] in `_captures.py`), which only the general code checks.

# Note [Parameters of f's own]
When the proof fails only because f's own closure cells or globals hold Parameters (a layer
`F.linear(x, w, b)` with w and b in its closure), f still runs under the watcher, which says which
of them it read. But nothing else f can name holds a Parameter, and the per-call check
(`ParameterReach.reads_own`) tells that none of the plain tensors it can name requires grad: the
only tensors that require grad and that f's outputs can depend on outside its arguments are then
those Parameters, which reach the outputs only through torch ops the watcher sees. No gradient can
be lost, and the plan skips the walk of Note [lost gradients] (in `_captures.py`).

Not seen, on purpose: a Parameter stored as a Python attribute of a plain tensor, put into
`builtins`, or set as a new attribute of torch or of a standard-library module. Those modules
and tensors are trusted as they come."""

from __future__ import annotations

import dis
import functools
import types
import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.nn import Parameter

from ._closure import plain
from ._errors import bug
from ._reach_check import MISSING, PROOFS, Deps, Taken, checks_maker, contents, items, keep, never
from ._unrecorded import rerunnable, unrecorded

_SAFE_MODULES = frozenset(
    {"torch", "math", "cmath", "numpy", "operator", "functools", "itertools", "builtins",
     "typing", "typing_extensions", "collections", "abc", "numbers", "enum", "dataclasses",
     "tf_compat_grad"}
)  # fmt: skip
# Names that reach objects by name or through introspection, or create or list Parameters.
_UNSAFE_NAMES = frozenset(
    {"globals", "locals", "vars", "eval", "exec", "getattr", "__import__", "import_module",
     "Parameter", "UninitializedParameter", "parameters", "named_parameters",
     "register_parameter", "get_parameter", "state_dict", "modules", "children", "get_objects",
     "getmodule", "getmembers", "get_type_hints", "_getframe", "f_globals", "f_locals",
     "f_back", "__dict__", "__globals__", "__closure__", "cell_contents", "__builtins__",
     "_base"}
)  # fmt: skip
_SAFE_TYPES = (
    type(None), bool, int, float, complex, str, bytes, range, slice, torch.dtype, torch.device,
    torch.Size, torch.layout, torch.memory_format, types.BuiltinFunctionType,
    types.BuiltinMethodType, types.MethodWrapperType, types.WrapperDescriptorType,
    types.MethodDescriptorType, types.GetSetDescriptorType, type(Ellipsis),
)  # fmt: skip
_MAX_ITEMS = 64


class _Unsafe(Exception):
    """f may reach a Parameter."""


class ParameterReach:
    """Whether one decorated function can read a Parameter; see Note [watching only when
    needed]."""

    __slots__ = (
        "_f", "_unchanged", "calm", "proof", "reads_none", "reads_own", "rerun", "unrecorded"
    )  # fmt: skip

    def __init__(self, f: Any) -> None:
        self._f = f
        # The answer of an earlier function of f's code, where it holds for f too (Note [a
        # proof per code] in `_reach_check.py`); else none yet. Looked up and taken here, in one
        # frame: a function decorated inside `forward` takes it on every call.
        make = PROOFS.get(f.__code__) if type(f) is _FUNCTION else None
        (
            # The last analysis's answer (`prove`): "none", "own" or None.
            self.proof,
            # Whether every name, closure cell and function the last analysis read still holds
            # what it held then (`_reach_check.checks_maker`); no analysis yet: never.
            self._unchanged,
            # Whether the last analysis still holds and no plain tensor it found f can name
            # requires grad (Note [lost gradients] in `_captures.py`); both fast questions
            # below are it, or never.
            self.calm,
            # The fast question of a call with no bound instance and no keyword arguments: True
            # when the last analysis proved that f reads no Parameter and is still valid (a
            # plan asks it, made after `possible` made an analysis).
            self.reads_none,
            # The per-call check that an "own" answer still holds (Note [Parameters of f's
            # own]).
            self.reads_own,
            # Whether f's ops need no recording (Note [f unrecorded] in `_unrecorded.py`), for
            # the last analysis: valid while `calm` holds.
            self.unrecorded,
            # Else whether f may run unrecorded and run again for a second derivative (Note [f
            # run again] in `_rerun.py`), on the same terms.
            self.rerun,
        ) = (make(f) if make is not None else None) or _UNPROVED

    def possible(self, extra: Iterable[Any]) -> bool:
        """False only when f provably reads no Parameter, called with the `extra` objects it
        can also reach (the bound instance of a method call, the keyword arguments)."""
        for value in extra:
            try:
                _check_value(value, Deps(), set())
            except _Unsafe:
                return True
        if not self._unchanged():
            self._analyse()
        return self.proof != "none"

    def planned_possible(self) -> bool:
        """`possible(())` for the making of a plan, without the check that the analysis f took
        or made still holds: a plan's per-call check (`calm`) asks that on each of its calls,
        handing the general code a call it no longer holds for."""
        if self._unchanged is never:
            self._analyse()
        return self.proof != "none"

    def _analyse(self) -> None:
        f = self._f
        answer, deps = prove(f)
        make = checks_maker(deps, answer, _runs(f, answer))
        if deps.shared and deps.own is not None:
            keep(f, make)
        taken = make(f)
        if taken is None:
            raise bug("a proof's checks refused the function they were made for")
        (
            self.proof, self._unchanged, self.calm, self.reads_none, self.reads_own,
            self.unrecorded, self.rerun,
        ) = taken  # fmt: skip


_FUNCTION = types.FunctionType
# No analysis yet (`ParameterReach`): never proved, never unchanged.
_UNPROVED: Taken = (None, never, never, never, never, False, False)


def _runs(f: Any, answer: str | None) -> tuple[bool, bool]:
    """Whether f's ops need no recording (Note [f unrecorded] in `_unrecorded.py`), else whether
    f may run unrecorded and run again for a second derivative (Note [f run again] in
    `_rerun.py`), for the proof's answer: read once per analysis (`_reach_check.Taken`)."""
    none_recorded = answer in ("none", "own") and unrecorded(f)
    return none_recorded, answer == "none" and not none_recorded and rerunnable(f)


def _check_value(
    value: Any, deps: Deps, seen: set[int], direct: dict[tuple[str, str], Parameter] | None = None
) -> None:
    """Raise `_Unsafe` unless value provably reads no Parameter; `direct` (for f itself) as
    `_check_function` takes it."""
    if isinstance(value, _SAFE_TYPES):
        return
    if isinstance(value, torch.Tensor):
        if isinstance(value, torch.nn.Parameter):
            raise _Unsafe
        deps.tensors.append(value)
        return
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, types.ModuleType):
        if value.__name__.partition(".")[0] not in _SAFE_MODULES:
            raise _Unsafe  # a user module: its attributes are checked where they are named
        return
    if isinstance(value, types.FunctionType):
        ref = value.__dict__.get("__tf_compat_grad__")  # weak: `_decoration.wrapper_of`
        decorated: Any = ref() if isinstance(ref, weakref.ref) else None
        if decorated is not None and vars(decorated) is value.__dict__:  # `custom_gradient`'s
            _check_value(decorated, deps, seen)
            return
        # Where the code was defined, not `__module__`: `functools.wraps` copies that from what a
        # wrapper wraps (a `recompute_grad` of an `nn.Module` would pass as torch's own code).
        if value.__globals__.get("__name__", "").partition(".")[0] in (
            _SAFE_MODULES - {"tf_compat_grad"}
        ):
            return  # torch's and the standard library's own functions
        _check_function(value, deps, seen, direct)
        return
    if isinstance(value, types.MethodType):
        _check_value(value.__self__, deps, seen)
        _check_value(value.__func__, deps, seen)
        return
    if isinstance(value, (tuple, frozenset)) and len(value) <= _MAX_ITEMS:
        for item in value:
            _check_value(item, deps, seen)
        return
    calls = getattr(type(value), "__tf_compat_grad_calls__", None)
    if calls is not None:  # a decorated function: what it runs is what it reads
        _check_value(calls(value), deps, seen)
        return
    if isinstance(value, type):
        if _package(value) in _SAFE_MODULES and not issubclass(
            value, (torch.nn.Module, torch.nn.Parameter)
        ):
            return
        raise _Unsafe
    if (
        _package(type(value)) == "numpy"
        and getattr(getattr(value, "dtype", None), "kind", "") != "O"
    ):
        return  # numpy arrays, scalars, ufuncs; not arrays of Python objects
    raise _Unsafe


def _package(value: Any) -> str:
    """The top-level package a function or class was defined in ('' when unknown)."""
    module = getattr(value, "__module__", None)
    return module.partition(".")[0] if isinstance(module, str) else ""


def _check_function(
    fn: types.FunctionType,
    deps: Deps,
    seen: set[int],
    direct: dict[tuple[str, str], Parameter] | None = None,
) -> None:
    """Raise `_Unsafe` unless fn provably reads no Parameter; with `direct`, the Parameters its
    own closure cells and globals hold are put there, keyed `("cell" | "global", name)`, instead
    (Note [Parameters of f's own])."""
    entry = (fn, fn.__code__, fn.__defaults__, items(fn.__kwdefaults__), items(fn.__dict__))
    if direct is None:
        deps.functions.append(entry)
    else:  # f itself (Note [a proof per code] in `_reach_check.py`)
        deps.own = entry
        defaults = (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values())
        deps.shared = not fn.__dict__ and plain(defaults)
    code = _read(fn.__code__)
    if code.names & _UNSAFE_NAMES or any(
        module.partition(".")[0] not in _SAFE_MODULES for module in code.imports
    ):
        raise _Unsafe  # an `import` inside f binds a module the globals do not show
    for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True)):  # fmt: skip
        value = contents(cell)
        if direct is None:
            deps.cells.append((cell, value))
            if value is not MISSING:
                _check_value(value, deps, seen)
        elif type(value) is Parameter:
            deps.own_cells.append((i, value, "type"))
            direct["cell", name] = value
        else:
            _check_own(i, value, deps, seen)
    namespace = fn.__globals__
    for name in code.globals:
        value = namespace.get(name, MISSING)
        deps.names.append((namespace, name, value))  # also when missing: it may be defined later
        if value is MISSING:
            continue  # a builtin, or a global not yet defined
        if direct is not None and type(value) is Parameter:
            direct["global", name] = value
            continue
        if isinstance(value, types.ModuleType) and value.__name__.partition(".")[0] not in (
            _SAFE_MODULES
        ):
            for attribute in code.names:  # a user module: the attributes f may look up on it
                member = value.__dict__.get(attribute, MISSING)
                deps.names.append((value.__dict__, attribute, member))  # also when missing
                if member is not MISSING:
                    _check_value(member, deps, seen)
            continue
        _check_value(value, deps, seen)
    for value in (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()):
        _check_value(value, deps, seen)
    for value in fn.__dict__.values():  # attributes set on the function (`h.w = ...`)
        _check_value(value, deps, seen)


def _check_own(i: int, value: Any, deps: Deps, seen: set[int]) -> None:
    """`_check_value` of the value of f's own cell i, noting how a new function of f's code is
    to be checked for the proof to hold for it too (Note [a proof per code] in
    `_reach_check.py`)."""
    if value is MISSING:
        deps.own_cells.append((i, value, "missing"))
        return
    if isinstance(value, _SAFE_TYPES) or type(value) is torch.Tensor:  # read as they are
        deps.own_cells.append((i, value, "tensor" if type(value) is torch.Tensor else "type"))
        return
    read = Deps()  # what is read through it
    try:
        weakref.ref(value)
    except TypeError:
        kind = "held"
    else:
        kind = "same"
    deps.own_cells.append((i, value, kind))
    try:
        _check_value(value, read, seen)
    finally:
        if kind == "held" or read.names or read.cells or read.functions or read.tensors:
            deps.shared = False
            deps.own_cells[-1] = (i, value, "held")
        deps.names += read.names
        deps.cells += read.cells
        deps.functions += read.functions
        deps.tensors += read.tensors


class _Code:
    """What a code object and the code nested in it name."""

    __slots__ = ("globals", "imports", "names")

    def __init__(self) -> None:
        self.names: set[str] = set()  # every global and attribute name
        self.globals: set[str] = set()  # the names looked up in the globals (or builtins)
        self.imports: list[str] = []  # the modules imported


@functools.lru_cache(maxsize=1024)
def _read(code: types.CodeType) -> _Code:
    """What code names, read once per code object: a function decorated again (inside
    `forward`, on every call) is not read again. Only the names of `globals` are read from f's
    globals: `exp` in `torch.exp` is an attribute of `torch`, and rebinding a global `exp`
    cannot change what f reads. Never modified by its callers."""
    found = _Code()
    _read_into(code, found)
    return found


def _read_into(code: types.CodeType, found: _Code) -> None:
    found.names.update(code.co_names)
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        op = instruction.opname
        if op == "IMPORT_NAME":  # after LOAD_CONST level, LOAD_CONST fromlist
            level = instructions[i - 2] if i >= 2 else None
            relative = level is None or level.opname != "LOAD_CONST" or level.argval != 0
            # A relative import (`from .x import w`), or one whose level cannot be read,
            # reaches the user's own package.
            found.imports.append("." + instruction.argval if relative else instruction.argval)
        elif "GLOBAL" in op or op.endswith("_NAME"):  # LOAD_GLOBAL, LOAD_NAME, STORE_GLOBAL, ...
            found.globals.add(instruction.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _read_into(const, found)


# --- the proof's answer ------------------------------------------------------------------


def prove(f: Any) -> tuple[str | None, Deps]:
    """The proof's answer for f: "none" when f provably reads no Parameter (Note [watching only
    when needed]), "own" when the proof fails only on Parameters f's own closure cells and
    globals hold (Note [Parameters of f's own]), else None; and what the analysis read, for the
    per-call check that it still holds."""
    deps = Deps()
    direct: dict[tuple[str, str], Parameter] = {}
    try:
        _check_value(f, deps, set(), direct)
    except _Unsafe:
        return None, deps
    return ("own" if direct else "none"), deps
