"""What grad_fn returns is repaired into a gradient like its input, or rejected by name."""

import messages
import numpy as np
import pytest
import torch
from helpers import D
from messages import argument, exactly, variable
from torch import nn

from tf_compat_grad import CustomGradientTypeError, CustomGradientValueError, custom_gradient


def returning(grad):
    """`identity(x)` whose grad_fn returns `grad` whatever the upstream."""

    @custom_gradient
    def identity(x):
        return x * 1, lambda dy: grad

    return identity


def scaled_by(w, grad):
    """`scaled(x) = x * w`, reading the Parameter w; grad_fn gives w the gradient `grad`."""

    @custom_gradient
    def scaled(x):
        def grad_fn(dy, variables=None):
            return dy * w, [grad]

        return x * w, grad_fn

    return scaled


# (gradient returned, input shape, expected x.grad)
REPAIRED = {
    "python float, scalar input": (2.0, [], torch.tensor(2.0, dtype=D)),
    "python float, vector input": (2.0, [3], torch.full([3], 2.0, dtype=D)),
    "python int": (2, [3], torch.full([3], 2.0, dtype=D)),
    "numpy array": (np.array([1.0, 2.0, 3.0]), [3], torch.tensor([1.0, 2.0, 3.0], dtype=D)),
    "numpy float32 array": (
        np.array([1.0, 2.0, 3.0], dtype=np.float32),
        [3],
        torch.tensor([1.0, 2.0, 3.0], dtype=D),
    ),
    "numpy scalar": (np.float64(4.0), [3], torch.full([3], 4.0, dtype=D)),
    "float32 tensor": (torch.tensor([0.5, 1.5, 2.5]), [3], torch.tensor([0.5, 1.5, 2.5], dtype=D)),
    "int64 tensor": (torch.tensor([1, 2, 3]), [3], torch.tensor([1.0, 2.0, 3.0], dtype=D)),
    "scalar tensor expanded": (torch.tensor(5.0, dtype=D), [3], torch.full([3], 5.0, dtype=D)),
    "numpy 0-d array expanded": (np.array(4.0), [2, 3], torch.full([2, 3], 4.0, dtype=D)),
    "broadcast summed down": (
        torch.ones([3, 4], dtype=D),
        [1, 4],
        torch.full([1, 4], 3.0, dtype=D),
    ),
    "leading dimension summed away": (
        torch.ones([2, 3], dtype=D),
        [3],
        torch.full([3], 2.0, dtype=D),
    ),
}


@pytest.mark.parametrize("name", REPAIRED)
def test_gradient_is_repaired(name):
    grad, shape, expected = REPAIRED[name]
    x = torch.zeros(shape, dtype=D, requires_grad=True)
    returning(grad)(x).sum().backward()
    assert type(x.grad) is torch.Tensor
    assert x.grad.dtype == D
    assert x.grad.shape == x.shape
    torch.testing.assert_close(x.grad, expected)


@pytest.mark.parametrize("name", REPAIRED)
def test_variable_gradient_is_repaired(name):
    grad, shape, expected = REPAIRED[name]
    w = nn.Parameter(torch.ones(shape, dtype=D))
    x = torch.zeros(shape, dtype=D, requires_grad=True)
    scaled_by(w, grad)(x).sum().backward()
    assert w.grad.dtype == D
    assert w.grad.shape == w.shape
    torch.testing.assert_close(w.grad, expected)
    torch.testing.assert_close(x.grad, torch.ones_like(x))


# (gradient returned, input shape)
INCOMPATIBLE = {
    "longer": ([5], [3]),
    "shorter": ([2], [3]),
    "neither broadcasts": ([2, 1], [1, 3]),
    # Smaller gradients that broadcast to the input would have to be expanded: refused, as
    # torch's engine refuses them (a reduction over the wrong axis).
    "one element for a vector": ([1], [4]),
    "row for a matrix": ([4], [3, 4]),
    "column for a matrix": ([3, 1], [3, 4]),
    "unit dimension missing": ([4], [1, 4]),
    "more elements, same rank": ([3, 4], [3, 2]),
}


