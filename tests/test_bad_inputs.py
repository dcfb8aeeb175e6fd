"""Bad inputs give a clear error that names the function and the argument, never a torch crash.

Each case asserts the exception type (a library class that keeps TensorFlow's builtin type), the
message prefix, the user's function name, the whole message as tests/messages.py pins it (with
the offending argument or output path), and that the traceback ends in tf_compat_grad rather
than deep inside torch. Mistakes TensorFlow accepts (a wrongly keyed dict of gradients with the
right count, item 27) are pinned as accepted.

Item numbers refer to docs/tensorflow_semantics.md.
"""

import functools
import gc
import inspect
import re
import warnings
from pathlib import Path

import messages
import numpy as np
import pytest
import torch
from helpers import D
from messages import PREFIX, SOME, argument, variable

from tf_compat_grad import (
    CustomGradientError,
    CustomGradientTypeError,
    CustomGradientValueError,
    custom_gradient,
)

TORCH_DIR = Path(torch.__file__).resolve().parent
LIBRARY_DIR = Path(custom_gradient.__code__.co_filename).resolve().parent


def leaf(*shape, dtype=D, device="cpu"):
    return torch.ones(shape, dtype=dtype, device=device, requires_grad=True)


def assert_clear(excinfo, kind, name, expected):
    """`kind` (a library class), raised by tf_compat_grad, naming `name`, saying `expected`."""
    error = excinfo.value
    assert type(error) is kind, f"{type(error).__name__}: {error}"
    assert isinstance(error, CustomGradientError)
    message = str(error)
    assert message.startswith(PREFIX), message
    # The qualified name: `test_x.<locals>.scale` for a function defined in a test.
    assert re.search(rf"`([\w<>]+\.)*{name}`", message), message
    assert re.search(messages.exactly(expected), message), f"{message!r} is not {expected!r}"
    raised_in = Path(str(excinfo.traceback[-1].path)).resolve()
    assert TORCH_DIR not in raised_in.parents, f"raised inside torch: {raised_in}"
    assert LIBRARY_DIR in raised_in.parents, f"not raised by the library: {raised_in}"


# ------------------------------------------------------------------ f returns something else


def returns_scalar_tensor(x):
    return x.sum()


def returns_three_items(x):
    return x * 2, lambda dy: dy, 3


def returns_vector_of_three(x):
    return torch.ones(3)


def returns_vector_of_two(x):
    return torch.ones(2)


def returns_none(x):
    return None


def returns_dict(x):
    return {"y": x * 2, "grad": lambda dy: dy}


def returns_generator(x):
    yield x * 2
    yield lambda dy: dy


def returns_generator_expression(x):
    return (item for item in (x * 2, lambda dy: dy))


NON_PAIRS = [
    (
        returns_scalar_tensor,
        CustomGradientTypeError,
        messages.not_a_pair(returns_scalar_tensor, "Tensor of shape [] and dtype torch.float64"),
    ),
    (
        returns_three_items,
        CustomGradientValueError,
        messages.unpacks(returns_three_items, "tuple", 3),
    ),
    (
        returns_vector_of_three,
        CustomGradientValueError,
        messages.unpacks(returns_vector_of_three, "Tensor of shape [3] and dtype torch.float32", 3),
    ),
    (
        returns_vector_of_two,
        CustomGradientTypeError,
        messages.single_tensor(
            returns_vector_of_two, "Tensor of shape [2] and dtype torch.float32"
        ),
    ),
    (returns_none, CustomGradientTypeError, messages.not_a_pair(returns_none, "None (NoneType)")),
    (returns_dict, CustomGradientTypeError, messages.not_a_pair(returns_dict, f"{SOME} (dict)")),
    (
        returns_generator,
        CustomGradientTypeError,
        messages.not_a_pair(returns_generator, f"{SOME} (generator)"),
    ),
    (
        returns_generator_expression,
        CustomGradientTypeError,
        messages.not_a_pair(returns_generator_expression, f"{SOME} (generator)"),
    ),
]


