"""Parameter places (Note [lost gradients] in `_captures.py`): a tensor that f's outputs reach
there is that Parameter, and one of the call's variables. A module's parameter slot holding a
plain tensor (`torch.func.functional_call` and `stack_module_state` put their tensors there):
`SlotVariables` remembers the slots, and grad_fn runs with their tensors put back (`in_slots`);
under a `torch.func` transform the slots' tensors are found by `transformed_slots`. A
parametrized weight: parametrize's cache, on while watched f runs (`open_cache`,
`close_cache`), keeps the weight f read, which takes the place of the originals it is computed
from (`in_place_of_originals`). The modules looked at are those f's code can name
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

from ._run import UNBOUND
from ._torch_internals import is_functorch_wrapped
from ._walk import among, walk

_Tensor = torch.Tensor


def open_cache() -> None:
    """Turn parametrize's cache on for a watched call of f (Note [lost gradients] in
    `_captures.py`)."""
    with _CACHE_LOCK:  # a count shared by every thread
        parametrize._cache_enabled += 1


def close_cache() -> list[_Tensor]:
    """Turn it off again: the parametrized weights cached while it was on (and before, in an
    enclosing `parametrize.cached()`), which may be what f read."""
    with _CACHE_LOCK:
        places = [t for t in parametrize._cache.values() if t is not None]
        parametrize._cache_enabled -= 1
        if not parametrize._cache_enabled:
            parametrize._cache = {}
    return places


_CACHE_LOCK = threading.Lock()

Slot = tuple[torch.nn.Module, str, str]  # a module, "_parameters" or "_buffers", a name


class SlotVariables(list[Any]):
    """A call's variables, some of them tensors f read in module slots (`functional_call`):
    `slots`, where those `placed` tensors sat. grad_fn runs with them put back, so that a
    grad_fn reading `self.weight` when the gradient is computed, after `functional_call` has
    restored the module's own Parameter, reads the tensor f computed with."""

    slots: list[Slot]
    placed: list[_Tensor]


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
