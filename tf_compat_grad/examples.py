"""Ready-made custom gradients: TensorFlow's docstring examples and the classic
`torch.autograd.Function` examples, each in decorator form.

Each function is what a port of the same TensorFlow code looks like; `tests/test_examples.py`
checks every one against the hand-written `torch.autograd.Function` it replaces. The classic
examples come from the seed documents: four public tutorials on custom gradients in PyTorch that
the project started from. `tests/seed_functions.py` keeps their classes as written.

Item numbers refer to docs/tensorflow_semantics.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._checker.report import Example
from ._decorator import custom_gradient

__all__ = [
    "clip_gradient_by_norm",
    "clipped_relu",
    "conditional_op",
    "custom_exp",
    "custom_relu",
    "linear_poly",
    "log1pexp",
    "log_sigmoid",
    "make_linear_poly",
    "memory_efficient_sigmoid",
    "my_relu",
    "smooth_round",
    "squared_loss",
    "straight_through_round",
]

Grad = Callable[..., Any]


# --- TensorFlow's `tf.custom_gradient` docstring examples ---------------------------------


@custom_gradient(example=lambda: (torch.tensor([-3.0, -0.5, 0.0, 0.7, 2.0, 30.0]),))
def log1pexp(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """`log(1 + exp(x))` with a gradient that stays finite for large x (1.0 at x=100)."""
    e = torch.exp(x)

    def grad(upstream: torch.Tensor) -> torch.Tensor:
        return upstream * (1 - 1 / (1 + e))

    return torch.log(1 + e), grad


@custom_gradient(
    example=lambda: (torch.randn(5), 1.0),
    surrogate="the upstream gradient clipped to L2 norm `norm` (tf.clip_by_norm)",
)
def clip_gradient_by_norm(x: torch.Tensor, norm: float) -> tuple[torch.Tensor, Grad]:
    """The identity, whose gradient is clipped to L2 norm `norm` (`tf.clip_by_norm`)."""
    y = x.clone()

    def grad_fn(dresult: torch.Tensor) -> list[torch.Tensor | None]:
        scale = torch.clamp(norm / torch.linalg.vector_norm(dresult), max=1.0)
        return [dresult * scale, None]

    return y, grad_fn


def make_linear_poly(weights: torch.nn.Parameter) -> Callable[[torch.Tensor], torch.Tensor]:
    """TensorFlow's `linear_poly`: `weights[1] * x + weights[0]`, the weights read from the
    closure, so grad_fn gets them as `variables` and returns their gradient too.

    Ported as TensorFlow's docstring writes it, including its slip: the weight gradient is
    `[sum(dy * x), sum(dy)]`, the true one for `[weights[1], weights[0]]`, so the two entries
    are swapped. The port declares it a surrogate, so that `python -m tf_compat_grad check`
    reports the difference with that reason instead of failing it.
    """

    @custom_gradient(
        example=lambda: (torch.randn(3),),
        surrogate="TensorFlow's docstring example as written: the two weight gradients swapped",
    )
    def linear_poly(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
        """`weights[1] * x + weights[0]`, with the gradient of TensorFlow's docstring (see
        `make_linear_poly`): `weights` is found as a variable, and grad_fn returns its gradient."""
        poly = weights[1] * x + weights[0]

        def grad_fn(
            dpoly: torch.Tensor, variables: list[torch.nn.Parameter] | None = None
        ) -> tuple[torch.Tensor, list[torch.Tensor]]:
            assert variables is not None and len(variables) == 1 and variables[0] is weights
            grad_xs = dpoly * weights[1]
            dy_dw = dpoly * torch.stack([x**1, x**0])
            return grad_xs, [dy_dw.reshape(2, -1).sum(dim=1)]

        return poly, grad_fn

    return linear_poly


linear_poly = make_linear_poly(torch.nn.Parameter(torch.tensor([5.0, 6.0])))
"""TensorFlow's docstring instance: `weights = tf.Variable([5., 6.])`."""


# --- The seed documents' examples ----------------------------------------------------------


