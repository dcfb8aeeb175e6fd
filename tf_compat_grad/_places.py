"""Parameter places (Note [lost gradients] in `_captures.py`): a tensor that f's outputs reach
there is that Parameter, and one of the call's variables. A module's parameter slot holding a
plain tensor (`torch.func.functional_call` and `stack_module_state` put their tensors there):
`SlotVariables` remembers the slots, and grad_fn runs with their tensors put back (`in_slots`);
under a `torch.func` transform the slots' tensors are found by `transformed_slots`. A
parametrized weight: parametrize's cache, on for its thread while watched f runs
(`open_cache`, `close_cache`, `_ThreadCache`), keeps the weight f read, which takes the place
of the originals it is computed from (`in_place_of_originals`), and which the cache serves again
while grad_fn runs (`put_back`). The modules looked at are those f's code can name
(`reachable`).
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.nn import Parameter
from torch.nn.utils import parametrize

from ._errors import bug
from ._run import UNBOUND
from ._torch_internals import is_functorch_wrapped
from ._walk import among, walk

_Tensor = torch.Tensor


def open_cache() -> None:
    """Turn parametrize's cache on for a watched call of f in this thread (Note [lost
    gradients] in `_captures.py`), as a `_ThreadCache` while such a call is open."""
    with _CACHE_LOCK:  # parametrize reads one count and one cache, shared by every thread
        parametrize._cache_enabled += 1
        cache = parametrize._cache
        if type(cache) is not _ThreadCache:
            cache = parametrize._cache = _ThreadCache(cache)
        cache.open()


def close_cache() -> dict[Any, _Tensor]:
    """Turn it off again: the parametrized weights this thread cached while it was on, and
    those cached before (an enclosing `parametrize.cached()`), which may be what f read, by
    their keys in parametrize's cache."""
    with _CACHE_LOCK:
        cache = parametrize._cache
        if type(cache) is not _ThreadCache:
            raise bug("parametrize's cache was replaced while a watched call had it on")
        places = cache.close()
        parametrize._cache_enabled -= 1
        if not cache.opened:  # back to parametrize's own dict
            parametrize._cache = dict(cache) if parametrize._cache_enabled else {}
    return places


class _ThreadCache(dict[Any, Any]):
    """parametrize's cache while watched calls have it on: the entries from before (an
    enclosing `parametrize.cached()`), and each such call's thread's own. parametrize turns
    caching on for every thread at once; a thread with no watched call open reads and stores
    nothing, as with the cache off, so that it never hands a watched f a weight it computed
    (under `no_grad`, the gradient of the originals would be lost) nor keeps f's."""

    def __init__(self, before: dict[Any, Any]) -> None:
        super().__init__(before)
        self.opened = 0  # the watched calls open, in every thread
        self._local = threading.local()

    def open(self) -> None:
        local = self._local
        local.depth = getattr(local, "depth", 0) + 1
        if local.depth == 1:
            local.entries = {}
        self.opened += 1

    def close(self) -> dict[Any, _Tensor]:
        local = self._local
        found = {**self, **local.entries}
        local.depth -= 1
        if not local.depth:
            del local.entries
        self.opened -= 1
        return {key: t for key, t in found.items() if t is not None}

    def get(self, key: Any, default: Any = None) -> Any:
        entries = getattr(self._local, "entries", None)
        if entries is None:
            return default
        return entries.get(key, super().get(key, default))

    def __setitem__(self, key: Any, value: Any) -> None:
        entries = getattr(self._local, "entries", None)
        if entries is not None:
            entries[key] = value


_CACHE_LOCK = threading.Lock()

Slot = tuple[torch.nn.Module, str, str]  # a module, "_parameters" or "_buffers", a name


class SlotVariables(list[Any]):
    """A call's variables, some of them tensors f read in module slots (`functional_call`):
    `slots`, where those `placed` tensors sat, or parametrized weights, by their keys in
    parametrize's cache (`cached`). grad_fn runs with them put back (`put_back`), so that a
    grad_fn reading `self.weight` when the gradient is computed, after `functional_call` has
    restored the module's own Parameter, or where parametrize would compute the weight again,
    reads the very tensor f computed with, which it finds among `variables` (item 35)."""

    def __init__(
        self,
        variables: list[Any],
        found: Sequence[tuple[Slot, _Tensor]],
        cached: dict[Any, _Tensor],
    ) -> None:
        super().__init__(variables)
        self.slots = [slot for slot, _ in found]
        self.placed = [tensor for _, tensor in found]
        self.cached = cached


@contextlib.contextmanager
def put_back(variables: SlotVariables) -> Iterator[None]:
    """Run the block with `variables`' slots holding their tensors and parametrize's cache, on
    for this thread, holding their weights."""
    with in_slots(variables.slots, variables.placed):
        if not variables.cached:
            yield
            return
        open_cache()
        try:
            for key, weight in variables.cached.items():  # this thread's: `_ThreadCache`
                parametrize._cache[key] = weight
            yield
        finally:
            close_cache()


