"""The taint of a captured tensor under a `torch.func` transform (Note [lost gradients] in
`_captures.py`): f runs inside the transform node's forward, with no autograd graph for `settle`
to walk, so the ops f runs are followed one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._captures import CapturedRule, lost_error, vmap_error
from ._torch_internals import grad_tracked
from ._walk import tensors

_Tensor = torch.Tensor


class Taint(TorchFunctionMode):
    """Follows, op by op while f runs in the transform node's forward, which tensors f computes
    from a tensor that depends on a `torch.func` grad level's inputs and that f captured rather
    than computed or was given: under a transform there is no autograd graph for `settle` to
    walk."""

    def __init__(
        self,
        given: Iterable[_Tensor],
        f: Callable[..., Any],
        bound: Any,
        kwargs: dict[str, Any],
        captured: CapturedRule = "refuse",
    ) -> None:
        super().__init__()
        self.f, self.bound, self.kwargs = f, bound, kwargs
        self.captured = captured
        self.seed: _Tensor | None = None  # the first captured tensor f computed from
        # Kept alive, so that no id is reused: what f was given or computed, and which of
        # those it computed from a captured tensor.
        self._known: dict[int, _Tensor] = {id(t): t for t in given}
        self._tainted: dict[int, _Tensor] = {}

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        touched = self._touches(args) or self._touches(kwargs.values())
        try:
            out = func(*args, **kwargs)
        except RuntimeError as error:
            if touched and self.seed is not None:  # under vmap: torch's internal assert
                if self.captured == "constant":
                    raise vmap_error(self.f, self.bound, self.kwargs, self.seed) from error
                raise lost_error(self.f, self.bound, self.kwargs, self.seed) from error
            raise
        for tensor in tensors(out):
            self._known[id(tensor)] = tensor
            if touched:
                self._tainted[id(tensor)] = tensor
        return out

    def _touches(self, values: Iterable[Any]) -> bool:
        touched = False
        for value in values:
            if isinstance(value, _Tensor):
                if id(value) in self._tainted:
                    touched = True
                elif id(value) not in self._known and grad_tracked(value):
                    self.seed = value if self.seed is None else self.seed
                    touched = True
            elif isinstance(value, (list, tuple)):
                touched = self._touches(value) or touched
        return touched

    def check(self, result: Any) -> None:
        """Raise when an output of f is computed from such a captured tensor (unless it is a
        constant of f, `captured="constant"`)."""
        if (
            self.captured == "refuse"
            and self.seed is not None
            and any(id(t) in self._tainted for t in tensors(result))
        ):
            raise lost_error(self.f, self.bound, self.kwargs, self.seed)
