"""TensorFlow's checks as they run eagerly, in torch, for `tf_ops`: `tf.debugging.check_numerics`
and the `tf.debugging.assert_*` family raise `InvalidArgumentError` (a ValueError here) with
TF's message when the condition fails, and otherwise return what TF's eager call returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._tf_math import convert_to_tensor


class InvalidArgumentError(ValueError):
    """TF's `tf.errors.InvalidArgumentError`, raised by a failed check."""


def check_numerics(tensor: Any, message: str = "", name: str | None = None) -> torch.Tensor:
    """`tf.debugging.check_numerics` (and `assert_all_finite(t, msg)`): `tensor` itself, or
    InvalidArgumentError if it holds a NaN or an infinity. Its gradient is checked the same way
    when it is computed, as TF checks it.

    >>> check_numerics(torch.tensor([1.0, 2.0]), "x")
    tensor([1., 2.])
    """
    t = _check_finite(convert_to_tensor(tensor), message)
    if not t.requires_grad:
        return t
    t = t.clone()  # a node of its own, so that the hook sees this use's gradient only
    gradient_message = "in the gradient: " + message
    t.register_hook(lambda grad: _check_finite(grad, gradient_message))  # type: ignore[no-untyped-call]
    return t


def _check_finite(t: torch.Tensor, message: str) -> torch.Tensor:
    if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
        found = "NaN" if bool(torch.isnan(t).any()) else "Inf"
        raise InvalidArgumentError(f"{message} : Tensor had {found} values")
    return t


def assert_all_finite(t: Any, msg: str = "", name: str | None = None, x: Any = None) -> Any:
    """`tf.debugging.assert_all_finite(t, msg)`: `check_numerics`."""
    return check_numerics(t if x is None else x, msg)


def _check(holds: Callable[..., torch.Tensor], what: str) -> Callable[..., None]:
    def check(
        x: Any, y: Any = None, message: str | None = None, summarize: Any = None, name: Any = None
    ) -> None:
        operands = (x,) if y is None else (x, y)
        if not bool(holds(*(convert_to_tensor(v) for v in operands)).all()):
            raise InvalidArgumentError(f"{message or ''} Condition x {what} did not hold.".strip())

    check.__doc__ = f"`tf.debugging.assert_*`: InvalidArgumentError unless x {what}; None."
    return check


assert_equal = _check(torch.eq, "== y")
assert_none_equal = _check(torch.ne, "!= y")
assert_greater = _check(torch.gt, "> y")
assert_greater_equal = _check(torch.ge, ">= y")
assert_less = _check(torch.lt, "< y")
assert_less_equal = _check(torch.le, "<= y")
assert_positive = _check(lambda x: x > 0, "> 0")
assert_negative = _check(lambda x: x < 0, "< 0")
assert_non_negative = _check(lambda x: x >= 0, ">= 0")
assert_non_positive = _check(lambda x: x <= 0, "<= 0")


def Assert(condition: Any, data: Any, summarize: Any = None, name: Any = None) -> None:
    """`tf.debugging.Assert`: InvalidArgumentError with `data` unless `condition` holds.

    >>> Assert(torch.tensor(True), ["never shown"])
    """
    if not bool(convert_to_tensor(condition)):
        raise InvalidArgumentError(f"assertion failed: {list(data)}")


def ensure_shape(x: Any, shape: Any, name: str | None = None) -> torch.Tensor:
    """`tf.ensure_shape`: `x`, or InvalidArgumentError unless its shape fits `shape` (None
    matches any size).

    >>> ensure_shape(torch.ones(2, 3), [None, 3]).shape
    torch.Size([2, 3])
    """
    t = convert_to_tensor(x)
    wanted = list(shape)
    if len(wanted) != t.dim() or any(
        w is not None and int(w) != d for w, d in zip(wanted, t.shape, strict=True)
    ):
        raise InvalidArgumentError(
            f"Shape of tensor {list(t.shape)} is not compatible with expected shape {wanted}."
        )
    return t
