"""Other libraries' custom-gradient test cases, written as decorated functions: PyTorch's
`autograd_function_db` (torch/testing/_internal/autograd_function_db.py: NumpyCube, NumpyMul,
NumpySort, NumpyTake, Select, ScaleGradGenVmap, ZeroGradientsGenVmap, ForwardHasDefaultArgs)
and JAX's `custom_vjp` tests (tests/api_test.py, CustomVJPTest: Python control flow, pytrees,
keyword and non-differentiable arguments, tracers closed over, residuals, nested rules,
`None` gradients, remat).

Each gradient is compared with plain autograd of the same math, or, where the rule is untrue on
purpose (a scaled or zeroed gradient, JAX's `2 cos x` for `sin x`), with the value the rule
states, written out here. Every comparison runs eagerly and under the `torch.func` transforms
each case's source runs it under.
"""

import math

import numpy as np
import pytest
import torch
from helpers import D
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import custom_gradient


def T(value):
    return torch.tensor(value, dtype=D)


def _numpy(t):
    return t.detach().numpy()


# --- PyTorch's autograd_function_db --------------------------------------------------------


@custom_gradient
def numpy_mul(x, y):
    def grad_fn(dy):
        return numpy_mul(dy, y), numpy_mul(dy, x)

    return torch.tensor(_numpy(x) * _numpy(y)), grad_fn


@custom_gradient
def numpy_cube(x):
    """Two outputs, the second the derivative, as NumpyCube (its second derivative is not
    compared: NumpyCube's backward differentiates through its own output, which a custom
    gradient cannot name)."""
    dx = torch.tensor(3 * _numpy(x) ** 2)

    def grad_fn(dy, d_dx):
        return numpy_mul(dy, dx) + 6 * numpy_mul(d_dx, x)

    return (torch.tensor(_numpy(x) ** 3), dx), grad_fn


@custom_gradient
def take(x, ind, ind_inv, dim):
    def grad_fn(dy):
        return take(dy, ind_inv, ind, dim), None, None, None

    return torch.take_along_dim(x, ind, dim), grad_fn


@custom_gradient
def numpy_take(x, ind, ind_inv, dim):
    def grad_fn(dy):
        return numpy_take(dy, ind_inv, ind, dim), None, None, None

    return torch.tensor(np.take_along_axis(_numpy(x), _numpy(ind), dim)), grad_fn


@custom_gradient
def sort(x, dim):
    """SortGenVmap: the sorted values and two integer outputs, the indices."""
    ind = torch.argsort(x, dim=dim)
    ind_inv = torch.argsort(ind, dim=dim)

    def grad_fn(dy, _ind, _ind_inv):
        return take(dy, ind_inv, ind, dim), None

    return (torch.take_along_dim(x, ind, dim), ind, ind_inv), grad_fn


@custom_gradient
def numpy_sort(x, dim):
    ind = np.argsort(_numpy(x), axis=dim)
    ind_inv = torch.tensor(np.argsort(ind, axis=dim))
    ind = torch.tensor(ind)

    def grad_fn(dy, _ind, _ind_inv):
        return numpy_take(dy, ind_inv, ind, dim), None

    return (torch.tensor(np.take_along_axis(_numpy(x), _numpy(ind), dim)), ind, ind_inv), grad_fn


@custom_gradient
def select(x, idx):
    def grad_fn(dy):
        result = dy.new_zeros(x.shape)
        result[idx] = dy
        return result, None

    return x[idx], grad_fn


@custom_gradient
def select_default(x, idx=(2,)):
    """ForwardHasDefaultArgs: a default is not an input (item 14)."""

    def grad_fn(dy):
        result = dy.new_zeros(x.shape)
        result[idx] = dy
        return result

    return x[idx], grad_fn


@custom_gradient
def scale_grad(x):
    return x.clone(), lambda dy: dy * 3.14