def transformed_slots(f: Callable[..., Any], bound: Any) -> tuple[list[Slot], list[_Tensor]]:
    """The parameter slots, then the buffer slots, of the modules f can reach that hold a
    tensor of an active `torch.func` transform, or a parameter slot holding a plain tensor
    (`functional_call` put them there: under `vmap` alone, a tensor it does not batch is not
    wrapped), and those tensors."""
    slots: list[Slot] = []
    tensors: list[_Tensor] = []
    for slot, tensor in _filled_slots(f, bound, ("_parameters", "_buffers")):
        placed = is_functorch_wrapped(tensor) or (
            slot[1] == "_parameters" and not isinstance(tensor, Parameter)
        )
        if placed and not among(tensor, tensors):
            slots.append(slot)
            tensors.append(tensor)
    return slots, tensors


@contextlib.contextmanager
def in_slots(slots: Sequence[Slot], tensors: Sequence[_Tensor]) -> Iterator[None]:
    """Put `tensors` in the `slots` while the block runs (the node's forward sees the
    transform's tensors unwrapped)."""
    held = [getattr(module, kind)[name] for module, kind, name in slots]
    for (module, kind, name), tensor in zip(slots, tensors, strict=True):
        getattr(module, kind)[name] = tensor
    try:
        yield
    finally:
        for (module, kind, name), previous in zip(slots, held, strict=True):
            getattr(module, kind)[name] = previous


def in_place_of_originals(variables: list[Any], weights: Sequence[_Tensor]) -> list[Any]:
    """`variables` with each parametrized weight f's outputs reach in the place of the first
    of the variables it is computed from, and those variables left out."""
    replaced: dict[int, _Tensor] = {}
    dropped: set[int] = set()
    extra: list[_Tensor] = []
    for weight in weights:
        _, hit = walk([weight], variables)
        if hit:
            replaced.setdefault(min(hit), weight)
            dropped.update(hit)
        else:
            extra.append(weight)
    kept = [
        replaced.get(i, v) for i, v in enumerate(variables) if i in replaced or i not in dropped
    ]
    return [*kept, *extra]


def parameter_slots(f: Callable[..., Any], bound: Any) -> list[tuple[Slot, _Tensor]]:
    """The tensors that require grad in the parameter slots of the modules f can reach (the
    bound instance, and modules in f's closure cells and globals, with their submodules), each
    with its slot."""
    seen: set[int] = set()
    slots: list[tuple[Slot, _Tensor]] = []
    for slot, tensor in _filled_slots(f, bound, ("_parameters",)):
        # A Parameter f reads is already a variable.
        if type(tensor) is not Parameter and tensor.requires_grad and id(tensor) not in seen:
            seen.add(id(tensor))
            slots.append((slot, tensor))
    return slots


def parametrization_originals(f: Callable[..., Any], bound: Any) -> list[tuple[str, _Tensor]]:
    """The originals that the parametrized weights of the modules f can reach are computed from,
    each named as f's code reaches it (`self.parametrizations.weight.original`)."""
    found: list[tuple[str, _Tensor]] = []
    for root, value in reachable(f, bound):
        if isinstance(value, torch.nn.Module):
            for path, module in value.named_modules(prefix=root):
                if isinstance(module, parametrize.ParametrizationList):
                    found += [
                        (f"{path}.{name}", t)
                        for name, t in module._parameters.items()
                        if t is not None
                    ]
    return found


def _filled_slots(
    f: Callable[..., Any], bound: Any, kinds: Sequence[str]
) -> Iterator[tuple[Slot, _Tensor]]:
    """Each slot of these kinds holding a tensor, in the modules f can reach and theirs."""
    modules = [m for _, value in reachable(f, bound) if isinstance(value, torch.nn.Module)
               for m in value.modules()]  # fmt: skip
    for kind in kinds:
        for module in modules:
            for name, tensor in getattr(module, kind).items():
                if tensor is not None:
                    yield (module, kind, name), tensor


def reachable(f: Callable[..., Any], bound: Any) -> list[tuple[str, Any]]:
    """What f's code can name directly, by the name it has there: `self`, closure cells,
    globals."""
    named: list[tuple[str, Any]] = []
    if bound is not UNBOUND and not isinstance(bound, type):
        named.append(("self", bound))
    fn = getattr(f, "__func__", f)
    if isinstance(fn, types.FunctionType):
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
            with contextlib.suppress(ValueError):  # an empty cell
                named.append((name, cell.cell_contents))
        for name in fn.__code__.co_names:
            if name in fn.__globals__:
                named.append((name, fn.__globals__[name]))
    return named
