"""`torch.func` transforms through a custom gradient (Note [transforms]).

Every expected value is an analytic derivative written out here, never one the library computed.
`cube` and `double_exp` carry deliberately untrue gradients (autodiff would give 3x^2 and e^x),
so a value that matches proves the custom rule was followed rather than autodiff.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import messages
import pytest
import torch
from helpers import D
from messages import exactly
from torch import nn
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

from tf_compat_grad import CustomGradientValueError, custom_gradient
from tf_compat_grad._errors import CustomGradientNotImplementedError
from tf_compat_grad.examples import clipped_relu, log1pexp

X = torch.tensor([-1.5, -0.3, 0.4, 1.0, 2.2], dtype=D)
V = torch.tensor([0.5, -2.0, 1.5, 3.0, -0.7], dtype=D)


# --- elementwise functions: value, first and second derivative ------------------------------


@custom_gradient
def cube(x):
    """`x**3` with the untrue gradient `7 x**2`: second derivative 14 x, autodiff's 6 x."""

    def grad_fn(dy):
        return dy * 7 * x * x

    return x**3, grad_fn


@custom_gradient
def double_exp(x):
    """`exp(x)` with the untrue gradient `2 exp(x)`, read from an intermediate f computed."""
    e = torch.exp(x)

    def grad_fn(dy):
        return dy * 2 * e

    return e, grad_fn


@dataclass(frozen=True)
class Elementwise:
    name: str
    fn: Callable[[torch.Tensor], torch.Tensor]
    value: Callable[[torch.Tensor], torch.Tensor]
    d1: Callable[[torch.Tensor], torch.Tensor]
    d2: Callable[[torch.Tensor], torch.Tensor]

    def __str__(self) -> str:
        return self.name


ELEMENTWISE = [
    Elementwise(
        "log1pexp",
        log1pexp,
        value=lambda x: torch.log1p(torch.exp(x)),
        d1=torch.sigmoid,
        d2=lambda x: torch.sigmoid(x) * (1 - torch.sigmoid(x)),
    ),
    Elementwise("cube", cube, value=lambda x: x**3, d1=lambda x: 7 * x**2, d2=lambda x: 14 * x),
    Elementwise(
        "double_exp",
        double_exp,
        value=torch.exp,
        d1=lambda x: 2 * torch.exp(x),
        d2=lambda x: 2 * torch.exp(x),
    ),
]

elementwise = pytest.mark.parametrize("case", ELEMENTWISE, ids=str)


def _summed(fn):
    return lambda x: fn(x).sum()


def _third_order_diagonal(d: torch.Tensor) -> torch.Tensor:
    n = d.shape[0]
    out = torch.zeros(n, n, n, dtype=d.dtype)
    i = torch.arange(n)
    out[i, i, i] = d
    return out


@elementwise
def test_vmap_value(case):
    torch.testing.assert_close(vmap(case.fn)(X), case.value(X))


@elementwise
def test_grad(case):
    torch.testing.assert_close(grad(_summed(case.fn))(X), case.d1(X))


@elementwise
def test_vmap_grad(case):
    torch.testing.assert_close(vmap(grad(case.fn))(X), case.d1(X))


@elementwise
def test_jacrev(case):
    torch.testing.assert_close(jacrev(case.fn)(X), torch.diag(case.d1(X)))


@elementwise
def test_vjp(case):
    _, pullback = vjp(case.fn, X)
    torch.testing.assert_close(pullback(V)[0], case.d1(X) * V)


@elementwise
def test_vjp_primal(case):
    primal, _ = vjp(case.fn, X)
    torch.testing.assert_close(primal, case.value(X))


@elementwise
def test_jvp(case):
    _, tangent = jvp(case.fn, (X,), (V,))
    torch.testing.assert_close(tangent, case.d1(X) * V)


@elementwise
def test_jvp_primal(case):
    primal, _ = jvp(case.fn, (X,), (V,))
    torch.testing.assert_close(primal, case.value(X))


@elementwise
def test_jacfwd(case):
    torch.testing.assert_close(jacfwd(case.fn)(X), torch.diag(case.d1(X)))


@elementwise
def test_grad_grad(case):
    second = grad(lambda x: grad(_summed(case.fn))(x).sum())(X)
    torch.testing.assert_close(second, case.d2(X))


@elementwise
def test_scalar_grad_grad(case):
    x = torch.tensor(0.7, dtype=D)
    torch.testing.assert_close(grad(grad(case.fn))(x), case.d2(x))


@elementwise
def test_vmap_grad_grad(case):
    torch.testing.assert_close(vmap(grad(grad(case.fn)))(X), case.d2(X))


@elementwise
def test_jacrev_jacrev(case):
    torch.testing.assert_close(jacrev(jacrev(case.fn))(X), _third_order_diagonal(case.d2(X)))


