"""`variables=`: the `nn.Parameter`s that f reads without being passed them (items 32-37),
found by a watcher while f runs, unless a proof from f's code shows that it reads none.

# Note [the Parameter watcher]
TensorFlow's `VariableWatcher` records every trainable variable accessed while f runs. The torch
analogue is a `TorchFunctionMode` that sees every torch call made inside f and keeps the
`nn.Parameter`s with `requires_grad=True` among its arguments, in order of first use. An autograd
graph walk would miss a Parameter that is read but does not reach the output.

Torch keeps the mode stack per thread, so two threads running decorated functions at once never
see each other's Parameters.

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
gets new code, new default values or new attributes. Relative imports, introspection (`__dict__`,
`__globals__`, `inspect.getmodule`, frames) and numpy arrays of Python objects answer "maybe".
The plain tensors the analysis met are listed too: the plans' per-call check also asks that
none of them requires grad, since f's outputs may then depend on a tensor whose gradient would
be lost (Note [lost gradients] in `_captures.py`), which only the general code checks.

# Note [reads read off the code]
When the proof fails only because f's own closure cells or globals hold Parameters, f's own
instructions may still show exactly which of them it reads: `F.linear(x, w, b)` reads w, then
b, on every call. `exact_reads` runs those instructions over symbols instead of values and
answers only for straight-line code (no branch, loop, `try` or `with`) in which each such
Parameter is handed straight to a torch op (a public builtin function of `torch`,
`torch.nn.functional`, `torch.linalg`, `torch.special` or `torch.fft` that torch lists as
overridable by `__torch_function__`), to an operator, or has a torch method called or a
property read on it. It records them in the order the watcher would: at the op's call (a
method is seen when it is called, not when it is looked up), and metadata (`w.shape`,
`w.size()`, `w.nelement()`) is no read. Anything else makes it answer nothing, and f is
watched: such a Parameter handed to a Python function or put in a container, a nested
function called in f or handed to anything, a slice bound, a private attribute,
`requires_grad_()` (it returns the Parameter), a method the Parameter's own `__dict__`
shadows (a shadow added later fails the per-call check). The rest of what f can reach must pass
the proof as before. A plan built on the answer (a "known" plan, Note [plans]) passes the
Parameters among them that need a gradient as the call's variables, without the watcher's
Python call per op, for as long as the per-call check of the names, cells and functions the
analysis read holds.

Not seen, on purpose: a Parameter stored as a Python attribute of a plain tensor, put into
`builtins`, or set as a new attribute of torch or of a standard-library module. Those modules
and tensors are trusted as they come.

Item numbers refer to docs/tensorflow_semantics.md.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.nn import Parameter
from torch.overrides import TorchFunctionMode

from . import _structure
from ._captures import any_needs_grad, close_cache, open_cache, settle
from ._errors import PREFIX, CustomGradientTypeError, describe, fn_name, plural
from ._run import UNBOUND, call_f, split

_Tensor = torch.Tensor
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS


def run_watched(
    f: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    flat_args: Sequence[Any],
    reach: ParameterReach | None = None,
    captures: bool = True,
) -> tuple[Any, Callable[..., Any], list[torch.nn.Parameter]]:
    """Call f once, watching for Parameters unless `reach` proves f reads none (Note [watching
    only when needed]): its outputs, grad_fn and variables; with `captures`, the tensors f's
    outputs reach outside its arguments are settled too (Note [lost gradients])."""
    if reach is not None and not reach.possible(
        kwargs.values() if bound is UNBOUND else (*kwargs.values(), bound)
    ):
        result, grad_fn = split(f, call_f(f, bound, args, kwargs))
        if not captures or (reach.calm() and not (kwargs and any_needs_grad(kwargs))):
            return result, grad_fn, []
        variables = settle(f, bound, kwargs, result, flat_args, [])
        check_accepts(f, bound, grad_fn, variables)
        return result, grad_fn, variables
    watcher = ParameterWatcher()
    if not captures:
        watcher.places = None
        with watcher:
            out = call_f(f, bound, args, kwargs)
    else:
        with watcher:
            open_cache()
            try:
                out = call_f(f, bound, args, kwargs)
            finally:
                watcher.places = close_cache()
    return watched_result(f, bound, out, watcher, flat_args, kwargs)


def watched_result(
    f: Callable[..., Any],
    bound: Any,
    out: Any,
    watcher: ParameterWatcher,
    flat_args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
) -> tuple[Any, Callable[..., Any], list[torch.nn.Parameter]]:
    """What a watched call of f returned (`out`), as outputs, grad_fn and the Parameters f read
    that are not among the values passed to it (`flat_args`, `kwargs`), with the tensors in
    Parameter places its outputs reach (Note [lost gradients]; not when `watcher.places` is
    None)."""
    result, grad_fn = split(f, out)
    variables: list[Any] = watcher.variables(
        exclude=[*flat_args, *_structure.leaves(kwargs)] if kwargs else flat_args
    )
    check_accepts(f, bound, grad_fn, variables)  # at call time, as TensorFlow (item 33)
    if watcher.places is not None:
        settled = settle(f, bound, kwargs or {}, result, flat_args, variables, watcher.places)
        if settled is not variables:
            check_accepts(f, bound, grad_fn, settled)
            variables = settled
    return result, grad_fn, variables


def check_accepts(
    f: Callable[..., Any], bound: Any, grad_fn: Callable[..., Any], variables: list[Any]
) -> None:
    """Raise unless grad_fn can take the variables f read (item 33)."""
    if variables and not accepts_variables(grad_fn):
        raise CustomGradientTypeError(
            f"{PREFIX}grad_fn of {describe(f)} must accept keyword argument 'variables', since "
            f"function uses variables: {fn_name(f)} reads {plural(len(variables), 'trainable Parameter')} "
            f"that it is not passed ({parameter_names(variables, f, bound)}). Define "
            "`def grad_fn(*upstream, variables=None)` and return `(input_grads, [one gradient "
            "per variable])`, or pass the Parameters as positional arguments."
        ) from None


def accepts_variables(grad_fn: Callable[..., Any]) -> bool:
    """Whether grad_fn can be called with `variables=` (item 33)."""
    code = getattr(grad_fn, "__code__", None)
    if type(grad_fn) is types.FunctionType and code is not None:
        if code.co_flags & _CO_VARKEYWORDS:
            return True
        first, last = code.co_posonlyargcount, code.co_argcount + code.co_kwonlyargcount
        return "variables" in code.co_varnames[first:last]
    try:
        parameters = inspect.signature(grad_fn).parameters.values()
    except (TypeError, ValueError):
        return True  # unreadable signature: let the call itself tell
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "variables" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in parameters
    )


def parameter_names(variables: list[torch.nn.Parameter], f: Callable[..., Any], bound: Any) -> str:
    """Name Parameters the way the user's code reaches them: `self.weight`, `w`, or by shape."""
    known: dict[int, str] = {}
    if isinstance(bound, torch.nn.Module):
        known.update((id(p), f"self.{name}") for name, p in bound.named_parameters())
    if isinstance(f, types.FunctionType) and f.__closure__:
        for name, cell in zip(f.__code__.co_freevars, f.__closure__, strict=True):
            with contextlib.suppress(ValueError):  # an empty cell
                known.setdefault(id(cell.cell_contents), name)
    for name, value in getattr(f, "__globals__", {}).items():
        if isinstance(value, torch.nn.Parameter):
            known.setdefault(id(value), name)
    return ", ".join(
        f"`{known[id(v)]}`" if id(v) in known else f"a Parameter of shape {list(v.shape)}"
        for v in variables
    )


