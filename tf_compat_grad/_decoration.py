"""What the decorations of one code object share, and the function a decorated plain function
is: its attributes copied from f (`Decoration.attributes`) and its code placed in f's file.

Note [a decorated function is a function]
`inspect.getfile` and `getsourcefile` (and tools built on them: debuggers, documentation generators,
IPython's `??`) take a function, a method, a class, a module or code, and test that with
`isinstance`, which no wrapper object passes. So for a plain function the decorator returns a
function (`Decoration.function`): its code is placed in f's file, it calls its `CustomGradient`, and
it shares that wrapper's attributes (`__tf_compat_grad__` names it, weakly: `wrapper_of`). Being a
function, it is also what Python makes of a function: bound when a class holds it, atomic for
`copy`, pickled by reference (by the name f has where it is defined, so `g = custom_gradient(f)`
cannot be pickled, as with any decorator). So the wrapper object stays what is returned where f will
be a method, whose instance it binds without making it an input (item 4): f defined in a class body
(its `__qualname__` is `Class.name`) or taking `self` or `cls` first (`Class.method =
custom_gradient(f)`), and where f is not a function (an `nn.Module`, a partial, a callable object),
which `deepcopy` copies with its state.

Note [the inline mark]
Dynamo traces a function whose own attributes hold `_torchdynamo_inline` by tracing that value
instead, guarding the function by its type alone (as it does for the wrappers `torch.compile` and
TorchScript make). Where Dynamo traces the compile route (`DYNAMO_TRACES_WATCHER`), a decorated
function's attributes hold its wrapper's compile closure there (`CustomGradient._compiling`), so
that the way in costs that closure's guard alone, not also the function's, `_caller`'s and
`is_compiling`'s (Note [compile guards] in `_compile.py`). `functools.wraps` copies a function's
attributes into the user's wrapper, which Dynamo would then trace as the closure, the wrapper's
own body skipped; so the attributes are `_Attributes`, a dict whose iteration, views, `copy`,
`|`, `len` and repr leave the mark out: `dict.update`, `{**d}` and `dict(d)` read a dict whose
`__iter__` is not dict's through its `keys()`, `copy` and `pickle` through its `items()`. Dynamo
reads the mark with `inspect.getattr_static` (`dict.get`), as attribute lookup reads the dict
itself. What it costs: Dynamo reads the function's `__code__` from the closure it traces (as
for torch's wrappers), and on torch 2.13 its other attributes too, so that a compiled frame
reading one set on the function runs as Python there (refused under `fullgraph=True`); torch
2.14 and 2.15 read those from the function. Not seen: another function given this very dict as
its own (`w.__dict__ = f.__dict__`) carries the mark, and Dynamo traces it as f.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import operator
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ._compile_exits import under_transform_reason
from ._eager import Shared
from ._errors import describe
from ._record import per_code
from ._script import refuse_function
from ._torch_internals import (
    DYNAMO_TRACES_WATCHER,
    inlined_only,
    older_torch_reason,
    outside_compile,
)


class Decoration:
    """What the decorations of one code object share (Note [decorated again] in `_eager.py`):
    the eager paths' classes and learned shapes; f's description and the calls that leave the
    compiled graph with their reasons; the code of the function `function` returns, placed in
    f's file (made when first asked for); and whether f will be a method. No slots: Dynamo
    reads its attributes where it traces a method's call (older torch reads no slot)."""

    def __init__(self, f: Callable[..., Any]) -> None:
        self.described = describe(f)
        self.outside_compile = outside_compile(under_transform_reason(f))
        self.outside_older_compile = outside_compile(older_torch_reason(f))
        self.eager = per_code(f, "eager", Shared) if hasattr(f, "__wrapped__") else Shared(f)
        # The placed code of the method (`place`) and of the function (`function`).
        self.placed: list[types.CodeType | None] = [None, None]
        self.is_method = isinstance(f, types.FunctionType) and _is_method(f)
        # The marks of the function `function` makes: a scripted caller calls it as Python,
        # `torch.jit.script` of it is refused by name (Note [TorchScript] in `_script.py`).
        refuse = functools.partial(refuse_function, self.described)
        self.marks = {**_IGNORED, "__prepare_scriptable__": refuse}
        # The attributes of a decoration of a function (`attributes`), with those that the
        # key of `decoration_of` fixes: f's name, module and qualified name.
        self.template: dict[str, Any] | None = None
        if type(f) is types.FunctionType:
            # (what differs between functions of the code a placeholder: nothing of f's kept)
            self.template = {n: getattr(f, n) if n in _FIXED else None for n in _ASSIGNED}
            self.template["__wrapped__"] = None
            # (`CustomGradient.__init__` sets these: made in place, the dict grows no more)
            self.template.update(dict.fromkeys(_OWN))

    def attributes(self, owner: Any, f: Callable[..., Any]) -> dict[str, Any]:
        """owner's attributes: those `functools.update_wrapper(owner, f)` sets (a function
        decorated inside `forward` is wrapped on every call, so for a function they are copied
        from a template made once per `Decoration`, with those that differ between functions
        of one code read from f). `CustomGradient.__init__` sets the rest."""
        template = self.template
        if template is None:  # not a function
            functools.update_wrapper(owner, f)
            return owner.__dict__  # type: ignore[no-any-return]
        attributes = _Attributes(template) if DYNAMO_TRACES_WATCHER else template.copy()
        attributes.update(zip(_READ, _read(f), strict=True))
        if f.__dict__:
            attributes.update(f.__dict__)
        attributes["__wrapped__"] = f
        return attributes

    def function(self, owner: Any, f: types.FunctionType) -> types.FunctionType:
        """The function `custom_gradient` returns for a plain function f (Note [a decorated
        function is a function]): it calls owner, f's wrapper, with f's metadata (as
        `functools.wraps` copies it) and owner's attributes, which name owner weakly (Note
        [decorated again] in `_eager.py`): one set for both, whatever is set on either later.
        Its code is placed as `place` places a method's, and `inlined_only`: Dynamo traces the
        compile closure in its place (Note [the inline mark]); a frame of its own (after a graph
        break) it leaves to owner's `__call__` (its rest failed on a `torch.func` transform's
        tensor)."""
        code = self.placed[True]
        if code is None:
            code = self.placed[True] = _placed(f, _CALLING)
            inlined_only(code)
        function = types.FunctionType(code, _GLOBALS, f.__name__, None, (types.CellType(owner),))
        # `functools.WRAPPER_ASSIGNMENTS` (the name was given above)
        function.__qualname__ = f.__qualname__
        function.__module__ = f.__module__
        function.__doc__ = f.__doc__
        function.__annotations__ = f.__annotations__
        if _TYPE_PARAMS:
            function.__type_params__ = f.__type_params__  # type: ignore[attr-defined]
        attributes = function.__dict__ = owner.__dict__
        if DYNAMO_TRACES_WATCHER:  # Note [the inline mark]
            attributes[_INLINE] = owner._compiling
        attributes.update(self.marks)
        attributes["__tf_compat_grad__"] = weakref.ref(owner)
        return function

    def place(self, f: Callable[..., Any], method: Any) -> None:
        """Places the code of method (the function a class holds for a decorated method, and
        that of the function `function` makes) at f's first line in f's file: it is the
        user's to `inspect` (`getsourcefile`, `getfile`; `getsource` follows `__wrapped__`),
        to TorchScript's messages and to tracebacks, whose line for it is then the one after
        f's first (its `def` under one decorator). Its body is one line, so that no other line
        of the user's file is shown for it. Made once per `Decoration`: per code object of f,
        unless f wraps another, whose place it takes."""
        placed = self.placed[False]
        if placed is None:
            placed = self.placed[False] = _placed(f, method.__code__)
        method.__code__ = placed