@pytest.mark.parametrize(
    ("f", "kind", "message"), NON_PAIRS, ids=[case[0].__name__ for case in NON_PAIRS]
)
@pytest.mark.parametrize("grad_enabled", [True, False], ids=["grad", "no_grad"])
def test_f_not_returning_a_pair(f, kind, message, grad_enabled):
    with torch.set_grad_enabled(grad_enabled), pytest.raises(kind) as excinfo:
        custom_gradient(f)(leaf(2))
    assert_clear(excinfo, kind, f.__name__, message)


# ------------------------------------------------------------------ grad_fn is not a function


@pytest.mark.parametrize(
    ("grad_fn", "got"),
    [
        (None, "None (NoneType)"),
        (3, "3 (int)"),
        ("dy", "'dy' (str)"),
        (torch.ones(1), "Tensor of shape [1] and dtype torch.float32"),
    ],
    ids=["None", "3", "'dy'", "tensor([1.])"],
)
def test_grad_fn_not_callable(grad_fn, got):
    @custom_gradient
    def bad_grad_fn(x):
        return x * 2, grad_fn

    with pytest.raises(CustomGradientTypeError) as excinfo:
        bad_grad_fn(leaf(2))
    message = messages.grad_fn_not_callable(bad_grad_fn, got)
    assert_clear(excinfo, CustomGradientTypeError, "bad_grad_fn", message)


# ------------------------------------------------------------------ what grad_fn returns


@pytest.mark.parametrize(
    ("gradient", "got"),
    [
        ("a string", "'a string' (str)"),
        ({1.0, 2.0}, "{1.0, 2.0} (set)"),
        (np.array(["a", "b"]), "ndarray of shape [2] and dtype <U1"),
        (object(), f"{SOME} (object)"),
        (lambda: None, f"{SOME} (function)"),
    ],
    ids=["str", "set", "numpy_str", "object", "function"],
)
def test_grad_fn_returns_a_non_gradient(gradient, got):
    @custom_gradient
    def scale(x):
        return x * 2, lambda dy: gradient

    with pytest.raises(CustomGradientTypeError) as excinfo:
        scale(leaf(2)).sum().backward()
    message = messages.not_a_gradient(scale, got, argument("x"))
    assert_clear(excinfo, CustomGradientTypeError, "scale", message)


def test_grad_fn_returns_a_generator():
    @custom_gradient
    def scale(x):
        return x * 2, lambda dy: (g for g in [dy])

    with pytest.raises(CustomGradientTypeError) as excinfo:
        scale(leaf(2)).sum().backward()
    message = messages.not_a_gradient(scale, f"{SOME} (generator)", argument("x"))
    assert_clear(excinfo, CustomGradientTypeError, "scale", message)


def test_grad_fn_returns_a_dict_with_too_many_keys():
    @custom_gradient
    def pick(params):
        return params["w"] * 2, lambda dy: {"w": dy * 2, "extra": dy}

    with pytest.raises(CustomGradientValueError) as excinfo:
        pick({"w": leaf(2)}).sum().backward()
    message = messages.count(pick, 2, ["params['w']"])
    assert_clear(excinfo, CustomGradientValueError, "pick", message)


def test_grad_fn_returns_a_dict_with_too_few_keys():
    @custom_gradient
    def pick(params):
        return params["a"] * params["b"], lambda dy: {"a": dy}

    with pytest.raises(CustomGradientValueError) as excinfo:
        pick({"a": leaf(2), "b": leaf(2)}).sum().backward()
    message = messages.count(pick, 1, ["params['a']", "params['b']"])
    assert_clear(excinfo, CustomGradientValueError, "pick", message)


def test_grad_fn_returns_a_dict_with_other_keys_of_the_right_count_follows_tf():
    # TF flattens whatever grad_fn returns and matches by position alone (items 26-27): the
    # keys are not compared, the sorted-key order decides.
    @custom_gradient
    def pick(params):
        return params["a"] + params["b"], lambda dy: {"z": dy * 3, "y": dy * 2}

    a, b = leaf(2), leaf(2)
    pick({"a": a, "b": b}).sum().backward()
    torch.testing.assert_close(a.grad, torch.full((2,), 2.0, dtype=D))  # "y" sorts first
    torch.testing.assert_close(b.grad, torch.full((2,), 3.0, dtype=D))


