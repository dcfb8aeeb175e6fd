"""Differential tests of idioms the earlier rounds did not reach: activation checkpointing
nested and mixed with `recompute_grad`, saved-tensor hooks, anomaly mode and multithreading off
around a second derivative of the run-again route (Note [f run again]), Module hooks and
FSDP-like swaps of a Parameter's data between forward and backward, a grad_fn that returns a
view of an input, a grad_fn that maps `variables` by identity to what `self.weight` gives it
when the gradient is computed (`functional_call`'s slots under `torch.func` and
`torch.compile`, parametrized weights, built-in parametrizations), a gradient penalty through a
parametrized weight; and what the checker says for a gradient wrong by a relative 1e-4, for
example inputs without elements and at a jump of the gradient. Each call is compared with plain
autograd of the same math (or a hand-written Function of the same rule), or must be refused by
a library error that names f. `tests/test_idiom_mixes.py` and `tests/test_idiom_mixes2.py`
cover the idioms around one call and the state kept between calls."""

import contextlib
import re

import pytest
import torch
from helpers import D, where
from torch import nn
from torch.nn.utils import parametrize
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import CustomGradientNotImplementedError, custom_gradient, recompute_grad
from tf_compat_grad.testing import Example, run_checks


@custom_gradient
def sine_off_by_1e4(x):
    def grad(dy):
        return dy * torch.cos(x) * (1 + 1e-4)

    return torch.sin(x), grad


def _values(reason, first, second):
    """The two numbers the reason prints after the words `first` and `second`."""
    number = r"(-?[\d.]+(?:e[-+]?\d+)?)"
    found = re.search(rf"{first} {number}, {second} {number}", reason)
    assert found, reason
    return float(found[1]), float(found[2])


def test_a_gradient_wrong_by_a_tiny_relative_amount_prints_two_different_values():
    """The FAIL names the element and both values: printed with 4 digits, -0.1505 and -0.1505
    would read as the same number."""
    x = torch.tensor([0.3, 1.2, -0.7], dtype=D)
    report = run_checks(sine_off_by_1e4, Example(x), only=["numerical", "autodiff"])
    numerical, autodiff = report["numerical"], report["autodiff"]
    assert numerical.status.value == "FAIL"
    got, true = _values(numerical.reason, "custom", "true")  # times a random upstream
    assert got != true
    assert got == pytest.approx(true, rel=2e-4)
    assert _values(autodiff.reason, "custom", "autodiff") == (got, true)


@custom_gradient
def square(x):
    def grad(dy):
        return dy * 2 * x

    return x * x, grad


def test_example_inputs_without_elements_say_so_not_kinks():
    report = run_checks(square, Example(torch.zeros(0, 3, dtype=D)), only=["numerical"])
    row = report["numerical"]
    assert row.status.value == "WARN"
    assert "kink" not in row.reason
    assert "no elements" in row.reason, row.reason


@custom_gradient
def sign_rule_abs(x):
    def grad(dy):
        return dy * torch.sign(x)

    return x.abs(), grad


@pytest.mark.xfail(
    strict=True,
    reason="Note [kinks] finds a jump by one-sided differences that disagree; at a jump whose "
    "value at the point is the middle (sign(0) = 0) both sides are jump / h, so the element is "
    "compared and second_order FAILs a right rule, where numerical WARNs on that element",
)
def test_a_jump_of_the_gradient_at_the_example_is_not_a_second_order_failure():
    x = torch.tensor([0.0, 1.0, -1.0], dtype=D)
    report = run_checks(sign_rule_abs, Example(x), only=["numerical", "second_order"])
    assert report["numerical"].status.value == "WARN"
    assert report["second_order"].status.value != "FAIL", report["second_order"].reason


# --- a grad_fn that returns a view of an input ------------------------------------------------


def _returning(rule):
    @custom_gradient
    def doubled(x):
        def grad(dy):
            return rule(x)

        return x * 2, grad

    return doubled


@pytest.mark.xfail(
    strict=True,
    reason="a gradient that shares the input's storage (x[:], x.detach()) is handed to "
    "autograd as it is; AccumulateGrad keeps it as x.grad (a hand-written Function's too), so "
    "the next backward's accumulation into x.grad edits x itself (compiled, it is a new tensor)",
)
@pytest.mark.parametrize("rule", [lambda x: x[:], lambda x: x.detach()], ids=["view", "detach"])
def test_a_gradient_that_is_a_view_of_the_input_leaves_the_input_alone(rule):
    doubled = _returning(rule)
    x = torch.tensor([0.5, -1.0, 2.0], dtype=D, requires_grad=True)
    before = x.detach().clone()
    for _ in range(3):
        doubled(x).sum().backward()
    assert torch.equal(x.detach(), before)
    assert torch.equal(x.grad, 3 * before)