@custom_gradient(
    example=lambda: (torch.randn(6),),
    surrogate="the seed's ReLU variant: gradient -0.5 where x <= 0",
)
def custom_relu(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """ReLU whose gradient is -0.5 (whatever the upstream) where x <= 0."""

    def grad(dy: torch.Tensor) -> torch.Tensor:
        return torch.where(x <= 0, -0.5, dy)  # the seed's `dx[x <= 0] = -0.5`, which vmaps

    return torch.clamp(x, min=0), grad


@custom_gradient(
    example=lambda: (
        torch.tensor([0.5, -1.0, 2.0, 0.3]),
        torch.tensor([0.45, 0.5, 1.0, -0.2]),
    ),
    surrogate="the seed's gradient: 1.0 where |prediction - target| < 0.1",
)
def squared_loss(prediction: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """`(prediction - target)**2`, with the prediction's gradient set to 1.0 where
    `|prediction - target| < 0.1`."""
    diff = prediction - target

    def grad(dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d_prediction = torch.where(torch.abs(diff) < 0.1, 1.0, 2 * diff * dy)
        return d_prediction, -2 * diff * dy

    return diff**2, grad


@custom_gradient(example=lambda: (3 * torch.randn(6),))
def memory_efficient_sigmoid(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """Sigmoid that keeps only its input for backward and recomputes sigmoid there."""

    def grad(dy: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(x)
        return dy * s * (1 - s)

    return torch.sigmoid(x), grad


@custom_gradient(
    example=lambda: (torch.randn(5),), surrogate="the seed's modified derivative 2 exp(x)"
)
def custom_exp(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """`exp(x)` with the deliberately modified derivative `2 * exp(x)`."""

    def grad(dy: torch.Tensor) -> torch.Tensor:
        return 2 * torch.exp(x) * dy

    return torch.exp(x), grad


@custom_gradient(example=lambda: (torch.randn(6),))
def conditional_op(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """`2x` where x > 0, `0.5x` where x <= 0 (and 0 where neither holds: NaN), with the
    matching piecewise gradient, as the seed's masks give."""
    positive, other = x > 0, x <= 0

    def grad(dy: torch.Tensor) -> torch.Tensor:
        return torch.where(positive, dy * 2, torch.where(other, dy * 0.5, 0.0))

    return torch.where(positive, x * 2, torch.where(other, x * 0.5, 0.0)), grad


@custom_gradient(
    example=lambda: Example(torch.rand(6), alpha=4.0),
    surrogate="the seed's backward: twice the true gradient (the tanh's 0.5 left out)",
)
def smooth_round(
    x: torch.Tensor, *positional_alpha: float, alpha: float = 10.0
) -> tuple[torch.Tensor, Grad]:
    """A differentiable round: `0.5 + 0.5 * tanh(alpha * (x - 0.5))`.

    As in TensorFlow, an argument passed positionally is an input that needs a gradient slot,
    while a default or a keyword argument is not (items 14 and 15). So
    `smooth_round(x, 5.0)` returns two gradients (the second None), and `smooth_round(x)` and
    `smooth_round(x, alpha=5.0)` return one: the variadic parameter tells grad_fn which case it is.
    """
    if positional_alpha:
        (alpha,) = positional_alpha
    t = torch.tanh(alpha * (x - 0.5))

    def grad(dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        # The seed's SmoothRound.backward leaves out the 0.5 of the tanh's derivative, so this
        # gradient is twice the true one; it is kept as the seed wrote it.
        return (dy * alpha * (1 - t**2), *(None for _ in positional_alpha))

    return 0.5 + 0.5 * t, grad


@custom_gradient(example=lambda: (torch.randn(7),))
def my_relu(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """ReLU with a hand-written backward (the MyReLU example)."""

    def grad(dy: torch.Tensor) -> torch.Tensor:
        return torch.where(x < 0, 0.0, dy)  # the seed's `dx[x < 0] = 0`, which vmaps

    return x.clamp_min(0), grad


@custom_gradient(example=lambda: (1.5 * torch.randn(7), 1.5))
def clipped_relu(
    x: torch.Tensor, *positional_clip_val: float, clip_val: float = 1.0
) -> tuple[torch.Tensor, Grad]:
    """`min(max(0, x), clip_val)`, gradient 1 where `0 < x < clip_val`.

    `clip_val` is a Python float: passed positionally (`clipped_relu(x, 1.5)`, as the seed
    does) it is an input whose gradient slot is None; by default or by keyword it is not an
    input (see `smooth_round`).
    """
    if positional_clip_val:
        (clip_val,) = positional_clip_val
    clip = float(clip_val)

    def grad(dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        mask = ((x > 0) & (x < clip)).to(dy.dtype)
        return (dy * mask, *(None for _ in positional_clip_val))

    return x.clamp(min=0, max=clip), grad


@custom_gradient(example=lambda: (5 * torch.randn(6),))
def log_sigmoid(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """A numerically stable `log(sigmoid(x))`, with gradient `1 - sigmoid(x)` (= sigmoid(-x))."""

    def grad(dy: torch.Tensor) -> torch.Tensor:
        return dy * torch.sigmoid(-x)

    return -torch.nn.functional.softplus(-x), grad


@custom_gradient(example=lambda: (2 * torch.randn(6),), surrogate="straight-through estimator")
def straight_through_round(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """`round(x)` whose gradient is the identity (a straight-through estimator)."""

    def grad(dy: torch.Tensor) -> torch.Tensor:
        return dy

    return torch.round(x), grad