@pytest.mark.parametrize("count", [0, 1, 3])
def test_grad_fn_returns_the_wrong_number_of_gradients(count):
    @custom_gradient
    def clip(x, limit):
        return x.clamp(max=limit), lambda dy: [dy] * count

    with pytest.raises(CustomGradientValueError) as excinfo:
        clip(leaf(2), 1.5).sum().backward()
    message = messages.count(clip, count, ["x", "limit"])
    assert_clear(excinfo, CustomGradientValueError, "clip", message)


@pytest.mark.parametrize(
    "shape", [(3,), (2, 3), (2, 1), (2, 2, 3), (0,)], ids=lambda s: "x".join(map(str, s)) or "0d"
)
def test_gradient_of_the_wrong_shape_or_rank(shape):
    # Neither broadcasts to [2] nor is a broadcast of it ([3, 2] would be summed down).
    @custom_gradient
    def scale(x, y):
        return x * y, lambda dy: (torch.ones(shape, dtype=D), dy)

    with pytest.raises(CustomGradientValueError) as excinfo:
        scale(leaf(2), leaf(2)).sum().backward()
    message = messages.wrong_shape(scale, shape, argument("x"), [2])
    assert_clear(excinfo, CustomGradientValueError, "scale", message)


def test_gradient_of_the_wrong_shape_for_a_nested_argument_names_its_path():
    @custom_gradient
    def total(params):
        return params["w"][1].sum(), lambda dy: {"w": [None, torch.ones(5, dtype=D)]}

    with pytest.raises(CustomGradientValueError) as excinfo:
        total({"w": [leaf(1), leaf(3)]}).backward()
    message = messages.wrong_shape(total, [5], argument("params['w'][1]"), [3])
    assert_clear(excinfo, CustomGradientValueError, "total", message)


def test_gradient_of_the_wrong_shape_for_a_variable_names_it():
    w = torch.nn.Parameter(torch.ones(2, dtype=D))

    @custom_gradient
    def scale(x):
        def grad_fn(dy, variables=None):
            return dy * w, [torch.ones(5, dtype=D)]

        return x * w, grad_fn

    with pytest.raises(CustomGradientValueError) as excinfo:
        scale(leaf(2)).sum().backward()
    message = messages.wrong_shape(scale, [5], variable(0, [2]), [2])
    assert_clear(excinfo, CustomGradientValueError, "scale", message)


def test_variable_gradients_of_the_wrong_count():
    w = torch.nn.Parameter(torch.ones(2, dtype=D))

    @custom_gradient
    def scale(x):
        def grad_fn(dy, variables=None):
            return dy * w, [dy, dy]

        return x * w, grad_fn

    with pytest.raises(CustomGradientValueError) as excinfo:
        scale(leaf(2)).sum().backward()
    message = messages.variables_count(scale, [[2]], 2)
    assert_clear(excinfo, CustomGradientValueError, "scale", message)


def test_grad_fn_without_variables_parameter_names_the_parameter():
    w = torch.nn.Parameter(torch.ones(2, dtype=D))

    @custom_gradient
    def scale(x):
        return x * w, lambda dy: dy * w

    with pytest.raises(CustomGradientTypeError) as excinfo:
        scale(leaf(2))
    message = messages.variables_keyword(scale, 1, "`w`")
    assert_clear(excinfo, CustomGradientTypeError, "scale", message)


# ------------------------------------------------------------------ complex tensors


def test_complex_input_with_complex_gradient_works():
    @custom_gradient
    def double(z):
        return z * 2, lambda dy: dy * 2

    z = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex128, requires_grad=True)
    reference = z.detach().clone().requires_grad_()
    double(z).abs().sum().backward()
    (reference * 2).abs().sum().backward()
    torch.testing.assert_close(z.grad, reference.grad)