@custom_gradient
def zero_gradients(x, y):
    """Zeros, one of them too large: summed down to its input's shape, as torch does."""

    def grad_fn(gx, gy):
        return torch.zeros(3, 4, *gx.shape, dtype=gx.dtype), torch.zeros(gy.shape, dtype=gy.dtype)

    return (x.clone(), y.clone()), grad_fn


def _rand(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, dtype=D, generator=generator) * 1.2 + 0.8


X1, XS, Y4, Y34 = _rand(1), _rand(3, 5, seed=1), _rand(4, seed=2), _rand(3, 4, seed=3)
IND = torch.argsort(XS, dim=1)
IND_INV = torch.argsort(IND, dim=1)


def _plain_sort(x, dim):
    values, ind = torch.sort(x, dim)
    return values, ind, torch.argsort(ind, dim=dim)


def _plain_select_default(x):
    return x[(2,)]


def _plain_take(x, ind, _ind_inv, dim):
    return torch.take_along_dim(x, ind, dim)


# name: decorated, reference, arguments, which arguments are differentiated, second order
DB = {
    "NumpyCube": (numpy_cube, lambda x: (x**3, 3 * x**2), [X1], [0], False),
    "NumpyMul": (numpy_mul, torch.mul, [Y4, Y34], [0, 1], True),
    "NumpySort": (numpy_sort, _plain_sort, [XS, 1], [0], False),
    "NumpyTake": (numpy_take, _plain_take, [XS, IND, IND_INV, 1], [0], False),
    "SortGenVmap": (sort, _plain_sort, [XS, 1], [0], True),
    "TakeGenVmap": (take, _plain_take, [XS, IND, IND_INV, 1], [0], True),
    "Select": (select, lambda x, i: x[i], [XS, 2], [0], True),
    "ForwardHasDefaultArgs": (select_default, _plain_select_default, [XS], [0], True),
}  # fmt: skip


def _weighted(outputs):
    """A scalar of every floating output, weighted so that no gradient is a plain sum."""
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return sum(
        (o * torch.linspace(0.5, 1.5, o.numel(), dtype=D).reshape(o.shape)).sum()
        for o in outputs
        if o.is_floating_point()
    )


def _gradients(fn, args, which, second):
    args = [a.clone().requires_grad_() if i in which else a for i, a in enumerate(args)]
    inputs = [args[i] for i in which]
    first = torch.autograd.grad(_weighted(fn(*args)) ** 2, inputs, create_graph=second)
    if not second:
        return first
    return (*first, *torch.autograd.grad(sum((g * g).sum() for g in first), inputs))


@pytest.mark.parametrize("name", DB)
def test_autograd_function_db_eager(name):
    decorated, reference, args, which, second = DB[name]
    for got, true in zip(
        _gradients(decorated, args, which, second),
        _gradients(reference, args, which, second),
        strict=True,
    ):
        torch.testing.assert_close(got, true)


def test_rules_stated_untrue_on_purpose():
    x = X1.clone().requires_grad_()
    (g,) = torch.autograd.grad(scale_grad(x).sum(), x)
    torch.testing.assert_close(g, torch.full_like(x, 3.14))
    y, z = Y4.clone().requires_grad_(), Y34.clone().requires_grad_()
    gy, gz = torch.autograd.grad(_weighted(zero_gradients(y, z)), [y, z])
    assert gy.shape == y.shape and not gy.any() and not gz.any()


def _scalar(fn):
    return lambda *args: _weighted(fn(*args)) ** 2


def _first(fn):
    def first(*args):
        out = fn(*args)
        return out[0] if isinstance(out, tuple) else out

    return first