@elementwise
def test_hessian(case):
    torch.testing.assert_close(hessian(_summed(case.fn))(X), torch.diag(case.d2(X)))


def test_grad_grad_of_log1pexp_is_not_the_higher_order_trap():
    # The closure tensor `e` must carry its own derivative: 0.0 here is the trap.
    s = 1 / (1 + torch.exp(torch.tensor(-1.0, dtype=D)))
    result = grad(grad(log1pexp))(torch.tensor(1.0, dtype=D))
    torch.testing.assert_close(result, s * (1 - s))
    assert abs(result.item() - 0.19661193324148185) < 1e-12


# --- no silent fallback to autodiff under vmap ------------------------------------------------


def test_vmap_of_grad_follows_the_custom_rule():
    torch.testing.assert_close(vmap(grad(cube))(X), 7 * X**2)


@elementwise
def test_grad_of_vmap(case):
    torch.testing.assert_close(grad(lambda x: vmap(case.fn)(x).sum())(X), case.d1(X))


OVER_VMAP = [
    pytest.param(lambda f, x: vjp(f, x)[1](V)[0] / V, id="vjp"),
    pytest.param(lambda f, x: torch.diagonal(jacrev(f)(x)), id="jacrev"),
    pytest.param(lambda f, x: jvp(f, (x,), (V,))[1] / V, id="jvp"),
    pytest.param(lambda f, x: torch.diagonal(jacfwd(f)(x)), id="jacfwd"),
]


@pytest.mark.parametrize("transform", OVER_VMAP)
def test_transform_of_vmap_follows_the_custom_rule(transform):
    torch.testing.assert_close(transform(vmap(cube), X), 7 * X**2)


# --- two inputs, two outputs ------------------------------------------------------------------


@custom_gradient
def mix(a, b):
    """`(a * b, a + b)` with the untrue Jacobian [[3b, a], [5, 7a]] (autodiff: [[b, a], [1, 1]])."""

    def grad_fn(d_product, d_sum):
        return d_product * 3 * b + d_sum * 5, d_product * a + d_sum * 7 * a

    return (a * b, a + b), grad_fn


A = torch.tensor([0.5, -1.0, 2.0], dtype=D)
B = torch.tensor([1.5, 3.0, -0.25], dtype=D)
MIX_JACOBIAN = (
    (torch.diag(3 * B), torch.diag(A)),
    (torch.diag(torch.full_like(A, 5.0)), torch.diag(7 * A)),
)
JACOBIANS = {"jacrev": jacrev, "jacfwd": jacfwd}


@pytest.mark.parametrize("jacobian", JACOBIANS.values(), ids=JACOBIANS.keys())
def test_two_input_two_output_jacobian(jacobian):
    result = jacobian(mix, argnums=(0, 1))(A, B)
    torch.testing.assert_close(result, MIX_JACOBIAN)


# --- a Python float positional argument -------------------------------------------------------

CLIP_X = torch.tensor([-1.0, 0.5, 1.0, 1.4, 2.0], dtype=D)
# With clip_val=1.5 (not the default 1.0) x=1.4 is inside: its gradient is 1 and its value 1.4.
CLIP_GRAD = torch.tensor([0.0, 1.0, 1.0, 1.0, 0.0], dtype=D)
CLIP_VALUE = torch.tensor([0.0, 0.5, 1.0, 1.4, 1.5], dtype=D)


def test_float_argument_grad():
    result = grad(lambda x: clipped_relu(x, 1.5).sum())(CLIP_X)
    torch.testing.assert_close(result, CLIP_GRAD)


def test_float_argument_vmap_grad():
    result = vmap(grad(lambda x: clipped_relu(x, 1.5)))(CLIP_X)
    torch.testing.assert_close(result, CLIP_GRAD)


def test_float_argument_vmap_value():
    torch.testing.assert_close(vmap(lambda x: clipped_relu(x, 1.5))(CLIP_X), CLIP_VALUE)


# --- how often f and grad_fn run ----------------------------------------------------------


def make_counted_cube():
    calls = Counter()

    @custom_gradient
    def counted_cube(x):
        calls["f"] += 1

        def grad_fn(dy):
            calls["grad_fn"] += 1
            return dy * 7 * x * x

        return x**3, grad_fn

    return counted_cube, calls


FIRST_ORDER = {
    "grad": lambda f: grad(_summed(f))(X),
    "vmap(grad)": lambda f: vmap(grad(f))(X),
    "jacrev": lambda f: torch.diagonal(jacrev(f)(X)),
    "vjp": lambda f: vjp(f, X)[1](torch.ones_like(X))[0],
    "jvp": lambda f: jvp(f, (X,), (torch.ones_like(X),))[1],
    "jacfwd": lambda f: torch.diagonal(jacfwd(f)(X)),
}
first_order = pytest.mark.parametrize("transform", FIRST_ORDER.values(), ids=FIRST_ORDER.keys())


