"""Running grad_fn in the autocast state of the forward.

torch runs a Function's backward with autocast off: under `torch.autocast("cpu",
dtype=torch.bfloat16)` a bf16 upstream then meets fp32 weights in grad_fn and matmul raises
(docs/torch_facts.md, "Autocast in backward"). `torch.amp.custom_bwd` solves this for
hand-written Functions by restoring the forward's autocast state around backward; this does the
same for grad_fn, with plain nested `with` blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

from ._torch_internals import any_autocast_enabled

T = TypeVar("T")
State = tuple[tuple[str, torch.dtype], ...]

_DEVICE_TYPES = ("cpu", "cuda")


def current() -> State:
    """The device types with autocast enabled now, with their dtypes (usually empty)."""
    if not any_autocast_enabled():
        return ()
    return tuple(
        (device, torch.get_autocast_dtype(device))
        for device in _DEVICE_TYPES
        if torch.is_autocast_enabled(device)
    )


def call_in(state: State, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` with autocast as `state` describes."""
    if not state:
        return fn(*args, **kwargs)
    (device, dtype), *rest = state
    with torch.autocast(device, dtype=dtype):
        return call_in(tuple(rest), fn, *args, **kwargs)


def call_off(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` with autocast off (a backward may run under autocast)."""
    if not any_autocast_enabled():
        return fn(*args, **kwargs)
    for device in _DEVICE_TYPES:
        if torch.is_autocast_enabled(device):
            with torch.autocast(device, enabled=False):
                return call_off(fn, *args, **kwargs)
    return fn(*args, **kwargs)  # another device type's, which `current` does not see either
