"""Parity with eager `tf.custom_gradient` of TensorFlow 2.21: items 1-42.

Each test names the item it checks. Items 29 and 30 are deliberate divergences: there the
library's own behaviour (expand, sum down, cast, convert) is tested instead.

Item numbers refer to docs/tensorflow_semantics.md.
"""

import collections
import functools
import gc
import inspect
import re
import weakref

import messages
import numpy as np
import pytest
import torch
from helpers import D
from messages import SOME, exactly

import tf_compat_grad
from tf_compat_grad import CustomGradientTypeError, CustomGradientValueError, custom_gradient

Point = collections.namedtuple("Point", ["c", "a", "b"])  # field order is not alphabetical
Pair = collections.namedtuple("Pair", ["first", "second"])


def tensor(*values, requires_grad=True):
    return torch.tensor(values, dtype=D, requires_grad=requires_grad)


@custom_gradient
def log1pexp(x):
    """log(1 + exp(x)) with a gradient that stays finite for large x."""
    e = torch.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))

    return torch.log(1 + e), grad


@custom_gradient
def custom_exp(x):
    """exp(x), with a gradient that claims 2 * exp(x) (item 40)."""
    e = torch.exp(x)
    return e, lambda dy: dy * 2 * e


@custom_gradient
def times_two_claims_seven(x):
    """2 * x, with a gradient that claims 7."""
    return 2 * x, lambda dy: 7 * dy


@custom_gradient
def square_fused_backprop(x):
    """x * x whose first derivative is computed by another custom op (item 42)."""

    def grad(dy):
        return dy * times_two_claims_seven(x)

    return x * x, grad


# ---------------------------------------------------------------- A. decorator and wrapper

DECORATOR_FORMS = [
    pytest.param(lambda f: custom_gradient(f), id="@custom_gradient"),
    pytest.param(lambda f: custom_gradient()(f), id="@custom_gradient()"),
    pytest.param(lambda f: custom_gradient(f=f), id="custom_gradient(f=fn)"),
]


@pytest.mark.parametrize("decorate", DECORATOR_FORMS)
def test_decorator_forms_are_equivalent(decorate):  # item 1
    fn = decorate(log1pexp.__wrapped__)
    x = tensor(0.0, 100.0)
    y = fn(x)
    torch.testing.assert_close(y, torch.log1p(torch.exp(x)))
    (dx,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(dx, torch.tensor([0.5, 1.0], dtype=D))


def _smooth_round(x, alpha=10.0, *, beta=1):
    """Round x, with a straight-through gradient."""
    return torch.round(x), lambda dy: dy


WRAPPER_METADATA = [
    pytest.param("__name__", "_smooth_round", id="__name__"),
    pytest.param("__qualname__", "_smooth_round", id="__qualname__"),
    pytest.param("__doc__", "Round x, with a straight-through gradient.", id="__doc__"),
    pytest.param("__module__", _smooth_round.__module__, id="__module__"),
]


@pytest.mark.parametrize(("attribute", "value"), WRAPPER_METADATA)
def test_wrapper_keeps_metadata(attribute, value):  # item 2
    assert getattr(custom_gradient(_smooth_round), attribute) == value


def test_wrapper_exposes_the_original_function_as_wrapped():  # item 2
    assert custom_gradient(_smooth_round).__wrapped__ is _smooth_round


def test_wrapper_keeps_the_signature():  # item 2
    signature = inspect.signature(custom_gradient(_smooth_round))
    assert str(signature) == "(x, alpha=10.0, *, beta=1)"


def test_node_is_named_after_the_function():
    y = log1pexp(tensor(1.0))
    assert type(y.grad_fn).__name__ == "log1pexpBackward"


class Scaler:
    def __init__(self, k):
        self.k = k

    @custom_gradient
    def scale(self, x):
        def grad(dy):
            return dy * self.k  # one gradient: `self` is not an input

        return x * self.k, grad

    @staticmethod
    @custom_gradient
    def double(x):
        return 2 * x, lambda dy: 2 * dy


def test_method_binds_self_and_self_is_not_an_input():  # item 4
    x = tensor(1.0, 2.0)
    y = Scaler(3.0).scale(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([3.0, 3.0], dtype=D))


def test_staticmethod_above_custom_gradient():  # item 4
    x = tensor(1.0)
    Scaler.double(x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([2.0], dtype=D))


class ScaledLog1pExp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([2.0], dtype=D))

    @custom_gradient
    def forward(self, x):
        e = torch.exp(x)

        def grad(dy, variables=None):
            return dy * self.w * torch.sigmoid(x), [(dy * torch.log1p(e)).sum(0, keepdim=True)]

        return self.w * torch.log1p(e), grad


def test_module_forward_reads_its_parameter_as_a_variable():  # item 4, item 32
    module = ScaledLog1pExp()
    x = tensor(0.0, 1.0)
    module(x).sum().backward()
    torch.testing.assert_close(x.grad, 2.0 * torch.sigmoid(x.detach()))
    torch.testing.assert_close(module.w.grad, torch.log1p(torch.exp(x.detach())).sum(0, True))


# ---------------------------------------------------------------- B. calling f


def test_f_is_called_exactly_once_per_call():  # item 5
    calls = []

    @custom_gradient
    def f(x):
        calls.append(x)
        return x * 2, lambda dy: dy * 2

    x = tensor(1.0)
    y = f(x)
    assert len(calls) == 1
    torch.autograd.grad(y, x, create_graph=True)
    assert len(calls) == 1