@pytest.mark.parametrize("name", INCOMPATIBLE)
def test_incompatible_shape_raises(name):
    got, shape = INCOMPATIBLE[name]
    f = returning(torch.ones(got, dtype=D))
    x = torch.zeros(shape, dtype=D, requires_grad=True)
    y = f(x).sum()
    message = messages.wrong_shape(f, got, argument("x"), shape)
    with pytest.raises(ValueError, match=exactly(message)) as info:
        y.backward()
    assert isinstance(info.value, CustomGradientValueError)


def test_incompatible_shape_names_the_nested_argument():
    @custom_gradient
    def affine(params, x):
        def grad(dy):
            return {"b": dy.sum(), "w": torch.ones(5, dtype=D)}, dy * params["w"]

        return params["w"] * x + params["b"], grad

    params = {
        "w": torch.ones(3, dtype=D, requires_grad=True),
        "b": torch.zeros((), dtype=D, requires_grad=True),
    }
    x = torch.ones(3, dtype=D, requires_grad=True)
    y = affine(params, x).sum()
    message = messages.wrong_shape(affine, [5], argument("params['w']"), [3])
    with pytest.raises(ValueError, match=exactly(message)) as info:
        y.backward()
    assert isinstance(info.value, CustomGradientValueError)


def test_incompatible_variable_gradient_shape_raises():
    w = nn.Parameter(torch.ones(3, dtype=D))
    f = scaled_by(w, torch.ones(5, dtype=D))
    y = f(torch.zeros(3, dtype=D, requires_grad=True)).sum()
    message = messages.wrong_shape(f, [5], variable(0, [3]), [3])
    with pytest.raises(ValueError, match=exactly(message)) as info:
        y.backward()
    assert isinstance(info.value, CustomGradientValueError)


# (gradient returned, how the message describes it)
NOT_A_GRADIENT = [
    pytest.param("abc", "'abc' (str)", id="str"),
    pytest.param(b"abc", "b'abc' (bytes)", id="bytes"),
    pytest.param(
        np.array(["a", "b", "c"]),
        "ndarray of shape [3] and dtype <U1",
        id="numpy strings",
    ),
]


@pytest.mark.parametrize(("grad", "described"), NOT_A_GRADIENT)
def test_non_numeric_gradient_raises_type_error_naming_the_argument(grad, described):
    f = returning(grad)
    y = f(torch.zeros(3, dtype=D, requires_grad=True)).sum()
    message = messages.not_a_gradient(f, described, argument("x"), torch.float64)
    with pytest.raises(TypeError, match=exactly(message)) as info:
        y.backward()
    assert isinstance(info.value, CustomGradientTypeError)


def test_non_numeric_variable_gradient_raises_type_error():
    w = nn.Parameter(torch.ones(3, dtype=D))
    f = scaled_by(w, "abc")
    y = f(torch.zeros(3, dtype=D, requires_grad=True)).sum()
    message = messages.not_a_gradient(f, "'abc' (str)", variable(0, [3]), torch.float64)
    with pytest.raises(TypeError, match=exactly(message)) as info:
        y.backward()
    assert isinstance(info.value, CustomGradientTypeError)


@pytest.mark.parametrize(
    "grad",
    [3.0, torch.ones(7, dtype=D), "abc", np.ones(2)],
    ids=["float", "tensor", "str", "numpy"],
)
def test_gradient_for_a_python_float_argument_is_dropped(grad):
    @custom_gradient
    def clip(x, limit):
        return torch.clamp(x, max=limit), lambda dy: (dy * 2, grad)

    x = torch.ones(3, dtype=D, requires_grad=True)
    clip(x, 1.5).sum().backward()
    torch.testing.assert_close(x.grad, torch.full([3], 2.0, dtype=D))


@pytest.mark.parametrize(
    "grad",
    [3.0, torch.ones(7, dtype=D), "abc", np.ones(2)],
    ids=["float", "wrong shape", "str", "numpy of wrong shape"],
)
def test_gradient_for_an_input_not_requiring_grad_is_ignored(grad):
    @custom_gradient
    def mul(x, c):
        return x * c, lambda dy: (dy * c, grad)

    x = torch.ones(3, dtype=D, requires_grad=True)
    c = torch.full([3], 4.0, dtype=D)
    mul(x, c).sum().backward()
    torch.testing.assert_close(x.grad, c)
    assert c.grad is None