# --- the watcher ---------------------------------------------------------------------------


# Reading a Parameter's metadata is not reading the Parameter (TF: `v.shape` is no read).
_METADATA_PROPERTIES = (
    "shape", "dtype", "device", "requires_grad", "grad", "grad_fn", "is_leaf", "ndim",
    "layout", "is_cuda", "is_sparse", "is_quantized", "is_meta", "_version",
)  # fmt: skip
_METADATA_METHODS = (
    "size", "dim", "numel", "stride", "element_size", "is_contiguous", "is_floating_point",
    "is_complex", "data_ptr", "__len__", "__hash__", "requires_grad_",
)  # fmt: skip
_METADATA: frozenset[Any] = frozenset(
    [getattr(_Tensor, name).__get__ for name in _METADATA_PROPERTIES if hasattr(_Tensor, name)]
    + [getattr(_Tensor, name) for name in _METADATA_METHODS]
)


class ParameterWatcher(TorchFunctionMode):
    """Records the trainable Parameters used by torch calls made while the mode is active."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[int, Parameter] = {}
        # The parametrized weights cached while it watched (Note [lost gradients] in
        # `_captures.py`); None: the tensors f's outputs reach are not to be settled.
        self.places: list[torch.Tensor] | None = []

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if kwargs is None:
            kwargs = {}
        if func not in _METADATA:
            self._scan(args)
            if kwargs:
                self._scan(kwargs.values())
        return func(*args, **kwargs)

    def _scan(self, values: Iterable[Any]) -> None:
        for value in values:
            kind = type(value)
            if kind is _Tensor:  # the common case; Parameter's isinstance check is slow
                continue
            if kind is Parameter or isinstance(value, Parameter):
                if value.requires_grad:
                    self.found.setdefault(id(value), value)
            elif kind is list or kind is tuple:
                self._scan(value)

    def variables(self, exclude: Iterable[Any]) -> list[Parameter]:
        """The Parameters found, first use first, less those passed as arguments."""
        if not self.found:
            return []
        passed = {id(x) for x in exclude if type(x) is not _Tensor and isinstance(x, Parameter)}
        return [p for key, p in self.found.items() if key not in passed]


# --- the proof that f reads no Parameter -------------------------------------------------


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
_MISSING = object()
_MAX_ITEMS = 64


class _Unsafe(Exception):
    """f may reach a Parameter."""


class ParameterReach:
    """Whether one decorated function can read a Parameter; see Note [watching only when
    needed]."""

    __slots__ = ("_f", "_unchanged", "calm", "known", "reads_known", "reads_none")

    def __init__(self, f: Any) -> None:
        self._f = f
        # The Parameters f reads on every call by the last analysis (`exact_reads`: none, or
        # those read off its code), else None; `reads_known` is the per-call check that a
        # non-empty answer still holds, as `reads_none` is for an empty one.
        self.known: list[Parameter] | None = None
        self.reads_known: Callable[[], bool] = _never
        # Whether every name, closure cell and function the last analysis read still holds
        # what it held then (`_unchanged_check`); no analysis yet: never.
        self._unchanged: Callable[[], bool] = _never
        # The fast question of a call with no bound instance and no keyword arguments: True
        # when the last analysis proved that f reads no Parameter and is still valid. Asked
        # before any analysis, it makes the first.
        self.reads_none: Callable[[], bool] = self._first_answer
        # Whether the last analysis still holds and no plain tensor it found f can name
        # requires grad (Note [lost gradients] in `_captures.py`); both fast questions include it.
        self.calm: Callable[[], bool] = _never

    def possible(self, extra: Iterable[Any]) -> bool:
        """False only when f provably reads no Parameter, called with the `extra` objects it
        can also reach (the bound instance of a method call, the keyword arguments)."""
        for value in extra:
            try:
                _check_value(value, _Deps(), set())
            except _Unsafe:
                return True
        if not self._unchanged():
            self._analyse()
        return self.known != []

    def _first_answer(self) -> bool:
        self._analyse()
        return self.reads_none()

    def _analyse(self) -> None:
        self.known, deps = exact_reads(self._f)
        self._unchanged = _unchanged_check(deps)
        self.calm = _unchanged_check(deps, quiet=True) if deps.tensors else self._unchanged
        self.reads_none = self.calm if self.known == [] else _never
        self.reads_known = self.calm if self.known else _never


def _never() -> bool:
    return False


# A function an analysis read: the function, its code, its defaults, its keyword defaults and
# its attributes (the last two as `_items` gives them); each can be rebound after the analysis.
_Function = tuple[types.FunctionType, types.CodeType, Any, Any, Any]


class _Deps:
    """The names, closure cells and functions an analysis read, with what it found there."""

    __slots__ = ("cells", "functions", "names", "tensors")

    def __init__(self) -> None:
        self.names: list[tuple[dict[str, Any], str, Any]] = []
        self.cells: list[tuple[types.CellType, Any]] = []
        self.functions: list[_Function] = []
        self.tensors: list[
            torch.Tensor
        ] = []  # the plain tensors f can name (Note [lost gradients])


def _items(mapping: dict[str, Any] | None) -> tuple[tuple[str, Any], ...] | None:
    """A dict's (name, value) pairs, kept apart: the dict can change in place."""
    return tuple(mapping.items()) if mapping else None