RAW_ARGUMENTS = [
    pytest.param(1.5, float, id="float"),
    pytest.param(3, int, id="int"),
    pytest.param(np.array([1.0, 2.0]), np.ndarray, id="ndarray"),
]


@pytest.mark.parametrize(("value", "kind"), RAW_ARGUMENTS)
def test_f_receives_the_raw_arguments(value, kind):  # item 5
    seen = []

    @custom_gradient
    def f(x, other):
        seen.append(other)
        return x * 2, lambda dy: (dy * 2, None)

    f(tensor(1.0), value)
    assert type(seen[0]) is kind


def _scalar_tensor(x):
    return x.sum()


def _three_items(x):
    return x, lambda dy: dy, None


def _three_item_list(x):
    return [x, lambda dy: dy, None]


def _length_two_tensor(x):
    return torch.zeros(2, dtype=D)


def _grad_fn_none(x):
    return x * 2, None


def _length_three_tensor(x):
    return torch.zeros(3, dtype=D)


NO_GRAD_PATHS = [
    pytest.param(torch.no_grad, True, id="no_grad"),
    pytest.param(torch.inference_mode, True, id="inference_mode"),
    pytest.param(torch.enable_grad, False, id="no-input-requires-grad"),
]
CALL_CONTEXTS = [pytest.param(torch.enable_grad, True, id="recorded"), *NO_GRAD_PATHS]

# Each case: what f returns, the error type, and its message for the decorated f (tests/messages.py).
NOT_A_PAIR = [
    pytest.param(
        _scalar_tensor,
        CustomGradientTypeError,
        functools.partial(messages.not_a_pair, got="Tensor of shape [] and dtype torch.float64"),
        id="0-d-tensor",
    ),
    pytest.param(
        _three_items,
        CustomGradientValueError,
        functools.partial(messages.unpacks, got="tuple", count=3),
        id="3-tuple",
    ),
    pytest.param(
        _three_item_list,
        CustomGradientValueError,
        functools.partial(messages.unpacks, got="list", count=3),
        id="3-list",
    ),
    pytest.param(
        _length_two_tensor,
        CustomGradientTypeError,
        functools.partial(
            messages.single_tensor, got="Tensor of shape [2] and dtype torch.float64"
        ),
        id="1-D-length-2-tensor",
    ),
    pytest.param(
        _grad_fn_none,
        CustomGradientTypeError,
        functools.partial(messages.grad_fn_not_callable, got="None (NoneType)"),
        id="grad_fn-None",
    ),
    pytest.param(
        _length_three_tensor,
        CustomGradientValueError,  # TF's unpacking: "too many values to unpack"
        functools.partial(
            messages.unpacks, got="Tensor of shape [3] and dtype torch.float64", count=3
        ),
        id="1-D-length-3-tensor",
    ),
]


# items 6, 7, 9
@pytest.mark.parametrize(("body", "error", "message"), NOT_A_PAIR)
@pytest.mark.parametrize(("mode", "requires_grad"), CALL_CONTEXTS)
def test_f_must_return_a_pair_at_call_time(body, error, message, mode, requires_grad):
    fn = custom_gradient(body)
    with mode(), pytest.raises(error, match=exactly(message(fn))):
        fn(tensor(1.0, 2.0, requires_grad=requires_grad))


def test_f_may_return_a_two_item_list():  # item 6
    @custom_gradient
    def f(x):
        return [x * 2, lambda dy: dy * 2]

    x = tensor(1.0)
    f(x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([2.0], dtype=D))


LIBRARY_ERRORS = [
    pytest.param(CustomGradientTypeError, TypeError, id="TypeError"),
    pytest.param(CustomGradientValueError, ValueError, id="ValueError"),
]


@pytest.mark.parametrize(("error", "builtin"), LIBRARY_ERRORS)
def test_library_errors_keep_the_builtin_type(error, builtin):
    assert issubclass(error, builtin)
    assert issubclass(error, tf_compat_grad.CustomGradientError)


def test_intermediates_of_f_are_differentiable_wrt_inputs():  # item 8
    inside = []

    @custom_gradient
    def f(x):
        h = x * x
        inside.append(h)
        return h * 3, lambda dy: dy

    x = tensor(2.0)
    f(x)
    (dh,) = torch.autograd.grad(inside[0], x)
    torch.testing.assert_close(dh, torch.tensor([4.0], dtype=D))


def test_custom_output_is_not_connected_to_intermediates_of_f():  # item 8
    inside = []

    @custom_gradient
    def f(x):
        h = x * x
        inside.append(h)
        return h * 3, lambda dy: dy

    x = tensor(2.0)
    y = f(x)
    assert torch.autograd.grad(y, inside[0], allow_unused=True) == (None,)


def test_gradient_goes_only_through_grad_fn():  # item 38
    @custom_gradient
    def f(x):
        return x * x, lambda dy: dy * 5

    x = tensor(3.0)
    f(x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([5.0], dtype=D))


# ---------------------------------------------------------------- B. no gradient work (item 9)


def _tracked_log1pexp(calls, refs):
    @custom_gradient
    def log1pexp(x):
        e = torch.exp(x)
        refs.append(weakref.ref(e))

        def grad(dy):
            calls.append(dy)
            return dy * (1 - 1 / (1 + e))

        return torch.log(1 + e), grad

    return log1pexp