TRANSFORMS = {
    "grad": lambda fn, a: grad(_scalar(fn))(*a),
    "grad grad": lambda fn, a: grad(lambda *b: grad(_scalar(fn))(*b).sum())(*a),
    "vmap": lambda fn, a: _first(vmap(fn, in_dims=(0, *[None] * (len(a) - 1))))(torch.stack([a[0], 2 * a[0]]), *a[1:]),
    "vmap grad": lambda fn, a: vmap(grad(_scalar(fn)), in_dims=(0, *[None] * (len(a) - 1)))(torch.stack([a[0], 2 * a[0]]), *a[1:]),
    "jacrev": lambda fn, a: jacrev(_first(fn))(*a),
    "jacfwd": lambda fn, a: jacfwd(_first(fn))(*a),
    "jvp": lambda fn, a: jvp(lambda x: _first(fn)(x, *a[1:]), (a[0],), (torch.ones_like(a[0]),))[1],
    "hessian": lambda fn, a: hessian(_scalar(fn))(*a),
}  # fmt: skip

TRANSFORMED = {
    "SortGenVmap": (sort, _plain_sort, [XS, 1]),
    "TakeGenVmap": (take, _plain_take, [XS, IND, IND_INV, 1]),
    "Select": (select, lambda x, i: x[i], [XS, 2]),
    "ForwardHasDefaultArgs": (select_default, _plain_select_default, [XS]),
    "CubeGenVmap": (
        custom_gradient(lambda x: ((x**3, 3 * x**2), lambda dy, d2: dy * 3 * x**2 + 6 * d2 * x)),
        lambda x: (x**3, 3 * x**2),
        [_rand(3)],
    ),
}


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", TRANSFORMED)
def test_autograd_function_db_under_transforms(name, transform):
    """Integer tensors among the inputs (sort's indices) are constants of forward mode, also
    when they are batched (hessian: forward over `vmap` of reverse)."""
    decorated, reference, args = TRANSFORMED[name]
    apply = TRANSFORMS[transform]
    torch.testing.assert_close(apply(decorated, args), apply(reference, args))


def test_untrue_rules_under_transforms():
    x = _rand(3)
    torch.testing.assert_close(jacfwd(scale_grad)(x), 3.14 * torch.eye(3, dtype=D))
    torch.testing.assert_close(
        vmap(grad(lambda t: scale_grad(t).sum()))(x[:, None]), 3.14 * torch.ones(3, 1, dtype=D)
    )
    gx, gy = grad(lambda a, b: _weighted(zero_gradients(a, b)), argnums=(0, 1))(Y4, Y34)
    assert gx.shape == Y4.shape and not gx.any() and not gy.any()


# --- JAX's custom_vjp tests ----------------------------------------------------------------


@custom_gradient
def sin_2cos(x):
    """JAX's `f`: sin with the rule `2 cos(x) g`."""
    cos = torch.cos(x)
    return torch.sin(x), lambda g: 2 * cos * g


def _eager_grad(fn, x):
    """x's gradient by `backward` (reentrant checkpointing refuses `torch.autograd.grad`)."""
    x = x.clone().requires_grad_()
    fn(x).sum().backward()
    return x.grad


@custom_gradient
def branches(x):
    def grad_fn(g):
        return 2 * g if x > 0 else 3 * g

    return (torch.sin(x) if x > 0 else torch.cos(x)), grad_fn


@pytest.mark.parametrize("x, expected", [(2.0, 2.0), (-2.0, 3.0)])
def test_python_control_flow(x, expected):
    torch.testing.assert_close(grad(branches)(T(x)), T(expected))
    torch.testing.assert_close(_eager_grad(branches, T(x)), T(expected))


@custom_gradient
def sin_2cos_scalar(x):
    assert x.dim() == 0, "vmap hands f one element"
    return torch.sin(x), lambda g: 2 * torch.cos(x) * g