def _same_items(then: tuple[tuple[str, Any], ...] | None, now: dict[str, Any] | None) -> bool:
    """`now` holds the very values `then` (from `_items`) lists, and nothing else."""
    if not then or not now or len(now) != len(then):
        return not then and not now
    return all(now.get(name, _MISSING) is value for name, value in then)


def _contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _MISSING


def _unchanged_check(deps: _Deps, quiet: bool = False) -> Callable[[], bool]:
    """A function that tells whether everything `deps` lists still holds what it held (and,
    when `quiet`, that none of the plain tensors it lists requires grad).

    It runs on every call, so it is generated as one expression with each comparison written
    out (`ns0.get('torch', MISSING) is v0 and fn0.__code__ is code0 and ...`), over the objects
    bound as closure variables, and without a loop or a call of its own.
    """
    env: dict[str, Any] = {"MISSING": _MISSING, "contents": _contents, "same": _same_items}
    terms: list[str] = []
    seen: set[tuple[int, str]] = set()
    for k, (namespace, name, value) in enumerate(deps.names):
        if (id(namespace), name) in seen:
            continue
        seen.add((id(namespace), name))
        env[f"ns{k}"], env[f"v{k}"] = namespace, value
        # A name deleted since raises KeyError: the check then answers False.
        read = f"ns{k}.get({name!r}, MISSING)" if value is _MISSING else f"ns{k}[{name!r}]"
        terms.append(f"{read} is v{k}")
    for k, (cell, value) in enumerate(deps.cells):
        env[f"cell{k}"], env[f"c{k}"] = cell, value
        # A cell emptied since raises ValueError: the check then answers False.
        read = f"contents(cell{k})" if value is _MISSING else f"cell{k}.cell_contents"
        terms.append(f"{read} is c{k}")
    for k, (fn, code, defaults, kwdefaults, attributes) in enumerate(deps.functions):
        env[f"fn{k}"], env[f"code{k}"], env[f"d{k}"] = fn, code, defaults
        terms.append(f"fn{k}.__code__ is code{k}")
        empty = []  # the attributes that held nothing: one test for all of them
        for attribute, items, key in (
            ("__defaults__", defaults, f"d{k}"),
            ("__kwdefaults__", kwdefaults, f"kw{k}"),
            ("__dict__", attributes, f"attrs{k}"),
        ):
            if not items:
                empty.append(f"fn{k}.{attribute}")
            elif attribute == "__defaults__":
                terms.append(f"fn{k}.__defaults__ is d{k}")
            else:
                env[key] = items
                terms.append(f"same({key}, fn{k}.{attribute})")
        if empty:
            terms.append(f"not ({' or '.join(empty)})")
    if quiet:
        for k, tensor in enumerate(deps.tensors):
            env[f"t{k}"] = tensor
            terms.append(f"not t{k}.requires_grad")
    return _check_maker(", ".join(env), " and ".join(terms) or "True")(**env)