def test_complex_input_with_real_gradient_is_cast():
    @custom_gradient
    def double(z):
        return z * 2, lambda dy: dy.real * 2

    z = torch.tensor([1 + 1j], dtype=torch.complex128, requires_grad=True)
    double(z).real.sum().backward()
    assert z.grad.dtype == torch.complex128
    torch.testing.assert_close(z.grad, torch.tensor([2 + 0j], dtype=torch.complex128))


def test_real_input_with_complex_output_and_gradient_takes_the_real_part_like_torch():
    # torch's own rule for a real input of a complex function: the gradient is real.
    @custom_gradient
    def rotate(x):
        return x * 1j, lambda dy: (dy * -1j).real

    x = leaf(2)
    rotate(x).imag.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(2, dtype=D))


@pytest.mark.parametrize(
    ("gradient", "got"),
    [
        (lambda dy: dy * (1 + 1j), "Tensor of shape [2] and dtype torch.complex128"),
        # imaginary part 0
        (lambda dy: dy.to(torch.complex128), "Tensor of shape [2] and dtype torch.complex128"),
        (lambda dy: 1 + 1j, "(1+1j) (complex)"),
        (lambda dy: np.array([1 + 1j, 2j]), "ndarray of shape [2] and dtype complex128"),
    ],
    ids=["complex_tensor", "complex_tensor_zero_imag", "python_complex", "numpy_complex"],
)
def test_complex_gradient_for_a_real_input_is_refused(gradient, got):
    # torch's own engine refuses a complex gradient for a real input; casting would silently
    # drop the imaginary part.
    @custom_gradient
    def scale(x):
        return x * 2, gradient

    with pytest.raises(CustomGradientTypeError) as excinfo:
        scale(leaf(2)).sum().backward()
    message = messages.not_a_gradient(scale, got, argument("x"))
    assert_clear(excinfo, CustomGradientTypeError, "scale", message)


# ------------------------------------------------------------------ sparse and meta tensors


def test_sparse_input_with_sparse_gradient_works():
    @custom_gradient
    def double(s):
        return s * 2, lambda dy: dy * 3

    s = torch.eye(2, dtype=D).to_sparse().requires_grad_()
    double(s).to_dense().sum().backward()
    assert s.grad.layout is torch.sparse_coo
    torch.testing.assert_close(s.grad.to_dense(), torch.eye(2, dtype=D) * 3)


def test_sparse_input_with_a_wrong_shaped_gradient_names_it():
    @custom_gradient
    def double(s):
        return s * 2, lambda dy: torch.ones(3, dtype=D)

    s = torch.eye(2, dtype=D).to_sparse().requires_grad_()
    with pytest.raises(CustomGradientValueError) as excinfo:
        double(s).to_dense().sum().backward()
    message = messages.wrong_shape(double, [3], argument("s"), [2, 2])
    assert_clear(excinfo, CustomGradientValueError, "double", message)


def test_sparse_gradient_for_a_dense_input_is_accepted():
    @custom_gradient
    def double(x):
        return x * 2, lambda dy: (dy * 3).to_sparse()

    x = leaf(2)
    double(x).sum().backward()
    torch.testing.assert_close(x.grad.to_dense(), torch.full((2,), 3.0, dtype=D))


def test_meta_tensors_work():
    @custom_gradient
    def double(m):
        return m * 2, lambda dy: dy * 3

    m = leaf(2, 3, device="meta")
    y = double(m)
    assert y.device.type == "meta" and y.shape == (2, 3)
    y.sum().backward()
    assert m.grad.device.type == "meta" and m.grad.shape == (2, 3)


def test_meta_input_with_a_wrong_shaped_gradient_names_it():
    @custom_gradient
    def double(m):
        return m * 2, lambda dy: torch.ones(3, device="meta")

    with pytest.raises(CustomGradientValueError) as excinfo:
        double(leaf(2, device="meta")).sum().backward()
    message = messages.wrong_shape(double, [3], argument("m"), [2])
    assert_clear(excinfo, CustomGradientValueError, "double", message)