@first_order
def test_first_order_calls_f_once(transform):
    counted_cube, calls = make_counted_cube()
    torch.testing.assert_close(transform(counted_cube), 7 * X**2)
    assert calls["f"] == 1


@first_order
def test_first_order_calls_grad_fn_once(transform):
    counted_cube, calls = make_counted_cube()
    transform(counted_cube)
    assert calls["grad_fn"] == 1


# --- a random f: a re-run must draw what the first run drew --------------------------------

XR = torch.linspace(0.5, 2.0, 64, dtype=D)


@custom_gradient
def dropout_cube(x):
    """`x**3` where a random mask keeps it, 0 elsewhere; the mask is drawn inside f."""
    keep = torch.rand_like(x) > 0.5

    def grad_fn(dy):
        return dy * keep * 3 * x * x

    return torch.where(keep, x**3, torch.zeros_like(x)), grad_fn


def _first_mask(seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.rand_like(XR) > 0.5


def test_random_f_grad_grad_uses_the_first_mask():
    keep = _first_mask(0)
    torch.manual_seed(0)
    second = grad(lambda x: grad(_summed(dropout_cube))(x).sum())(XR)
    torch.testing.assert_close(second, 6 * XR * keep)


def test_random_f_rerun_does_not_advance_the_generator():
    _first_mask(0)
    expected = torch.rand(4, dtype=D)
    torch.manual_seed(0)
    grad(lambda x: grad(_summed(dropout_cube))(x).sum())(XR)
    torch.testing.assert_close(torch.rand(4, dtype=D), expected)


def test_random_f_eager_create_graph_uses_the_first_mask():
    keep = _first_mask(1)
    x = XR.clone().requires_grad_()
    torch.manual_seed(1)
    (first,) = torch.autograd.grad(dropout_cube(x).sum(), x, create_graph=True)
    torch.testing.assert_close(first.detach(), 3 * XR**2 * keep)


def test_random_f_eager_create_graph_matches_plain_backward():
    x = XR.clone().requires_grad_()
    torch.manual_seed(2)
    (with_graph,) = torch.autograd.grad(dropout_cube(x).sum(), x, create_graph=True)
    torch.manual_seed(2)
    (without,) = torch.autograd.grad(dropout_cube(x).sum(), x)
    torch.testing.assert_close(with_graph.detach(), without)


# --- forward over forward is refused -------------------------------------------------------


@elementwise
def test_forward_over_forward_is_refused(case):
    message = messages.forward_over_forward(case.fn)
    with pytest.raises(CustomGradientNotImplementedError, match=exactly(message)):
        jacfwd(jacfwd(case.fn))(X)


def test_forward_over_forward_is_a_not_implemented_error():
    message = messages.forward_over_forward(log1pexp)
    with pytest.raises(NotImplementedError, match=exactly(message)):
        jacfwd(jacfwd(log1pexp))(X)


# --- a grad_fn returning the wrong number of gradients -----------------------------------


@custom_gradient
def too_many_grads(x):
    def grad_fn(dy):
        return dy, dy

    return x * 2, grad_fn


@first_order
def test_wrong_gradient_count_is_a_value_error(transform):
    message = messages.count(too_many_grads, 2, ["x"])
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        transform(too_many_grads)


def test_wrong_gradient_count_error_is_a_value_error():
    with pytest.raises(ValueError, match=exactly(messages.count(too_many_grads, 2, ["x"]))):
        grad(_summed(too_many_grads))(X)


# --- torch.func.functional_call on a module whose forward is decorated ---------------------


class Scale(nn.Module):
    """`weight * x` with the untrue input gradient `3 * weight` (autodiff: weight)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([1.0, 2.0, 3.0], dtype=D))

    @custom_gradient
    def forward(self, x):
        w = self.weight

        def grad_fn(dy, variables=None):
            dx = dy * 3 * w
            if variables is None:
                return dx
            return dx, [dy * x]

        return w * x, grad_fn


W = torch.tensor([0.5, -2.0, 4.0], dtype=D)


def test_functional_call_input_grad():
    module = Scale()
    result = grad(lambda x: functional_call(module, {"weight": W}, (x,)).sum())(A)
    torch.testing.assert_close(result, 3 * W)


def test_functional_call_value():
    module = Scale()
    result = vmap(lambda x: functional_call(module, {"weight": W}, (x,)))(A.unsqueeze(0))
    torch.testing.assert_close(result, (W * A).unsqueeze(0))


def test_a_tensor_escaped_from_a_finished_transform_works():
    leaked = []

    def keep(x):
        leaked.append(x)
        return x.sum()

    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    grad(keep)(x)
    (escaped,) = leaked
    assert torch._C._functorch.is_functorch_wrapped_tensor(escaped)
    log1pexp(escaped).sum().backward()
    torch.testing.assert_close(x.grad, torch.sigmoid(torch.ones(3, dtype=torch.float64)))