@functools.lru_cache(maxsize=256)
def _check_maker(names: str, expression: str) -> Callable[..., Callable[[], bool]]:
    """The function that makes a check of `expression` over the objects `names` names,
    compiled once per form: when f reads a name that is rebound on every call, each call costs
    an analysis but no compilation."""
    source = (
        f"def make({names}):\n"
        "    def unchanged():\n"
        "        try:\n"
        f"            return {expression}\n"
        "        except (KeyError, ValueError):\n"
        "            return False\n"
        "    return unchanged\n"
    )
    made: dict[str, Any] = {}
    exec(compile(source, "<tf_compat_grad reach check>", "exec"), made)
    maker: Callable[..., Callable[[], bool]] = made["make"]
    return maker


def _check_value(
    value: Any, deps: _Deps, seen: set[int], direct: dict[tuple[str, str], Parameter] | None = None
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
    deps: _Deps,
    seen: set[int],
    direct: dict[tuple[str, str], Parameter] | None = None,
) -> None:
    """Raise `_Unsafe` unless fn provably reads no Parameter; with `direct`, the Parameters its
    own closure cells and globals hold are put there, keyed `("cell" | "global", name)`, instead
    (`exact_reads` then follows what fn does with them)."""
    deps.functions.append(
        (fn, fn.__code__, fn.__defaults__, _items(fn.__kwdefaults__), _items(fn.__dict__))
    )
    code = _read(fn.__code__)
    if code.names & _UNSAFE_NAMES or any(
        module.partition(".")[0] not in _SAFE_MODULES for module in code.imports
    ):
        raise _Unsafe  # an `import` inside f binds a module the globals do not show
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        contents = _contents(cell)
        deps.cells.append((cell, contents))
        if direct is not None and type(contents) is Parameter:
            direct["cell", name] = contents
        elif contents is not _MISSING:
            _check_value(contents, deps, seen)
    namespace = fn.__globals__
    for name in code.globals:
        value = namespace.get(name, _MISSING)
        deps.names.append((namespace, name, value))  # also when missing: it may be defined later
        if value is _MISSING:
            continue  # a builtin, or a global not yet defined
        if direct is not None and type(value) is Parameter:
            direct["global", name] = value
            continue
        if isinstance(value, types.ModuleType) and value.__name__.partition(".")[0] not in (
            _SAFE_MODULES
        ):
            for attribute in code.names:  # a user module: the attributes f may look up on it
                member = value.__dict__.get(attribute, _MISSING)
                deps.names.append((value.__dict__, attribute, member))  # also when missing
                if member is not _MISSING:
                    _check_value(member, deps, seen)
            continue
        _check_value(value, deps, seen)
    for value in (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()):
        _check_value(value, deps, seen)
    for value in fn.__dict__.values():  # attributes set on the function (`h.w = ...`)
        _check_value(value, deps, seen)