def test_meta_gradient_for_a_cpu_input_is_refused_clearly():
    @custom_gradient
    def double(x):
        return x * 2, lambda dy: torch.ones(2, dtype=D, device="meta")

    with pytest.raises(CustomGradientError) as excinfo:
        double(leaf(2)).sum().backward()
    message = messages.meta_gradient(double, argument("x"), "cpu")
    assert_clear(excinfo, type(excinfo.value), "double", message)


def test_jagged_nested_tensor_works():
    @custom_gradient
    def double(t):
        return t * 2, lambda dy: dy * 3

    t = torch.nested.nested_tensor(
        [torch.ones(2, dtype=D), torch.ones(3, dtype=D)], layout=torch.jagged, requires_grad=True
    )
    double(t).values().sum().backward()
    torch.testing.assert_close(t.grad.values(), torch.full((5,), 3.0, dtype=D))


def test_strided_nested_tensor_is_refused_clearly():
    @custom_gradient
    def double(t):
        return t * 2, lambda dy: dy * 3

    with warnings.catch_warnings():  # torch: "nested tensors are in prototype stage"
        warnings.simplefilter("ignore", UserWarning)
        t = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], requires_grad=True)
    with pytest.raises(CustomGradientError) as excinfo:
        double(t)
    assert_clear(excinfo, type(excinfo.value), "double", messages.strided_nested(double, "t"))


# ------------------------------------------------------------------ positional arguments


@pytest.mark.parametrize(
    ("args", "path", "got"),
    [
        ((None,), "y", "None (NoneType)"),
        (([1.0, None],), "y[1]", "None (NoneType)"),
        (({"b": 1.0, "a": (None,)},), "y['a'][0]", "None (NoneType)"),
        ((object(),), "y", f"{SOME} (object)"),
        ((torch.float32,), "y", "torch.float32 (dtype)"),
        ((len,), "y", "<built-in function len> (builtin_function_or_method)"),
    ],
    ids=["none", "none_in_list", "none_in_dict", "object", "dtype", "builtin"],
)
@pytest.mark.parametrize("grad_enabled", [True, False], ids=["grad", "no_grad"])
def test_unusable_positional_argument(args, path, got, grad_enabled):
    # TensorFlow raises ValueError ("Attempt to convert a value (None) ...", item 13).
    calls = []

    @custom_gradient
    def scale(x, y):
        calls.append(1)
        return x * 2, lambda dy: (dy, None)

    with torch.set_grad_enabled(grad_enabled), pytest.raises(CustomGradientValueError) as excinfo:
        scale(leaf(2), *args)
    message = messages.unusable_argument(scale, got, path)
    assert_clear(excinfo, CustomGradientValueError, "scale", message)
    assert calls == [], "f must not run with an unusable input"


def test_none_by_keyword_is_fine():
    @custom_gradient
    def scale(x, y=None):
        assert y is None
        return x * 2, lambda dy: dy * 3

    x = leaf(2)
    scale(x, y=None).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 3.0, dtype=D))


def test_unusable_output_names_its_path():
    @custom_gradient
    def pair(x):
        return {"a": [x * 2, "text"]}, lambda dy: dy

    with pytest.raises(CustomGradientTypeError) as excinfo:
        pair(leaf(2))
    message = messages.unusable_output(pair, "'text' (str)", "['a'][1]")
    assert_clear(excinfo, CustomGradientTypeError, "pair", message)


def test_none_output_names_its_path():
    @custom_gradient
    def pair(x):
        return (x * 2, None), lambda dy1, dy2: dy1

    with pytest.raises(CustomGradientTypeError) as excinfo:
        pair(leaf(2))
    message = messages.unusable_output(pair, "None (NoneType)", "[1]")
    assert_clear(excinfo, CustomGradientTypeError, "pair", message)


# ------------------------------------------------------------------ recursion


@custom_gradient
def power_of_three(x, n):
    """`x * 3**n`, whose custom gradient is `2 * 3**n`: each level calls the decorated self."""
    if n == 0:
        return x * 1, lambda dy: (dy * 2, None)
    inner = power_of_three(x, n - 1)
    return inner * 3, lambda dy: (dy * 3, None)


