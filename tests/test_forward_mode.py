"""Forward mode and nested transforms: dual tensors of `torch.autograd.forward_ad`, integer
tensors under forward mode, `torch.compile` around `torch.func`, and eager autograd around
`torch.func.grad` (Note [transforms], Note [compile under torch.func]).

Every expected value is an analytic derivative written out here. `cube` and `mix` carry
deliberately untrue gradients, so a value that matches proves the custom rule was followed.
"""

import math

import messages
import pytest
import torch
import torch.autograd.forward_ad as fwAD
from helpers import D
from messages import exactly, within
from torch import nn
from torch._dynamo.utils import counters
from torch.func import grad, jacfwd, jvp, vjp

from tf_compat_grad import custom_gradient
from tf_compat_grad._errors import CustomGradientNotImplementedError
from tf_compat_grad._torch_internals import DYNAMO_TRACES_WATCHER
from tf_compat_grad.examples import log1pexp

X = torch.tensor([-1.5, -0.3, 0.4, 1.0, 2.2], dtype=D)
V = torch.tensor([0.5, -2.0, 1.5, 3.0, -0.7], dtype=D)


@custom_gradient
def cube(x):
    """`x**3` with the untrue gradient `7 x**2`."""

    def grad_fn(dy):
        return dy * 7 * x * x

    return x**3, grad_fn


@custom_gradient
def mix(a, b):
    """`(a * b, a + b)` with the untrue Jacobian [[3b, a], [5, 7a]]."""

    def grad_fn(d_product, d_sum):
        return d_product * 3 * b + d_sum * 5, d_product * a + d_sum * 7 * a

    return (a * b, a + b), grad_fn


def dual_call(fn, primals, tangents, **kwargs):
    """fn on dual tensors (None: not dual); the outputs' primals and tangents as pytrees."""
    with fwAD.dual_level():
        args = [
            p if t is None else fwAD.make_dual(p, t) for p, t in zip(primals, tangents, strict=True)
        ]
        out = fn(*args, **kwargs)
        leaves, spec = torch.utils._pytree.tree_flatten(out)
        unpacked = [fwAD.unpack_dual(o) for o in leaves]
        return (
            torch.utils._pytree.tree_unflatten([u.primal for u in unpacked], spec),
            torch.utils._pytree.tree_unflatten([u.tangent for u in unpacked], spec),
        )


# --- dual tensors follow the custom rule --------------------------------------------------

ELEMENTWISE = [
    pytest.param(cube, lambda x: x**3, lambda x: 7 * x**2, id="cube"),
    pytest.param(log1pexp, lambda x: torch.log1p(torch.exp(x)), torch.sigmoid, id="log1pexp"),
]


@pytest.mark.parametrize(("fn", "value", "d1"), ELEMENTWISE)
def test_dual_tensor_follows_the_custom_rule(fn, value, d1):
    primal, tangent = dual_call(fn, (X,), (V,))
    torch.testing.assert_close(primal, value(X))
    torch.testing.assert_close(tangent, d1(X) * V)
    torch.testing.assert_close(tangent, jvp(fn, (X,), (V,))[1])


A = torch.tensor([0.5, -1.0, 2.0], dtype=D)
B = torch.tensor([1.5, 3.0, -0.25], dtype=D)
TA = torch.tensor([1.0, 2.0, -1.0], dtype=D)
TB = torch.tensor([-0.5, 0.25, 4.0], dtype=D)

# J v of mix for tangents (ta, tb): (3b ta + a tb, 5 ta + 7a tb).
MIX_CASES = [
    pytest.param((TA, TB), (3 * B * TA + A * TB, 5 * TA + 7 * A * TB), id="both-dual"),
    pytest.param((TA, None), (3 * B * TA, 5 * TA), id="first-dual"),
    pytest.param((None, TB), (A * TB, 7 * A * TB), id="second-dual"),
]


@pytest.mark.parametrize(("tangents", "expected"), MIX_CASES)
def test_dual_two_inputs_tuple_output(tangents, expected):
    primal, tangent = dual_call(mix, (A, B), tangents)
    torch.testing.assert_close(primal, (A * B, A + B))
    torch.testing.assert_close(tangent, expected)
    zeros = torch.zeros_like(A)
    full = tuple(zeros if t is None else t for t in tangents)
    torch.testing.assert_close(tangent, jvp(mix, (A, B), full)[1])