@pytest.mark.parametrize(("mode", "requires_grad"), NO_GRAD_PATHS)
def test_no_grad_path_returns_outputs_without_a_node(mode, requires_grad):  # item 9
    fn = _tracked_log1pexp([], [])
    x = tensor(0.0, 1.0, requires_grad=requires_grad)
    with mode():
        y = fn(x)
    torch.testing.assert_close(y, torch.log1p(torch.exp(x.detach())))
    assert y.grad_fn is None


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "requires_grad"), NO_GRAD_PATHS)
def test_no_grad_path_never_calls_grad_fn(mode, requires_grad):  # item 9
    calls = []
    fn = _tracked_log1pexp(calls, [])
    with mode():
        y = fn(tensor(0.0, 1.0, requires_grad=requires_grad))
    del y
    gc.collect()
    assert calls == []


@pytest.mark.parametrize(("mode", "requires_grad"), NO_GRAD_PATHS)
def test_no_grad_path_keeps_nothing_alive(mode, requires_grad):  # item 9
    refs = []
    fn = _tracked_log1pexp([], refs)
    with mode():
        y = fn(tensor(0.0, 1.0, requires_grad=requires_grad))
    assert refs[0]() is None  # without gc.collect(): no reference cycle either
    del y


@pytest.mark.parametrize(("mode", "requires_grad"), NO_GRAD_PATHS)
def test_no_grad_path_outputs_are_new_tensors(mode, requires_grad):  # items 9, 10
    @custom_gradient
    def identity(x):
        return x, lambda dy: dy

    x = tensor(1.0, requires_grad=requires_grad)
    with mode():
        y = identity(x)
    assert y is not x


NO_GRAD_MODES = [
    pytest.param(torch.no_grad, id="no_grad"),
    pytest.param(torch.inference_mode, id="inference_mode"),
]