class _Code:
    """What a code object and the code nested in it name."""

    __slots__ = ("globals", "imports", "names")

    def __init__(self) -> None:
        self.names: set[str] = set()  # every global and attribute name
        self.globals: set[str] = set()  # the names looked up in the globals (or builtins)
        self.imports: list[str] = []  # the modules imported


def _read(code: types.CodeType, into: _Code | None = None) -> _Code:
    """Only the names of `globals` are read from f's globals: `exp` in `torch.exp` is an
    attribute of `torch`, and rebinding a global `exp` cannot change what f reads."""
    found = _Code() if into is None else into
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
            _read(const, found)
    return found


# --- the Parameters f provably reads, exactly -----------------------------------------------

# Namespaces whose public builtin functions are torch ops: each hands its tensor arguments to
# `__torch_function__`, so the watcher would record a Parameter passed to one.
_OP_NAMESPACES = frozenset(
    {"torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft"}
)
# `nelement` and `ndimension` reach `__torch_function__` as `numel` and `dim`. `requires_grad_`
# is left out and refused: it returns the Parameter itself, which the analysis would lose.
_METADATA_NAMES = frozenset(_METADATA_PROPERTIES + _METADATA_METHODS + ("nelement", "ndimension"))
_METADATA_NAMES -= {"requires_grad_"}
# What a stack slot holds, besides a Parameter, a `_Module` or a `_Method`; `_OP` is a torch op
# reached by name on a public torch namespace (`F.linear`, `torch.exp`).
_NULL, _OTHER, _CELL, _NESTED, _OP = "null", "other", "cell", "nested", "op"
# Instructions that only move values the simulation needs not follow.
_PLAIN_OPS = frozenset(
    {"NOP", "RESUME", "CACHE", "PRECALL", "COPY_FREE_VARS", "MAKE_CELL", "EXTENDED_ARG"}
)
_OPERATORS = ("BINARY_", "INPLACE_", "UNARY_", "COMPARE_OP")


@functools.cache
def _overridable() -> frozenset[Any]:
    """The functions that hand their tensor arguments to `__torch_function__` (torch's own list:
    `to_dlpack` or `has_torch_function_unary`, say, are not on it)."""
    overridable = torch.overrides.get_overridable_functions()
    return frozenset(fn for functions in overridable.values() for fn in functions)


