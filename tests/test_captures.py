"""Tensors that f's outputs depend on without being its arguments or variables (Note [lost
gradients]): each gradient is given (a tensor in a Parameter's place is that Parameter) or the
call is refused, compared with plain autograd of the same math without the decorator."""

import contextlib
import copy

import messages
import pytest
import torch
import torch.nn.functional as F
from helpers import D
from messages import exactly
from torch.func import functional_call, grad, stack_module_state, vmap
from torch.nn.utils import parametrizations, parametrize

from tf_compat_grad import CustomGradientValueError, custom_gradient

G = torch.randn(3, dtype=D, requires_grad=True)  # a global that needs a gradient


def _t(*shape, requires_grad=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=D, generator=gen).requires_grad_(requires_grad)


def _refused(f, what, *args, computed_from=None, call=None, **kwargs):
    """f(*args, **kwargs), or `call` of them, is refused: f's output depends on `what`."""
    message = messages.lost_gradient(f, what, computed_from)
    with pytest.raises(CustomGradientValueError, match=exactly(message)):
        (call or f)(*args, **kwargs)


# --- refused: a gradient would be lost -------------------------------------------------------


@pytest.mark.parametrize("x_needs", [True, False], ids=["x-needs-grad", "x-does-not"])
def test_closure_tensor_computed_from_a_leaf_is_refused(x_needs):
    # With x needing no gradient, f's own autodiff used to give `base` a gradient that
    # ignored grad_fn: two rules for one function. Both are refused.
    base = _t(3)
    w = base * 2

    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w

    _refused(
        f, "closure `w`", _t(3, requires_grad=x_needs), computed_from="the tensor of shape [3]"
    )
    w = w.detach()  # TensorFlow's numbers, explicitly
    x = _t(3)
    torch.testing.assert_close(torch.autograd.grad(f(x).sum(), x)[0], w)


def test_global_tensor_is_refused():
    @custom_gradient
    def f(x):
        return x * G, lambda dy: dy * G

    _refused(f, "global `G`", _t(3))


def test_keyword_tensor_is_refused_and_a_number_by_keyword_is_not():
    @custom_gradient
    def scaled(x, scale=1.0):
        return x * scale, lambda dy: dy * scale

    _refused(scaled, "keyword `scale`", _t(3), scale=_t(3, seed=1))
    x = _t(3)
    scaled(x, scale=2.0).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=D))


def test_attribute_of_self_that_is_a_plain_tensor_is_refused():
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = _t(3)  # a plain attribute, not a Parameter

        @custom_gradient
        def forward(self, x):
            return x * self.scale, lambda dy: dy * self.scale

    _refused(Scale.forward, "`self.scale`", _t(3), call=Scale())


def test_attribute_of_another_object_is_refused():
    class Holder:
        pass

    holder = Holder()
    holder.w = _t(3)

    @custom_gradient
    def f(x):
        return x * holder.w, lambda dy: dy * holder.w

    _refused(f, "closure `holder.w`", _t(3))


@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated")
@pytest.mark.parametrize(
    ("norm", "leaf"), [("weight_norm", "`self.weight_v`"), ("spectral_norm", "`self.weight_orig`")]
)
def test_hook_computed_weight_is_refused(norm, leaf):
    # The old hook-based norms compute `weight` as a plain attribute before forward runs:
    # its originals would get no gradient.
    m = Linear(3, 4)
    getattr(torch.nn.utils, norm)(m)
    _refused(Linear.forward, "`self.weight`", _t(2, 3), computed_from=leaf, call=m)


def test_tensor_sharing_a_leaf_with_the_input_but_not_computed_from_it_is_refused():
    a = _t(3)
    c = a * 5  # reaches a, but not through x: that part of a's gradient would be lost

    @custom_gradient
    def f(x):
        return x * c, lambda dy: dy * c

    _refused(f, "closure `c`", a * 3, computed_from="the tensor of shape [3]")


def test_closure_tensor_whose_requires_grad_flips_after_a_plan_is_made_is_refused():
    w = _t(3, requires_grad=False)

    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w

    for _ in range(3):  # the plan is made and used while w needs no gradient
        f(_t(3)).sum().backward()
    w.requires_grad_()
    _refused(f, "closure `w`", _t(3))


def test_closure_over_a_tensor_of_a_torch_func_grad_level_is_refused():
    def loss(w, x):
        @custom_gradient
        def f(x):
            return x * w, lambda dy: dy * w

        return f(x).sum()

    with pytest.raises(CustomGradientValueError, match="depends on closure `w`"):
        grad(loss)(_t(3, requires_grad=False), _t(3, requires_grad=False))


