"""Finding the `nn.Parameter`s that f reads, TensorFlow's `variables=` (items 32-37).

TensorFlow's `VariableWatcher` records every trainable variable accessed while f runs. The torch
analogue is a `TorchFunctionMode` that sees every torch call made inside f and keeps the
`nn.Parameter`s with `requires_grad=True` among its arguments, in order of first use. An autograd
graph walk would miss a Parameter that is read but does not reach the output.

Torch keeps the mode stack per thread, so two threads running decorated functions at once never
see each other's Parameters.

Item numbers refer to docs/tensorflow_semantics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.nn import Parameter
from torch.overrides import TorchFunctionMode

_Tensor = torch.Tensor

# Reading a Parameter's metadata is not reading the Parameter (TF: `v.shape` is no read).
_METADATA_PROPERTIES = (
    "shape", "dtype", "device", "requires_grad", "grad", "grad_fn", "is_leaf", "ndim",
    "layout", "is_cuda", "is_sparse", "is_quantized", "is_meta", "_version",
)  # fmt: skip
_METADATA: frozenset[Any] = frozenset(
    [getattr(_Tensor, name).__get__ for name in _METADATA_PROPERTIES if hasattr(_Tensor, name)]
    + [_Tensor.size, _Tensor.dim, _Tensor.numel, _Tensor.stride, _Tensor.element_size]
    + [_Tensor.is_contiguous, _Tensor.is_floating_point, _Tensor.is_complex, _Tensor.data_ptr]
    + [_Tensor.__len__, _Tensor.__hash__, _Tensor.requires_grad_]
)


class ParameterWatcher(TorchFunctionMode):
    """Records the trainable Parameters used by torch calls made while the mode is active."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[int, Parameter] = {}

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
        passed = {id(x) for x in exclude if isinstance(x, Parameter)}
        return [p for key, p in self.found.items() if key not in passed]
