"""`custom_gradient(captured="constant")`: TensorFlow's behaviour for a tensor f's outputs depend
on that is neither a positional argument nor a variable (Note [lost gradients]): no gradient for
it through f's outputs, while grad_fn's own use of it is differentiated at second order.
First-order gradients are compared with plain autograd of the same math with the captured tensor
detached; second-order ones with plain autograd of grad_fn's own math."""

import copy
import pickle

import messages
import pytest
import torch
from helpers import D
from messages import exactly
from torch.func import functional_call, grad, vmap

from tf_compat_grad import (
    CustomGradientNotImplementedError,
    CustomGradientTypeError,
    CustomGradientValueError,
    custom_gradient,
)

G = torch.randn(3, dtype=D, requires_grad=True)  # a global that needs a gradient


def _t(*shape, requires_grad=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=D, generator=gen).requires_grad_(requires_grad)


def _closure_function(w, rule="constant"):
    """x * sin(w), whose grad_fn claims 3 * cos(w) (not the true sin(w)) and uses w itself."""

    @custom_gradient(captured=rule)
    def f(x):
        def grad_fn(dy):
            return dy * 3 * torch.cos(w)

        return x * torch.sin(w), grad_fn

    return f


def test_the_default_still_refuses_and_names_the_option():
    w = _t(3) * 2
    f = _closure_function(w, "refuse")
    message = messages.lost_gradient(f, "closure `w`", "the tensor of shape [3]")
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        f(_t(3, seed=1))


@pytest.mark.parametrize("calls", [1, 3], ids=["first-call", "planned-calls"])
def test_closure_gets_no_gradient_through_the_output_and_x_gets_grad_fns(calls):
    base = _t(3)
    f = _closure_function(base * 2)
    w = (base * 2).detach()
    for _ in range(calls):  # the later calls run the plan made by the first
        x = _t(3, seed=1)
        gx, gbase = torch.autograd.grad(f(x).sum(), [x, base], allow_unused=True)
        assert gbase is None  # TensorFlow: None
        torch.testing.assert_close(gx, 3 * torch.cos(w))