# --- kept: no gradient is lost ---------------------------------------------------------------


def test_residual_used_only_by_grad_fn_keeps_its_outer_gradient():
    # An outer variable of a higher-order derivative: its gradient flows through grad_fn's ops.
    y = _t(3, seed=1)

    @custom_gradient
    def f(x):
        return x * 2, lambda dy: dy * y

    x = _t(3)
    (g,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    torch.testing.assert_close(torch.autograd.grad(g.sum(), y)[0], torch.ones(3, dtype=D))


@pytest.mark.slow  # grad of grad through the transform node: over a second
def test_outer_variable_used_only_by_grad_fn_under_torch_func():
    # JAX's closed-over tracer: the outer grad differentiates grad_fn's result through y.
    x0 = _t(3, requires_grad=False)

    def inner(y):
        @custom_gradient
        def f(x):
            return x * 2, lambda dy: dy * y

        return grad(lambda x: f(x).sum())(x0)

    got = grad(lambda y: (inner(y) ** 2).sum())(_t(3, requires_grad=False, seed=1))
    torch.testing.assert_close(got, 2 * _t(3, requires_grad=False, seed=1))


def test_captured_tensor_computed_from_the_input_keeps_the_custom_rule():
    # tensorflow/compression's perturb_and_apply: f runs on x + u and grad_fn gives x's gradient.
    x = _t(3)
    x_plus_u = x + torch.rand(3, dtype=D)

    @custom_gradient
    def perturb_and_apply(x):
        return torch.sin(x_plus_u), lambda dy: dy * 7

    perturb_and_apply(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 7.0, dtype=D))


def test_closure_tensor_that_needs_no_gradient_is_a_constant():
    w = _t(3, requires_grad=False)

    @custom_gradient
    def f(x):
        return x * w, lambda dy: dy * w

    x = _t(3)
    f(x).sum().backward()
    torch.testing.assert_close(x.grad, w)


# --- given: a tensor in a Parameter's place is that Parameter --------------------------------


class Linear(torch.nn.Module):
    """A linear layer whose decorated forward reads `self.weight` and `self.bias` and gives
    their true gradients as variables."""

    def __init__(self, n_in, n_out):
        super().__init__()
        gen = torch.Generator().manual_seed(n_in * 10 + n_out)
        self.weight = torch.nn.Parameter(torch.randn(n_out, n_in, dtype=D, generator=gen))
        self.bias = torch.nn.Parameter(torch.randn(n_out, dtype=D, generator=gen))

    @custom_gradient
    def forward(self, x):
        w, b = self.weight, self.bias

        def grad_fn(dy, variables=None):
            by_id = {id(w): dy.t() @ x, id(b): dy.sum(0)}
            return dy @ w, [by_id[id(v)] for v in variables]

        return F.linear(x, w, b), grad_fn


def _plain(m, x):
    """The same layer's math without the decorator."""
    return F.linear(x, m.weight, m.bias)


def test_functional_call_gives_the_tensors_in_parameter_slots_their_true_gradient():
    m = Linear(3, 4)
    params = {"weight": _t(4, 3, seed=1), "bias": _t(4, seed=2)}
    x = _t(2, 3, seed=3)
    loss = (functional_call(m, params, (x,)) ** 2).sum()
    got = torch.autograd.grad(loss, [params["weight"], params["bias"], x])
    want = torch.autograd.grad(
        (F.linear(x, params["weight"], params["bias"]) ** 2).sum(),
        [params["weight"], params["bias"], x],
    )
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def _loss(m, params, x):
    return (functional_call(m, params, (x,)) ** 2).sum()


def _plain_loss(params, x):
    return (F.linear(x, params["weight"], params["bias"]) ** 2).sum()


def test_torch_func_grad_over_functional_call():
    m = Linear(3, 4)
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = _t(2, 3, requires_grad=False, seed=3)
    got = grad(lambda p: _loss(m, p, x))(params)
    want = grad(_plain_loss)(params, x)
    for name in params:
        torch.testing.assert_close(got[name], want[name])


def test_per_sample_gradients_with_vmap_of_grad():
    m = Linear(3, 4)
    params = {k: v.detach() for k, v in m.named_parameters()}
    xs = _t(5, 1, 3, requires_grad=False, seed=4)
    got = vmap(grad(lambda p, x: _loss(m, p, x)), in_dims=(None, 0))(params, xs)
    want = vmap(grad(_plain_loss), in_dims=(None, 0))(params, xs)
    for name in params:
        torch.testing.assert_close(got[name], want[name])


