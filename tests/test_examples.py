"""Every example in `tf_compat_grad.examples` against the hand-written code it replaces.

The seed examples are checked against their `torch.autograd.Function`s in `seed_functions.py`:
same outputs, same gradients for every input, under several upstreams, to second order. The
TensorFlow docstring examples are checked against the numbers the TF docstring promises.

Item numbers refer to docs/tensorflow_semantics.md.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

from tf_compat_grad import examples as E
from tf_compat_grad._checker.subject import decorated


def _load_seeds() -> ModuleType:
    # Loaded by path: pytest runs with --import-mode=importlib, which puts nothing on sys.path.
    name = "seed_functions"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


S = _load_seeds()

F64 = torch.float64


def _t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def _randn(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=F64) * scale


def _away(x: torch.Tensor, *kinks: float, gap: float = 0.1) -> torch.Tensor:
    """`x` with every value within `gap` of a kink pushed out to `gap` from it."""
    for k in kinks:
        near = (x - k).abs() < gap
        x = torch.where(near, k + gap * torch.where(x >= k, 1.0, -1.0).to(F64), x)
    return x


def _leaves(inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in inputs]


# --- Seed examples against their Functions ------------------------------------------------


@dataclass(frozen=True)
class Case:
    """An example in decorator form, the seed Function it replaces, and inputs to try."""

    name: str
    example: Callable[..., torch.Tensor]
    seed: Callable[..., torch.Tensor]
    inputs: tuple[tuple[torch.Tensor, ...], ...]
    marks: tuple[Any, ...] = ()


_PREDICTION = _randn(11, 8)

CASES = [
    Case(
        "custom_relu",
        E.custom_relu,
        S.CustomReLU.apply,
        ((_t(-1.0, 0.5, 2.0),), (_t(0.0, -0.0, 3.0, -3.0),), (_randn(1, 7),), (_randn(2, 3, 4),)),
    ),
    Case(
        "squared_loss",
        E.squared_loss,
        S.CustomSquaredLoss.apply,
        (
            (_t(0.5, 0.0, 1.0), _t(0.5, 0.1, 1.2)),
            (_randn(3, 6), _randn(4, 6)),
            (_PREDICTION, _PREDICTION + _randn(12, 8, scale=0.1)),  # both sides of |d| < 0.1
            (_randn(5, 4, 3), _randn(6, 3)),  # the target broadcasts
        ),
    ),
    Case(
        "memory_efficient_sigmoid",
        E.memory_efficient_sigmoid,
        S.MemoryEfficientSigmoid.apply,
        ((_t(-1.0, 0.5, 2.0),), (_t(-40.0, 0.0, 40.0),), (_randn(7, 10, scale=5.0),)),
    ),
    Case(
        "custom_exp",
        E.custom_exp,
        S.CustomExp.apply,
        ((_t(1.0, 2.0),), (_randn(8, 2, 3),)),
    ),
    Case(
        "conditional_op",
        E.conditional_op,
        S.ConditionalOp.apply,
        ((_t(-1.0, 0.0, 1.0, 2.0),), (_randn(9, 3, 4),)),
    ),
    Case(
        "smooth_round-default",
        lambda x: E.smooth_round(x),
        lambda x: S.SmoothRound.apply(x),
        ((_t(0.1, 0.5, 0.9),), (_randn(10, 6, scale=0.5) + 0.5,)),
    ),
    Case(
        "smooth_round-positional",
        lambda x: E.smooth_round(x, 5.0),
        lambda x: S.SmoothRound.apply(x, 5.0),
        ((_t(0.1, 0.5, 0.9),), (_randn(10, 6, scale=0.5) + 0.5,)),
    ),
    Case(
        "smooth_round-keyword",
        lambda x: E.smooth_round(x, alpha=5.0),
        lambda x: S.SmoothRound.apply(x, 5.0),
        ((_t(0.1, 0.5, 0.9),), (_randn(10, 6, scale=0.5) + 0.5,)),
    ),
    Case(
        "my_relu",
        E.my_relu,
        S.MyReLU.apply,
        ((_t(-1.0, 0.0, 2.0),), (_randn(13, 5),)),
    ),
    Case(
        "clipped_relu-default",
        lambda x: E.clipped_relu(x),
        lambda x: S.ClippedReLUFunction.apply(x, 1.0),
        ((_t(-1.0, 0.0, 0.5, 1.0, 2.0),), (_randn(14, 5, scale=2.0),)),
    ),
    Case(
        "clipped_relu-keyword",
        lambda x: E.clipped_relu(x, clip_val=2.0),
        lambda x: S.ClippedReLUFunction.apply(x, 2.0),
        ((_t(-1.0, 0.0, 0.5, 2.0, 3.0),), (_randn(15, 5, scale=2.0),)),
    ),
    Case(
        "clipped_relu-positional",
        lambda x: E.clipped_relu(x, 2.0),
        lambda x: S.ClippedReLUFunction.apply(x, 2.0),
        ((_t(-1.0, 0.0, 0.5, 2.0, 3.0),), (_randn(15, 5, scale=2.0),)),
    ),
    Case(
        "log_sigmoid",
        E.log_sigmoid,
        S.LogSigmoid.apply,
        ((_t(-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 1000.0),), (_randn(16, 4, 5, scale=10.0),)),
    ),
    Case(
        "straight_through_round",
        E.straight_through_round,
        S.StraightThroughRound.apply,
        ((_t(-2.7, -0.5, 0.4, 0.5, 1.5, 2.2),), (_randn(17, 9, scale=3.0),)),
    ),
]

CASE_INPUTS = [
    pytest.param(case, inputs, id=f"{case.name}-{i}", marks=case.marks)
    for case in CASES
    for i, inputs in enumerate(case.inputs)
]


def _weighted(y: torch.Tensor) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1234)
    return (y * torch.randn(y.shape, generator=generator, dtype=y.dtype)).sum()


UPSTREAMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum": torch.sum,
    "mean": torch.mean,  # what the seeds 002 and 003 use
    "weighted": _weighted,  # a non-trivial upstream
}


def _run(
    fn: Callable[..., torch.Tensor],
    inputs: tuple[torch.Tensor, ...],
    loss: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    args = _leaves(inputs)
    y = fn(*args)
    loss(y).backward()
    return y.detach(), [a.grad for a in args]


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize(("case", "inputs"), CASE_INPUTS)
def test_example_matches_seed(case: Case, inputs: tuple[torch.Tensor, ...], upstream: str) -> None:
    y, grads = _run(case.example, inputs, UPSTREAMS[upstream])
    expected_y, expected_grads = _run(case.seed, inputs, UPSTREAMS[upstream])
    torch.testing.assert_close(y, expected_y)
    for grad, expected in zip(grads, expected_grads, strict=True):
        assert grad is not None and expected is not None
        torch.testing.assert_close(grad, expected)


def _second_order(
    fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]
) -> list[torch.Tensor]:
    """d/dx of <v, d/dx (w * y * y).sum()>: the upstream of y depends on x (item 40)."""
    args = _leaves(inputs)
    y = fn(*args)
    first = torch.autograd.grad(_weighted(y * y), args, create_graph=True)
    generator = torch.Generator().manual_seed(99)
    inner = sum((g * torch.randn(g.shape, generator=generator, dtype=F64)).sum() for g in first)
    assert isinstance(inner, torch.Tensor)
    second = torch.autograd.grad(inner, args, allow_unused=True)
    return [torch.zeros_like(a) if s is None else s for a, s in zip(args, second, strict=True)]


@pytest.mark.parametrize(("case", "inputs"), CASE_INPUTS)
def test_example_matches_seed_second_order(case: Case, inputs: tuple[torch.Tensor, ...]) -> None:
    got = _second_order(case.example, inputs)
    expected = _second_order(case.seed, inputs)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)


# The results the seed documents print for their own example inputs, under a sum loss.
_SR = _t(0.1, 0.5, 0.9)
SEED_RESULTS = [
    pytest.param(
        E.custom_relu, (_t(-1.0, 0.5, 2.0),), _t(0.0, 0.5, 2.0), (_t(-0.5, 1.0, 1.0),),
        id="custom_relu",
    ),
    pytest.param(
        E.squared_loss,
        (_t(0.5, 0.0, 1.0), _t(0.5, 0.1, 1.2)),
        _t(0.0, 0.01, 0.04),
        (_t(1.0, -0.2, -0.4), _t(0.0, 0.2, 0.4)),  # |0.0 - 0.1| < 0.1 is False
        id="squared_loss",
    ),
    pytest.param(
        E.memory_efficient_sigmoid,
        (_t(-1.0, 0.5, 2.0),),
        torch.sigmoid(_t(-1.0, 0.5, 2.0)),
        (torch.sigmoid(_t(-1.0, 0.5, 2.0)) * torch.sigmoid(-_t(-1.0, 0.5, 2.0)),),
        id="memory_efficient_sigmoid",
    ),
    pytest.param(
        E.custom_exp, (_t(1.0, 2.0),), _t(math.e, math.e**2), (_t(2 * math.e, 2 * math.e**2),),
        id="custom_exp",
    ),
    pytest.param(
        E.conditional_op, (_t(-1.0, 0.0, 1.0, 2.0),), _t(-0.5, 0.0, 2.0, 4.0),
        (_t(0.5, 0.5, 2.0, 2.0),),
        id="conditional_op",
    ),
    pytest.param(
        E.smooth_round,
        (_SR,),
        0.5 + 0.5 * torch.tanh(10 * (_SR - 0.5)),
        (10 * (1 - torch.tanh(10 * (_SR - 0.5)) ** 2),),  # twice the true derivative, as seeded
        id="smooth_round",
    ),
    pytest.param(
        E.my_relu, (_t(-1.0, 0.0, 2.0),), _t(0.0, 0.0, 2.0), (_t(0.0, 1.0, 1.0),), id="my_relu"
    ),
]  # fmt: skip


@pytest.mark.parametrize(("fn", "inputs", "expected_y", "expected_grads"), SEED_RESULTS)
def test_seed_example_results(
    fn: Callable[..., torch.Tensor],
    inputs: tuple[torch.Tensor, ...],
    expected_y: torch.Tensor,
    expected_grads: tuple[torch.Tensor, ...],
) -> None:
    y, grads = _run(fn, inputs, torch.sum)
    torch.testing.assert_close(y, expected_y)
    for grad, expected in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected)


def test_squared_loss_same_tensor_twice() -> None:
    grads = []
    for fn in (E.squared_loss, S.CustomSquaredLoss.apply):
        (x,) = _leaves((_randn(20, 5),))
        fn(x, x).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])
    torch.testing.assert_close(grads[0], torch.ones(5, dtype=F64))  # diff = 0: the 1.0 floor


def test_squared_loss_constant_target() -> None:
    target = _randn(21, 6)
    grads = []
    for fn in (E.squared_loss, S.CustomSquaredLoss.apply):
        (prediction,) = _leaves((_randn(22, 6),))
        _weighted(fn(prediction, target)).backward()
        grads.append(prediction.grad)
    torch.testing.assert_close(grads[0], grads[1])
    assert target.grad is None


def test_conditional_op_nan_matches_seed() -> None:
    # The seed's masks `x > 0` and `x <= 0` are both False for NaN: output 0 and gradient 0.
    inputs = (_t(float("nan"), -1.0, 1.0),)
    y, (grad,) = _run(E.conditional_op, inputs, torch.sum)
    expected_y, (expected_grad,) = _run(S.ConditionalOp.apply, inputs, torch.sum)
    torch.testing.assert_close(y, expected_y, equal_nan=True)
    torch.testing.assert_close(grad, expected_grad, equal_nan=True)


def test_every_example_is_covered() -> None:
    covered = {case.name.split("-")[0] for case in CASES}
    covered |= {"log1pexp", "clip_gradient_by_norm", "make_linear_poly", "linear_poly"}
    public = {
        name
        for name, value in vars(E).items()
        if decorated(value) is not None or name.startswith("make_")
    }
    assert public - covered == set()


# --- gradcheck where the gradient is the true one -----------------------------------------

GRADCHECK_CASES = [
    pytest.param(E.memory_efficient_sigmoid, _randn(30, 6, scale=3.0), id="memory_efficient_sigmoid"),
    pytest.param(E.my_relu, _away(_randn(31, 7), 0.0), id="my_relu"),
    pytest.param(lambda x: E.clipped_relu(x), _away(_randn(32, 7), 0.0, 1.0), id="clipped_relu-default"),
    pytest.param(
        lambda x: E.clipped_relu(x, clip_val=2.0), _away(_randn(33, 7, scale=2.0), 0.0, 2.0),
        id="clipped_relu-keyword",
    ),
    pytest.param(
        lambda x: E.clipped_relu(x, 2.0), _away(_randn(33, 7, scale=2.0), 0.0, 2.0),
        id="clipped_relu-positional",
    ),
    pytest.param(  # the seed's second gradcheck: a 3x4 input, clip value 0.5
        lambda x: E.clipped_relu(x, 0.5), _away(_randn(34, 3, 4), 0.0, 0.5),
        id="clipped_relu-positional-3x4",
    ),
    pytest.param(E.log_sigmoid, _randn(35, 6, scale=5.0), id="log_sigmoid"),
    pytest.param(E.log1pexp, _randn(36, 6, scale=5.0), id="log1pexp"),
    pytest.param(E.conditional_op, _away(_randn(37, 7), 0.0), id="conditional_op"),
]  # fmt: skip


@pytest.mark.parametrize(("fn", "x"), GRADCHECK_CASES)
def test_gradcheck(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> None:
    assert gradcheck(fn, (x.clone().requires_grad_(True),))


@pytest.mark.parametrize(("fn", "x"), GRADCHECK_CASES)
def test_gradgradcheck(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> None:
    assert gradgradcheck(fn, (x.clone().requires_grad_(True),))


_CLIP_INPUT = _t(-1.0, -0.3, 0.4, 1.2, 2.3, 3.0)  # on both sides of the kinks at 0 and 1.5


def test_gradcheck_accepts_seed_clipped_relu() -> None:
    x = _CLIP_INPUT.clone().requires_grad_(True)
    assert gradcheck(lambda x: S.ClippedReLUFunction.apply(x, 1.5), (x,), eps=1e-6, atol=1e-4)


def test_gradcheck_rejects_incorrect_clipped_relu() -> None:
    x = _CLIP_INPUT.clone().requires_grad_(True)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        gradcheck(lambda x: S.IncorrectClippedReLU.apply(x, 1.5), (x,), eps=1e-6, atol=1e-4)


def _sigmoid_d2(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return s * (1 - s) * (1 - 2 * s)


def _softplus_d2(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * torch.sigmoid(-x)


SECOND_DERIVATIVES = [
    pytest.param(E.memory_efficient_sigmoid, _sigmoid_d2, id="memory_efficient_sigmoid"),
    pytest.param(E.log1pexp, _softplus_d2, id="log1pexp"),
    pytest.param(E.log_sigmoid, lambda x: -_softplus_d2(x), id="log_sigmoid"),
]


@pytest.mark.parametrize(("fn", "d2"), SECOND_DERIVATIVES)
def test_second_derivative_is_analytic(
    fn: Callable[[torch.Tensor], torch.Tensor], d2: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    x = _t(-30.0, -4.0, -1.0, 0.0, 0.5, 2.0, 9.0).requires_grad_(True)
    (first,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), x)
    torch.testing.assert_close(second, d2(x.detach()))


def test_custom_exp_second_order_mixes_custom_and_true_terms() -> None:
    # item 40: y = custom_exp(x), loss y*y gives 12 e^{2x}.
    x = _t(-1.0, 0.0, 0.5).requires_grad_(True)
    y = E.custom_exp(x)
    (first,) = torch.autograd.grad((y * y).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), x)
    torch.testing.assert_close(first, 4 * torch.exp(2 * x.detach()))
    torch.testing.assert_close(second, 12 * torch.exp(2 * x.detach()))


# --- TensorFlow's docstring examples ------------------------------------------------------


def test_log1pexp_gradient_is_one_at_100() -> None:
    # The TF docstring's float32 example: exp(100) overflows, plain autograd gives nan.
    x = torch.tensor(100.0, requires_grad=True)
    log1pexp = torch.log(1 + torch.exp(x))
    (naive,) = torch.autograd.grad(log1pexp, x)
    assert torch.isnan(naive)
    E.log1pexp(x).backward()
    assert x.grad is not None
    assert x.grad.item() == 1.0


def test_log1pexp_matches_softplus() -> None:
    x = _randn(40, 12, scale=10.0).requires_grad_(True)
    y = E.log1pexp(x)
    _weighted(y).backward()
    generator = torch.Generator().manual_seed(1234)
    w = torch.randn(x.shape, generator=generator, dtype=F64)
    torch.testing.assert_close(y.detach(), torch.log1p(torch.exp(x.detach())))
    torch.testing.assert_close(x.grad, w * torch.sigmoid(x.detach()))


CLIP_UPSTREAMS = [
    pytest.param(_t(3.0, 0.0, -4.0), _t(0.6, 0.0, -0.8), id="norm-5-clipped-to-1"),
    pytest.param(_t(0.3, 0.0, -0.4), _t(0.3, 0.0, -0.4), id="norm-0.5-unchanged"),
    pytest.param(_t(0.0, 0.0, 0.0), _t(0.0, 0.0, 0.0), id="zero-unchanged"),
]


@pytest.mark.parametrize(("upstream", "expected"), CLIP_UPSTREAMS)
def test_clip_gradient_by_norm(upstream: torch.Tensor, expected: torch.Tensor) -> None:
    x = _randn(41, 3).requires_grad_(True)
    y = E.clip_gradient_by_norm(x, 1.0)
    assert y is not x
    torch.testing.assert_close(y.detach(), x.detach())
    y.backward(upstream)
    assert x.grad is not None
    torch.testing.assert_close(x.grad, expected)
    assert torch.linalg.vector_norm(x.grad).item() == pytest.approx(
        min(1.0, torch.linalg.vector_norm(upstream).item())
    )


@pytest.mark.parametrize("upstream", ["sum", "weighted"])
def test_make_linear_poly(upstream: str) -> None:
    weights = torch.nn.Parameter(_t(5.0, 6.0))
    linear_poly = E.make_linear_poly(weights)
    x = _t(1.0, 2.0, 3.0).requires_grad_(True)
    y = linear_poly(x)
    torch.testing.assert_close(y.detach(), 6 * x.detach() + 5)
    UPSTREAMS[upstream](y).backward()
    if upstream == "sum":
        dy = torch.ones(3, dtype=F64)
        torch.testing.assert_close(weights.grad, _t(6.0, 3.0))  # [sum(x), 3]
    else:
        dy = torch.randn(3, generator=torch.Generator().manual_seed(1234), dtype=F64)
    # TF's grad_fn: grad_xs = dy * w[1]; grad_vars = reduce_sum(dy * stack([x, 1]), axis=1).
    torch.testing.assert_close(x.grad, 6 * dy)
    torch.testing.assert_close(weights.grad, torch.stack([(dy * x.detach()).sum(), dy.sum()]))


# --- The numerically stable log-sigmoid ---------------------------------------------------


def test_log_sigmoid_is_finite_at_extremes() -> None:
    x = _t(-1000.0, 1000.0).requires_grad_(True)
    y = E.log_sigmoid(x)
    y.sum().backward()
    assert x.grad is not None
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    torch.testing.assert_close(y.detach(), _t(-1000.0, 0.0))
    torch.testing.assert_close(x.grad, _t(1.0, 0.0))
    assert torch.isinf(torch.log(torch.sigmoid(x.detach()[0])))  # what the naive form gives
