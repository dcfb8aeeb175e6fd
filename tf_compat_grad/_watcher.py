"""`variables=`: the `nn.Parameter`s that f reads without being passed them (items 32-37),
found by a watcher while f runs, unless the reach proof (`_reach.py`) shows that it reads none.

# Note [the Parameter watcher]
TensorFlow's `VariableWatcher` records every trainable variable accessed while f runs. The torch
analogue is a `TorchFunctionMode` that sees every torch call made inside f and keeps the
`nn.Parameter`s with `requires_grad=True` among its arguments, in order of first use. An autograd
graph walk would miss a Parameter that is read but does not reach the output.

Torch keeps the mode stack per thread, so two threads running decorated functions at once never
see each other's Parameters."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.nn import Parameter
from torch.overrides import TorchFunctionMode

from ._captures import CapturedRule, any_needs_grad, settle
from ._places import close_cache, open_cache
from ._run import UNBOUND, call_f, split
from ._structure import leaves
from ._torch_internals import Noted, dynamo_tracing, run_while_tracing, set_grad_mode, traced_items
from ._variables import check_accepts

if TYPE_CHECKING:
    from ._reach import ParameterReach

_Tensor = torch.Tensor


def run_watched(
    f: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    flat_args: Sequence[Any],
    reach: ParameterReach | None = None,
    captures: bool = True,
    captured: CapturedRule = "refuse",
) -> tuple[Any, Callable[..., Any], list[torch.nn.Parameter]]:
    """Call f once, watching for Parameters unless `reach` proves f reads none (Note [watching
    only when needed] in `_reach.py`): its outputs, grad_fn and variables; with `captures`, the tensors f's
    outputs reach outside its arguments are settled too, by the rule `captured` (Note [lost
    gradients])."""
    if reach is not None and not reach.possible(
        kwargs.values() if bound is UNBOUND else (*kwargs.values(), bound)
    ):
        result, grad_fn = split(f, call_f(f, bound, args, kwargs))
        if not captures or (reach.calm() and not (kwargs and any_needs_grad(kwargs))):
            return result, grad_fn, []
        variables = settle(f, bound, kwargs, result, flat_args, [], (), captured)
        check_accepts(f, bound, grad_fn, variables)
        return result, grad_fn, variables
    watcher = ParameterWatcher()
    if not captures:
        with watcher:
            out = call_f(f, bound, args, kwargs)
    else:
        with watcher:
            open_cache()
            try:
                out = call_f(f, bound, args, kwargs)
            finally:
                watcher.places = close_cache()
    return watched_result(f, bound, out, watcher, flat_args, kwargs, captured)


def watched_result(
    f: Callable[..., Any],
    bound: Any,
    out: Any,
    watcher: ParameterWatcher,
    flat_args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    captured: CapturedRule = "refuse",
) -> tuple[Any, Callable[..., Any], list[torch.nn.Parameter]]:
    """What a watched call of f returned (`out`), as outputs, grad_fn and the Parameters f read
    that are not among the values passed to it (`flat_args`, `kwargs`), with the tensors in
    Parameter places its outputs reach (Note [lost gradients]; not when `watcher.places` is
    None)."""
    result, grad_fn = split(f, out)
    variables: list[Any] = watcher.variables(
        exclude=[*flat_args, *leaves(kwargs)] if kwargs else flat_args
    )
    check_accepts(f, bound, grad_fn, variables)  # at call time, as TensorFlow (item 33)
    if watcher.places is not None:
        settled = settle(
            f, bound, kwargs or {}, result, flat_args, variables, watcher.places, captured
        )
        if settled is not variables:
            check_accepts(f, bound, grad_fn, settled)
            variables = settled
    return result, grad_fn, variables


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


@run_while_tracing
def op_noted(asked: str, func: Any) -> tuple[str, tuple[bool, Any]]:
    """Decided while Dynamo traces (Note [compile guards] in `_compile.py`), asked with "op"
    as the route question is (which asks it): `func in _METADATA`, and what `_note_scan` noted
    of the op's positional arguments (None where it noted nothing: they are scanned as
    traced)."""
    noted = _SCANNED.take() if dynamo_tracing() else None
    return asked, (func in _METADATA, noted)


# What `_note_scan` noted for `op_noted` (one trace at a time: Dynamo's compile lock).
_SCANNED = Noted()


def _note_scan(ctx: Any) -> None:
    """Given to `comptime` in `CompiledWatcher.__torch_function__`: what `_scan` finds among
    the op's positional arguments, read from Dynamo's trackers (a Parameter's class read in
    the trace costs a TYPE_MATCH guard per Parameter): `(position, is a Parameter)` for each
    Parameter and each plain tensor that requires grad; None where an argument is a list or a
    tuple, or Dynamo holds another kind of value."""
    held = traced_items(ctx, "args")
    noted: Any = None
    if held is not None and held[0] is tuple:
        noted = []
        for i, (kind, fake) in enumerate(held[1]):
            if kind is list or kind is tuple:
                noted = None
                break
            if fake is not None and fake.requires_grad:
                if issubclass(kind, Parameter):
                    noted.append((i, True))
                elif kind is _Tensor:
                    noted.append((i, False))
    _SCANNED.note(noted)


class ParameterWatcher(TorchFunctionMode):
    """Records the trainable Parameters used by torch calls made while the mode is active."""

    # The parametrized weights cached while it watched (Note [lost gradients] in
    # `_captures.py`), set when it is popped; None: the tensors f's outputs reach are not to be
    # settled.
    places: dict[Any, torch.Tensor] | None = None

    def __init__(self) -> None:  # `TorchFunctionMode.__init__` sets nothing: not called
        self.found: dict[int, Parameter] = {}

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if kwargs:
            if func not in _METADATA:
                self._scan(args)
                self._scan(kwargs.values())
            return func(*args, **kwargs)
        if func not in _METADATA:
            found = self.found
            for value in args:  # `_scan` written out for the usual arguments: runs per op
                kind = type(value)
                if kind is _Tensor:  # the common case; Parameter's isinstance check is slow
                    continue
                if kind is Parameter:
                    if value.requires_grad:
                        found[id(value)] = value  # kept where first found
                elif kind is list or kind is tuple or isinstance(value, Parameter):
                    self._scan((value,))
        return func(*args)

    def _scan(self, values: Iterable[Any]) -> None:
        for value in values:
            kind = type(value)
            if kind is _Tensor:
                continue
            if kind is Parameter or isinstance(value, Parameter):
                if value.requires_grad:
                    self.found[id(value)] = value
            elif kind is list or kind is tuple:
                self._scan(value)

    def variables(self, exclude: Iterable[Any]) -> list[Parameter]:
        """The Parameters found, first use first, less those passed as arguments."""
        if not self.found:
            return []
        passed = {id(x) for x in exclude if type(x) is not _Tensor and isinstance(x, Parameter)}
        return [p for key, p in self.found.items() if key not in passed]


class CompiledWatcher(ParameterWatcher):
    """The watcher of a call while Dynamo traces it (Note [lost gradients under compile] in
    `_captures.py`): it also finds the tensors f uses that require grad and that it was not
    given (`seeds`: f runs under `no_grad`, so none of its own making), and follows which
    tensors f computes from them, by identity, which Dynamo folds into constants."""

    set_grad = staticmethod(set_grad_mode)

    def start(
        self, known: Sequence[_Tensor], keywords: Iterable[Any], ask: Callable[..., Any]
    ) -> None:
        """Set the watcher made with `__new__` (which spares Dynamo's instantiation: Note
        [compile guards] in `_compile.py`) to watch a call given the tensors `known` and the
        keyword values `keywords`; `ask`: the route question, or `op_noted` (asked "op" per
        op: a global read here costs this module's guard too). `ParameterWatcher.__init__` is
        not called: Dynamo guards `super()`."""
        self.ask = ask
        self.read: list[Parameter] = []  # what `found` holds, by identity: `id` is a guard
        self.places = None
        self.known = known
        self.keywords = [t for t in keywords if isinstance(t, Parameter)]  # not variables
        self.seeds: list[_Tensor] = []  # first reached first
        self.tainted: list[_Tensor] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # Per op, while there is no seed: what the Parameter watcher does, and a look at
        # `requires_grad` (Dynamo traces all of it, for each op: the cost is compile time).
        from torch._dynamo.comptime import comptime  # a local import: no guard

        n_seeds = len(self.seeds)
        touched = n_seeds and self._tainted_among([args, kwargs])
        comptime(lambda c: _note_scan(c))  # a literal lambda: no guard
        metadata, noted = self.ask("op", func)[1]
        if metadata:
            return func(*args, **(kwargs or {}))
        if noted is None:
            self._scan(args)
        else:  # as `_scan` would find them, read from the trackers
            for i, parameter in noted:
                self._found(args[i], parameter)
        if kwargs:
            self._scan(kwargs.values())
        out = func(*args, **(kwargs or {}))
        taint = touched or len(self.seeds) > n_seeds
        if taint:
            for tensor in out if isinstance(out, (list, tuple)) else (out,):
                if isinstance(tensor, _Tensor):
                    self.tainted.append(tensor)
        return out

    def _scan(self, values: Iterable[Any]) -> None:
        # A Parameter's type is not read: Dynamo guards `type` of each (Note [compile guards]
        # in `_compile.py`).
        for value in values:
            if isinstance(value, Parameter):
                if value.requires_grad:
                    self._found(value, True)
                continue
            kind = type(value)
            if kind is _Tensor:
                if value.requires_grad:  # not, under `no_grad`, what f computed
                    self._found(value, False)
            elif kind is list or kind is tuple:
                self._scan(value)

    def _found(self, value: _Tensor, parameter: bool) -> None:
        """Keep value, found by `_scan`: a Parameter or a plain tensor that requires grad."""
        if not parameter or any(value is t for t in self.keywords):
            self._seed(value)
        elif not any(value is p for p in self.read):
            self.read.append(value)  # type: ignore[arg-type]

    def unpassed(self) -> list[Parameter]:
        """The Parameters f read, first use first, less those passed to it (the variables)."""
        return [p for p in self.read if not any(p is x for x in self.known)]

    def _seed(self, value: _Tensor) -> None:
        """Record value, which requires grad, as a seed unless it is known or one already."""
        known = self.known
        if any(value is t for t in known):  # (first: `Parameter` read costs a guard)
            return
        base = value._base  # a view Dynamo made without the mode (`w.T`) is known by its base
        if isinstance(base, Parameter) and not any(base is t for t in self.keywords):
            return  # a view of a variable (`weights[1]`)
        if not any(base is t for t in known) and not any(value is t for t in self.seeds):
            self.seeds.append(value)

    def _tainted_among(self, values: Iterable[Any]) -> bool:
        for value in values:
            if isinstance(value, _Tensor):
                if any(value is t for t in self.tainted):
                    return True
            elif isinstance(value, (list, tuple)):
                if self._tainted_among(value):
                    return True
            elif isinstance(value, dict) and self._tainted_among(value.values()):
                return True
        return False

    def reaches(self, result: Any, one: bool) -> bool:
        """Whether an output of f is a seed (also one f returns as it is) or computed from
        one; `one`: result is a plain tensor (read from its class: `isinstance` reads the
        global `Tensor`, a guard)."""
        outputs = [result] if one or isinstance(result, _Tensor) else leaves(result)
        for tensor in outputs:
            if (one or isinstance(tensor, _Tensor)) and tensor.requires_grad:
                self._seed(tensor)
        if not self.seeds:
            return False
        return any(
            isinstance(t, _Tensor) and (self._tainted_among([t]) or any(t is s for s in self.seeds))
            for t in outputs
        )