@pytest.mark.parametrize("mode", NO_GRAD_MODES)
def test_variables_signature_is_checked_without_grad_mode(mode):  # items 9, 33
    w = torch.nn.Parameter(tensor(2.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w

    with mode(), pytest.raises(CustomGradientTypeError):
        f(tensor(1.0))


@pytest.mark.parametrize("mode", NO_GRAD_MODES)
def test_none_argument_is_rejected_without_grad_mode(mode):  # item 13
    @custom_gradient
    def f(x, y):
        return x * 2, lambda dy: (dy * 2, None)

    with mode(), pytest.raises(CustomGradientValueError):
        f(tensor(1.0), None)


# ---------------------------------------------------------------- B. outputs (item 10)


def test_output_is_a_new_tensor_when_f_returns_its_input():  # item 10
    @custom_gradient
    def identity(x):
        return x, lambda dy: dy * 3

    x = tensor(1.0, 2.0)
    y = identity(x)
    assert y is not x
    torch.testing.assert_close(y, x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([3.0, 3.0], dtype=D))


def test_python_float_output_becomes_a_tensor():  # item 10
    @custom_gradient
    def f(x):
        return 1.5, lambda dy: dy

    y = f(tensor(1.0))
    assert isinstance(y, torch.Tensor)
    assert y.item() == 1.5


def _list_of(a, b):
    return [a, b]


def _tuple_of(a, b):
    return (a, b)


def _dict_of(a, b):
    return {"z": a, "a": b}


def _namedtuple_of(a, b):
    return Pair(a, b)


OUTPUT_CONTAINERS = [
    pytest.param(_list_of, id="list"),
    pytest.param(_tuple_of, id="tuple"),
    pytest.param(_dict_of, id="dict"),
    pytest.param(_namedtuple_of, id="namedtuple"),
]


@pytest.mark.parametrize("pack", OUTPUT_CONTAINERS)
def test_output_container_keeps_its_type(pack):  # item 10
    @custom_gradient
    def f(x):
        return pack(x * 2, x * 3), lambda da, db: da + db

    out = f(tensor(1.0))
    assert type(out) is type(pack(1, 2))


def test_dict_output_keeps_its_original_key_order():  # item 10
    @custom_gradient
    def f(x):
        return {"z": x * 2, "a": x * 3}, lambda da, dz: da + dz

    assert list(f(tensor(1.0))) == ["z", "a"]


# ---------------------------------------------------------------- C. inputs and counting


def test_python_float_argument_needs_a_gradient_slot():  # items 11, 12
    @custom_gradient
    def clip(x, lo):
        return torch.clamp(x, min=lo), lambda dy: (dy, None)

    x = tensor(1.0, 2.0)
    clip(x, 1.5).sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(2, dtype=D))


def test_missing_slot_for_python_float_raises_at_backward():  # items 12, 26
    @custom_gradient
    def clip(x, lo):
        return torch.clamp(x, min=lo), lambda dy: dy

    y = clip(tensor(1.0, 2.0), 1.5)  # no error at call time
    message = messages.count(clip, 1, ["x", "lo"])
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        y.sum().backward()


NON_TENSOR_LEAVES = [
    pytest.param(1.5, id="float"),
    pytest.param(2, id="int"),
    pytest.param(True, id="bool"),
    pytest.param("mode", id="str"),
    pytest.param(np.array([1.0, 2.0]), id="ndarray"),
]


@pytest.mark.parametrize("leaf", NON_TENSOR_LEAVES)
def test_non_tensor_positional_leaf_counts_as_an_input(leaf):  # item 12
    @custom_gradient
    def f(x, other):
        return x * 2, lambda dy: dy * 2

    y = f(tensor(1.0), leaf)
    message = messages.count(f, 1, ["x", "other"])
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        y.backward()


@pytest.mark.parametrize("leaf", NON_TENSOR_LEAVES)
def test_non_tensor_positional_leaf_takes_none(leaf):  # item 12
    @custom_gradient
    def f(x, other):
        return x * 2, lambda dy: (dy * 2, None)

    x = tensor(1.0)
    f(x, leaf).backward()
    torch.testing.assert_close(x.grad, torch.tensor([2.0], dtype=D))


def test_none_argument_raises_at_call_time_naming_the_argument():  # item 13
    @custom_gradient
    def f(x, ys):
        return x * 2, lambda dy: (dy * 2, None, None)

    message = messages.unusable_argument(f, "None (NoneType)", "ys[1]")
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        f(tensor(1.0), [2.0, None])


UNCONVERTIBLE_LEAVES = [
    pytest.param(None, "None (NoneType)", id="None"),
    pytest.param(object(), f"{SOME} (object)", id="object"),
    pytest.param(len, "<built-in function len> (builtin_function_or_method)", id="callable"),
]


@pytest.mark.parametrize(("leaf", "got"), UNCONVERTIBLE_LEAVES)
def test_unconvertible_argument_raises_at_call_time(leaf, got):  # item 13
    @custom_gradient
    def f(x, y):
        return x * 2, lambda dy: (dy * 2, None)

    message = messages.unusable_argument(f, got, "y")
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        f(tensor(1.0), leaf)


def test_empty_containers_are_zero_inputs():  # items 13, 26
    @custom_gradient
    def f(empty, x):
        return x * 2, lambda dy: ([], dy * 2)

    x = tensor(1.0)
    f((), x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([2.0], dtype=D))


SMOOTH_ROUND_CALLS = [
    pytest.param(lambda f, x: f(x), 1, id="alpha-defaulted"),
    pytest.param(lambda f, x: f(x, 10.0), 2, id="alpha-positional"),
    pytest.param(lambda f, x: f(x, alpha=10.0), 1, id="alpha-keyword"),
]


def _smooth_round_needing(n_grads):
    @custom_gradient
    def smooth_round(x, alpha=10.0):
        return torch.round(x), lambda dy: [dy, *[None] * (n_grads - 1)]

    return smooth_round


@pytest.mark.parametrize(("call", "n_inputs"), SMOOTH_ROUND_CALLS)
def test_only_positionally_passed_arguments_are_inputs(call, n_inputs):  # items 14, 15
    x = tensor(0.4)
    call(_smooth_round_needing(n_inputs), x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([1.0], dtype=D))


@pytest.mark.parametrize(("call", "n_inputs"), SMOOTH_ROUND_CALLS)
def test_one_gradient_too_many_for_passed_arguments_raises(call, n_inputs):  # items 14, 26
    f = _smooth_round_needing(n_inputs + 1)
    y = call(f, tensor(0.4))
    message = messages.count(f, n_inputs + 1, ["x", "alpha"][:n_inputs])
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        y.backward()


def test_keyword_argument_reaches_f_and_is_not_counted():  # item 15
    seen = []

    @custom_gradient
    def f(x, scale=1.0):
        seen.append(scale)
        return x * scale, lambda dy: dy * scale

    x = tensor(1.0)
    f(x, scale=4.0).backward()
    assert seen == [4.0]
    torch.testing.assert_close(x.grad, torch.tensor([4.0], dtype=D))


def test_tensor_passed_by_keyword_that_needs_a_gradient_is_refused():  # item 15
    # TensorFlow gives `scale` no gradient without a word; here that is refused (item 15).
    @custom_gradient
    def f(x, scale=None):
        return x * scale, lambda dy: dy * scale

    x, scale = tensor(1.0), tensor(4.0)
    message = messages.lost_gradient(f, "keyword `scale`")
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        f(x, scale=scale)
    y = f(x, scale=scale.detach())  # the fix that keeps TensorFlow's numbers
    assert torch.autograd.grad(y, x)[0].item() == 4.0


def test_all_tensors_by_keyword_is_refused_rather_than_autodiff_of_f():  # item 39
    calls = []

    @custom_gradient
    def f(x):
        def grad(dy):
            calls.append(dy)
            return dy * 100

        return x * x, grad

    x = tensor(3.0)
    with pytest.raises(
        CustomGradientValueError, match=exactly(messages.lost_gradient(f, "keyword `x`"))
    ):
        f(x=x)
    assert calls == []


def test_only_closure_tensor_requiring_grad_is_refused_rather_than_autodiff_of_f():  # item 39
    c = tensor(3.0)

    @custom_gradient
    def f(x):
        return x * c * c, lambda dy: dy * 100

    with pytest.raises(
        CustomGradientValueError, match=exactly(messages.lost_gradient(f, "closure `c`"))
    ):
        f(tensor(2.0, requires_grad=False))


def _tagged_dict(t):
    return {"b": t["b"], "c": t["c"], "a": t["a"]}


def _tagged_ordered_dict(t):
    return collections.OrderedDict(c=t["c"], a=t["a"], b=t["b"])


def _tagged_namedtuple(t):
    return Point(c=t["c"], a=t["a"], b=t["b"])


def _tagged_nested(t):
    return [t["a"], (t["b"], [t["c"]])]


INPUT_STRUCTURES = [
    pytest.param(_tagged_dict, "abc", id="dict-sorted-keys"),
    pytest.param(_tagged_ordered_dict, "abc", id="ordereddict-sorted-keys"),
    pytest.param(_tagged_namedtuple, "cab", id="namedtuple-field-order"),
    pytest.param(_tagged_nested, "abc", id="nested-list-tuple"),
]


@pytest.mark.parametrize(("pack", "order"), INPUT_STRUCTURES)
def test_gradients_follow_flattened_input_order(pack, order):  # items 11, 16, 27
    @custom_gradient
    def f(arg):
        return torch.zeros((), dtype=D), lambda dy: (dy * 1, dy * 2, dy * 3)

    leaves = {name: tensor(0.0) for name in "abc"}
    f(pack(leaves)).backward()
    for k, name in enumerate(order, start=1):
        torch.testing.assert_close(leaves[name].grad, torch.tensor([float(k)], dtype=D))


def test_count_error_names_nested_arguments():  # item 26
    @custom_gradient
    def f(params):
        return params["w"] * 2, lambda dy: dy * 2

    y = f({"w": tensor(1.0), "b": [tensor(1.0)]})
    message = messages.count(f, 1, ["params['b'][0]", "params['w']"])
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        y.backward()


def test_same_tensor_twice_gets_the_sum():  # item 17
    @custom_gradient
    def f(a, b):
        return a * b, lambda dy: (dy * 2, dy * 5)

    x = tensor(1.0)
    f(x, x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([7.0], dtype=D))


def test_int_tensor_input_with_none_gradient():  # item 18
    @custom_gradient
    def gather(x, index):
        return x[index], lambda dy: (torch.zeros_like(x).index_add(0, index, dy), None)

    x = tensor(1.0, 2.0, 3.0)
    gather(x, torch.tensor([2, 2])).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([0.0, 0.0, 2.0], dtype=D))