# --- checkpointing, recompute_grad and saved-tensor hooks around a second derivative ----------


@custom_gradient
def logsumexp(x):  # pure, grad_fn reads e and s: unrecorded, run again for create_graph
    e = torch.exp(x)
    s = e.sum()

    def grad(dy):
        return dy * e / s

    return torch.log(s), grad


def _plain_logsumexp(x):
    return torch.log(torch.exp(x).sum())


def _nested_checkpoints(fn):
    def inner(x):
        return checkpoint(fn, x * 1.5, use_reentrant=False) * 2

    return lambda x: checkpoint(inner, x, use_reentrant=False)


def _under(context):
    def wrap(fn):
        def call(x):
            with context():
                return fn(x)

        return call

    return wrap


def _hooks():
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t)


IDIOMS = {
    "checkpoint": lambda fn: lambda x: checkpoint(fn, x, use_reentrant=False),
    "nested checkpoint": _nested_checkpoints,
    "recompute_grad": lambda fn: recompute_grad(fn),
    "save_on_cpu": _under(torch.autograd.graph.save_on_cpu),
    "saved_tensors_hooks": _under(_hooks),
    "anomaly": _under(torch.autograd.detect_anomaly),
}


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
@pytest.mark.parametrize("idiom", IDIOMS)
def test_idioms_around_the_run_again_route_match_plain_autograd_to_the_second_order(idiom):
    wrap = IDIOMS[idiom]
    results = []
    for fn in (logsumexp, _plain_logsumexp):
        x = torch.tensor([0.5, -1.0, 2.0], dtype=D, requires_grad=True)
        with torch.autograd.set_multithreading_enabled(idiom != "anomaly"):
            y = wrap(fn)(x)
            (g,) = torch.autograd.grad(y, x, create_graph=True)
            (h,) = torch.autograd.grad(g.pow(3).sum(), x)
        results.append((y.detach(), g.detach(), h))
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want)


W_INIT = torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=D)


@custom_gradient
def _tanh_matmul(x, w):
    y = torch.tanh(x @ w)

    def grad(dy):
        dz = dy * (1 - y * y)
        return dz @ w.t(), x.t() @ dz

    return y, grad


def test_checkpoint_and_recompute_grad_nested_in_custom_gradient_and_around_it():
    """recompute_grad inside f (grad_fn differentiates it itself), and a decorated call inside
    a recompute_grad block inside a checkpoint, against the plain math."""
    w = nn.Parameter(W_INIT.clone())

    @custom_gradient
    def outer(x):
        y = recompute_grad(lambda t: _tanh_matmul(t, w) * 3)(x)

        def grad(dy, variables=None):
            with torch.enable_grad():
                again = x.detach().requires_grad_()
                gx, gw = torch.autograd.grad(torch.tanh(again @ w) * 3, (again, w), dy)
            return gx, [gw]

        return y, grad

    def around(x):
        return checkpoint(recompute_grad(lambda t: outer(t).sin()), x, use_reentrant=True)

    plain_w = W_INIT.clone().requires_grad_()
    x = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D, requires_grad=True)
    plain_x = x.detach().clone().requires_grad_()
    around(x).pow(2).sum().backward()
    (torch.tanh(plain_x @ plain_w) * 3).sin().pow(2).sum().backward()
    torch.testing.assert_close(x.grad, plain_x.grad)
    torch.testing.assert_close(w.grad, plain_w.grad)


# --- Module hooks and FSDP-like swaps of a Parameter's data ---------------------------------


