"""`custom_gradient`: the decorator, the wrapper object, and binding for methods."""

from __future__ import annotations

import copy
import functools
import os
import pickle
import sys
import types
from collections.abc import Callable
from typing import Any, Concatenate, Generic, NoReturn, Protocol, TypeVar, overload

import torch
from typing_extensions import ParamSpec

from ._captures import CAPTURED_RULES, CapturedRule
from ._compile import compiling_call, decorated_while_tracing
from ._compile_exits import call_older_compile, outside, parametrized, parametrized_reason
from ._compile_watched import call_compiled
from ._decoration import decoration_of, wrapper_of
from ._eager import EagerPath
from ._errors import (
    PREFIX,
    CustomGradientTypeError,
    describe,
    describe_value,
)
from ._run import UNBOUND
from ._script import refuse_function, refuse_script
from ._torch_internals import (
    DYNAMO_TRACES_WATCHER,
    graph_break,
    is_dynamo_compiling,
    is_exporting,
    never_compiled,
    transforms_active_while_tracing,
)

P = ParamSpec("P")
R = TypeVar("R")
_P = ParamSpec("_P")  # a method's parameters after `self`
_R = TypeVar("_R")
_T = TypeVar("_T")  # the instance (or class) a method is bound to
_M = TypeVar("_M", bound=torch.nn.Module)

_is_compiling = torch.compiler.is_compiling


