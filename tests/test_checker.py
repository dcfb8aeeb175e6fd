"""`tf_compat_grad.testing.check`: every check reports a deliberately broken function, and the
report object behaves.

Each broken function below breaks exactly one thing; the test runs only the check that must
catch it (`run_checks(..., only=[...])`) to keep the suite fast.
"""

from __future__ import annotations

import json
import math
import re
import types
from collections.abc import Callable
from typing import Any

import messages
import pytest
import torch
from helpers import D
from messages import exactly

import tf_compat_grad._checker.torch_checks
from tf_compat_grad import custom_gradient, examples, grad_pass_through, recompute_grad
from tf_compat_grad._checker.subject import decorated
from tf_compat_grad.testing import CHECKS, Example, Report, Status, check, run_checks

Grad = Callable[..., Any]
KEPT: list[torch.Tensor] = []  # what the leaking functions below keep alive


def _x(n: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=D)


# --- one deliberately broken function per check --------------------------------------------


@custom_gradient
def bad_forward(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x.reshape(7), lambda dy: dy  # the example has 5 elements


@custom_gradient
def edits_its_input(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    with torch.no_grad():
        x.clamp_(min=0)  # the caller's tensor changes behind autograd's back
    return x * 2, lambda dy: 2 * dy


@custom_gradient
def edits_its_index(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    i.add_(1)  # an integer input: no gradient, so the library lets the call through
    return x * 2, lambda dy: (2 * dy, None)


@custom_gradient
def wrong_count(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x * 2, lambda dy: (dy * 2, dy)


@custom_gradient
def wrong_shape(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x * 2, lambda dy: torch.ones(3, dtype=dy.dtype)


@custom_gradient
def scalar_gradient(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x * 2, lambda dy: (2 * dy).sum()  # broadcast back: repaired, but suspicious


@custom_gradient
def float32_gradient(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x * 2, lambda dy: (2 * dy).float()


@custom_gradient
def infinite_gradient(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x * 2, lambda dy: 2 * dy / (x - x)


@custom_gradient
def clipped_upstream(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return torch.sin(x), lambda dy: torch.cos(x) * dy.clamp(-0.5, 0.5)


@custom_gradient
def normalized_upstream(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return torch.sin(x), lambda dy: torch.cos(x) * dy / torch.linalg.vector_norm(dy)


@custom_gradient
def noisy_gradient(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return torch.sin(x), lambda dy: torch.cos(x) * dy * (1 + 0.01 * torch.rand_like(x))


@custom_gradient
def detached_gradient(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return torch.sin(x), lambda dy: torch.cos(x.detach()) * dy  # no second derivative


class _CosWithoutDerivative(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return torch.cos(x)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("no derivative of this cos")


@custom_gradient
def no_second_derivative(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return torch.sin(x), lambda dy: _CosWithoutDerivative.apply(x) * dy


@custom_gradient
def differs_under_func(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    def grad(dy: torch.Tensor) -> torch.Tensor:
        return (3.0 if torch._C._are_functorch_transforms_active() else 2.0) * dy

    return 2 * x, grad


@custom_gradient
def numpy_gradient(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    def grad(dy: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(2 * dy.numpy())

    return 2 * x, grad


@custom_gradient
def differs_under_vmap(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    k = 3.0 if torch._C._functorch.is_batchedtensor(x) else 2.0
    return k * x, lambda dy: k * dy


@custom_gradient
def reads_item(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    def grad(dy: torch.Tensor) -> torch.Tensor:
        # A Python number read from a batched tensor: vmap cannot batch `.item()` by design
        # (a boolean-mask assignment, the earlier example here, batches since torch 2.15).
        k = (x * 0 + 2).mean().item()
        return k * dy

    return 2 * x, grad


@custom_gradient
def prints(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    print("prints: a graph break")
    return torch.sin(x), lambda dy: torch.cos(x) * dy


@custom_gradient
def item_in_forward(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    s = x.sum().item()
    return x * s, lambda dy: dy * s


@custom_gradient
def differs_when_compiled(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    k = 3.0 if torch.compiler.is_compiling() else 2.0
    return k * x, lambda dy: k * dy


@custom_gradient
def masked_matmul(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    def grad(dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        full = dy @ w.t()  # bfloat16 under autocast
        dx = torch.zeros_like(x)  # float32
        mask = x > 0
        dx[mask] = full[mask]  # index_put refuses to mix dtypes
        return dx, x.t() @ dy

    return x @ w, grad


@custom_gradient
def needs_grad_mode(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    y = x**3
    (d,) = torch.autograd.grad(y.sum(), x, create_graph=True)  # fails under no_grad
    return y, lambda dy: dy * d


@custom_gradient
def grad_mode_dependent(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    k = 2.0 if torch.is_grad_enabled() else 3.0
    return k * x, lambda dy: k * dy


@custom_gradient
def records_under_no_grad(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    with torch.enable_grad():  # records f's ops whatever the caller's mode
        y = 2 * x
    return y, lambda dy: 2 * dy


_HELD = types.SimpleNamespace()  # an object f did not make


@custom_gradient
def reads_input_through_an_attribute(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    _HELD.x = x  # read by grad_fn through the object as is: not saved, no version check
    return x**2, lambda dy: 2 * _HELD.x * dy


@custom_gradient
def keeps_in_list(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    saved = [torch.exp(x)]  # alive as long as the graph, not freed by backward
    return saved[0] * 1, lambda dy: dy * saved[0]


@custom_gradient
def leaks_from_forward(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    e = torch.exp(x)
    KEPT.append(e)
    return e * 1, lambda dy: dy * e


@custom_gradient
def leaks_from_backward(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    def grad(dy: torch.Tensor) -> torch.Tensor:
        g = dy * 2
        KEPT.append(g * 1)
        return g

    return x * 2, grad


def _matmul_example() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(3, 4, generator=generator), torch.randn(4, 2, generator=generator)


@custom_gradient
def masked_assignment(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """The seeds' ReLU backward, `dx[x <= 0] = 0`."""

    def grad(dy: torch.Tensor) -> torch.Tensor:
        dx = dy.clone()
        dx[x <= 0] = 0
        return dx

    return x.clamp_min(0), grad


def _vmap_batches_masked_assignment() -> bool:
    """Whether this torch's vmap batches `dx[x <= 0] = 0` (torch 2.15 does; before, it raises)."""

    def relu_backward(x: torch.Tensor) -> torch.Tensor:
        dx = x.clone()
        dx[x <= 0] = 0
        return dx

    try:
        torch.func.vmap(relu_backward)(torch.randn(2, 3))
    except RuntimeError:
        return False
    return True


@custom_gradient
def doubled_exp(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    """The seed's `2 exp(x)` derivative, not declared a surrogate."""
    return torch.exp(x), lambda dy: 2 * torch.exp(x) * dy


BROKEN = [
    pytest.param(bad_forward, (_x(),), "forward", Status.FAIL, "RuntimeError", id="forward-raises"),
    pytest.param(
        edits_its_input,
        (_x(),),
        "forward",
        Status.FAIL,
        "edited its argument `x` in place",  # the library refuses the call
        id="forward-edits-input",
    ),
    pytest.param(
        edits_its_index,
        (_x(), torch.tensor([0, 1])),
        "forward",
        Status.FAIL,
        "f edits its argument `i` in place",
        id="forward-edits-index",
    ),
    pytest.param(
        wrong_count, (_x(),), "gradients", Status.FAIL, "returned 2 gradients", id="gradients-count"
    ),
    pytest.param(wrong_shape, (_x(),), "gradients", Status.FAIL, "shape [3]", id="gradients-shape"),
    pytest.param(
        scalar_gradient,
        (_x(),),
        "gradients",
        Status.WARN,
        "shape [] for `x`",
        id="gradients-broadcast",
    ),
    pytest.param(
        float32_gradient, (_x(),), "gradients", Status.WARN, "torch.float32", id="gradients-dtype"
    ),
    pytest.param(infinite_gradient, (_x(),), "numerical", Status.FAIL, "inf", id="numerical-inf"),
    pytest.param(
        doubled_exp,
        (_x(),),
        "numerical",
        Status.FAIL,
        "the custom gradient is not the true derivative at 5 element(s)",
        id="numerical-differs",
    ),
    pytest.param(infinite_gradient, (_x(),), "autodiff", Status.FAIL, "inf", id="autodiff-inf"),
    pytest.param(
        doubled_exp,
        (_x(),),
        "autodiff",
        Status.FAIL,
        "differs from autodiff of f at 5 element(s)",
        id="autodiff-differs",
    ),
    pytest.param(
        clipped_upstream, (_x(),), "linearity", Status.WARN, "not linear", id="linearity-clipped"
    ),
    pytest.param(
        normalized_upstream, (_x(),), "linearity", Status.FAIL, "zero upstream", id="linearity-nan"
    ),
    pytest.param(
        noisy_gradient, (_x(),), "determinism", Status.FAIL, "different gradients", id="determinism"
    ),
    pytest.param(
        detached_gradient,
        (_x(),),
        "second_order",
        Status.FAIL,
        "second derivative is wrong",
        id="second-order-detached",
    ),
    pytest.param(
        no_second_derivative,
        (_x(),),
        "second_order",
        Status.WARN,
        "double backward raises",
        id="second-order-raises",
    ),
    pytest.param(
        differs_under_func,
        (_x(),),
        "func_grad",
        Status.FAIL,
        "different gradient",
        id="func-grad-differs",
    ),
    pytest.param(
        numpy_gradient, (_x(),), "func_grad", Status.WARN, "raises", id="func-grad-raises"
    ),
    pytest.param(
        differs_under_vmap, (_x(),), "vmap", Status.FAIL, "other outputs", id="vmap-differs"
    ),
    pytest.param(reads_item, (_x(),), "vmap", Status.WARN, ".item()", id="vmap-raises"),
    pytest.param(
        masked_assignment,
        (_x(),),
        "vmap",
        Status.WARN,
        "grad_fn indexes with a boolean mask (`dx[x <= 0] = -0.5`), whose result has a "
        "data-dependent shape that vmap cannot batch; `torch.where(x <= 0, -0.5, dy)` computes "
        "the same and batches",
        id="vmap-boolean-mask",
        marks=pytest.mark.skipif(
            _vmap_batches_masked_assignment(), reason="this torch's vmap batches the assignment"
        ),
    ),
    pytest.param(
        prints,
        (_x(),),
        "compile",
        Status.WARN,
        "Failed to trace builtin operator)",
        id="compile-print",
        marks=pytest.mark.traced_compile,
    ),
    pytest.param(
        item_in_forward,
        (_x(),),
        "compile",
        Status.WARN,
        "Tensor.item()",
        id="compile-item",
        marks=pytest.mark.traced_compile,
    ),
    pytest.param(
        differs_when_compiled,
        (_x(),),
        "compile",
        Status.FAIL,
        "other outputs",
        id="compile-differs",
        marks=pytest.mark.traced_compile,
    ),
    pytest.param(
        masked_matmul,
        _matmul_example(),
        "autocast",
        Status.FAIL,
        "Index put requires",
        id="autocast-raises",
    ),
    pytest.param(
        needs_grad_mode,
        (_x(),),
        "no_grad",
        Status.FAIL,
        "under torch.no_grad()",
        id="no-grad-raises",
    ),
    pytest.param(
        grad_mode_dependent, (_x(),), "no_grad", Status.FAIL, "outputs differ", id="no-grad-differs"
    ),
    pytest.param(
        records_under_no_grad,
        (_x(),),
        "no_grad",
        Status.FAIL,
        "under torch.no_grad() an output is recorded in a graph",
        id="no-grad-records",
    ),
    pytest.param(
        reads_input_through_an_attribute,
        (_x(),),
        "inplace",
        Status.FAIL,
        "silently changes the gradient",
        id="inplace",
    ),
    pytest.param(
        keeps_in_list,
        (_x(),),
        "memory",
        Status.WARN,
        "until the outputs are freed",
        id="memory-held-by-graph",
    ),
    pytest.param(
        leaks_from_forward, (_x(),), "memory", Status.FAIL, "stay alive", id="memory-leak-forward"
    ),
    pytest.param(
        leaks_from_backward, (_x(),), "memory", Status.FAIL, "stay alive", id="memory-leak-backward"
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fn", "args", "name", "status", "words"), BROKEN)
def test_broken_function_is_reported(
    fn: Callable[..., Any], args: tuple[Any, ...], name: str, status: Status, words: str
) -> None:
    row = run_checks(fn, Example(*args), only=[name])[name]
    assert row.status is status, row
    assert words in row.reason, row


def test_compile_check_skips_where_torch_cannot_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tf_compat_grad._checker.torch_checks, "DYNAMO_TRACES_WATCHER", False)
    row = run_checks(prints, Example(_x()), only=["compile"])["compile"]
    assert row.status is Status.SKIP, row
    assert f"torch {torch.__version__} cannot trace" in row.reason, row


def test_every_check_has_a_failing_case() -> None:
    failing = {p.values[2] for p in BROKEN if p.values[3] is Status.FAIL}
    assert failing == set(CHECKS)


def test_forward_failure_skips_the_rest() -> None:
    report = run_checks(bad_forward, Example(_x()), only=["forward", "numerical", "no_grad"])
    assert [r.status for r in report] == [Status.FAIL, Status.SKIP, Status.SKIP]
    assert report.failed == ["forward"]


def test_wrong_count_skips_gradient_checks_and_names_the_function() -> None:
    report = run_checks(wrong_count, Example(_x()), only=["gradients", "linearity", "no_grad"])
    message = messages.count(wrong_count, 2, ["x"])
    assert report["gradients"].reason == f"backward raises CustomGradientValueError: {message}"
    assert report["linearity"].status is Status.SKIP
    assert report["no_grad"].status is Status.PASS


@custom_gradient(surrogate="gradient reversal")
def reverse_gradient(x: torch.Tensor) -> Any:
    """Gradient reversal: the input itself, returned unchanged."""
    return x, lambda dy: -dy


@pytest.mark.slow
def test_an_output_that_is_the_input_passes_no_grad() -> None:
    """Under no_grad the input returned as it is still requires grad, as with `lambda x: x`;
    that is no graph recorded."""
    report = run_checks(reverse_gradient, Example(_x()))
    assert report["no_grad"].status is Status.PASS
    assert not [row for row in report if row.status is Status.FAIL]


# --- the seeds' functions ------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn", [examples.custom_relu, examples.squared_loss], ids=lambda f: f.__name__
)
def test_seed_functions_that_ignore_the_upstream_warn(fn: Any) -> None:
    row = run_checks(fn, fn.example, only=["linearity"])["linearity"]
    assert row.status is Status.WARN
    assert "loss scaling (AMP's GradScaler), gradient accumulation and mean-vs-sum" in row.reason
    assert row.value is not None and row.value > 0.1


def test_declared_straight_through_estimator_deliberately_differs() -> None:
    report = run_checks(
        examples.straight_through_round,
        examples.straight_through_round.example,
        only=["numerical", "autodiff", "linearity"],
    )
    assert [r.status for r in report] == [Status.PASS, Status.PASS, Status.PASS]
    assert report["numerical"].reason.startswith(
        "deliberately differs from the true derivative, as declared: surrogate "
        "'straight-through estimator'; at 6 element(s), largest at `x["
    )
    assert report.surrogate == "straight-through estimator"
    assert "declared surrogate: straight-through estimator" in str(report)


@custom_gradient
def undeclared_straight_through(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return torch.round(x), lambda dy: dy


def test_undeclared_surrogate_fails_and_says_how_to_declare_it() -> None:
    report = run_checks(undeclared_straight_through, Example(_x()), only=["numerical", "autodiff"])
    assert report.failed == ["numerical", "autodiff"]
    assert report["numerical"].reason.startswith(
        "the custom gradient is not the true derivative at 5 element(s): largest at `x["
    )
    assert report["numerical"].reason.endswith(
        ", true 0 (finite differences and autodiff of f agree). If the difference is intended "
        "(a straight-through estimator, a clipped or reversed gradient), declare it: "
        '`@custom_gradient(surrogate="why")`'
    )
    assert "deliberately" not in str(report)


def test_check_declares_a_surrogate_for_one_call() -> None:
    report = check(undeclared_straight_through, _x(), surrogate="rounding, straight through")
    assert report.ok, report
    assert report["numerical"].reason.startswith(
        "deliberately differs from the true derivative, as declared: surrogate "
        "'rounding, straight through'"
    )
    assert undeclared_straight_through.surrogate is None


def test_grad_pass_through_is_a_declared_surrogate() -> None:
    rounded = grad_pass_through(torch.round)
    report = run_checks(rounded, Example(_x()), only=["numerical", "autodiff"])
    assert [r.status for r in report] == [Status.PASS, Status.PASS]
    assert report.surrogate == "grad_pass_through: the upstream gradient passes through unchanged"


def test_recompute_grad_is_checked_against_the_true_derivative() -> None:
    block = recompute_grad(lambda x: torch.sin(x) * x)
    report = run_checks(block, Example(_x()), only=["numerical"])
    assert report["numerical"].status is Status.PASS, report
    assert report.surrogate is None


@pytest.mark.parametrize("surrogate", ["", "  ", 1, True])
def test_a_surrogate_needs_a_reason(surrogate: Any) -> None:
    with pytest.raises(TypeError, match=re.escape("custom_gradient(surrogate=...) takes the ")):
        custom_gradient(surrogate=surrogate)


def test_strict_turns_warn_into_fail() -> None:
    lenient = run_checks(examples.custom_relu, examples.custom_relu.example, only=["linearity"])
    strict = check(examples.custom_relu, strict=True)
    assert lenient.ok and lenient.warned == ["linearity"]
    assert not strict.ok and strict.failed == ["linearity"] and strict.warned == []
    assert strict["linearity"].reason.endswith("(a WARN, failed by strict mode)")
    assert strict.to_dict()["strict"] is True


def test_a_gradient_right_only_through_autodiff_of_f_on_a_kink_passes() -> None:
    """At a kink autodiff of f picks one side; a custom gradient picking the other is no bug."""

    @custom_gradient
    def relu_one_at_zero(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
        return x.clamp_min(0), lambda dy: dy * (x >= 0)

    report = run_checks(relu_one_at_zero, Example(ON_A_KINK), only=["numerical", "autodiff"])
    assert report.failed == [], report
    assert "not checkable at 1 of 4 element(s) on a kink" in report["numerical"].reason


def test_stable_gradient_is_finite_where_autodiff_is_not() -> None:
    x = torch.tensor([0.0, 800.0], dtype=D)  # exp(800) overflows float64
    row = run_checks(examples.log1pexp, Example(x), only=["autodiff"])["autodiff"]
    assert row.status is Status.PASS
    assert "finite at 1 element(s) where autodiff of f gives nan/inf" in row.reason


# --- an example point on a kink or jump ---------------------------------------------------

ON_A_KINK = torch.tensor([-1.0, 0.0, 0.7, 2.0], dtype=D)  # x[1] sits on the kink at 0


def _scaled(g: torch.Tensor, k: torch.Tensor | float) -> torch.Tensor:
    """`g` in value, `k` times its derivative: a second derivative wrong by the factor k."""
    return k * g - (k - 1) * g.detach()


@custom_gradient
def relu_twice(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x.clamp_min(0), lambda dy: 2 * dy * (x > 0)  # wrong everywhere by a factor 2


@custom_gradient
def relu_wrong_at_2(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    factor = torch.tensor([1.0, 1.0, 3.0, 1.0], dtype=x.dtype)  # wrong next to the kink
    return x.clamp_min(0), lambda dy: dy * (x > 0) * factor


@custom_gradient
def abs_nan_at_zero(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return x.abs(), lambda dy: dy * x / x.abs()  # NaN at 0: wrong on both sides of the kink


@custom_gradient
def x_abs_x_second_order_thrice(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    # The gradient 2|x| has a kink at 0; its derivative is three times the true one.
    return x * x.abs(), lambda dy: dy * _scaled(2 * x.abs(), 3.0)


@custom_gradient
def x_abs_x_second_order_wrong_at_2(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    factor = torch.tensor([1.0, 1.0, 3.0, 1.0], dtype=x.dtype)
    return x * x.abs(), lambda dy: dy * _scaled(2 * x.abs(), factor)


@custom_gradient
def fast_sine(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
    return torch.sin(40 * x), lambda dy: 40 * torch.cos(40 * x) * dy  # curved, but smooth


def test_seed_squared_loss_on_its_floor_boundary_is_not_a_failure() -> None:
    # |prediction - target| is 0.1 at element 1 (float32): the gradient jumps to the floor
    # of 1.0 within a step of the finite differences.
    prediction = torch.tensor([0.5, 0.0, 1.0])
    target = torch.tensor([0.5, 0.1, 1.2])
    report = run_checks(
        examples.squared_loss, Example(prediction, target), only=["numerical", "second_order"]
    )
    row = report["second_order"]
    assert row.status is Status.WARN, row
    assert row.reason.startswith(
        "double backward matches finite differences of the gradient at the other 4 element(s); "
        "not checkable at 2 of 6 element(s) on a kink or jump, where the one-sided differences "
        "disagree: `prediction[1]` = 0 (left "
    ), row
    assert "; `target[1]` = 0.1 (left " in row.reason
    assert report["numerical"].reason.startswith("deliberately differs"), report["numerical"]


def test_a_kink_is_named_and_the_rest_compared() -> None:
    report = run_checks(examples.my_relu, Example(ON_A_KINK), only=["numerical", "second_order"])
    assert [r.status for r in report] == [Status.WARN, Status.WARN]
    assert report["numerical"].reason.startswith(
        "matches the true derivative (finite differences) at the other 3 element(s); not "
        "checkable at 1 of 4 element(s) on a kink or jump, where the one-sided differences "
        "disagree: `x[1]` = 0 (left 0, right "
    )
    assert "at the other 3 element(s); not checkable at 1 of 4" in report["second_order"].reason


@pytest.mark.parametrize(
    ("x", "unit"),
    [
        pytest.param(torch.zeros(3, dtype=D), "3 of 3 element(s)", id="per-element"),
        pytest.param(torch.zeros(80, dtype=D), "12 of 12 random direction(s)", id="directions"),
    ],
)
def test_nothing_compared_is_not_a_pass(x: torch.Tensor, unit: str) -> None:
    report = run_checks(examples.my_relu, Example(x), only=["numerical", "second_order"])
    for row in report:
        assert row.status is Status.WARN, row
        assert row.reason.startswith(f"nothing compared: not checkable at {unit} on a kink"), row
        what = "the gradient" if row.check == "numerical" else "the second derivative"
        assert row.reason.endswith(f"Give example inputs away from the kinks to check {what}")


@pytest.mark.parametrize(
    ("fn", "name", "status", "words"),
    [
        pytest.param(
            relu_twice,
            "numerical",
            Status.FAIL,
            "the custom gradient is not the true derivative at 2 element(s): largest at `x[",
            id="first-order-wrong-everywhere",
        ),
        pytest.param(
            relu_wrong_at_2,
            "numerical",
            Status.FAIL,
            "the custom gradient is not the true derivative at 1 element(s): largest at `x[2]`",
            id="first-order-wrong-next-to-the-kink",
        ),
        pytest.param(
            abs_nan_at_zero,
            "numerical",
            Status.FAIL,
            "the custom gradient is nan at `x[1]`",
            id="first-order-nan-on-the-kink",
        ),
        pytest.param(
            x_abs_x_second_order_thrice,
            "second_order",
            Status.FAIL,
            "the second derivative is wrong: double backward gives ",
            id="second-order-wrong-everywhere",
        ),
        pytest.param(
            x_abs_x_second_order_wrong_at_2,
            "second_order",
            Status.FAIL,
            "at `x[2]`, finite differences of the gradient give",
            id="second-order-wrong-next-to-the-kink",
        ),
    ],
)
def test_a_kink_does_not_hide_a_wrong_rule(
    fn: Callable[..., Any], name: str, status: Status, words: str
) -> None:
    row = run_checks(fn, Example(ON_A_KINK), only=[name])[name]
    assert row.status is status, row
    assert words in row.reason, row
    if "nan" not in words:
        assert "not checkable at 1 of 4 element(s) on a kink or jump" in row.reason, row


def test_a_smooth_curved_function_has_no_kink() -> None:
    report = run_checks(fast_sine, Example(_x()), only=["numerical", "second_order"])
    assert [r.status for r in report] == [Status.PASS, Status.PASS], report
    assert "not checkable" not in str(report)


# --- methods, modules, variables -----------------------------------------------------------


class Scale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([1.5, -2.0, 0.5]))

    @custom_gradient(example=lambda: (Scale(), torch.randn(4, 3)))
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
        w = self.weight
        y = x * w

        def grad(dy: torch.Tensor, variables: Any = None) -> Any:
            return dy * w, [(dy * x).sum(0)]

        return y, grad


@pytest.mark.slow
def test_module_forward_with_variables_passes_and_is_restored() -> None:
    module = Scale()
    before = module.weight.detach().clone()
    report = check(module.forward, torch.randn(4, 3))
    assert report.ok, report
    assert report.warned == []
    assert "reads 1 Parameter(s)" in report["forward"].reason
    assert module.weight.dtype == torch.float32 and module.weight.grad is None
    assert torch.equal(module.weight.detach(), before)


@pytest.mark.slow
def test_method_taken_from_the_class_uses_its_example() -> None:
    report = check(Scale.forward)
    assert report.function == "Scale.forward"
    assert report.ok


def test_variables_get_numerical_gradients() -> None:
    # TensorFlow's docstring grad_fn returns [sum(dy * x), sum(dy)] for weights [w0, w1], the
    # derivative of `w1 * x + w0` in the wrong order; the checker sees it, declared.
    weights = torch.nn.Parameter(torch.tensor([5.0, 6.0], dtype=D))
    row = run_checks(examples.make_linear_poly(weights), Example(_x(3)), only=["numerical"])[
        "numerical"
    ]
    assert row.status is Status.PASS
    assert "as declared" in row.reason and "`variables[0][" in row.reason


# --- the report ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report() -> Report:
    return run_checks(
        examples.custom_relu,
        examples.custom_relu.example,
        only=["forward", "gradients", "numerical", "linearity", "no_grad"],
    )


def test_report_table(report: Report) -> None:
    text = str(report)
    assert text.splitlines()[0].startswith("custom_relu (")
    assert "  example: Example(<tensor [6] float32>)" in text
    assert "WARN  linearity     not linear in the upstream gradient" in text
    assert "  declared surrogate: the seed's ReLU variant: gradient -0.5 where x <= 0" in text
    assert len(text.splitlines()) == 3 + len(report)


def test_report_to_dict_is_json(report: Report) -> None:
    data = json.loads(json.dumps(report.to_dict()))
    assert data["function"] == "custom_relu"
    assert data["ok"] is True
    assert data["counts"] == {"PASS": 4, "WARN": 1, "FAIL": 0, "SKIP": 0}
    assert [c["check"] for c in data["checks"]] == [
        "forward",
        "gradients",
        "numerical",
        "linearity",
        "no_grad",
    ]
    linearity = data["checks"][3]
    assert linearity["status"] == "WARN" and math.isclose(linearity["value"], 0.5)
    assert set(linearity) == {"check", "status", "reason", "figure", "value", "seconds"}


def test_report_lookup(report: Report) -> None:
    assert report["linearity"].status is Status.WARN
    assert report.warned == ["linearity"]
    with pytest.raises(KeyError, match="no check 'vmap'"):
        report["vmap"]


def test_unknown_check_is_refused() -> None:
    with pytest.raises(ValueError, match=exactly(messages.unknown_checks(["speed"], CHECKS))):
        run_checks(examples.log1pexp, Example(_x()), only=["speed"])


@pytest.mark.slow
def test_keyword_arguments_reach_the_function() -> None:
    report = check(examples.smooth_round, torch.rand(4, dtype=D), alpha=3.0)
    assert report.example == "Example(<tensor [4] float64>, alpha=3.0)"
    assert report["numerical"].status is Status.PASS  # twice the true one, declared


def test_check_leaves_its_arguments_and_random_state_alone() -> None:
    x = _x().requires_grad_(True)
    state = torch.random.get_rng_state()
    run_checks(noisy_gradient, Example(x), only=["numerical", "inplace", "determinism"])
    assert x.grad is None and torch.equal(x.detach(), _x())
    assert torch.equal(torch.random.get_rng_state(), state)


def test_example_that_raises_is_a_forward_failure() -> None:
    def broken() -> tuple[torch.Tensor]:
        raise RuntimeError("no data")

    report = run_checks(examples.log1pexp, broken, only=["forward", "numerical"])
    assert report["forward"].status is Status.FAIL
    assert "no data" in report["forward"].reason
    assert report["numerical"].status is Status.SKIP


def test_integer_inputs_are_skipped() -> None:
    @custom_gradient
    def count(x: torch.Tensor) -> tuple[torch.Tensor, Grad]:
        return x * 2, lambda dy: None

    report = run_checks(count, Example(torch.arange(3)), only=["forward", "numerical", "no_grad"])
    assert [r.status for r in report] == [Status.PASS, Status.SKIP, Status.PASS]
    assert report["numerical"].reason == "no floating-point tensor input to differentiate"


def test_check_without_any_example_is_refused() -> None:
    assert repr(decorated(wrong_count)).startswith("<custom_gradient `wrong_count`")
    with pytest.raises(TypeError, match=exactly(messages.check_needs_example(wrong_count))):
        check(wrong_count)


W = torch.nn.Parameter(torch.tensor([1.5, -0.5], dtype=D))


@custom_gradient
def repaired_gradients(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, Any]:
    """grad_fn returns a scalar for `x` (expanded) and a float32 gradient for W (cast)."""

    def grad_fn(dy: torch.Tensor, variables: Any = None) -> Any:
        return ((dy * W).sum(), None), [(dy * x).to(torch.float32)]

    return x * W * scale, grad_fn


def test_gradients_the_library_repairs_are_named() -> None:
    row = run_checks(repaired_gradients, Example(_x()[:2], 2.0), only=["gradients"])["gradients"]
    assert row.status is Status.WARN
    assert row.reason == (
        "grad_fn returns shape [] for `x` of shape [2] (expanded by tf_compat_grad; is that "
        "intended?); grad_fn returns torch.float32 for `variables[0]` of dtype torch.float64 (cast)"
    )


class _Holder:
    @staticmethod
    @custom_gradient
    def scaled(x: torch.Tensor, k: float) -> tuple[torch.Tensor, Any]:
        return x * k, lambda dy: (dy * k, None)


def test_a_staticmethod_object_is_checked_as_its_function() -> None:
    """The staticmethod object a class holds takes no instance: every example argument is an
    argument (found in review: the first one was taken for `self`)."""
    report = run_checks(
        vars(_Holder)["scaled"], Example(_x()[:2], 2.0), only=["gradients", "autodiff"]
    )
    assert report["gradients"].status is Status.PASS
    assert report["gradients"].reason.startswith("one gradient per positional input (2)")
    assert report["autodiff"].status is Status.PASS