_INLINE = "_torchdynamo_inline"


class _Attributes(dict):  # type: ignore[type-arg]
    """The attributes a decorated function shares with its wrapper: every item but the inline
    mark is shown and copied (Note [the inline mark])."""

    __slots__ = ()

    def _shown(self) -> dict[str, Any]:
        return {name: value for name, value in dict.items(self) if name != _INLINE}

    def __iter__(self) -> Any:
        return iter(self._shown())

    def __len__(self) -> int:
        return dict.__len__(self) - (_INLINE in self)

    def __repr__(self) -> str:
        return repr(self._shown())

    def __or__(self, other: Any) -> Any:
        return self._shown().__or__(other)

    def keys(self) -> Any:
        return self._shown().keys()

    def values(self) -> Any:
        return self._shown().values()

    def items(self) -> Any:
        return self._shown().items()

    def copy(self) -> dict[str, Any]:
        return self._shown()


def decoration_of(f: Callable[..., Any]) -> Decoration:
    """f's `Decoration`: made once per code object of f, name, module and qualified name (a
    function decorated again reuses it), unless f wraps another, which its description and
    place name (its eager classes are still made once per code)."""
    if hasattr(f, "__wrapped__"):
        return Decoration(f)
    global _last
    code_ref, last_names, last = _last
    function = type(f) is types.FunctionType
    if (
        function
        and code_ref() is f.__code__
        and last_names == (f.__name__, f.__module__, f.__qualname__)
    ):
        return last
    code = getattr(f, "__code__", None)
    names = (
        getattr(f, "__name__", None),
        getattr(f, "__module__", None),
        getattr(f, "__qualname__", None),
    )
    decoration: Decoration = per_code(f, names[2], Decoration)
    if function:
        _last = weakref.ref(code), names, decoration
    return decoration