def test_ensembling_with_stack_module_state():
    models = [Linear(3, 4) for _ in range(3)]
    for k, model in enumerate(models):
        with torch.no_grad():
            model.weight.add_(k)
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    x = _t(2, 3, requires_grad=False, seed=5)

    def loss(p, b):
        return (functional_call(base, (p, b), (x,)) ** 2).sum()

    got = vmap(grad(loss))(params, buffers)
    want = vmap(grad(lambda p, b: _plain_loss(p, x)))(params, buffers)
    for name in params:
        torch.testing.assert_close(got[name], want[name])
    outputs = vmap(lambda p, b: functional_call(base, (p, b), (x,)))(params, buffers)
    torch.testing.assert_close(outputs, torch.stack([_plain(model, x) for model in models]))


class Double(torch.nn.Module):
    def forward(self, w):
        return w * 2


PARAMETRIZATIONS = {
    "parametrize": lambda m: parametrize.register_parametrization(m, "weight", Double()),
    "weight_norm": parametrizations.weight_norm,
    "spectral_norm": lambda m: parametrizations.spectral_norm(m.eval()),
    "orthogonal": parametrizations.orthogonal,
}


@pytest.mark.parametrize("cached", [False, True], ids=["", "in-cached"])
@pytest.mark.parametrize("kind", list(PARAMETRIZATIONS))
def test_parametrized_weight_gives_its_originals_the_chain_rule(kind, cached):
    m = Linear(3, 4)
    PARAMETRIZATIONS[kind](m)
    reference = copy.deepcopy(m)
    x = _t(2, 3, seed=6)
    with parametrize.cached() if cached else contextlib.nullcontext():
        (m(x) ** 2).sum().backward()
    (_plain(reference, x) ** 2).sum().backward()
    for (name, got), want in zip(m.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, msg=name)
    assert parametrize._cache == {}  # the library's use of the cache leaves it as it was


def _layer_of(module):
    """A decorated function (no method) reading `module`'s weight and bias from its closure."""

    @custom_gradient
    def layer(x):
        w, b = module.weight, module.bias

        def grad_fn(dy, variables=None):
            return dy @ w, [dy.t() @ x if v.dim() == 2 else dy.sum(0) for v in variables]

        return F.linear(x, w, b), grad_fn

    return layer


def test_parametrized_weight_of_a_module_in_the_closure_on_every_call_of_a_plan():
    m = Linear(3, 4)
    parametrize.register_parametrization(m, "weight", Double())
    reference = copy.deepcopy(m)
    layer = _layer_of(m)
    x = _t(2, 3, seed=7)
    for _ in range(3):  # the first call makes the plan; the others run it
        m.zero_grad()
        reference.zero_grad()
        (layer(x) ** 2).sum().backward()
        (_plain(reference, x) ** 2).sum().backward()
        for got, want in zip(m.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(got.grad, want.grad)


def test_functional_call_of_a_module_whose_submodule_a_decorated_function_reads():
    inner = Linear(3, 4)
    layer = _layer_of(inner)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return layer(x)

    weight, x = _t(4, 3, seed=8), _t(2, 3, seed=9)
    (functional_call(Wrapper(), {"inner.weight": weight}, (x,)) ** 2).sum().backward()
    reference = weight.detach().requires_grad_()
    (F.linear(x.detach(), reference, inner.bias) ** 2).sum().backward()
    torch.testing.assert_close(weight.grad, reference.grad)


class Shifted(torch.nn.Module):
    """`x * w + shift` with a buffer: under `stack_module_state`, both are the transform's."""

    def __init__(self, k):
        super().__init__()
        self.w = torch.nn.Parameter(_t(3, requires_grad=False, seed=k))
        self.register_buffer("shift", _t(3, requires_grad=False, seed=10 + k))

    @custom_gradient
    def forward(self, x):
        w, shift = self.w, self.shift
        return x * w + shift, lambda dy, variables=None: (dy * w, [dy * x for _ in variables])


def test_ensembling_a_module_with_a_buffer():
    models = [Shifted(k) for k in range(3)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    x = _t(3, requires_grad=False, seed=20)

    def loss(p, b):
        return (functional_call(base, (p, b), (x,)) ** 2).sum()

    def plain(p, b):
        return ((x * p["w"] + b["shift"]) ** 2).sum()

    got, want = vmap(grad(loss))(params, buffers), vmap(grad(plain))(params, buffers)
    torch.testing.assert_close(got["w"], want["w"])