def _wrong_axis():
    @custom_gradient
    def row_sum(x, scale=1.0):
        return x.sum(0) * scale, lambda dy: dy  # dy: [4], x: [3, 4]; `dy.expand(3, 4)` was meant

    return row_sum


class _TorchRowSum(torch.autograd.Function):
    """The same mistake in a plain `autograd.Function`, which torch's engine refuses."""

    @staticmethod
    def forward(ctx, x):
        return x.sum(0)

    @staticmethod
    def backward(ctx, dy):
        return dy


def _eager_plan(f, x):
    f(x.detach().requires_grad_())  # the first call makes the plan
    return torch.autograd.grad(f(x).sum(), x)


def _func_grad(f, x):
    return torch.func.grad(lambda t: f(t).sum())(x)


def _vmap_grad(f, x):
    return torch.func.vmap(torch.func.grad(lambda t: f(t).sum()))(x.unsqueeze(0))


def _compiled(f, x):
    # Not fullgraph: Dynamo cannot trace the raising backward, so it runs it eagerly.
    return torch.autograd.grad(torch.compile(lambda t: f(t).sum(), backend="eager")(x), x)


TOO_SMALL_PATHS = {
    "eager plan": _eager_plan,
    "eager general": lambda f, x: torch.autograd.grad(f(x, scale=1.0).sum(), x),
    "torch.func.grad": _func_grad,
    "vmap of grad": _vmap_grad,
    # Dynamo, tracing the raising backward, warns about the cache of the message's names.
    "torch.compile": pytest.param(
        _compiled,
        marks=[
            pytest.mark.traced_compile,
            pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`"),
        ],
    ),
}


@pytest.mark.parametrize("path", TOO_SMALL_PATHS.values(), ids=list(TOO_SMALL_PATHS))
def test_too_small_gradient_is_refused_on_every_path(path, dynamo):
    x = torch.ones(3, 4, dtype=D, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"got \[4\] but expected shape compatible with"):
        torch.autograd.grad(_TorchRowSum.apply(x).sum(), x)  # torch's own rule
    f = _wrong_axis()
    message = messages.wrong_shape(f, [4], argument("x"), [3, 4])
    with pytest.raises(ValueError, match=exactly(message)):
        path(f, x)


def test_checker_reports_the_too_small_gradient():
    from tf_compat_grad.testing import Example, Status, run_checks

    row = run_checks(_wrong_axis(), Example(torch.ones(3, 4, dtype=D)), only=["gradients"])
    assert row["gradients"].status is Status.FAIL
    assert "returned a gradient of shape [4] for argument `x`, which has shape [3, 4]" in (
        row["gradients"].reason
    )


@pytest.mark.parametrize("scalar", [2.0, torch.tensor(2.0, dtype=D), np.float64(2.0)])
def test_one_value_stands_for_every_element_as_autograd_gives_it(scalar):
    """The differential: `x * 2` for a [3, 4] x has the gradient 2 everywhere."""
    x = torch.randn(3, 4, dtype=D, requires_grad=True)

    @custom_gradient
    def double(x):
        return x * 2, lambda dy: scalar

    (custom,) = torch.autograd.grad(double(x).sum(), x)
    (true,) = torch.autograd.grad((x * 2).sum(), x)
    torch.testing.assert_close(custom, true)


def test_broadcast_gradient_is_summed_down_as_autograd_sums_it():
    """The differential: `x + b` with x [3, 4] and b [4]: b's gradient is the column sums."""
    x = torch.randn(3, 4, dtype=D, requires_grad=True)
    b = torch.randn(4, dtype=D, requires_grad=True)
    dy = torch.randn(3, 4, dtype=D)

    @custom_gradient
    def add(x, b):
        return x + b, lambda up: (up, up)  # up has x's shape: summed down to b's

    custom = torch.autograd.grad(add(x, b), [x, b], dy)
    true = torch.autograd.grad(x + b, [x, b], dy)
    for c, t in zip(custom, true, strict=True):
        torch.testing.assert_close(c, t)