def test_grad_fns_use_of_the_captured_tensor_is_differentiated_at_second_order():
    base = _t(3)
    w = base * 2
    f = _closure_function(w)
    x = _t(3, seed=1)
    (gx,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(gx.sum(), base)
    # plain autograd of grad_fn's math, 3 * cos(2 * base), with respect to base
    (expected,) = torch.autograd.grad((3 * torch.cos(base * 2)).sum(), base)
    torch.testing.assert_close(second, expected)
    assert second.abs().sum() > 0  # `.detach()` where f reads w would give none


def test_global_keyword_and_attribute_get_no_gradient_through_the_output():
    @custom_gradient(captured="constant")
    def scaled(x, scale=1.0):
        return x * scale * G, lambda dy: dy * 2

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = _t(3, seed=2)  # a plain attribute, not a Parameter

        @custom_gradient(captured="constant")
        def forward(self, x):
            return x * self.scale, lambda dy: dy * self.scale.detach()

    s, x, module = _t(3, seed=1), _t(3, seed=3), Scale()
    gx, gs, gg = torch.autograd.grad(scaled(x, scale=s).sum(), [x, s, G], allow_unused=True)
    assert gs is None and gg is None
    torch.testing.assert_close(gx, torch.full((3,), 2.0, dtype=D))
    gx, gscale = torch.autograd.grad(module(x).sum(), [x, module.scale], allow_unused=True)
    assert gscale is None
    torch.testing.assert_close(gx, module.scale.detach())


def test_without_an_input_that_needs_a_gradient_it_is_still_refused():
    # TensorFlow would differentiate f's own ops into w and never call grad_fn.
    w = _t(3)
    f = _closure_function(w)
    message = messages.lost_gradient_without_inputs(f, "closure `w`")
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        f(_t(3, requires_grad=False, seed=1))
    with torch.no_grad():
        f(_t(3, seed=1))  # nothing to differentiate


def test_a_tensor_in_a_parameters_place_is_still_a_variable():
    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(_t(3, seed=4))

        @custom_gradient(captured="constant")
        def forward(self, x):
            def grad_fn(dy, variables):
                return dy * self.w, [dy * x]

            return x * self.w, grad_fn

    module, x = Linear(), _t(3, seed=1)
    w = _t(3, requires_grad=False, seed=5)
    gw = grad(lambda w: functional_call(module, {"w": w}, (x,)).sum())(w)
    torch.testing.assert_close(gw, x.detach())  # grad_fn's variable gradient, not lost


def test_under_torch_func_grad_the_captured_tensor_gets_none_and_second_order_flows():
    def loss(x, w):
        return _closure_function(w)(x).sum()

    x, w = _t(3, requires_grad=False, seed=1), _t(3, requires_grad=False)
    gx, gw = grad(loss, argnums=(0, 1))(x, w)
    torch.testing.assert_close(gx, 3 * torch.cos(w))
    torch.testing.assert_close(gw, torch.zeros(3, dtype=D))
    second = grad(lambda w: grad(loss)(x, w).sum())(w)
    torch.testing.assert_close(second, -3 * torch.sin(w))


def test_under_vmap_an_op_torch_cannot_run_is_refused_by_name():
    def loss(x, w):
        return _closure_function(w)(x).sum()

    x, w = _t(2, 3, requires_grad=False, seed=1), _t(2, 3, requires_grad=False)
    with pytest.raises(CustomGradientNotImplementedError, match="closure `w`, a tensor of a"):
        vmap(grad(loss, argnums=(0, 1)))(x, w)


def test_every_call_form_takes_the_option_and_copies_keep_it():
    class Holder:
        @custom_gradient(captured="constant")
        @staticmethod
        def static(x):
            return x * G, lambda dy: dy

        @custom_gradient(captured="constant")
        @classmethod
        def klass(cls, x):
            return x * G, lambda dy: dy

    for fn in (Holder.static, Holder().klass):
        x = _t(3, seed=1)
        gx, gg = torch.autograd.grad(fn(x).sum(), [x, G], allow_unused=True)
        assert gg is None
        torch.testing.assert_close(gx, torch.ones(3, dtype=D))
    wrapped = custom_gradient(f=_constant_global, captured="constant")
    assert wrapped.captured == "constant"
    assert custom_gradient(_constant_global).captured == "refuse"
    # Pickled by reference, as a function is: by the name it is defined under.
    for copied in (copy.deepcopy(wrapped), pickle.loads(pickle.dumps(_decorated_constant))):
        assert copied.captured == "constant"
        x = _t(3, seed=1)
        copied(x).sum().backward()  # not refused
        torch.testing.assert_close(x.grad, torch.ones(3, dtype=D))
    with pytest.raises(CustomGradientTypeError, match='takes "refuse" or "constant"'):
        custom_gradient(captured="detach")  # type: ignore[call-overload]


def _constant_global(x):
    return x * G, lambda dy: dy


@custom_gradient(captured="constant")
def _decorated_constant(x):
    return x * G, lambda dy: dy


def test_under_torch_compile_the_captured_tensor_gets_none():
    torch._dynamo.reset()
    w = _t(3)
    f = _closure_function(w)
    x = _t(3, seed=1)
    out = torch.compile(lambda x: f(x).sum(), backend="eager")(x)
    gx, gw = torch.autograd.grad(out, [x, w], allow_unused=True)
    assert gw is None
    torch.testing.assert_close(gx, 3 * torch.cos(w.detach()))


def test_decorations_of_one_code_keep_each_its_own_rule():
    # Decorated again per call (the `forward` idiom), the decorations of one code share their
    # plans' code and learned shapes (Note [decorated again]): each keeps its own rule.
    w = _t(3, seed=2)
    for _ in range(3):
        for rule in ("constant", "refuse", "constant"):
            x = _t(3, seed=1)
            if rule == "refuse":
                with pytest.raises(CustomGradientValueError):
                    _closure_function(w, rule)(x)
                continue
            y = _closure_function(w, rule)(x)
            gx, gw = torch.autograd.grad(y.sum(), [x, w], allow_unused=True)
            assert gw is None
            torch.testing.assert_close(gx, 3 * torch.cos(w.detach()))


def test_the_rule_is_fixed_at_decoration():
    """The call paths are made with the rule: setting it later is refused, naming the way."""
    fn = custom_gradient(_constant_global, captured="constant")
    with pytest.raises(AttributeError, match=r"fixed when it is decorated.*captured='refuse'\)"):
        fn.__tf_compat_grad__().captured = "refuse"
    assert fn.captured == fn.__tf_compat_grad__().captured == "constant"
