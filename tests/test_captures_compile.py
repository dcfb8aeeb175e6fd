"""Lost gradients under `torch.compile` (Note [lost gradients under compile]): what eager
autograd refuses is refused by the same message when the graph may break, and by the compile
error under `fullgraph=True`; what it keeps, the compiled call keeps, against plain autograd."""

import re

import messages
import pytest
import torch
from helpers import D
from messages import exactly

from tf_compat_grad import CustomGradientValueError, custom_gradient

pytestmark = pytest.mark.traced_compile

G = torch.randn(3, dtype=D, requires_grad=True)  # a global that needs a gradient
SLOW = pytest.mark.slow  # a second or more each; the closure case covers the same check


def _t(*shape, requires_grad=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=D, generator=gen).requires_grad_(requires_grad)


def _compiled(fn, fullgraph, **kwargs):
    """`fn(x, **kwargs).sum()` compiled afresh: Dynamo keeps what it compiled per code object,
    also the frames it compiled after a graph break."""
    torch._dynamo.reset()
    return torch.compile(lambda x: fn(x, **kwargs).sum(), backend="eager", fullgraph=fullgraph)


def _closure(w):
    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * 3

    return f


@custom_gradient
def _global(x):
    return x * G, lambda dy: dy * 3


@custom_gradient
def _scaled(x, scale=1.0):
    return x * scale, lambda dy: dy * 3


class _Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = _t(3, seed=2)  # a plain attribute, not a Parameter

    @custom_gradient
    def forward(self, x):
        return x * self.scale, lambda dy: dy * 3


def _refused_cases():
    """(the decorated function, the callable, its keyword arguments, what the message names,
    the leaf it names as lost)."""
    f = _closure(_t(3, seed=1) * 2)
    scale = _Scale()
    return [
        pytest.param(f, f, {}, "closure `w`", "the tensor of shape [3]", id="closure W = base*2"),
        pytest.param(_global, _global, {}, "global `G`", None, id="global", marks=SLOW),
        pytest.param(
            _scaled,
            _scaled,
            {"scale": _t(3, seed=3)},
            "keyword `scale`",
            None,
            id="keyword",
            marks=SLOW,
        ),
        pytest.param(
            _Scale.forward, scale, {}, "`self.scale`", None, id="attribute of self", marks=SLOW
        ),
    ]


@pytest.mark.parametrize(("f", "call", "kwargs", "what", "leaf"), _refused_cases())
def test_a_lost_gradient_is_refused_under_compile(dynamo, f, call, kwargs, what, leaf):
    """Under compile f's outputs had no graph, so these lost their gradient without a word."""
    message = messages.lost_gradient(f, what, leaf)
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        _compiled(call, fullgraph=False, **kwargs)(_t(3))
    with pytest.raises(Exception, match=re.escape(messages.lost_under_compile(f))):
        _compiled(call, fullgraph=True, **kwargs)(_t(3))


def test_a_captured_tensor_computed_from_the_input_keeps_the_custom_rule(dynamo):
    """`perturb_and_apply`: checked outside the graph, where its graph reaches only x."""
    x = _t(3)
    x_plus_u = x + torch.rand(3, dtype=D)

    @custom_gradient
    def perturb_and_apply(x):
        return torch.sin(x_plus_u), lambda dy: dy * 7

    (got,) = torch.autograd.grad(_compiled(perturb_and_apply, fullgraph=False)(x), x)
    torch.testing.assert_close(got, torch.full((3,), 7.0, dtype=D))
    with pytest.raises(Exception, match=re.escape(messages.lost_under_compile(perturb_and_apply))):
        _compiled(perturb_and_apply, fullgraph=True)(x)


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph breaks", "fullgraph"])
def test_no_gradient_to_lose_stays_in_one_graph(dynamo, fullgraph):
    """A closure tensor that needs no gradient, and one that requires grad but only grad_fn uses
    (a residual), keep the custom rule in one graph."""
    w, y = _t(3, requires_grad=False), _t(3, seed=1)

    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w * y

    x = _t(3)
    (got,) = torch.autograd.grad(_compiled(f, fullgraph)(x), x)
    torch.testing.assert_close(got, (w * y).detach())


class _Double(torch.nn.Module):
    def forward(self, weight):
        return weight * 2


class _Weighted(torch.nn.Module):
    """`x * self.weight`, whose grad_fn gives the weight its true gradient as a variable."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(_t(3, requires_grad=False, seed=4))

    @custom_gradient
    def forward(self, x):
        weight = self.weight

        def grad_fn(dy, variables=None):
            return dy * weight, [dy * x]

        return x * weight, grad_fn


def test_a_parametrized_weight_gets_the_chain_rule_under_compile(dynamo):
    """The originals got grad_fn's gradient of the weight as theirs: half the true one here.
    The call runs outside the graph, as in eager mode, against plain autograd of the math."""
    module = _Weighted()
    torch.nn.utils.parametrize.register_parametrization(module, "weight", _Double())
    original = module.parametrizations.weight.original
    x = _t(3)
    got = torch.autograd.grad(_compiled(module, fullgraph=False)(x), [original, x])
    true = torch.autograd.grad((x * module.weight).sum(), [original, x])
    torch.testing.assert_close(got, true)
    message = messages.parametrized_under_compile(_Weighted.forward)
    with pytest.raises(Exception, match=re.escape(message)):
        _compiled(module, fullgraph=True)(x)