# The code, names and `Decoration` of the last function `decoration_of` was asked for: a
# function decorated inside `forward` asks for the same on every call, found here by identity
# (`per_code` makes a weak reference to the code and reads two dicts).
_last: tuple[Callable[[], Any], Any, Decoration] = (lambda: None, None, None)  # type: ignore[assignment]


def wrapper_of(obj: Any) -> Any:
    """The `CustomGradient` that obj, a function `custom_gradient` made (for a plain function,
    or the one a class holds for a decorated method), names as `__tf_compat_grad__`: weakly
    for a plain function (Note [decorated again] in `_eager.py`), as it is for a method; None
    for anything else."""
    ref = getattr(obj, "__tf_compat_grad__", None)
    return ref() if type(ref) is weakref.ref else ref


# What `functools.update_wrapper` assigns from the function it wraps (`Decoration.attributes`):
# those `decoration_of`'s key fixes, and those read from each function of the code.
_ASSIGNED = functools.WRAPPER_ASSIGNMENTS
_FIXED = ("__module__", "__name__", "__qualname__")
_READ = tuple(n for n in _ASSIGNED if n not in _FIXED)
_read = operator.attrgetter(*_READ)
# The attributes `CustomGradient.__init__` sets, in its order.
_OWN = ("_shared", "_f", "_eager", "_call_eager", "_compiling", "example", "surrogate", "captured")


def _calling() -> types.CodeType:
    """The code of the function `Decoration.function` makes: a call of it calls its wrapper."""
    wrapper: Any = None

    def function(*args: Any, **kwargs: Any) -> Any:  # one line: see `Decoration.place`
        return wrapper(*args, **kwargs)

    return function.__code__


_CALLING = _calling()
_GLOBALS = {"__builtins__": builtins}  # the function's code reads no global
_TYPE_PARAMS = "__type_params__" in _ASSIGNED  # Python 3.12 and later
# What `torch.jit.ignore` marks a function with.
_IGNORED = vars(torch.jit.ignore(lambda: None))  # type: ignore[no-untyped-call]


def _placed(f: Callable[..., Any], code: types.CodeType) -> types.CodeType:
    """`code` placed at f's first line (`Decoration.place`)."""
    place = getattr(inspect.unwrap(f), "__code__", None)
    if place is not None:
        body = max(line for *_, line in code.co_lines() if line is not None)  # its one line
        code = code.replace(
            co_filename=place.co_filename,
            co_firstlineno=max(place.co_firstlineno + 1 - (body - code.co_firstlineno), 1),
            co_name=place.co_name,
        )
    return code


def _is_method(f: types.FunctionType) -> bool:
    """Whether f will be a method (Note [a decorated function is a function])."""
    *outer, _ = f.__qualname__.split(".")
    code = f.__code__
    return (bool(outer) and outer[-1] != "<locals>") or (
        code.co_argcount > 0 and code.co_varnames[0] in ("self", "cls")
    )