class Layer(nn.Module):
    """`tanh(x @ w)` with grad_fn's rule (variables: w)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(W_INIT.clone())

    @custom_gradient
    def forward(self, x):
        y = torch.tanh(x @ self.w)

        def grad(dy, variables=None):
            dz = dy * (1 - y * y)
            return dz @ self.w.t(), [x.t() @ dz]

        return y, grad


class PlainLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(W_INIT.clone())

    def forward(self, x):
        return torch.tanh(x @ self.w)


def _with_hooks(layer, seen):
    layer.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    layer.register_forward_hook(lambda m, args, out: out * 3)
    layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
    layer.register_full_backward_hook(lambda m, gi, go: seen.append((gi[0], go[0])))
    layer.w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    return layer


def test_module_hooks_around_a_decorated_forward_match_plain_autograd():
    runs = []
    for layer in (Layer(), PlainLayer()):
        seen = []
        _with_hooks(layer, seen)
        x = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D, requires_grad=True)
        for _ in range(2):
            layer(x).pow(2).sum().backward()
        runs.append([x.grad, layer.w.grad, *seen[0], seen[1], *seen[2], seen[3]])
    for got, want in zip(*runs, strict=True):
        torch.testing.assert_close(got, want)


def test_a_parameter_resharded_between_forward_and_backward_matches_plain_autograd():
    """FSDP-like: the full weight is put into `.data` for forward, freed after it, and put back
    before backward; grad_fn reads the restored Parameter, as the plain graph does."""
    runs = []
    for layer in (Layer(), PlainLayer()):
        full = layer.w.detach().clone()
        x = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D, requires_grad=True)
        y = layer(x)
        layer.w.data = torch.empty(0, dtype=D)
        layer.w.data = full.clone()
        y.pow(2).sum().backward()
        runs.append((x.grad, layer.w.grad))
    for got, want in zip(*runs, strict=True):
        torch.testing.assert_close(got, want)


# --- variables mapped by identity under torch.func.functional_call ------------------------------


class TwoLayers(nn.Module):
    """`(x @ w1) @ w2`, two Parameters of one shape; grad_fn maps `variables` by identity, as
    portable TensorFlow code does (their order is a set's there: item 35)."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=D))
        self.w2 = nn.Parameter(torch.tensor([[1.5, 0.5], [-0.5, 1.0]], dtype=D))

    @custom_gradient
    def forward(self, x):
        h = x @ self.w1

        def grad(dy, variables):
            by_identity = {id(self.w1): x.t() @ (dy @ self.w2.t()), id(self.w2): h.t() @ dy}
            return dy @ self.w2.t() @ self.w1.t(), [by_identity[id(v)] for v in variables]

        return h @ self.w2, grad


def _two_layers_plain(params, x):
    return x @ params["w1"] @ params["w2"]


def _functional_loss(params, x):
    return torch.func.functional_call(TWO_LAYERS, params, (x,)).pow(2).sum()


TWO_LAYERS = TwoLayers()
TWO_LAYER_TRANSFORMS = {
    "grad": lambda loss, params, x: torch.func.grad(loss)(params, x),
    "vmap of grad": lambda loss, params, x: torch.func.vmap(
        torch.func.grad(loss), in_dims=(None, 0)
    )(params, torch.stack([x, x * 2])),
    "jacrev": lambda loss, params, x: torch.func.jacrev(loss)(params, x),
    "hessian": lambda loss, params, x: torch.func.hessian(loss)(params, x),
}


@pytest.mark.parametrize("transform", TWO_LAYER_TRANSFORMS)
def test_grad_fn_finds_the_slots_tensors_among_variables_by_identity_under_a_transform(transform):
    """`functional_call` puts other tensors in the module's slots; grad_fn reads `self.w1`
    and must find that very tensor among `variables`, under a transform as eagerly."""
    params = {"w1": torch.tensor([[1.0, 2.0], [0.5, -1.0]], dtype=D), "w2": W_INIT.clone()}
    x = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D)
    run = TWO_LAYER_TRANSFORMS[transform]
    got = run(_functional_loss, params, x)
    want = run(lambda p, t: _two_layers_plain(p, t).pow(2).sum(), params, x)
    torch.testing.assert_close(got, want)


class Symmetric(nn.Module):
    def forward(self, weight):
        return weight + weight.T


def _parametrized(module):
    parametrize.register_parametrization(module, "w1", Symmetric())
    return module


class PlainTwoLayers(TwoLayers):
    def forward(self, x):
        return x @ self.w1 @ self.w2


@pytest.mark.parametrize("cached", [False, True], ids=["", "parametrize.cached"])
def test_grad_fn_finds_a_parametrized_weight_among_variables_by_identity(cached):
    """grad_fn reads `self.w1`, a parametrized weight, when the gradient is computed: it must be
    the weight f read, which is the variable, not the parametrization computed again."""
    x = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D)
    runs = []
    for layers in (_parametrized(TwoLayers()), _parametrized(PlainTwoLayers())):
        inputs = x.clone().requires_grad_()
        with parametrize.cached() if cached else contextlib.nullcontext():
            layers(inputs).pow(2).sum().backward()
        runs.append((inputs.grad, layers.parametrizations.w1.original.grad, layers.w2.grad))
    for got, want in zip(*runs, strict=True):
        torch.testing.assert_close(got, want)


