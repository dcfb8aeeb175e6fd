"""Static types of decorated functions and methods: checked by mypy and pyright, never run.

`tests/test_typing.py` type-checks this file with both. `assert_type` pins a return type (it fails
on `Any`); a call with a wrong argument carries the checker's own ignore comment (`# type:
ignore[code]` for mypy, `# pyright: ignore[rule]` for pyright), which each reports when unused,
so the call must be an error: the parameters are known, by name and type. Neither checker can
spell a callable with named parameters in `assert_type`, hence the calls.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from typing_extensions import assert_type

from tf_compat_grad import custom_gradient, grad_pass_through, recompute_grad

Tensor = torch.Tensor
Grad = Callable[..., Any]


@custom_gradient
def scaled(x: Tensor, alpha: float) -> tuple[Tensor, Grad]:
    return x * alpha, lambda dy: dy * alpha


@custom_gradient()
def called(x: Tensor) -> tuple[Tensor, Grad]:
    return x, lambda dy: dy


@custom_gradient(example=lambda: (torch.ones(2),), surrogate="identity")
def called_with_keywords(x: Tensor) -> tuple[Tensor, Grad]:
    return x, lambda dy: dy


def block(x: Tensor, n: int) -> Tensor:
    return x * n


class Layer(nn.Module):
    # pyright reports any override of a method by an object that is not a function (so also
    # `functools.cache` on forward): a decorated method of a Module is typed as a function.
    @custom_gradient
    def forward(self, x: Tensor) -> tuple[Tensor, Grad]:
        return x, lambda dy: dy


class CalledLayer(nn.Module):
    """`@custom_gradient()`, with its keywords or without, types forward as bare
    `@custom_gradient` does."""

    @custom_gradient()
    def forward(self, x: Tensor) -> tuple[Tensor, Grad]:
        return x, lambda dy: dy


class ExampleLayer(nn.Module):
    @custom_gradient(example=lambda: (torch.ones(2),), surrogate="identity")
    def forward(self, x: Tensor, alpha: float = 1.0) -> tuple[Tensor, Grad]:
        return x * alpha, lambda dy: dy * alpha


class Mixer(nn.Module):
    """A decorated forward of two tensors and a keyword, and a decorated helper method."""

    @custom_gradient
    def forward(self, x: Tensor, y: Tensor, *, scale: float = 1.0) -> tuple[Tensor, Grad]:
        return x * y * scale, lambda dy: (dy * y, dy * x)

    @custom_gradient
    def helper(self, x: Tensor) -> tuple[Tensor, Grad]:
        return x, lambda dy: dy


class Scaler:
    """A decorated `__call__`: calling the instance binds it."""

    @custom_gradient
    def __call__(self, x: Tensor, alpha: float) -> tuple[Tensor, Grad]:
        return x * alpha, lambda dy: dy * alpha


class Ops:
    @custom_gradient
    def method(self, x: Tensor, alpha: float) -> tuple[Tensor, Grad]:
        return x * alpha, lambda dy: dy * alpha

    @recompute_grad
    def recomputed(self, x: Tensor) -> Tensor:
        return x

    @staticmethod
    @custom_gradient
    def static_above(x: Tensor) -> tuple[Tensor, Grad]:
        return x, lambda dy: dy

    @custom_gradient
    @staticmethod
    def static_below(x: Tensor) -> tuple[Tensor, Grad]:
        return x, lambda dy: dy

    @custom_gradient
    @classmethod
    def class_below(cls, x: Tensor) -> tuple[Tensor, Grad]:
        return x, lambda dy: dy


def functions(x: Tensor) -> None:
    assert_type(scaled(x, alpha=2.0), Tensor)
    scaled(x, "2")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert_type(called(x), Tensor)
    called(x, x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    assert_type(called_with_keywords(x), Tensor)
    assert_type(called_with_keywords.surrogate, str | None)
    assert_type(recompute_grad(block)(x, n=2), Tensor)
    recompute_grad(block)(x, 2.5)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert_type(grad_pass_through(block)(x, n=2), Tensor)
    grad_pass_through(block)(x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


def methods(x: Tensor, layer: Layer, ops: Ops) -> None:
    """Through an instance, `self` is bound and the other parameters stay."""
    assert_type(ops.method(x, alpha=2.0), Tensor)
    ops.method(x, "2")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    ops.method(x, 2.0, 3.0)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    assert_type(Ops.method(ops, x, alpha=2.0), Tensor)
    assert_type(layer.forward(x), Tensor)
    layer.forward(x, x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    assert_type(Layer.forward(layer, x), Tensor)
    assert_type(CalledLayer().forward(x), Tensor)
    CalledLayer().forward(x, x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    assert_type(ExampleLayer().forward(x, alpha=2.0), Tensor)
    ExampleLayer().forward(x, "2")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    mixer = Mixer()
    assert_type(mixer.forward(x, x, scale=2.0), Tensor)
    mixer.forward(x, x, scale="2")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    mixer.forward(x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    assert_type(mixer.helper(x), Tensor)
    mixer.helper(x, x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    assert_type(ops.recomputed(x), Tensor)
    ops.recomputed(x, x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    assert_type(Scaler()(x, alpha=2.0), Tensor)
    Scaler()(x, "2")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def static_and_class_methods(x: Tensor, ops: Ops) -> None:
    """Checkers pass a function under `@staticmethod` / `@classmethod` to the decorator as a
    plain function, and then bind it as a method: the first parameter tells which kind it is.
    mypy does not compare the instance with that parameter, so it binds a staticmethod reached
    through an instance like a method (call it through the class there). Reached through the
    class, a decorated classmethod is typed as the unbound function by both checkers (call it
    through an instance): an overload binding the class there is matched by mypy for every
    method and staticmethod reached through their class too."""
    assert_type(Ops.static_above(x), Tensor)
    assert_type(Ops.static_below(x), Tensor)
    assert_type(ops.static_above(x), Tensor)  # type: ignore[call-arg]
    assert_type(ops.static_below(x), Tensor)  # type: ignore[call-arg]
    assert_type(ops.class_below(x), Tensor)
    Ops.class_below(x)  # type: ignore[call-arg, arg-type]  # pyright: ignore[reportCallIssue]
    ops.class_below(x, x)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