def test_closure_tensor_that_needs_a_gradient_is_refused():  # item 20
    c = tensor(3.0)

    @custom_gradient
    def f(x):
        return x * c, lambda dy: dy * c

    with pytest.raises(
        CustomGradientValueError, match=exactly(messages.lost_gradient(f, "closure `c`"))
    ):
        f(tensor(2.0))


# ---------------------------------------------------------------- D. calling grad_fn


def test_single_output_gives_one_upstream():  # item 21
    seen = []

    @custom_gradient
    def f(x):
        def grad(*upstream):
            seen.append(upstream)
            return upstream[0]

        return x * 2, grad

    x = tensor(1.0, 2.0)
    f(x).backward(torch.tensor([3.0, 4.0], dtype=D))
    assert len(seen[0]) == 1
    torch.testing.assert_close(seen[0][0], torch.tensor([3.0, 4.0], dtype=D))


def test_dict_output_upstreams_come_in_sorted_key_order():  # item 21
    seen = []

    @custom_gradient
    def f(x):
        def grad(da, db):
            seen.append((da, db))
            return da + db

        return {"b": x * 1, "a": x * 1}, grad

    out = f(tensor(1.0))
    (3 * out["a"] + 5 * out["b"]).backward()
    da, db = seen[0]
    torch.testing.assert_close(da, torch.tensor([3.0], dtype=D))
    torch.testing.assert_close(db, torch.tensor([5.0], dtype=D))


def test_namedtuple_output_upstreams_come_in_field_order():  # item 21
    seen = []

    @custom_gradient
    def f(x):
        def grad(dc, da, db):
            seen.append((dc, da, db))
            return dc + da + db

        return Point(c=x * 1, a=x * 1, b=x * 1), grad

    out = f(tensor(1.0))
    (out.a + 2 * out.b + 3 * out.c).backward()
    expected = [torch.tensor([k], dtype=D) for k in (3.0, 1.0, 2.0)]
    torch.testing.assert_close(list(seen[0]), expected)


def test_unused_output_gets_zeros():  # item 22
    seen = []

    @custom_gradient
    def f(x):
        def grad(da, db):
            seen.append(db)
            return da

        return (x * 2, x[:2] * 3), grad

    a, _ = f(tensor(1.0, 2.0, 3.0))
    a.sum().backward()
    torch.testing.assert_close(seen[0], torch.zeros(2, dtype=D))


def test_unused_int_output_gets_int_zeros():  # item 22
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy, dindex):
            seen.append(dindex)
            return dy

        return (x * 2, torch.argmax(x)), grad

    y, _ = f(tensor(1.0, 2.0))
    y.sum().backward()
    assert seen[0].dtype == torch.int64
    assert seen[0].item() == 0


def test_output_used_twice_calls_grad_fn_once_with_the_sum():  # item 23
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy):
            seen.append(dy)
            return dy

        return x * 1, grad

    y = f(tensor(1.0))
    (2 * y + 3 * y).backward()
    assert len(seen) == 1
    torch.testing.assert_close(seen[0], torch.tensor([5.0], dtype=D))


def test_each_gradient_computation_calls_grad_fn_again():  # item 23
    calls = []

    @custom_gradient
    def f(x):
        def grad(dy):
            calls.append(dy)
            return dy * 2

        return x * 2, grad

    x = tensor(1.0)
    y = f(x)
    first = torch.autograd.grad(y, x, retain_graph=True)
    second = torch.autograd.grad(y, x)
    assert len(calls) == 2
    torch.testing.assert_close(first, second)


def test_grad_outputs_reach_grad_fn():  # item 24
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy):
            seen.append(dy)
            return dy

        return x * 2, grad

    x = tensor(1.0, 2.0)
    torch.autograd.grad(f(x), x, grad_outputs=torch.tensor([7.0, 8.0], dtype=D))
    torch.testing.assert_close(seen[0], torch.tensor([7.0, 8.0], dtype=D))


def test_without_variables_grad_fn_gets_no_variables_keyword():  # item 25
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy, variables="default"):
            seen.append(variables)
            return dy

        return x * 2, grad

    f(tensor(1.0)).backward()
    assert seen == ["default"]


def test_required_variables_parameter_fails_at_backward_without_variables():  # item 25
    @custom_gradient
    def f(x):
        def grad(dy, variables):
            return dy

        return x * 2, grad

    y = f(tensor(1.0))  # no error at call time
    with pytest.raises(
        TypeError, match=re.escape("grad() missing 1 required positional argument: 'variables'")
    ):
        y.backward()