class CustomGradient(Generic[P, R]):
    """A function whose gradient is the grad_fn it returns; made by `custom_gradient`.

    Calling it returns f's outputs only. Used as a method (or `nn.Module.forward`), the instance
    is bound and is not an input.
    """

    __wrapped__: Callable[..., Any]
    # What a call outside torch.compile runs: the newest plan, else the general code (set and
    # replaced by its `EagerPath`). A slot, read on every call: the attributes of a decorated
    # plain function are not a dict exactly (Note [the inline mark] in `_decoration.py`), and
    # CPython reads an attribute from those about ten times slower.
    __slots__ = ("__dict__", "__weakref__", "_entry")
    _entry: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]
    # Example inputs for the checker (`custom_gradient(example=)`), and why grad_fn is not the
    # true derivative, when that is intended (`surrogate=`): set in `__init__`.
    example: Any
    surrogate: str | None
    # The decorator that made this wrapper of `__wrapped__`: a pickle not by reference remakes
    # it (`recompute_grad` sets itself on its wrappers).
    _made_by: Callable[..., CustomGradient[Any, Any]]

    def __init__(
        self,
        f: Callable[P, tuple[R, Callable[..., Any]]],
        example: Any = None,
        surrogate: str | None = None,
        captured: CapturedRule = "refuse",
    ) -> None:
        shared = decoration_of(f)
        self.__dict__ = attributes = shared.attributes(self, f)  # as `functools.wraps` sets
        # The rest in the attribute dict too, where Dynamo reads them (older torch reads no slot
        # of a traced object): what the decorations of f's code share, with f's description.
        self._shared = shared
        self._f = f  # what is called; `__wrapped__` may name another (recompute_grad's f)
        self._eager = eager = EagerPath(f, shared.eager, captured, self)  # sets `_entry`
        call_eager = self._call_eager = self._entry  # every call outside torch.compile
        self._compiling = compiling_call(f, shared, captured, call_eager, eager.reach)
        # `example`, `surrogate` (above) and `captured` (the property)
        attributes["example"], attributes["surrogate"] = example, surrogate
        attributes["captured"] = captured

    @functools.cached_property
    def _method(self) -> Callable[..., Any]:
        """The function a class holds for this wrapper (see `__set_name__`): made when first
        asked for, as most decorations are not methods (a function decorated in `forward`)."""
        owner = self
        f = self._f

        @functools.wraps(f)
        def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:  # one line: Decoration.place
            return owner._call_compiling(self, args, kwargs) if _is_compiling() else owner._entry(self, args, kwargs)  # fmt: skip

        # Strong, unlike a plain function's: the method's closure holds this wrapper anyway,
        # and 0.1.0 pickled the wrapper of a method as `getattr(method, "__tf_compat_grad__")`.
        method.__tf_compat_grad__ = self  # type: ignore[attr-defined]
        self._shared.place(f, method)
        return method

    @property
    def captured(self) -> CapturedRule:
        """`custom_gradient(captured=...)`: what a call does with a tensor f's outputs depend
        on that is neither a positional argument nor a variable (refuse it, or keep it a
        constant of f as TensorFlow does). Fixed at decoration: the call paths are made with
        it."""
        return self.__dict__["captured"]  # type: ignore[no-any-return]

    @captured.setter
    def captured(self, rule: CapturedRule) -> None:
        raise AttributeError(
            f"{PREFIX}the `captured` rule of {self._shared.described} is fixed when it is decorated, "
            f"and this wrapper's calls were made with {self.captured!r}. Decorate the function "
            f"again instead: `custom_gradient(f, captured={rule!r})`."
        )

    def __tf_compat_grad_calls__(self) -> Callable[..., Any]:
        """The function a call runs, for the proof that it reads no Parameter (`_reach.py`)."""
        return self._f

    # Note [where f runs] (in _eager.py) explains the order of the steps of an eager call.
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if _is_compiling():
            return self._compiling(*args, **kwargs)  # type: ignore[no-any-return]
        return self._entry(UNBOUND, args, kwargs)  # type: ignore[no-any-return]

    # Type checkers hand a function under `@staticmethod` or `@classmethod` (above or below the
    # decorator) to it as the plain function and bind it through this descriptor, so the kind of
    # method is read off f's first parameter: the instance, its class, or neither (static).
    @overload
    def __get__(self, instance: None, owner: type | None = None) -> CustomGradient[P, R]: ...

    @overload
    def __get__(
        self: CustomGradient[Concatenate[_T, _P], _R], instance: _T, owner: type | None = None
    ) -> Callable[_P, _R]: ...

    @overload
    def __get__(
        self: CustomGradient[Concatenate[type[_T], _P], _R],
        instance: _T,
        owner: type | None = None,
    ) -> Callable[_P, _R]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> CustomGradient[P, R]: ...

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self._method, instance)

    def __set_name__(self, owner: type, name: str) -> None:
        # A plain function on the class, not this descriptor: Dynamo recursed on a `__get__`
        # descriptor installed as `nn.Module.forward` (docs/torch_facts.md, "Descriptors under
        # compile").
        setattr(owner, name, self._method)
        if issubclass(owner, torch.nn.Module) and not hasattr(owner, "__prepare_scriptable__"):
            owner.__prepare_scriptable__ = refuse_script  # type: ignore[attr-defined]

    def __prepare_scriptable__(self) -> NoReturn:
        """What `torch.jit.script` calls first: refused by name (Note [TorchScript] in
        `_script.py`)."""
        refuse_function(describe(self.__wrapped__))

    def __repr__(self) -> str:
        return f"<custom_gradient {describe(self._f)}>"

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled by reference, as a function is: by its module and qualified name where they
        lead to this wrapper (or to the method the class holds for it), else remade in the
        loading process by the decorator that made it, from `__wrapped__` (`block =
        recompute_grad(f)` keeps f's name under another one), which pickles by reference."""
        found = _lookup(self)
        if found is self:
            return str(self.__qualname__)
        if wrapper_of(found) is self:  # see `__set_name__`
            return wrapper_of, (found,)
        f = self.__wrapped__
        if isinstance(f, types.FunctionType) and _lookup(f) is not f:
            raise pickle.PicklingError(
                f"{PREFIX}cannot pickle {describe(f)}: pickle saves a function by reference, "
                f"as its module and qualified name, and `{f.__module__}.{f.__qualname__}` does "
                "not lead to it (a function defined inside another function, a lambda, or a "
                "name bound to something else since). Define it at the top level of a module, "
                "or as a method of a class there, so that another process can import it."
            )
        return _remake, (self._made_by, f, self.example, self.surrogate, self.captured)

    def __copy__(self) -> CustomGradient[P, R]:
        return self  # a function is atomic for `copy`

    def __deepcopy__(self, memo: dict[int, Any]) -> CustomGradient[P, R]:
        """Atomic, as a function is for `deepcopy` (which would otherwise pickle a function
        defined inside another by reference, and fail), unless what was decorated deep-copies
        to something else (an `nn.Module`, a partial of one): then a wrapper of the copy, made
        by the same decorator."""
        f = self.__wrapped__
        copied = copy.deepcopy(f, memo)
        if copied is f:
            return self
        return _remake(self._made_by, copied, self.example, self.surrogate, self.captured)

    def _call_compiling(self, bound: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call while Dynamo traces (or `torch.export` exports) the caller."""
        # Outside the graph: first, torch < 2.13 cannot trace the functorch query either (Note
        # [compile on older torch]); then under a `torch.func` transform (Note [compile under
        # torch.func]), to the eager path directly (a non-strict `torch.export` says
        # "compiling" there too).
        if not DYNAMO_TRACES_WATCHER:
            older = self._shared.outside_older_compile
            return older(call_older_compile, self._f, self._call_eager, bound, args, kwargs)
        if transforms_active_while_tracing():
            return self._shared.outside_compile(self._call_eager, bound, args, kwargs)
        # Note [parametrizations under compile] in `_compile_exits.py`
        if not is_exporting() and parametrized(bound):
            graph_break(parametrized_reason(self._shared.described))
            return outside(self._call_eager, bound, args, kwargs)
        return call_compiled(
            self._f, bound, args, kwargs, self._shared.described, self._eager.captured
        )


def _lookup(obj: object) -> Any:
    """What obj's module and qualified name lead to now (pickle's lookup of a function), or
    None."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    found: Any = sys.modules.get(module) if module and qualname else None
    for name in (qualname or "").split("."):
        found = getattr(found, name, None)
    return found


def _remake(
    made_by: Callable[..., CustomGradient[Any, Any]],
    f: Callable[..., Any],
    example: Any,
    surrogate: str | None = None,
    captured: CapturedRule = "refuse",
) -> CustomGradient[Any, Any]:
    """Unpickles a wrapper that is not found by its name (see `CustomGradient.__reduce__`)."""
    wrapped = made_by(f) if captured == "refuse" else made_by(f, captured=captured)
    wrapped.example = example
    wrapped.surrogate = surrogate or wrapped.surrogate
    return wrapped


class _Decorator(Protocol):
    """What `custom_gradient(...)` without a function returns: the decorator, typed as
    `custom_gradient` is for a function (a method of an `nn.Module` as a plain function)."""

    @overload
    def __call__(
        self, f: Callable[Concatenate[_M, P], tuple[R, Callable[..., Any]]], /
    ) -> Callable[Concatenate[_M, P], R]: ...

    @overload
    def __call__(self, f: Callable[P, tuple[R, Callable[..., Any]]], /) -> CustomGradient[P, R]: ...


# A method of an `nn.Module` (its first parameter a Module: `forward`) is typed as the plain
# function it is on the class (see `__set_name__`): type checkers accept a function, not a
# descriptor object, as an override of `Module.forward`.
@overload
def custom_gradient(
    f: Callable[Concatenate[_M, P], tuple[R, Callable[..., Any]]],
    *,
    example: Any = None,
    surrogate: str | None = None,
    captured: CapturedRule = "refuse",
) -> Callable[Concatenate[_M, P], R]: ...


@overload
def custom_gradient(
    f: Callable[P, tuple[R, Callable[..., Any]]],
    *,
    example: Any = None,
    surrogate: str | None = None,
    captured: CapturedRule = "refuse",
) -> CustomGradient[P, R]: ...


@overload
def custom_gradient(
    f: None = None,
    *,
    example: Any = None,
    surrogate: str | None = None,
    captured: CapturedRule = "refuse",
) -> _Decorator: ...


def custom_gradient(
    f: Any = None,
    *,
    example: Any = None,
    surrogate: str | None = None,
    captured: CapturedRule = "refuse",
) -> Any:
    """Decorate `f(*args) -> (outputs, grad_fn)` so autograd differentiates it with grad_fn.

    Works as `@custom_gradient`, `@custom_gradient()` and `custom_gradient(f=fn)`, like
    `tf.custom_gradient`. The inputs are the flattened positional arguments; grad_fn receives
    one upstream gradient per flattened output and returns one gradient per input (None for
    an input that needs none). If f reads trainable `nn.Parameter`s it is not passed, grad_fn is
    called with `variables=[...]` and returns `(input_grads, variable_grads)`.

    Args:
        f: the function to decorate; it returns its outputs and its gradient function.
        example: example inputs for `python -m tf_compat_grad check`: a function of no
            arguments returning the positional arguments as a tuple (or a
            `tf_compat_grad.testing.Example` with keyword arguments too). Kept as `.example`.
        surrogate: why grad_fn deliberately differs from the true derivative (e.g.
            `"straight-through estimator"`), for the checker, which otherwise fails a gradient
            that differs. Not in TensorFlow; kept as `.surrogate`.
        captured: what a call does when f's outputs depend on a tensor that requires grad
            and is neither a positional argument nor a variable (a closure, a global, an
            attribute, a keyword argument). `"refuse"` (the default) raises, since the
            gradient through f's outputs into that tensor would be lost; `"constant"` keeps
            TensorFlow's behaviour: no gradient for it through f's outputs (grad_fn's own use
            of it is still differentiated at second order). Kept as `.captured`.

    Returns:
        A function that returns f's outputs and records grad_fn for autograd, with f's name,
        signature and file; for a method, or a callable that is not a function, a
        `CustomGradient` that does the same.

    Raises:
        TypeError: `f` is a class or not callable.

    Example:
        >>> import torch
        >>> from tf_compat_grad import custom_gradient
        >>> @custom_gradient
        ... def log1pexp(x):
        ...     e = torch.exp(x)
        ...     def grad(upstream):
        ...         return upstream * (1 - 1 / (1 + e))
        ...     return torch.log(1 + e), grad
        >>> x = torch.tensor(100.0, requires_grad=True)
        >>> log1pexp(x).backward()
        >>> x.grad
        tensor(1.)
    """
    if surrogate is not None and (not isinstance(surrogate, str) or not surrogate.strip()):
        raise CustomGradientTypeError(
            f"{PREFIX}custom_gradient(surrogate=...) takes the reason the gradient differs from "
            f"the true derivative, as a non-empty string, but it was given {surrogate!r}. Write "
            'e.g. `@custom_gradient(surrogate="straight-through estimator")`.'
        )
    if captured not in CAPTURED_RULES:
        raise CustomGradientTypeError(
            f'{PREFIX}custom_gradient(captured=...) takes "refuse" or "constant", but it was '
            f'given {captured!r}. Write e.g. `@custom_gradient(captured="constant")`.'
        )
    if f is None or is_dynamo_compiling():  # Note [decorating while compiling] in _compile.py
        again = functools.partial(
            custom_gradient, example=example, surrogate=surrogate, captured=captured
        )
        if f is None:
            return again
        traced = decorated_while_tracing(f, again, captured)
        if traced is not None:
            return traced
        graph_break(_decorated_while_compiling(f))  # under fullgraph=True, the error
    if type(f) is types.FunctionType:  # a function, unless it will be a method
        wrapped = CustomGradient(f, example, surrogate, captured)
        shared = wrapped._shared
        return wrapped if shared.is_method else shared.function(wrapped, f)
    if isinstance(f, staticmethod):
        f = f.__func__
        wrapped = _decorate(f, example, surrogate, captured)
        is_function = type(f) is types.FunctionType
        return staticmethod(wrapped._shared.function(wrapped, f) if is_function else wrapped)
    if isinstance(f, classmethod):
        return _ClassMethod(_decorate(f.__func__, example, surrogate, captured))
    return _decorate(f, example, surrogate, captured)


def custom_gradient_object(f: Any, surrogate: str | None = None) -> CustomGradient[Any, Any]:
    """`custom_gradient(f)` as the wrapper object, also for a plain function: for
    `recompute_grad` and `grad_pass_through` (Note [a decorated function is a function] in `_decoration.py`)."""
    if is_dynamo_compiling():
        graph_break(_decorated_while_compiling(f))  # under fullgraph=True, the error
    return _decorate(f, None, surrogate, "refuse")


def _decorate(
    f: Any, example: Any, surrogate: str | None, captured: CapturedRule
) -> CustomGradient[Any, Any]:
    """The wrapper of f, after checking that f can be decorated."""
    if isinstance(f, type) or not callable(f):
        kind = f"the class {describe(f)}" if isinstance(f, type) else describe_value(f)
        raise CustomGradientTypeError(
            f"{PREFIX}custom_gradient decorates a function that returns (outputs, grad_fn), "
            f"but it was given {kind}, which is "
            f"{'not a function' if isinstance(f, type) else 'not callable'}. Decorate a "
            "function, a method, a staticmethod or a classmethod (the decorator above or below "
            "@staticmethod / @classmethod)."
        )
    return CustomGradient(f, example, surrogate, captured)


def _decorated_while_compiling(f: Any) -> str:
    """Why decorating inside a compiled region is a graph break. Read while Dynamo traces:
    attributes are read directly (Dynamo misreads `getattr(f, "__qualname__", None)`). The
    function `recompute_grad` (or `grad_pass_through`) wraps is named, as the user wrote it."""
    if hasattr(f, "__wrapped__"):
        f = f.__wrapped__
    try:
        code = f.__code__
        where = f"`{f.__qualname__}` ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
    except AttributeError:
        where = describe_value(f)
    return (
        f"{PREFIX}custom_gradient decorates {where} while torch.compile traces the code that "
        "decorates it, and a decoration makes classes that torch.compile cannot trace, so it "
        "runs outside the graph (a graph break; an error under fullgraph=True), on every call. "
        "Decorate the function once, outside the compiled code: at the top level of a module, "
        "or as a method of the class (`@custom_gradient def forward(self, x)`)"
    )


CustomGradient._made_by = staticmethod(custom_gradient)  # type: ignore[assignment]

# After the graph break above, Dynamo compiles the frames that run eagerly one by one; the making
# of a wrapper is not one it can trace.
CustomGradient.__init__ = never_compiled(CustomGradient.__init__)  # type: ignore[method-assign]


class _ClassMethod:
    """`@custom_gradient` above `@classmethod`: the class is bound, not an input."""

    def __init__(self, wrapped: CustomGradient[Any, Any]) -> None:
        self.__func__ = wrapped
        self.__wrapped__ = wrapped.__wrapped__

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return types.MethodType(
            self.__func__._method, owner if owner is not None else type(instance)
        )