class _Method:
    """A Parameter's torch method, looked up for a call."""

    __slots__ = ("owner",)

    def __init__(self, owner: Parameter) -> None:
        self.owner = owner


def _tracked(value: Any) -> bool:
    """Whether a stack slot holds what a read must be followed for."""
    return type(value) is Parameter or type(value) is _Method


class _Module:
    __slots__ = ("module",)

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module


def exact_reads(f: Any) -> tuple[list[Parameter] | None, _Deps]:
    """The Parameters f reads on every call, in the watcher's order: none when the proof holds
    (Note [watching only when needed]), those its own code shows when it fails only on f's own
    cells and globals (Note [reads read off the code]), else None; and what the analysis read,
    for the per-call check that it still holds."""
    deps = _Deps()
    direct: dict[tuple[str, str], Parameter] = {}
    try:
        _check_value(f, deps, set(), direct)
    except _Unsafe:
        return None, deps
    if not direct:
        return [], deps
    assert type(f) is types.FunctionType  # only `_check_function` fills `direct`
    return _simulate(f, direct, deps.names), deps


def _simulate(
    f: types.FunctionType,
    direct: dict[tuple[str, str], Parameter],
    shadows: list[tuple[dict[str, Any], str, Any]],
) -> list[Parameter] | None:
    """Run f's own instructions over symbols (a Parameter of `direct`, a torch namespace or op,
    a nested function, anything else), recording each torch op or tensor operator a Parameter
    is handed to; None at any instruction outside the straight-line forms it knows."""
    code = f.__code__
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return None
    if getattr(code, "co_exceptiontable", b""):
        return None  # a try or with block
    namespace = f.__globals__
    local: dict[str, Any] = {}
    cells: dict[str, Any] = {name: _OTHER for name in code.co_cellvars}
    for name in code.co_freevars:
        cells[name] = direct.get(("cell", name), _OTHER)
    stack: list[Any] = []
    reads: list[Parameter] = []
    value: Any

    def read(*values: Any) -> None:
        for value in values:
            if type(value) is Parameter and all(value is not r for r in reads):
                reads.append(value)

    def pop(count: int) -> list[Any]:
        if count > len(stack):
            raise _Unsafe
        taken = stack[len(stack) - count :]
        del stack[len(stack) - count :]
        return taken

    def symbol(value: Any) -> Any:
        if type(value) is Parameter:
            return value
        if isinstance(value, types.ModuleType) and value.__name__ in _OP_NAMESPACES:
            return _Module(value)
        return _OTHER

    def call(callee: list[Any], args: list[Any]) -> None:
        if any(type(c) is Parameter or c is _NESTED for c in callee):
            raise _Unsafe  # a nested function may read what its closure holds
        if any(type(a) is _Method or a is _NESTED for a in args):
            raise _Unsafe  # a Parameter's method or a nested function, called who knows when
        methods = [c.owner for c in callee if type(c) is _Method]
        if methods or any(c is _OP for c in callee):
            read(*methods, *args)  # one torch call: the watcher scans self, then the arguments
        elif any(type(a) is Parameter for a in args):
            raise _Unsafe  # handed to code the simulation does not follow
        stack.append(_OTHER)

    try:
        for instruction in dis.get_instructions(code):
            op, arg, name = instruction.opname, instruction.arg or 0, instruction.argval
            if instruction.opcode in dis.hasjrel or instruction.opcode in dis.hasjabs:
                return None  # a branch or loop: what runs depends on the values
            if op in _PLAIN_OPS or op == "KW_NAMES":  # keyword values are counted in CALL's
                pass
            elif op == "LOAD_CONST":
                stack.append(_OTHER)
            elif op == "PUSH_NULL":
                stack.append(_NULL)
            elif op in ("LOAD_FAST", "LOAD_FAST_CHECK"):
                stack.append(local.get(name, _OTHER))
            elif op == "LOAD_FAST_LOAD_FAST":
                stack.extend(local.get(n, _OTHER) for n in name)
            elif op == "STORE_FAST":
                local[name] = pop(1)[0]
            elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
                stack.append(cells.get(name, _OTHER))
            elif op == "STORE_DEREF":
                value = pop(1)[0]
                if _tracked(value):
                    raise _Unsafe  # a cell a nested function may read later
                cells[name] = value
            elif op == "LOAD_CLOSURE":
                stack.append(_CELL)
            elif op == "LOAD_GLOBAL":
                value = direct.get(("global", name))
                if value is None:
                    value = symbol(namespace.get(name, _MISSING))
                if sys.version_info >= (3, 11) and arg & 1:
                    stack.append(_NULL)
                stack.append(value)
            elif op in ("LOAD_ATTR", "LOAD_METHOD"):
                (owner,) = pop(1)
                method = op == "LOAD_METHOD" or (sys.version_info >= (3, 12) and arg & 1)
                value = _OTHER
                if type(owner) is Parameter:
                    attribute = type(inspect.getattr_static(_Tensor, name, None))  # Python: refused
                    if attribute is not types.GetSetDescriptorType:  # an instance can shadow it
                        instance = vars(owner)
                        if name in instance:
                            raise _Unsafe
                        shadows.append((instance, name, _MISSING))
                    if name in _METADATA_NAMES:
                        pass  # metadata is no read
                    elif name.startswith("_") or name == "requires_grad_":
                        raise _Unsafe  # may not reach torch
                    elif attribute is types.GetSetDescriptorType and not method:
                        read(owner)  # a property: torch sees it as it is looked up
                    elif attribute is types.MethodDescriptorType and method:
                        value = _Method(owner)  # torch sees it when it is called
                    else:
                        raise _Unsafe
                elif type(owner) is _Module and not name.startswith("_"):
                    member = vars(owner.module).get(name)  # no module `__getattr__` runs
                    value = (
                        _OP
                        if type(member) is types.BuiltinFunctionType and member in _overridable()
                        else symbol(member)
                    )
                elif type(owner) is _Method or owner is _NESTED:
                    raise _Unsafe
                stack.extend((_NULL, value) if method else (value,))
            elif op == "MAKE_FUNCTION" or op == "SET_FUNCTION_ATTRIBUTE":
                taken = pop(1 - dis.stack_effect(instruction.opcode, instruction.arg))
                if any(map(_tracked, taken)):
                    raise _Unsafe  # a Parameter as a default value
                stack.append(_NESTED)
            elif op in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SLICE"):
                taken = pop(1 - dis.stack_effect(instruction.opcode, instruction.arg))
                if any(map(_tracked, taken)):
                    raise _Unsafe  # inside a container, it can go anywhere
                # f's `return output, grad_fn`: a tuple with a nested function is one too
                stack.append(_NESTED if any(t is _NESTED for t in taken) else _OTHER)
            elif op == "BINARY_SLICE":  # the watcher sees the slice, not what it holds
                container, *bounds = pop(3)
                if any(map(_tracked, bounds)) or type(container) is _Method:
                    raise _Unsafe
                read(container)
                stack.append(_OTHER)
            elif op.startswith(_OPERATORS) or op == "BINARY_SUBSCR":
                taken = pop(1 - dis.stack_effect(instruction.opcode, instruction.arg))
                if any(type(t) is _Method or t is _NESTED for t in taken):
                    raise _Unsafe
                read(*taken)
                stack.append(_OTHER)
            elif op in ("CALL_FUNCTION", "CALL_FUNCTION_KW"):  # Python 3.10
                kw = 1 if op == "CALL_FUNCTION_KW" else 0
                taken = pop(arg + 1 + kw)
                call(taken[:1], taken[1 : 1 + arg])
            elif op in ("CALL_METHOD", "CALL", "CALL_KW"):
                kw = 1 if op == "CALL_KW" else 0
                taken = pop(arg + 2 + kw)
                call(taken[:2], taken[2 : 2 + arg])
            elif op == "POP_TOP":
                pop(1)  # a value loaded and dropped: not read
            elif op in ("RETURN_VALUE", "RETURN_CONST"):
                if op == "RETURN_VALUE" and _tracked(pop(1)[0]):
                    raise _Unsafe
                return reads
            else:
                return None
    except _Unsafe:
        return None
    return None