XR, XX = torch.arange(3.0, dtype=D), torch.arange(6.0, dtype=D).reshape(2, 3)
VMAP = {
    "vmap": (lambda: vmap(sin_2cos_scalar)(XR), torch.sin(XR)),
    "vmap vmap": (lambda: vmap(vmap(sin_2cos_scalar))(XX), torch.sin(XX)),
    "vmap grad": (lambda: vmap(grad(sin_2cos_scalar))(XR), 2 * torch.cos(XR)),
    "vmap vmap grad": (lambda: vmap(vmap(grad(sin_2cos_scalar)))(XX), 2 * torch.cos(XX)),
    "grad vmap": (lambda: grad(lambda x: vmap(sin_2cos_scalar)(x).sum())(XR), 2 * torch.cos(XR)),
    "vmap grad vmap": (
        lambda: vmap(grad(lambda x: vmap(sin_2cos_scalar)(x).sum()))(XX),
        2 * torch.cos(XX),
    ),
    "eager grad vmap": (lambda: _eager_grad(vmap(sin_2cos_scalar), XR), 2 * torch.cos(XR)),
}


@pytest.mark.parametrize("name", VMAP)
def test_vmap(name):
    compute, expected = VMAP[name]
    torch.testing.assert_close(compute(), expected)


def test_pytrees():
    @custom_gradient
    def f(x):
        return {"b": torch.sin(x["a"])}, lambda g: {"a": 2 * torch.cos(x["a"]) * g}

    torch.testing.assert_close(grad(lambda d: f(d)["b"])({"a": T(3.0)})["a"], T(2 * math.cos(3)))


def test_keyword_and_callable_arguments_are_not_inputs():
    @custom_gradient
    def scaled(x, y, c=1.0):
        return c * (x + y), lambda g: (g, g)

    @custom_gradient
    def apply(x, *, fn):
        return fn(x), lambda g: torch.cos(x) * g

    gx, gy = grad(lambda a, b: scaled(a, b, c=2.0) ** 2, argnums=(0, 1))(T(10.0), T(5.0))
    torch.testing.assert_close((gx, gy), (T(60.0), T(60.0)))
    torch.testing.assert_close(grad(lambda x: apply(x, fn=lambda y: 2 * y))(T(1.0)), T(math.cos(1)))


def _closes_over(x):
    @custom_gradient
    def f(y):
        return x * y, lambda g: torch.cos(y) * g * x

    return f


def test_closed_over_vmap_tracer():
    torch.testing.assert_close(vmap(lambda x: _closes_over(x)(3.0))(XR), 3 * XR)
    torch.testing.assert_close(vmap(lambda x: grad(_closes_over(x))(T(3.0)))(XR), math.cos(3) * XR)


def _grad_fn_closes_over(y):
    @custom_gradient
    def f(x):
        return 2 * torch.sin(x), lambda g: 2 * torch.cos(y) * g  # captures y

    return grad(f)(T(1.0))


def test_grad_fn_closes_over_a_tensor_of_an_outer_transform():
    torch.testing.assert_close(vmap(_grad_fn_closes_over)(XR), 2 * torch.cos(XR))
    torch.testing.assert_close(grad(_grad_fn_closes_over)(T(4.0)), T(-2 * math.sin(4)))


def test_grad_fn_closes_over_an_outer_tensor_eagerly():
    y = T(4.0).requires_grad_()

    @custom_gradient
    def f(x):
        return 2 * torch.sin(x), lambda g: 2 * torch.cos(y) * g

    x = T(1.0).requires_grad_()
    (gx,) = torch.autograd.grad(f(x), x, create_graph=True)
    (gy,) = torch.autograd.grad(gx, y)
    torch.testing.assert_close(gy, T(-2 * math.sin(4)))


@custom_gradient
def clip_gradient(lo, hi, x):
    return x, lambda g: (None, None, torch.clamp(g, torch.as_tensor(lo, dtype=g.dtype), hi))


def test_clip_gradient_with_a_bound_computed_from_the_input():
    for compute in (grad, lambda fn: lambda x: _eager_grad(fn, x)):
        torch.testing.assert_close(
            compute(lambda x: clip_gradient(-0.1, x + 0.1, x))(T(0.1)), T(0.2)
        )