def _two_layer_grads(layers, call):
    inputs = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D, requires_grad=True)
    params = {"w1": (layers.w1 * 1.5).detach().requires_grad_(), "w2": W_INIT.clone()}
    params["w2"].requires_grad_()
    call(layers, params, inputs).pow(2).sum().backward()
    return inputs.grad, params["w1"].grad, params["w2"].grad


@pytest.mark.slow
def test_compiled_calls_find_slots_and_parametrized_weights_among_variables_by_identity(dynamo):
    """Under torch.compile, a method reading a parametrized weight leaves the graph and a call
    whose output reaches `functional_call`'s slots settles them outside it: grad_fn still finds
    `self.w1` among `variables`."""
    x = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D)
    runs = []
    for layers, wrap in (
        (_parametrized(TwoLayers()), lambda m: torch.compile(m, backend="aot_eager")),
        (_parametrized(PlainTwoLayers()), lambda m: m),
    ):
        inputs = x.clone().requires_grad_()
        wrap(layers)(inputs).pow(2).sum().backward()
        runs.append((inputs.grad, layers.parametrizations.w1.original.grad, layers.w2.grad))

    def slots(layers, params, inputs):
        return torch.func.functional_call(layers, params, (inputs,))

    compiled = torch.compile(slots, backend="aot_eager")
    runs += [_two_layer_grads(TwoLayers(), compiled), _two_layer_grads(PlainTwoLayers(), slots)]
    for got, want in zip(runs[0] + runs[2], runs[1] + runs[3], strict=True):
        torch.testing.assert_close(got, want)


class PositionalTwoLayers(TwoLayers):
    """TwoLayers whose grad_fn gives the variables' gradients in order of first use."""

    @custom_gradient
    def forward(self, x):
        w1, w2 = self.w1, self.w2
        h = x @ w1

        def grad(dy, variables):
            return dy @ w2.t() @ w1.t(), [x.t() @ (dy @ w2.t()), h.t() @ dy]

        return h @ w2, grad


def test_an_outer_backward_to_a_parametrized_weights_original_under_a_transform_is_refused():
    """A gradient penalty through a module with a parametrized weight: under torch.func, f's
    variable is the original the weight is computed from, so grad_fn's gradient of the weight
    would reach it without the parametrization's chain rule. The input gradient is right."""
    layers, plain = _parametrized(PositionalTwoLayers()), _parametrized(PlainTwoLayers())
    x = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=D)
    penalty = torch.func.grad(lambda t: layers(t).pow(2).sum())(x)
    want = torch.func.grad(lambda t: plain(t).pow(2).sum())(x)
    torch.testing.assert_close(penalty, want)
    with pytest.raises(CustomGradientNotImplementedError, match="parametrization") as info:
        penalty.pow(2).sum().backward()
    message = str(info.value)
    assert where(PositionalTwoLayers.forward) in message
    assert "`self.parametrizations.w1.original`" in message, message


class Projection(nn.Module):
    """`x @ W.T` of a Linear whose weight a built-in parametrization computes; grad_fn gives a
    gradient only to the variable that is `self.linear.weight`."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3, dtype=D)

    @custom_gradient
    def forward(self, x):
        def grad(dy, variables):
            weight = self.linear.weight
            return dy @ weight, [dy.t() @ x if v is weight else None for v in variables]

        return x @ self.linear.weight.t(), grad


class PlainProjection(Projection):
    def forward(self, x):
        return x @ self.linear.weight.t()


@pytest.mark.parametrize("parametrization", ["weight_norm", "spectral_norm", "orthogonal"])
def test_built_in_parametrizations_give_the_originals_grad_fns_gradient(parametrization):
    """The originals get grad_fn's gradient through the parametrization (they got none when
    `self.linear.weight`, computed again in backward, was not the variable); spectral_norm's
    power iteration runs once per forward, as in plain autograd."""
    x = torch.tensor([[0.3, -0.7, 1.0], [1.1, 0.2, -0.4]], dtype=D)
    decorated, plain = Projection(), PlainProjection()
    plain.load_state_dict(decorated.state_dict())
    runs = []
    for module in (decorated, plain):
        getattr(nn.utils.parametrizations, parametrization)(module.linear)
    plain.load_state_dict(decorated.state_dict())
    for module in (decorated, plain):
        inputs = x.clone().requires_grad_()
        module(inputs).pow(2).sum().backward()
        grads = [p.grad for p in module.parameters()]
        runs.append([inputs.grad, *grads, *module.buffers()])
    for got, want in zip(*runs, strict=True):
        torch.testing.assert_close(got, want)