def test_recursion_through_the_decorated_function():
    # The outer node's gradient goes to x directly; inner calls are not on the path to x
    # because the outer output is detached from f's graph (Note [where f runs]).
    x = leaf(2)
    y = power_of_three(x, 3)
    torch.testing.assert_close(y, torch.full((2,), 27.0, dtype=D))
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 3.0, dtype=D))
    assert torch._C._len_torch_function_stack() == 0


def test_recursion_inside_grad_fn():
    @custom_gradient
    def square(x):
        def grad_fn(dy):
            return square(x)[0] * 0 + dy * 2 * x  # calls itself while differentiating

        return (x * x, x + 0), lambda dy, _: grad_fn(dy)

    x = leaf(2)
    square(x)[0].sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 2.0, dtype=D))


def test_unbounded_recursion_raises_recursion_error_and_leaves_no_state():
    @custom_gradient
    def forever(x):
        return forever(x)

    stack = torch._C._len_torch_function_stack()
    with pytest.raises(RecursionError):
        forever(leaf(2))
    assert torch._C._len_torch_function_stack() == stack
    x = leaf(2)
    power_of_three(x, 1).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 3.0, dtype=D))


# ------------------------------------------------------------------ what is decorated


class NotAFunction:
    def __init__(self, x):
        self.x = x


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (NotAFunction, messages.decorated_class(NotAFunction)),
        (torch.nn.Linear, messages.decorated_class(torch.nn.Linear)),
        (3, messages.decorated_value("3 (int)")),
        ("f", messages.decorated_value("'f' (str)")),
        (torch.ones(2), messages.decorated_value("Tensor of shape [2] and dtype torch.float32")),
    ],
    ids=["class", "module_class", "int", "str", "tensor"],
)
def test_decorating_a_class_or_a_non_callable(target, message):
    with pytest.raises(CustomGradientTypeError) as excinfo:
        custom_gradient(target)
    error = excinfo.value
    assert isinstance(error, TypeError)
    assert str(error).startswith(PREFIX)
    assert re.search(messages.exactly(message), str(error)), str(error)


def test_decorated_builtin_names_it():
    with pytest.raises(CustomGradientTypeError) as excinfo:
        custom_gradient(len)([1.0, 2.0])
    assert_clear(excinfo, CustomGradientTypeError, "len", messages.not_a_pair(len, "2 (int)"))


@pytest.mark.slow
def test_decorated_coroutine_function_names_it():
    async def scale(x):
        return x * 2, lambda dy: dy

    with warnings.catch_warnings():  # the coroutine f returned is never awaited
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(CustomGradientTypeError) as excinfo:
            custom_gradient(scale)(leaf(2))
        message = messages.not_a_pair(scale, f"{SOME} (coroutine)")
        assert_clear(excinfo, CustomGradientTypeError, "scale", message)
        del excinfo
        gc.collect()


def test_decorating_a_callable_instance_works():
    class Doubler:
        def __call__(self, x):
            return x * 2, lambda dy: dy * 3

    x = leaf(2)
    custom_gradient(Doubler())(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 3.0, dtype=D))


# ------------------------------------------------------------------ user errors propagate


def test_errors_raised_by_grad_fn_keep_their_type():
    class Mine(RuntimeError):
        pass

    @custom_gradient
    def scale(x):
        def grad_fn(dy):
            raise Mine("from grad_fn")

        return x * 2, grad_fn

    with pytest.raises(Mine, match="from grad_fn"):
        scale(leaf(2)).sum().backward()


# --- grad_fn's parameters against f's number of outputs (item 21) ----------------------------


def _two_outputs(grad_fn, reads=None):
    """`(2x, 3x)`, and `x * reads` added to the first when a Parameter is given."""

    @custom_gradient
    def two(x):
        first = 2 * x if reads is None else 2 * x + x * reads
        return (first, 3 * x), grad_fn

    return two


def _one_upstream(upstream):
    return upstream


def _fills_variables(d1, variables=None):
    return d1