class UserError(Exception):
    pass


GRAD_FN_EXCEPTIONS = [
    pytest.param(RuntimeError, id="RuntimeError"),
    pytest.param(KeyError, id="KeyError"),
    pytest.param(UserError, id="user-defined"),
]


@pytest.mark.parametrize("error", GRAD_FN_EXCEPTIONS)
def test_exception_in_grad_fn_propagates_with_its_type(error):  # item 31
    @custom_gradient
    def f(x):
        def grad(dy):
            raise error("from grad_fn")

        return x * 2, grad

    y = f(tensor(1.0))
    with pytest.raises(error, match="from grad_fn"):
        y.backward()


# ---------------------------------------------------------------- E. what grad_fn returns

SINGLE_INPUT_RETURNS = [
    pytest.param(lambda g: g, id="tensor"),
    pytest.param(lambda g: [g], id="list"),
    pytest.param(lambda g: (g,), id="tuple"),
]


@pytest.mark.parametrize("pack", SINGLE_INPUT_RETURNS)
def test_single_input_gradient_forms(pack):  # item 26
    @custom_gradient
    def f(x):
        return x * 2, lambda dy: pack(dy * 2)

    x = tensor(1.0)
    f(x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([2.0], dtype=D))


NESTED_RETURNS = [
    pytest.param(lambda g1, g2, g3: (g1, g2, g3), id="flat-tuple"),
    pytest.param(lambda g1, g2, g3: [g1, g2, g3], id="flat-list"),
    pytest.param(lambda g1, g2, g3: (g1, {"p": g2, "q": g3}), id="mirrors-inputs"),
    pytest.param(lambda g1, g2, g3: (g1, {"q": g3, "p": g2}), id="mirrors-inputs-key-order"),
    pytest.param(lambda g1, g2, g3: [(g1,), [g2, [g3]]], id="other-nesting"),
]


@pytest.mark.parametrize("pack", NESTED_RETURNS)
def test_structured_gradients_are_flattened(pack):  # items 26, 27
    @custom_gradient
    def f(x, d):
        return x + d["p"] + d["q"], lambda dy: pack(dy * 1, dy * 2, dy * 3)

    x, p, q = tensor(0.0), tensor(0.0), tensor(0.0)
    f(x, {"q": q, "p": p}).backward()
    grads = [x.grad, p.grad, q.grad]
    torch.testing.assert_close(grads, [torch.tensor([k], dtype=D) for k in (1.0, 2.0, 3.0)])


def test_none_gradient_leaves_grad_unset():  # item 28
    @custom_gradient
    def f(x, z):
        return x * z, lambda dy: (dy * z, None)

    x, z = tensor(1.0), tensor(2.0)
    f(x, z).backward()
    assert z.grad is None
    torch.testing.assert_close(x.grad, torch.tensor([2.0], dtype=D))


def test_none_gradient_keeps_the_other_path():  # item 28
    @custom_gradient
    def f(x):
        return x * 2, lambda dy: None

    x = tensor(1.0)
    (f(x) + 3 * x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([3.0], dtype=D))


WRONG_COUNTS = [
    pytest.param(lambda dy: dy, 1, id="too-few"),
    pytest.param(lambda dy: (dy, dy, dy), 3, id="too-many"),
    pytest.param(lambda dy: [], 0, id="empty-list"),
]


@pytest.mark.parametrize(("grad", "returned"), WRONG_COUNTS)
def test_wrong_gradient_count_raises_at_backward(grad, returned):  # item 26
    @custom_gradient
    def f(x, z):
        return x * z, grad

    y = f(tensor(1.0), tensor(2.0))  # no error at call time
    message = messages.count(f, returned, ["x", "z"])
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        y.backward()


# Items 29, 30 are deliberate divergences: the library repairs what torch's engine would not take.
REPAIRED_GRADIENTS = [
    pytest.param(lambda dy: torch.tensor(2.0, dtype=D), [2.0, 2.0], id="0-d-expanded"),
    pytest.param(lambda dy: torch.ones(3, 2, dtype=D), [3.0, 3.0], id="larger-summed"),
    pytest.param(lambda dy: torch.ones(2, dtype=torch.float32), [1.0, 1.0], id="float32-cast"),
    pytest.param(lambda dy: 2.0, [2.0, 2.0], id="python-float"),
    pytest.param(lambda dy: np.array([1.0, 2.0]), [1.0, 2.0], id="ndarray"),
]


@pytest.mark.parametrize(("grad", "expected"), REPAIRED_GRADIENTS)
def test_gradient_is_repaired_to_the_input(grad, expected):  # items 29, 30
    @custom_gradient
    def f(x):
        return x * 2, grad

    x = tensor(1.0, 1.0)
    (dx,) = torch.autograd.grad(f(x).sum(), x)
    assert dx.dtype == D
    torch.testing.assert_close(dx, torch.tensor(expected, dtype=D))


def test_gradient_of_unfixable_shape_raises():  # item 29
    @custom_gradient
    def f(x):
        return x * 2, lambda dy: torch.ones(3, dtype=D)

    y = f(tensor(1.0, 1.0))
    message = messages.wrong_shape(f, [3], messages.argument("x"), [2])
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        y.sum().backward()


# ---------------------------------------------------------------- F. variables


def test_parameter_read_in_f_is_passed_as_the_very_object():  # items 32, 34
    w = torch.nn.Parameter(tensor(3.0))
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen.append(variables)
            return dy * w, [dy * x]

        return x * w, grad

    f(tensor(2.0)).backward()
    assert type(seen[0]) is list
    assert len(seen[0]) == 1
    assert seen[0][0] is w


