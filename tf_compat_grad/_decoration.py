"""What the decorations of one code object share, and the function a decorated plain function
is: its attributes copied from f (`wrap`, `copy_assigned`) and its code placed in f's file.

Note [a decorated function is a function]
`inspect.getfile` and `getsourcefile` (and tools built on them: debuggers, documentation
generators, IPython's `??`) take a function, a method, a class, a module or code, and test
that with `isinstance`, which no wrapper object passes. So for a plain function the decorator
returns a function: its code is placed in f's file (`Decoration.place`), it calls its
`CustomGradient`, and it shares that wrapper's attributes (`__tf_compat_grad__` names it).
Being a function, it is also what Python makes of a function: bound when a class holds it,
atomic for `copy`, pickled by reference (by the name f has where it is defined, so
`g = custom_gradient(f)` cannot be pickled, as with any decorator). So the wrapper object
stays what is returned where f will be a method, whose instance it binds without making it
an input (item 4): f defined in a class body (its `__qualname__` is `Class.name`) or taking
`self` or `cls` first (`Class.method = custom_gradient(f)`), and where f is not a function
(an `nn.Module`, a partial, a callable object), which `deepcopy` copies with its state.
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
from collections.abc import Callable
from typing import Any

from ._compile_exits import under_transform_reason
from ._eager import Shared
from ._errors import describe
from ._record import per_code
from ._torch_internals import inlined_only, older_torch_reason, outside_compile


class Decoration:
    """What the decorations of one code object share (Note [decorated again] in `_eager.py`):
    the eager paths' classes and learned shapes; f's description and the calls that leave the
    compiled graph with their reasons; the code of the function `function` returns, placed in
    f's file (made when first asked for); and whether f will be a method."""

    __slots__ = (
        "described", "eager", "is_method", "outside_compile", "outside_older_compile", "placed"
    )  # fmt: skip

    def __init__(self, f: Callable[..., Any]) -> None:
        self.described = describe(f)
        self.outside_compile = outside_compile(under_transform_reason(f))
        self.outside_older_compile = outside_compile(older_torch_reason(f))
        self.eager = per_code(f, "eager", Shared) if hasattr(f, "__wrapped__") else Shared(f)
        self.placed: list[types.CodeType | None] = [None, None]  # see `place`
        self.is_method = isinstance(f, types.FunctionType) and _is_method(f)

    def place(self, f: Callable[..., Any], function: Any, inlined: bool) -> None:
        """Places the code of function (the method a class holds for a decorated method, or
        the function `custom_gradient` returns) at f's first line in f's file: it is the
        user's to `inspect` (`getsourcefile`, `getfile`; `getsource` follows `__wrapped__`),
        to TorchScript's messages and to tracebacks, whose line for it is then the one after
        f's first (its `def` under one decorator). Its body is one line, so that no other line
        of the user's file is shown for it. `inlined`: the code is marked `inlined_only`. Made
        once per `Decoration`: per code object of f, unless f wraps another, whose place it
        takes."""
        placed = self.placed[inlined]
        if placed is None:
            placed = self.placed[inlined] = _placed(f, function.__code__, inlined)
        function.__code__ = placed


def decoration_of(f: Callable[..., Any]) -> Decoration:
    """f's `Decoration`: made once per code object of f, name, module and qualified name (a
    function decorated again reuses it), unless f wraps another, which its description and
    place name (its eager classes are still made once per code)."""
    if hasattr(f, "__wrapped__"):
        return Decoration(f)
    return per_code(f, getattr(f, "__qualname__", None), Decoration)  # type: ignore[no-any-return]


# What `functools.update_wrapper` assigns from the function it wraps (`wrap`, `copy_assigned`).
_ASSIGNED = functools.WRAPPER_ASSIGNMENTS
_assigned = operator.attrgetter(*_ASSIGNED)


def copy_assigned(to: Any, f: Callable[..., Any]) -> None:
    """The assignments of `functools.update_wrapper` from a function f onto `to`."""
    for name, value in zip(_ASSIGNED, _assigned(f), strict=True):
        setattr(to, name, value)


def wrap(wrapper: Any, f: Callable[..., Any]) -> None:
    """`functools.update_wrapper(wrapper, f)`, in fewer steps for a function (which has every
    attribute it copies): a function decorated inside `forward` is wrapped on every call."""
    if type(f) is not types.FunctionType:
        functools.update_wrapper(wrapper, f)
        return
    attributes = wrapper.__dict__
    attributes.update(zip(_ASSIGNED, _assigned(f), strict=True))
    if f.__dict__:
        attributes.update(f.__dict__)
    attributes["__wrapped__"] = f


def _placed(f: Callable[..., Any], code: types.CodeType, inlined: bool) -> types.CodeType:
    """`code` placed at f's first line (`Decoration.place`)."""
    place = getattr(inspect.unwrap(f), "__code__", None)
    if place is not None:
        body = max(line for *_, line in code.co_lines() if line is not None)  # its one line
        code = code.replace(
            co_filename=place.co_filename,
            co_firstlineno=max(place.co_firstlineno + 1 - (body - code.co_firstlineno), 1),
            co_name=place.co_name,
        )
    if inlined:
        inlined_only(code)
    return code


def _is_method(f: types.FunctionType) -> bool:
    """Whether f will be a method (Note [a decorated function is a function])."""
    *outer, _ = f.__qualname__.split(".")
    code = f.__code__
    return (bool(outer) and outer[-1] != "<locals>") or (
        code.co_argcount > 0 and code.co_varnames[0] in ("self", "cls")
    )