UPSTREAM_PATHS = {
    "eager": lambda fn, x: fn(x),
    "torch.func.grad": lambda fn, x: torch.func.grad(lambda t: sum(o.sum() for o in fn(t)))(x),
}


def _scaled_one(scale, upstream):
    return upstream * scale


class _OneUpstream:
    """A callable object that takes one upstream."""

    def __call__(self, upstream):
        return upstream


def _three_upstreams(d1, d2, d3):
    return d1 + d2 + d3


REFUSED_UPSTREAMS = [
    pytest.param(_one_upstream, "too many positional arguments", False, id="one upstream"),
    pytest.param(
        functools.partial(_scaled_one, 2.0),
        "too many positional arguments",
        False,
        id="a partial of one upstream",
    ),
    pytest.param(_OneUpstream(), "too many positional arguments", False, id="callable object"),
    pytest.param(
        _three_upstreams, "missing a required argument: 'd3'", False, id="an upstream too few"
    ),
    pytest.param(
        _fills_variables,
        "the upstream gradients would fill its `variables` parameter",
        False,
        id="upstream in variables",
    ),
    pytest.param(
        _fills_variables,
        "multiple values for argument 'variables'",
        True,
        id="upstream and variables",
    ),
]


@pytest.mark.parametrize("path", UPSTREAM_PATHS.values(), ids=list(UPSTREAM_PATHS))
@pytest.mark.parametrize(("grad_fn", "problem", "parameter"), REFUSED_UPSTREAMS)
def test_grad_fn_that_cannot_take_the_upstreams_is_refused_when_f_returns(
    grad_fn, problem, parameter, path
):
    w = torch.nn.Parameter(torch.ones(3, dtype=D)) if parameter else None
    fn = _two_outputs(grad_fn, w)
    message = messages.upstreams_not_taken(fn, grad_fn, 2, problem, parameter)
    with pytest.raises(CustomGradientTypeError, match=re.escape(message)) as info:
        path(fn, leaf(3))  # no backward: the call itself is refused
    assert_clear(info, CustomGradientTypeError, "two", message)


class _Rule:
    """A callable object as grad_fn."""

    def __call__(self, d1, d2):
        return 2 * d1 + 3 * d2


def _scaled(scale, d1, d2, variables=None):
    rule = (2 * d1 + 3 * d2) * scale
    return rule if variables is None else (rule, [(d1 * 0).sum(0) for _ in variables])


TAKES_TWO = [
    pytest.param(lambda *upstream: 2 * upstream[0] + 3 * upstream[1], id="*upstream"),
    pytest.param(lambda d1, d2=None: 2 * d1 + 3 * d2, id="a default"),
    pytest.param(_Rule(), id="callable object"),
    pytest.param(functools.partial(_scaled, 1.0), id="functools.partial"),
    pytest.param(lambda d1, d2, variables=None: 2 * d1 + 3 * d2, id="variables keyword unused"),
]


@pytest.mark.parametrize("grad_fn", TAKES_TWO)
def test_grad_fn_that_takes_the_upstreams_is_not_refused(grad_fn):
    """The true gradient of `2x + 3x` is 5, as plain autograd gives it."""
    x = leaf(3)
    (custom,) = torch.autograd.grad(sum(o.sum() for o in _two_outputs(grad_fn)(x)), x)
    x2 = leaf(3)
    (true,) = torch.autograd.grad((2 * x2).sum() + (3 * x2).sum(), x2)
    torch.testing.assert_close(custom, true)


def test_grad_fn_with_variables_keyword_for_two_outputs_is_not_refused():
    w = torch.nn.Parameter(torch.full((3,), 0.5, dtype=D))
    fn = _two_outputs(functools.partial(_scaled, 1.0), w)
    x = leaf(3)
    fn(x)[0].sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=D))
    assert w.grad is not None


# Two compilations each: the cases the others' code paths cover run with the slow tests.
REFUSED_UPSTREAMS_COMPILED = [
    pytest.param(*case.values, id=case.id, marks=pytest.mark.slow)
    if case.id in ("upstream in variables", "callable object", "an upstream too few")
    else case
    for case in REFUSED_UPSTREAMS
]