def test_variable_gets_the_returned_gradient():  # item 34
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy, variables=None: (dy * w, [dy * 10])

    x = tensor(2.0)
    f(x).backward()
    torch.testing.assert_close(x.grad, torch.tensor([3.0], dtype=D))
    torch.testing.assert_close(w.grad, torch.tensor([10.0], dtype=D))


def _read_in_output(x, w):
    return x * w


def _read_unused(x, w):
    w.sum()
    return x * 2


def _written(x, w):
    with torch.no_grad():
        w.mul_(1.0)  # TF: `w.assign(...)`
    return x * 2


VARIABLE_ACCESSES = [
    pytest.param(_read_in_output, id="read"),
    pytest.param(_read_unused, id="read-but-unused"),
    pytest.param(_written, id="written"),
]


@pytest.mark.parametrize("body", VARIABLE_ACCESSES)
def test_accessed_parameter_is_a_variable(body):  # item 32
    w = torch.nn.Parameter(tensor(3.0))
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen.append(variables)
            return dy, [dy * 0 + 4]

        return body(x, w), grad

    f(tensor(1.0)).backward()
    assert len(seen[0]) == 1
    assert seen[0][0] is w
    torch.testing.assert_close(w.grad, torch.tensor([4.0], dtype=D))


def test_parameter_created_inside_f_is_a_variable():  # item 32
    created = []

    @custom_gradient
    def f(x):
        w = torch.nn.Parameter(torch.full((1,), 3.0, dtype=D))
        created.append(w)
        return x * w, lambda dy, variables=None: (dy * w, [dy * 0 + 4])

    f(tensor(1.0)).backward()
    torch.testing.assert_close(created[0].grad, torch.tensor([4.0], dtype=D))


NOT_VARIABLES = [
    pytest.param(lambda x, w: x * w, False, id="non-trainable"),
    pytest.param(lambda x, w: x * w.shape[0], True, id="metadata-only"),
]


@pytest.mark.parametrize(("body", "trainable"), NOT_VARIABLES)
def test_parameter_not_read_as_trainable_is_not_a_variable(body, trainable):  # item 32
    w = torch.nn.Parameter(tensor(3.0), requires_grad=trainable)

    @custom_gradient
    def f(x):
        return body(x, w), lambda dy: dy  # no `variables` parameter: would raise if found

    x = tensor(1.0)
    f(x).backward()
    assert w.grad is None


def test_parameter_passed_positionally_is_an_ordinary_input():  # item 19
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x, w):
        return x * w, lambda dy: (dy * w, dy * 10)

    x = tensor(2.0)
    f(x, w).backward()
    torch.testing.assert_close(w.grad, torch.tensor([10.0], dtype=D))


def test_parameter_passed_by_keyword_is_not_a_variable():  # items 15, 32
    # Not a variable, so its gradient would be lost: refused (item 15).
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x, w=None):
        return x * w, lambda dy: dy * w

    with pytest.raises(
        CustomGradientValueError, match=exactly(messages.lost_gradient(f, "keyword `w`"))
    ):
        f(tensor(2.0), w=w)


@pytest.mark.parametrize(("mode", "requires_grad"), CALL_CONTEXTS)
def test_grad_fn_without_variables_raises_at_call_time(mode, requires_grad):  # items 9, 33
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w

    message = messages.variables_keyword(f, 1, "`w`")
    with mode(), pytest.raises(CustomGradientTypeError, match=exactly(message)):
        f(tensor(2.0, requires_grad=requires_grad))


GLOBAL_W = torch.nn.Parameter(torch.tensor([3.0], dtype=D))


class _Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(tensor(2.0))
        self.bias = torch.nn.Parameter(tensor(1.0))

    @custom_gradient
    def forward(self, x):
        return x * self.weight + self.bias, lambda dy: dy * self.weight


# Each maker gives a call and the decorated function it reaches.
def _closure_call():
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w

    return lambda x: f(x), f


def _global_call():
    @custom_gradient
    def f(x):
        return x * GLOBAL_W, lambda dy: dy * GLOBAL_W

    return lambda x: f(x), f


def _module_call():
    return _Affine(), _Affine.forward


def _unnamed_call():
    ws = [torch.nn.Parameter(torch.ones(2, 1, dtype=D))]  # reached through a list

    @custom_gradient
    def f(x):
        return x * ws[0], lambda dy: dy * ws[0]

    return lambda x: f(x), f


PARAMETER_NAMES = [
    pytest.param(_closure_call, 1, "`w`", id="closure"),
    pytest.param(_global_call, 1, "`GLOBAL_W`", id="global"),
    pytest.param(_module_call, 2, "`self.weight`, `self.bias`", id="module"),
    pytest.param(_unnamed_call, 1, "a Parameter of shape [2, 1]", id="unnamed"),
]


@pytest.mark.parametrize(("make", "count", "names"), PARAMETER_NAMES)
@pytest.mark.parametrize(("mode", "requires_grad"), CALL_CONTEXTS)
def test_variables_error_names_parameters_as_the_code_reaches_them(
    make, count, names, mode, requires_grad
):  # item 33
    call, f = make()
    message = messages.variables_keyword(f, count, names)
    with mode(), pytest.raises(CustomGradientTypeError, match=exactly(message)):
        call(tensor(2.0, requires_grad=requires_grad))


def _variables_default(dy, variables=None):
    return dy, [dy]


def _variables_keyword_only(dy, *, variables):
    return dy, [dy]