@custom_gradient
def none_for_x(x, y):
    return x * torch.sin(y), lambda g: (None, 2 * torch.cos(y) * g)


@custom_gradient
def none_for_pair(xs, y):
    return xs[0] * xs[1] * torch.sin(y), lambda g: (None, None, 2 * torch.cos(y) * g)


def test_none_gradients():
    expected = T(2 * math.cos(3))
    torch.testing.assert_close(grad(lambda x: none_for_x(x, x))(T(3.0)), expected)
    torch.testing.assert_close(_eager_grad(lambda x: none_for_x(x, x), T(3.0)), expected)
    torch.testing.assert_close(grad(lambda x: none_for_pair((x, x), x))(T(3.0)), expected)
    torch.testing.assert_close(grad(lambda x: vmap(none_for_x)(x, x).sum())(XR), 2 * torch.cos(XR))


def test_integer_input_takes_a_none_gradient():
    @custom_gradient
    def f(i, x):
        return torch.sin(x), lambda g: (None, 2 * torch.cos(x) * g)

    torch.testing.assert_close(grad(f, 1)(torch.tensor([1, 2]), T(3.0)), T(2 * math.cos(3)))


def test_custom_gradient_second_order():
    @custom_gradient
    def square(x):
        return x**2, lambda g: g * x

    torch.testing.assert_close(grad(square)(T(3.0)), T(3.0))
    torch.testing.assert_close(grad(grad(square))(T(3.0)), T(1.0))
    x = T(3.0).requires_grad_()
    (g,) = torch.autograd.grad(square(x), x, create_graph=True)
    torch.testing.assert_close(torch.autograd.grad(g, x)[0], T(1.0))


def _sin_sin(x):
    return sin_2cos(sin_2cos(x))


@pytest.mark.parametrize("reentrant", [False, True])
def test_remat(reentrant):
    x = T(2.0)
    expected = 4 * torch.cos(torch.sin(x)) * torch.cos(x)
    got = _eager_grad(lambda t: checkpoint(_sin_sin, t, use_reentrant=reentrant), x)
    torch.testing.assert_close(got, expected)


def test_remat_higher_order():
    x = T(2.0).requires_grad_()
    (g,) = torch.autograd.grad(checkpoint(_sin_sin, x, use_reentrant=False), x, create_graph=True)
    torch.testing.assert_close(torch.autograd.grad(g, x)[0], grad(grad(_sin_sin))(T(2.0)))


def test_a_vjp_taken_inside_f_is_the_rule():
    @custom_gradient
    def g(x):
        y, pullback = vjp(lambda t: t**2, x)
        return y, lambda dy: pullback(dy)[0]

    torch.testing.assert_close(_eager_grad(g, T(1.0)), T(2.0))
    torch.testing.assert_close(vjp(g, T(1.0))[1](T(3.0))[0], T(6.0))
    _, pullback = vjp(vmap(g), torch.tensor([3.0], dtype=D))
    pullback(torch.tensor([3.0], dtype=D))
    torch.testing.assert_close(pullback(torch.tensor([3.0], dtype=D))[0], T([18.0]))


def test_scan_of_a_rule_with_a_shared_coefficient_under_vmap():
    @custom_gradient
    def mul(x, coeff):
        return x * coeff, lambda g: (g * coeff, (x * g).sum())

    def scan(x, coeff):
        for _ in range(3):
            x = mul(x, coeff)
        return x

    xs = torch.randn(3, 2, dtype=D, generator=torch.Generator().manual_seed(0))
    args = (xs.requires_grad_(), T(1.5).requires_grad_())
    batched = vmap(scan, in_dims=(0, None))
    assert torch.autograd.gradcheck(batched, args)
    assert torch.autograd.gradgradcheck(batched, args)