@pytest.mark.traced_compile
@pytest.mark.parametrize(("grad_fn", "problem", "parameter"), REFUSED_UPSTREAMS_COMPILED)
def test_grad_fn_that_cannot_take_the_upstreams_is_refused_under_compile(
    dynamo, grad_fn, problem, parameter
):
    """Dynamo cannot trace `inspect.signature`: the check reads grad_fn's code instead (a
    partial's function, a callable object's `__call__`). Without fullgraph the error is the
    eager one; under fullgraph=True, Dynamo's error shows it, naming that code."""
    w = torch.nn.Parameter(torch.ones(3, dtype=D)) if parameter else None
    fn = _two_outputs(grad_fn, w)
    message = messages.upstreams_not_taken(fn, grad_fn, 2, problem, parameter)
    with pytest.raises(CustomGradientTypeError, match=re.escape(message)) as info:
        _compiled_sum(fn, fullgraph=False)(leaf(3))
    assert_clear(info, CustomGradientTypeError, "two", message)
    if isinstance(grad_fn, functools.partial):
        code_of = grad_fn.func
    else:
        code_of = grad_fn if inspect.isfunction(grad_fn) else type(grad_fn).__call__
    traced = messages.upstreams_not_taken(fn, code_of, 2, problem, parameter)
    with pytest.raises(Exception, match=re.escape(traced)):
        _compiled_sum(fn, fullgraph=True)(leaf(3))


def _compiled_sum(fn, fullgraph):
    """Compiled afresh: Dynamo keeps what it compiled per code object, also the frames it
    compiled after a graph break."""
    torch._dynamo.reset()
    return torch.compile(
        lambda t: sum(o.sum() for o in fn(t)), backend="eager", fullgraph=fullgraph
    )


def _tensor_default(scale):
    def grad_fn(d1, d2, d3=None, *, factor=scale):  # a tensor default, which Dynamo cannot read
        return (2 * d1 + 3 * d2) * factor

    return grad_fn


@pytest.mark.traced_compile
@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph breaks", "fullgraph"])
@pytest.mark.parametrize(
    "grad_fn",
    [*TAKES_TWO, pytest.param(_tensor_default(torch.ones((), dtype=D)), id="tensor default")],
)
def test_grad_fn_that_takes_the_upstreams_is_not_refused_under_compile(dynamo, grad_fn, fullgraph):
    """The true gradient of `2x + 3x` is 5, as plain autograd gives it."""
    x = leaf(3)
    (custom,) = torch.autograd.grad(_compiled_sum(_two_outputs(grad_fn), fullgraph)(x), x)
    x2 = leaf(3)
    (true,) = torch.autograd.grad((2 * x2).sum() + (3 * x2).sum(), x2)
    torch.testing.assert_close(custom, true)


COMPILED_NON_PAIRS = [case for case in NON_PAIRS if case[0] in (returns_none, returns_dict)]


@pytest.mark.traced_compile
@pytest.mark.parametrize(
    ("f", "kind", "message"), COMPILED_NON_PAIRS, ids=[c[0].__name__ for c in COMPILED_NON_PAIRS]
)
@pytest.mark.parametrize("fullgraph", [False, True])
def test_f_not_returning_a_pair_under_compile(dynamo, f, kind, message, fullgraph):
    """Compiled, f runs inside the compile node's traced forward (Note [f inside the compile
    node] in `_compile_node.py`): the refusal found there leaves the graph, and the call
    raises eager's error; under fullgraph=True, Dynamo's error names f. A new decoration each
    time: one whose trace failed is watched from then on (Note [compile unwatched])."""
    compiled = torch.compile(custom_gradient(f), backend="eager", fullgraph=fullgraph)
    if fullgraph:
        traced = rf"`{f.__name__}` \(test_bad_inputs.py:\d+\) must return a pair"
        with pytest.raises(Exception, match=traced):
            compiled(leaf(2))
    else:
        with pytest.raises(kind) as excinfo:
            compiled(leaf(2))
        assert_clear(excinfo, kind, f.__name__, message)
