"""Running f again with the random draws of its first run (Note [transforms], recompute_grad).

A random f (a dropout-like mask) run a second time must draw the same numbers, or the gradient
of the second run belongs to another function than the output of the first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


class RngState:
    """The random-number state when it is made: CPU, and CUDA once CUDA is in use."""

    __slots__ = ("cpu", "cuda")

    def __init__(self) -> None:
        self.cpu = torch.get_rng_state()
        initialized = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
        self.cuda = torch.cuda.get_rng_state_all() if initialized else None

    def rerun(self, fn: Callable[[], T]) -> T:
        """`fn()` with the random-number state as it was; the current state is left as it is."""
        devices = list(range(len(self.cuda))) if self.cuda is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state_all(self.cuda)
            return fn()