def _variables_in_kwargs(dy, **kwargs):
    return dy, [dy * 0 + len(kwargs["variables"])]


GRAD_FNS_TAKING_VARIABLES = [
    pytest.param(_variables_default, id="variables=None"),
    pytest.param(_variables_keyword_only, id="keyword-only"),
    pytest.param(_variables_in_kwargs, id="**kwargs"),
]


@pytest.mark.parametrize("grad", GRAD_FNS_TAKING_VARIABLES)
def test_grad_fn_signatures_accepting_variables(grad):  # item 33
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, grad

    f(tensor(2.0)).backward()
    torch.testing.assert_close(w.grad, torch.tensor([1.0], dtype=D))


def test_variables_get_gradients_when_no_input_requires_grad():  # item 37
    w = torch.nn.Parameter(tensor(3.0))
    calls = []

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            calls.append(dy)
            return dy * w, [dy * x]

        return x * w, grad

    f(tensor(2.0, requires_grad=False)).backward()
    assert len(calls) == 1
    torch.testing.assert_close(w.grad, torch.tensor([2.0], dtype=D))


def test_wrong_number_of_variable_gradients_raises():  # item 34
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy, variables=None: (dy * w, [dy, dy])

    y = f(tensor(2.0))
    message = messages.variables_count(f, [[1]], 2)
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        y.backward()


def test_returning_only_input_gradients_with_variables_raises():  # item 34
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy, variables=None: dy * w

    y = f(tensor(2.0))
    message = messages.variables_not_a_pair(f, [[1]], "Tensor of shape [1] and dtype torch.float64")
    with pytest.raises(CustomGradientTypeError, match=exactly(message)):
        y.backward()


def test_variable_gradients_that_are_not_a_list_raise_type_error():  # item 34
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy, variables=None: (dy * w, dy * x)

    y = f(tensor(2.0))
    message = messages.variables_not_a_list(f, [[1]], "Tensor of shape [1] and dtype torch.float64")
    with pytest.raises(CustomGradientTypeError, match=exactly(message)):
        y.backward()


def test_none_variable_gradient_leaves_grad_unset():  # item 36
    w = torch.nn.Parameter(tensor(3.0))

    @custom_gradient
    def f(x):
        return x * w, lambda dy, variables=None: (dy * w, [None])

    x = tensor(2.0)
    f(x).backward()
    assert w.grad is None
    torch.testing.assert_close(x.grad, torch.tensor([3.0], dtype=D))


def test_variables_come_in_order_of_first_use():  # item 35
    u, v, w = (torch.nn.Parameter(tensor(float(k))) for k in (1, 2, 3))
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen.append(variables)
            return dy, [dy * 10, dy * 20, dy * 30]

        return x * w + x * u + x * v + w, grad

    f(tensor(1.0)).backward()
    assert [id(p) for p in seen[0]] == [id(w), id(u), id(v)]
    torch.testing.assert_close(
        [w.grad, u.grad, v.grad], [tensor(k, requires_grad=False) for k in (10.0, 20.0, 30.0)]
    )


# ---------------------------------------------------------------- G. higher order


def test_log1pexp_second_derivative_flows_through_the_closure():  # item 40
    x = tensor(-2.0, 0.0, 3.0)
    (dx,) = torch.autograd.grad(log1pexp(x).sum(), x, create_graph=True)
    (d2x,) = torch.autograd.grad(dx.sum(), x)
    s = torch.sigmoid(x.detach())
    torch.testing.assert_close(d2x, s * (1 - s))


def test_second_derivative_flows_through_a_closure_over_the_input():  # item 40
    @custom_gradient
    def cube(x):
        return x**3, lambda dy: dy * 3 * x * x

    x = tensor(2.0)
    (dx,) = torch.autograd.grad(cube(x), x, create_graph=True)
    (d2x,) = torch.autograd.grad(dx, x)
    torch.testing.assert_close(d2x, torch.tensor([12.0], dtype=D))


def test_upstream_depending_on_x_goes_through_grad_fn_again():  # item 40
    x = tensor(0.5)
    y = custom_exp(x)
    (dx,) = torch.autograd.grad(y * y, x, create_graph=True)
    (d2x,) = torch.autograd.grad(dx, x)
    e2 = torch.exp(2 * x.detach())
    torch.testing.assert_close(dx.detach(), 4 * e2)
    torch.testing.assert_close(d2x, 12 * e2)


def test_detach_in_grad_fn_stops_the_second_order():  # item 41
    @custom_gradient
    def f(x):
        e = torch.exp(x)
        return e, lambda dy: dy * e.detach()

    x = tensor(0.5)
    (dx,) = torch.autograd.grad(f(x), x, create_graph=True)
    assert dx.grad_fn is None  # TF: tape.gradient of the gradient is None
    torch.testing.assert_close(dx, torch.exp(x.detach()))


def test_nested_custom_gradient_in_grad_fn_defines_the_second_derivative():  # item 42
    x = tensor(1.5)
    (dx,) = torch.autograd.grad(square_fused_backprop(x), x, create_graph=True)
    (d2x,) = torch.autograd.grad(dx, x)
    torch.testing.assert_close(dx.detach(), torch.tensor([3.0], dtype=D))
    torch.testing.assert_close(d2x, torch.tensor([7.0], dtype=D))  # the true value is 2


def test_gradcheck_log1pexp():
    x = torch.linspace(-5, 5, 7, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(log1pexp, (x,))


def test_gradgradcheck_log1pexp():
    x = torch.linspace(-5, 5, 7, dtype=D, requires_grad=True)
    assert torch.autograd.gradgradcheck(log1pexp, (x,))