@custom_gradient
def nested(pair, scale=1.0, *, shift=0.0):
    """`{"p": a * b * scale, "q": [a + shift]}` with the untrue gradients (5 b, 2 a) on p."""
    a, b = pair

    def grad_fn(dp, dq):
        return [dp * 5 * b + dq, dp * 2 * a], None

    return {"p": a * b * scale, "q": [a + shift]}, grad_fn


def test_dual_nested_arguments_outputs_and_keywords():
    primal, tangent = dual_call(lambda a, b: nested([a, b], 2.0, shift=1.0), (A, B), (TA, TB))
    torch.testing.assert_close(primal, {"p": 2 * A * B, "q": [A + 1]})
    torch.testing.assert_close(tangent, {"p": 5 * B * TA + 2 * A * TB, "q": [TA]})


class Cuber:
    def __init__(self, k: float) -> None:
        self.k = k

    @custom_gradient
    def __call__(self, x):
        def grad_fn(dy):
            return dy * self.k * x * x

        return x**3, grad_fn


def test_dual_method_call():
    primal, tangent = dual_call(Cuber(7.0), (X,), (V,))
    torch.testing.assert_close(primal, X**3)
    torch.testing.assert_close(tangent, 7 * X**2 * V)


def test_dual_primal_requiring_grad_keeps_the_custom_backward():
    x = X.clone().requires_grad_()
    with fwAD.dual_level():
        out = cube(fwAD.make_dual(x, V))
        torch.testing.assert_close(fwAD.unpack_dual(out).tangent, 7 * X**2 * V)
        (g,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(g, 7 * X**2)


def test_dual_forward_over_reverse_is_the_hessian_vector_product():
    # The closure tensor `e` of log1pexp must carry a tangent: without it, H v is 0.
    x = X.clone().requires_grad_()
    with fwAD.dual_level():
        (g,) = torch.autograd.grad(log1pexp(fwAD.make_dual(x, V)).sum(), x)
        hv = fwAD.unpack_dual(g).tangent
    s = torch.sigmoid(X)
    torch.testing.assert_close(hv, s * (1 - s) * V)


class Scale(nn.Module):
    """`weight * x` with the untrue input gradient `3 * weight`; reads its Parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([1.0, 2.0, -3.0], dtype=D))

    @custom_gradient
    def forward(self, x):
        w = self.weight

        def grad_fn(dy, variables=None):
            return dy * 3 * w, [dy * x]

        return w * x, grad_fn


def test_dual_with_variables_gets_grad_fns_gradient_in_a_later_backward():
    """The tangent follows the rule, and the Parameter's gradient through the output is
    grad_fn's (`dy * x`), also through the tangent (`3 * dy * TA`)."""
    scale = Scale()
    w = scale.weight
    with fwAD.dual_level():
        primal, tangent = fwAD.unpack_dual(scale(fwAD.make_dual(A, TA)))
        (g,) = torch.autograd.grad((primal + tangent).sum(), w)
    torch.testing.assert_close(tangent, 3 * w.detach() * TA)
    torch.testing.assert_close(g, A + 3 * TA)


def test_dual_with_variables_under_no_grad_follows_the_custom_rule():
    scale = Scale()
    with torch.no_grad():
        primal, tangent = dual_call(scale, (A,), (TA,))
    w = scale.weight.detach()
    torch.testing.assert_close(primal, w * A)
    torch.testing.assert_close(tangent, 3 * w * TA)


# --- integer tensors have no tangent ----------------------------------------------------------


@custom_gradient
def pick(x, index):
    """`x[index]` with the untrue gradient 2 (scattered back); index is an integer input."""

    def grad_fn(dy):
        return torch.zeros_like(x).index_add(0, index, 2 * dy), None

    return x[index], grad_fn


@custom_gradient
def sort3(x):
    """`torch.sort(x)` (values, integer indices) with the untrue gradient 3 on the values."""
    values, indices = torch.sort(x)

    def grad_fn(d_values, d_indices):
        return torch.zeros_like(x).index_add(0, indices, 3 * d_values)

    return (values, indices), grad_fn


INDEX = torch.tensor([4, 0, 0, 2])
PICK_JACOBIAN = 2 * torch.eye(5, dtype=D)[INDEX]
SORTED = torch.argsort(X)
SORT_JACOBIAN = 3 * torch.eye(5, dtype=D)[SORTED]

INTEGER_CASES = [
    pytest.param(lambda: jvp(lambda x: pick(x, INDEX), (X,), (V,))[1], 2 * V[INDEX], id="jvp-in"),
    pytest.param(lambda: jacfwd(pick)(X, INDEX), PICK_JACOBIAN, id="jacfwd-in"),
    pytest.param(lambda: dual_call(pick, (X, INDEX), (V, None))[1], 2 * V[INDEX], id="fwAD-in"),
    pytest.param(
        lambda: jvp(lambda x: vjp(lambda z: pick(z, INDEX), x)[1](V[INDEX])[0], (X,), (V,))[1],
        torch.zeros_like(X),
        id="jvp-of-vjp-in",
    ),
    pytest.param(lambda: jvp(sort3, (X,), (V,))[1][0], 3 * V[SORTED], id="jvp-out"),
    pytest.param(lambda: jacfwd(lambda x: sort3(x)[0])(X), SORT_JACOBIAN, id="jacfwd-out"),
    pytest.param(lambda: dual_call(sort3, (X,), (V,))[1][0], 3 * V[SORTED], id="fwAD-out"),
    pytest.param(
        lambda: jvp(lambda x: vjp(lambda z: sort3(z)[0], x)[1](V)[0], (X,), (V,))[1],
        torch.zeros_like(X),
        id="jvp-of-vjp-out",
    ),
]


@pytest.mark.parametrize(("compute", "expected"), INTEGER_CASES)
def test_integer_tensor_is_a_constant_of_forward_mode(compute, expected):
    torch.testing.assert_close(compute(), expected)


def test_integer_output_has_no_tangent():
    tangents = jvp(sort3, (X,), (V,))[1]
    assert tangents[1].dtype == torch.int64
    assert not tangents[1].any()
    assert dual_call(sort3, (X,), (V,))[1][1] is None


# --- torch.compile around torch.func ---------------------------------------------------------


@custom_gradient
def sin_twice(x):
    """`sin(x)` with the untrue gradient `2 cos(x)` (autodiff: cos x; torch.compile gave 0)."""

    def grad_fn(dy):
        return dy * 2 * torch.cos(x)

    return torch.sin(x), grad_fn


BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.mark.slow
@pytest.mark.traced_compile
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_func_grad_follows_the_custom_rule(dynamo, backend):
    x = torch.tensor(0.5, dtype=D)
    result = torch.compile(grad(sin_twice), backend=backend)(x)
    torch.testing.assert_close(result, 2 * torch.cos(x))
    assert counters["graph_break"], "the decorated call runs outside the compiled graph"


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_func_grad_fullgraph_is_refused_naming_the_function(dynamo, backend):
    message = (
        messages.under_transform(sin_twice)
        if DYNAMO_TRACES_WATCHER
        # Older torch: every decorated call leaves the graph (Note [compile on older torch]).
        else messages.older_torch_reason(sin_twice)
    )
    compiled = torch.compile(grad(sin_twice), backend=backend, fullgraph=True)
    with pytest.raises(Exception, match=within(message)):
        compiled(torch.tensor(0.5, dtype=D))


@pytest.mark.slow
def test_compiled_jvp_follows_the_custom_rule_or_is_refused_by_name(dynamo):
    """Where Dynamo traces into `jvp`, older torch refuses the call by name (Note [compile on
    older torch]); where it does not (2.9), or from torch 2.13, the custom rule applies."""
    compiled = torch.compile(lambda x, v: jvp(cube, (x,), (v,))[1], backend="eager")
    try:
        result = compiled(X, V)
    except CustomGradientNotImplementedError as error:
        assert not DYNAMO_TRACES_WATCHER
        assert str(error) == messages.older_torch_transform(cube)
        return
    torch.testing.assert_close(result, 7 * X**2 * V)


@pytest.mark.slow
@pytest.mark.skipif(DYNAMO_TRACES_WATCHER, reason="torch >= 2.13 runs the call outside safely")
def test_compiled_grad_on_older_torch_is_refused_naming_the_version(dynamo):
    """Older Dynamo fails inside the transform after the call leaves the graph (2.9: an
    internal `is_leaf` assertion): refused by name (Note [compile on older torch])."""
    message = messages.older_torch_transform(sin_twice)
    depth = torch._C._len_torch_function_stack()
    compiled = torch.compile(grad(sin_twice), backend="eager")
    with pytest.raises(CustomGradientNotImplementedError, match=within(message)):
        compiled(torch.tensor(0.5, dtype=D))
    assert torch._C._len_torch_function_stack() == depth
    assert f"torch {torch.__version__}" in message


# --- eager autograd around torch.func.grad ---------------------------------------------------

Y = 0.3
XS = 1.2


def _outer_grad(add_y: bool) -> torch.Tensor:
    y = torch.tensor(Y, dtype=D, requires_grad=True)

    @custom_gradient
    def f(x):
        c = torch.cos(y)  # captured from the outer scope, where y requires grad

        def grad_fn(dy):
            return dy * 2 * c * x

        return c * x * x, grad_fn

    inner = grad(f)(torch.tensor(XS, dtype=D))  # 2 cos(y) x
    (outer,) = torch.autograd.grad(inner + y if add_y else inner, y)
    return outer


@pytest.mark.parametrize(
    ("add_y", "expected"),
    [
        pytest.param(False, -2 * math.sin(Y) * XS, id="grad"),
        pytest.param(True, 1 - 2 * math.sin(Y) * XS, id="grad-plus-y"),
    ],
)
def test_eager_autograd_around_func_grad(add_y, expected):
    torch.testing.assert_close(_outer_grad(add_y), torch.tensor(expected, dtype=D))


def test_eager_autograd_around_func_grad_of_the_input():
    # The outer level differentiates the input itself: the second derivative 14 x of cube.
    x = X.clone().requires_grad_()
    (second,) = torch.autograd.grad(grad(lambda z: cube(z).sum())(x).sum(), x)
    torch.testing.assert_close(second, 14 * X)


def test_dual_tensor_by_keyword_only_gets_the_true_derivative_of_f():
    """Keyword arguments are not inputs (item 15); with no dual input, nothing is recorded and
    f's own derivative applies (item 39), as in reverse mode: 3 x**2, not cube's untrue 7 x**2."""

    def by_keyword(*, x):
        return cube(x=x)

    with fwAD.dual_level():
        out = by_keyword(x=fwAD.make_dual(X, V))
        tangent = fwAD.unpack_dual(out).tangent
    torch.testing.assert_close(tangent, 3 * X**2 * V)


# --- grad_fns that call decorated functions -------------------------------------------------


@custom_gradient
def my_sin(x):
    """sin, whose grad_fn calls `my_cos`, whose grad_fn calls back: true derivatives both."""
    return torch.sin(x), lambda dy: dy * my_cos(x)


@custom_gradient
def my_cos(x):
    return torch.cos(x), lambda dy: -dy * my_sin(x)


@custom_gradient
def my_exp(x):
    """exp, whose grad_fn calls itself."""
    return torch.exp(x), lambda dy: dy * my_exp(x)


CALLING = [
    pytest.param(my_sin, torch.sin, id="grad_fns calling each other"),
    pytest.param(my_exp, torch.exp, id="grad_fn calling its own function"),
]


def _tangent_and_its_gradient(fn, x, v):
    """Forward mode on dual tensors, then reverse mode through the tangent."""
    x = x.clone().requires_grad_()
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(fn(fwAD.make_dual(x, v))).tangent
        (g,) = torch.autograd.grad(tangent.sum(), x)
    return tangent, g


@pytest.mark.parametrize(("decorated", "plain"), CALLING)
def test_dual_through_a_grad_fn_calling_decorated_functions_is_plain_forward_mode(decorated, plain):
    """It used to recurse without end: each decorated call in grad_fn saw the dual tensor and
    computed its own tangent through its own grad_fn. The rule now applies at the primals."""
    custom = dual_call(decorated, [X], [V])
    true = dual_call(plain, [X], [V])
    for c, t in zip(custom, true, strict=True):
        torch.testing.assert_close(c, t)
    for c, t in zip(
        _tangent_and_its_gradient(decorated, X, V),
        _tangent_and_its_gradient(plain, X, V),
        strict=True,
    ):
        torch.testing.assert_close(c, t)
    torch.testing.assert_close(jvp(decorated, (X,), (V,))[1], jvp(plain, (X,), (V,))[1])


@pytest.mark.parametrize(("decorated", "plain"), CALLING)
def test_hessian_through_a_grad_fn_calling_decorated_functions(decorated, plain):
    from torch.func import hessian

    torch.testing.assert_close(
        hessian(lambda x: decorated(x).sum())(X), hessian(lambda x: plain(x).sum())(X)
    )


@pytest.mark.parametrize(("decorated", "plain"), CALLING)
def test_reverse_over_forward_reentering_the_rule_is_refused_by_name(decorated, plain):
    """Under `jacrev(jacfwd(f))` the rule in jvp reaches its own jvp again, without end."""
    from torch.func import jacrev

    with pytest.raises(
        CustomGradientNotImplementedError, match=exactly(messages.jvp_reentered(decorated))
    ):
        jacrev(jacfwd(lambda x: decorated(x).sum()))(X)
