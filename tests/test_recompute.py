"""`recompute_grad` and `grad_pass_through` (items 48-60).

Every recompute test compares against plain autograd of the same f: the recomputed block must be
the same function with the same derivatives, only cheaper in memory.

Item numbers refer to docs/tensorflow_semantics.md.
"""

import functools
import weakref
from collections.abc import Callable
from typing import Any

import messages
import pytest
import torch
import torch._dynamo
from helpers import D
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from messages import exactly
from torch import nn
from torch._dynamo.utils import counters
from torch.nn import functional as F

from tf_compat_grad import grad_pass_through, recompute_grad

X = torch.tensor([-1.5, -0.3, 0.4, 1.0, 2.2], dtype=D)
W = torch.tensor([0.5, -2.0, 1.5, 3.0, -0.7], dtype=D)


def _leaf(t: torch.Tensor = X) -> torch.Tensor:
    return t.detach().clone().requires_grad_()


def sin_times(x):
    """sin(x) * x."""
    return torch.sin(x) * x


def tanh_chain(x):
    """Two nonlinear layers."""
    return torch.tanh(torch.exp(0.3 * x) * x)


def softplus_square(x):
    """softplus(x) ** 2."""
    return torch.nn.functional.softplus(x) ** 2


BLOCKS = [sin_times, tanh_chain, softplus_square]


# --- wrapping (item 48) ------------------------------------------------------------------------


@pytest.mark.parametrize("wrap", [recompute_grad, grad_pass_through])
def test_wrapper_keeps_function_identity(wrap):
    g = wrap(sin_times)
    assert g.__wrapped__ is sin_times
    assert g.__name__ == "sin_times"
    assert g.__doc__ == "sin(x) * x."


# --- values, first and second derivatives against plain autograd ------------------------------


@pytest.mark.parametrize("f", BLOCKS)
def test_value_and_gradient_equal_plain_autograd(f):
    x, x_plain = _leaf(), _leaf()
    y = recompute_grad(f)(x)
    y_plain = f(x_plain)
    torch.testing.assert_close(y, y_plain, rtol=0, atol=0)
    (g,) = torch.autograd.grad(y, x, W)
    (g_plain,) = torch.autograd.grad(y_plain, x_plain, W)
    torch.testing.assert_close(g, g_plain)


@pytest.mark.parametrize("f", BLOCKS)
def test_second_derivative_with_upstream_depending_on_x(f):
    # TF raises NotImplementedError here (item 54); the port recomputes with create_graph.
    x, x_plain = _leaf(), _leaf()
    loss = (recompute_grad(f)(x) ** 2).sum()
    loss_plain = (f(x_plain) ** 2).sum()
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    (g_plain,) = torch.autograd.grad(loss_plain, x_plain, create_graph=True)
    torch.testing.assert_close(g, g_plain)
    (gg,) = torch.autograd.grad(g.sum(), x)
    (gg_plain,) = torch.autograd.grad(g_plain.sum(), x_plain)
    torch.testing.assert_close(gg, gg_plain)


@pytest.mark.parametrize("f", BLOCKS)
def test_gradcheck_and_gradgradcheck(f):
    block = recompute_grad(f)
    assert torch.autograd.gradcheck(block, (_leaf(),))
    assert torch.autograd.gradgradcheck(block, (_leaf(),))


# --- f runs once forward, once per backward (item 49) -----------------------------------------


def test_call_counts_forward_once_then_once_per_backward():
    calls = []

    def f(x):
        calls.append(torch.is_grad_enabled())
        return torch.sin(x) * x

    x = _leaf()
    y = recompute_grad(f)(x).sum()
    assert calls == [False]
    y.backward(retain_graph=True)
    assert calls == [False, True]
    first = x.grad.clone()
    y.backward()
    assert calls == [False, True, True]
    torch.testing.assert_close(x.grad, 2 * first)


def test_intermediates_are_freed_after_forward():
    refs = []

    def f(x):
        h = torch.exp(x)
        refs.append(weakref.ref(h))
        return h * h

    x = _leaf()
    y_plain = f(x)
    assert refs[0]() is not None  # the control: plain autograd keeps h for mul's backward
    y = recompute_grad(f)(x)
    assert len(refs) == 2
    assert refs[1]() is None
    torch.testing.assert_close(y, y_plain.detach())
    (g,) = torch.autograd.grad(y, x, W)
    (g_plain,) = torch.autograd.grad(y_plain, x, W)
    torch.testing.assert_close(g, g_plain)


def test_second_order_recomputes_instead_of_keeping_the_first_backward():
    # With create_graph the gradients are a recomputed block of their own: the first backward
    # keeps none of f's intermediates, and the second backward runs f once more.
    calls, refs = [], []

    def f(x):
        calls.append(torch.is_grad_enabled())
        h = torch.exp(x)
        refs.append(weakref.ref(h))
        return torch.sin(h) * x

    x, x_plain = _leaf(), _leaf()
    (g,) = torch.autograd.grad((recompute_grad(f)(x) * W).sum(), x, create_graph=True)
    assert calls == [False, True]
    assert all(ref() is None for ref in refs)
    (gg,) = torch.autograd.grad(g.sum(), x)
    assert calls == [False, True, True]
    (g_plain,) = torch.autograd.grad((f(x_plain) * W).sum(), x_plain, create_graph=True)
    (gg_plain,) = torch.autograd.grad(g_plain.sum(), x_plain)
    torch.testing.assert_close(g, g_plain)
    torch.testing.assert_close(gg, gg_plain)


# --- random draws -------------------------------------------------------------------------------


def dropout_like(x):
    return x * (torch.rand_like(x) > 0.5) * 2.0


def _dropout_run(fn: Callable[..., Any], create_graph: bool = False):
    x = _leaf(torch.linspace(-1, 1, 64, dtype=D))
    torch.manual_seed(1234)
    y = fn(x)
    state_after_forward = torch.get_rng_state()
    (g,) = torch.autograd.grad(y, x, torch.ones_like(y), create_graph=create_graph)
    return y.detach(), g.detach(), state_after_forward, torch.get_rng_state()


def test_dropout_mask_is_redrawn_identically():
    y, g, after_forward, after_backward = _dropout_run(recompute_grad(dropout_like))
    y_plain, g_plain, after_plain, _ = _dropout_run(dropout_like)
    assert 0 < (g_plain == 0).sum() < g_plain.numel()  # the mask really drops some entries
    torch.testing.assert_close(y, y_plain, rtol=0, atol=0)
    torch.testing.assert_close(g, g_plain, rtol=0, atol=0)
    assert torch.equal(after_forward, after_plain)
    assert torch.equal(after_backward, after_plain)  # the recompute does not advance the RNG


def test_dropout_gradient_same_with_create_graph():
    _, g, _, _ = _dropout_run(recompute_grad(dropout_like))
    _, g_graph, _, after = _dropout_run(recompute_grad(dropout_like), create_graph=True)
    _, _, after_plain, _ = _dropout_run(dropout_like)
    torch.testing.assert_close(g_graph, g, rtol=0, atol=0)
    assert torch.equal(after, after_plain)


# --- inputs: unused, Python numbers, kwargs, Parameters (items 50-53) -------------------------


def test_unused_input_gets_zeros_not_none():
    x, z = _leaf(), _leaf(W)
    y = recompute_grad(lambda x, z: x * 2)(x, z)
    gx, gz = torch.autograd.grad(y.sum(), (x, z), allow_unused=True)
    torch.testing.assert_close(gx, torch.full_like(X, 2.0))
    assert gz is not None
    torch.testing.assert_close(gz, torch.zeros_like(W), rtol=0, atol=0)


def test_python_float_stays_float_on_recompute():
    # TF turns it into a float32 tensor (item 53), which breaks float64 code.
    seen = []

    def scale(x, s):
        seen.append(type(s))
        return x * s

    x = _leaf()
    y = recompute_grad(scale)(x, 1.5)
    (g,) = torch.autograd.grad(y.sum(), x)
    assert seen == [float, float]
    assert g.dtype == D
    torch.testing.assert_close(g, torch.full_like(X, 1.5))


def test_kwargs_reach_both_runs_and_get_no_gradient():
    seen = []

    def f(x, *, scale):
        seen.append(scale)
        return torch.sin(x) * scale

    x, s = _leaf(), _leaf(W)
    y = recompute_grad(f)(x, scale=s)
    gx, gs = torch.autograd.grad(y.sum(), (x, s), allow_unused=True)
    assert len(seen) == 2
    assert all(t is s for t in seen)
    torch.testing.assert_close(gx, torch.cos(X) * W)
    assert gs is None


def test_parameter_in_closure_gets_gradient():
    p = nn.Parameter(W.clone())
    x = _leaf()
    y = recompute_grad(lambda x: torch.sin(x * p))(x)
    gx, gp = torch.autograd.grad(y.sum(), (x, p))
    gx_plain, gp_plain = torch.autograd.grad(torch.sin(x * p).sum(), (x, p))
    torch.testing.assert_close(gx, gx_plain)
    torch.testing.assert_close(gp, gp_plain)


class Net(nn.Module):
    def __init__(self, recompute: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(5, 5, dtype=D)
        self.out = nn.Linear(5, 1, dtype=D)
        self.recompute = recompute

    def block(self, x):
        return torch.tanh(self.lin(x))

    def forward(self, x):
        h = recompute_grad(self.block)(x) if self.recompute else self.block(x)
        return self.out(h)


def test_module_parameters_read_in_block_get_gradients():
    net, plain = Net(recompute=True), Net(recompute=False)
    x = torch.stack([X, W])
    net(x).sum().backward()
    plain(x).sum().backward()
    for (name, p), q in zip(net.named_parameters(), plain.parameters(), strict=True):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, msg=name)


# --- inputs that share a graph -------------------------------------------------------------------


def shared(a, b):
    return a * torch.sin(b) + b * b


# How the block's two inputs are made from one leaf x: the same tensor twice, or connected.
CONNECTED = {
    "same": lambda x: (x, x),
    "computed": lambda x: (x, x * 3.0),
    "both computed": lambda x: (torch.exp(x), x * 3.0),
    "view": lambda x: (x, x.view(5)),
}


def _connected(make: Callable[..., Any], as_list: bool, x: torch.Tensor) -> torch.Tensor:
    """The recomputed `shared` on inputs made from x, as two arguments or one list."""
    a, b = make(x)
    if as_list:
        return recompute_grad(lambda ab: shared(*ab))([a, b])
    return recompute_grad(shared)(a, b)


@pytest.mark.parametrize("as_list", [False, True], ids=["arguments", "list"])
@pytest.mark.parametrize("make", CONNECTED.values(), ids=CONNECTED.keys())
def test_connected_inputs_gradient_equals_plain_autograd(make, as_list):
    x, x_plain = _leaf(), _leaf()
    y = _connected(make, as_list, x)
    y_plain = shared(*make(x_plain))
    torch.testing.assert_close(y, y_plain, rtol=0, atol=0)
    (g_plain,) = torch.autograd.grad(y_plain, x_plain, W)
    for _ in range(2):  # a second backward through the retained graph gives the same
        (g,) = torch.autograd.grad(y, x, W, retain_graph=True)
        torch.testing.assert_close(g, g_plain)


@pytest.mark.parametrize("as_list", [False, True], ids=["arguments", "list"])
@pytest.mark.parametrize("make", CONNECTED.values(), ids=CONNECTED.keys())
def test_connected_inputs_second_derivative_equals_plain_autograd(make, as_list):
    x, x_plain = _leaf(), _leaf()
    loss = (_connected(make, as_list, x) ** 2).sum()
    loss_plain = (shared(*make(x_plain)) ** 2).sum()
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    (g_plain,) = torch.autograd.grad(loss_plain, x_plain, create_graph=True)
    torch.testing.assert_close(g, g_plain)
    (gg,) = torch.autograd.grad((g * W).sum(), x)
    (gg_plain,) = torch.autograd.grad((g_plain * W).sum(), x_plain)
    torch.testing.assert_close(gg, gg_plain)


@pytest.mark.parametrize("create_graph", [False, True])
def test_input_also_used_outside_the_block(create_graph):
    # The loss reaches h both through the block and directly: both paths need h's node.
    def loss_of(x, block):
        h = torch.exp(x) * W
        return (block(x, h) * W).sum() + (h * h).sum() + torch.cos(h).sum()

    x, x_plain = _leaf(), _leaf()
    (g,) = torch.autograd.grad(loss_of(x, recompute_grad(shared)), x, create_graph=create_graph)
    (g_plain,) = torch.autograd.grad(loss_of(x_plain, shared), x_plain, create_graph=True)
    torch.testing.assert_close(g, g_plain)
    if create_graph:
        (gg,) = torch.autograd.grad(g.sum(), x)
        (gg_plain,) = torch.autograd.grad(g_plain.sum(), x_plain)
        torch.testing.assert_close(gg, gg_plain)


def test_parameter_read_in_block_and_behind_an_input():
    # p is a variable of the block and also made the block's input: its gradient is the sum of
    # both paths, counted once each, at first and second order.
    p = nn.Parameter(W.clone())

    def f(h):
        return torch.sin(h * p) * h

    def loss_of(block):
        return (block(torch.tanh(x * p)) ** 2).sum()

    x = _leaf()
    g = torch.autograd.grad(loss_of(recompute_grad(f)), (x, p), create_graph=True)
    g_plain = torch.autograd.grad(loss_of(f), (x, p), create_graph=True)
    torch.testing.assert_close(g, g_plain)
    gg = torch.autograd.grad(sum(t.sum() for t in g), (x, p))
    gg_plain = torch.autograd.grad(sum(t.sum() for t in g_plain), (x, p))
    torch.testing.assert_close(gg, gg_plain)


@pytest.mark.parametrize(
    "make", [lambda t: nn.Parameter(t.clone()), _leaf], ids=["Parameter", "leaf"]
)
def test_input_also_read_directly_by_the_block(make):
    # f gets w as an argument and reads it from its closure too: both reads count.
    w = make(W)

    def f(a, v):
        return torch.sin(a * w) * v * w

    x = _leaf()
    loss = (recompute_grad(f)(x, w) ** 2).sum()
    loss_plain = (f(x, w) ** 2).sum()
    g = torch.autograd.grad(loss, (x, w), create_graph=True)
    g_plain = torch.autograd.grad(loss_plain, (x, w), create_graph=True)
    torch.testing.assert_close(g, g_plain)
    gg = torch.autograd.grad(sum((t * W).sum() for t in g), (x, w))
    gg_plain = torch.autograd.grad(sum((t * W).sum() for t in g_plain), (x, w))
    torch.testing.assert_close(gg, gg_plain)


# Random input graphs: leaves, a Parameter the block reads, and tensors made from them by steps
# that share subexpressions, take views or cut the graph; the block gets some of them (the same
# one in several slots, as arguments or in one list) and the loss uses some of them directly too.
GRAPH_SETTINGS = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
STEPS = ["mul", "add", "sin", "scale", "transpose", "slice", "flatten", "unsqueeze", "detach"]
PICK = st.integers(0, 63)  # an index into the tensors made so far, modulo their number


def _step(kind: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if kind == "mul":
        return a * b if a.shape == b.shape else a * b.sum()
    if kind == "add":
        return a + b if a.shape == b.shape else a + torch.tanh(b).mean()
    if kind == "sin":
        return torch.sin(a)
    if kind == "scale":
        return a * 1.5
    if kind == "transpose":
        return a.transpose(0, -1)
    if kind == "slice":
        return a[..., 1:] if a.shape[-1] > 1 else a[..., :]
    if kind == "flatten":
        return a.reshape(-1)
    if kind == "unsqueeze":
        return a.unsqueeze(0) if a.dim() < 4 else a.squeeze(0)
    return a.detach()


def _graph_block(p: nn.Parameter) -> Callable[..., Any]:
    def block(*args):
        *ts, scale = args
        acc = torch.tanh(p).sum() * scale
        for i, t in enumerate(ts):
            acc = acc + torch.sin(t * (i + 1)).sum() * torch.tanh(ts[i - 1]).mean()
        return acc, ts[0] * torch.cos(ts[-1] * p[0]).sum()

    return block


@st.composite
def input_graphs(draw):
    return {
        "leaves": draw(st.integers(1, 3)),
        "steps": draw(st.lists(st.tuples(st.sampled_from(STEPS), PICK, PICK), max_size=6)),
        "slots": draw(st.lists(PICK, min_size=1, max_size=4)),
        "outside": draw(st.lists(PICK, max_size=2)),
        "as_list": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


def _graph_gradients(graph, recompute: bool) -> list[list[torch.Tensor]]:
    """First-order gradients of the graph's loss in its leaves and Parameter, twice through a
    retained graph and once recording, then the second-order ones."""
    generator = torch.Generator().manual_seed(graph["seed"])
    p = nn.Parameter(torch.rand(3, dtype=D, generator=generator) + 0.5)
    leaves = [
        torch.randn(2, 3, dtype=D, generator=generator).requires_grad_()
        for _ in range(graph["leaves"])
    ]
    made: list[torch.Tensor] = [*leaves, p, p * 2.0]
    for kind, i, j in graph["steps"]:
        made.append(_step(kind, made[i % len(made)], made[j % len(made)]))
    slots = [made[i % len(made)] for i in graph["slots"]]
    block = _graph_block(p)
    if recompute and graph["as_list"]:
        y, z = recompute_grad(lambda ts, scale: block(*ts, scale))(slots, 0.5)
    else:
        y, z = (recompute_grad(block) if recompute else block)(*slots, 0.5)
    loss = y**2 + torch.sin(z).sum()
    for i in graph["outside"]:
        loss = loss + (torch.cos(made[i % len(made)]) ** 2).sum()
    sources = [*leaves, p]

    def grad(total: torch.Tensor, **options: bool) -> list[torch.Tensor]:
        if not total.requires_grad:  # only constants: no node reaches a source
            return [torch.zeros_like(s) for s in sources]
        return list(
            torch.autograd.grad(
                total, sources, allow_unused=True, materialize_grads=True, **options
            )
        )

    first = [grad(loss, retain_graph=True) for _ in range(2)]
    g = grad(loss, create_graph=True)
    second = grad(sum(((t * (k + 1)).sum() for k, t in enumerate(g)), torch.zeros((), dtype=D)))
    return [*first, g, second]


@pytest.mark.slow
@GRAPH_SETTINGS
@given(input_graphs())
def test_random_input_graphs_match_plain_autograd(graph):
    for got, want in zip(
        _graph_gradients(graph, recompute=True),
        _graph_gradients(graph, recompute=False),
        strict=True,
    ):
        torch.testing.assert_close(got, want)


# --- multiple outputs (item 55) ---------------------------------------------------------------


def sin_cos(x):
    return torch.sin(x) * x, torch.cos(x)


@pytest.mark.parametrize("used", [0, 1])
def test_multiple_outputs_one_unused(used):
    x, x_plain = _leaf(), _leaf()
    ys = recompute_grad(sin_cos)(x)
    ys_plain = sin_cos(x_plain)
    assert isinstance(ys, tuple) and len(ys) == 2
    (g,) = torch.autograd.grad((ys[used] * W).sum(), x)
    (g_plain,) = torch.autograd.grad((ys_plain[used] * W).sum(), x_plain)
    torch.testing.assert_close(g, g_plain)


# --- torch.func ---------------------------------------------------------------------------------


def test_torch_func_grad():
    block = recompute_grad(sin_times)
    g = torch.func.grad(lambda x: block(x).sum())(X.clone())
    torch.testing.assert_close(g, torch.cos(X) * X + torch.sin(X))


def test_torch_func_grad_of_grad():
    block = recompute_grad(sin_times)
    g2 = torch.func.vmap(torch.func.grad(torch.func.grad(lambda x: block(x).sum())))(X.clone())
    torch.testing.assert_close(g2, 2 * torch.cos(X) - X * torch.sin(X))


def test_torch_func_vmap_of_grad():
    block = recompute_grad(sin_times)
    g = torch.func.vmap(torch.func.grad(lambda x: block(x).sum()))(X.clone())
    torch.testing.assert_close(g, torch.cos(X) * X + torch.sin(X))


@pytest.mark.parametrize("make", CONNECTED.values(), ids=CONNECTED.keys())
def test_torch_func_grad_of_grad_connected_inputs(make):
    block = recompute_grad(shared)

    def gradient(fn):
        return torch.func.grad(lambda x: fn(*make(x)).sum())

    g = gradient(block)(X.clone())
    torch.testing.assert_close(g, gradient(shared)(X.clone()))
    gg = torch.func.grad(lambda x: (gradient(block)(x) * W).sum())(X.clone())
    gg_plain = torch.func.grad(lambda x: (gradient(shared)(x) * W).sum())(X.clone())
    torch.testing.assert_close(gg, gg_plain)


# --- grad_pass_through (items 56-60) ----------------------------------------------------------


def test_pass_through_round_gives_ones():
    x = _leaf()
    y = grad_pass_through(torch.round)(x)
    torch.testing.assert_close(y, torch.round(X))
    (g,) = torch.autograd.grad(y, x, W)
    torch.testing.assert_close(g, W, rtol=0, atol=0)


def product(p, q):
    return p * q


def test_pass_through_output_count_must_match_inputs():
    y = grad_pass_through(product)(_leaf(), _leaf(W))
    message = messages.count(product, 1, ["p", "q"])
    with pytest.raises(ValueError, match=exactly(message)):
        y.sum().backward()


def test_pass_through_parameter_gets_none():
    p = nn.Parameter(W.clone())
    x = _leaf()
    y = grad_pass_through(lambda x: x * p)(x)
    gx, gp = torch.autograd.grad(y.sum(), (x, p), allow_unused=True)
    torch.testing.assert_close(gx, torch.ones_like(X))
    assert gp is None


def test_pass_through_sum_expands_to_input_shape():
    # TF passes the scalar through unchanged (item 59); torch needs the input's shape.
    x = _leaf()
    y = grad_pass_through(torch.sum)(x)
    assert y.shape == ()
    (g,) = torch.autograd.grad(3.0 * y, x)
    assert g.shape == X.shape
    torch.testing.assert_close(g, torch.full_like(X, 3.0))


def test_pass_through_second_order():
    a = _leaf()
    y = grad_pass_through(lambda p: p**3)(a)
    torch.testing.assert_close(y, X**3)
    (g,) = torch.autograd.grad((y * y).sum(), a, create_graph=True)
    torch.testing.assert_close(g, 2 * X**3)
    (gg,) = torch.autograd.grad(g.sum(), a)
    torch.testing.assert_close(gg, torch.full_like(X, 2.0))


# --- torch.compile ------------------------------------------------------------------------------

BLOCK = recompute_grad(sin_times)


def model(x):
    return torch.cos(BLOCK(x * 2)).sum()


def _compiled_gradient(backend: str) -> tuple[torch.Tensor, int]:
    torch._dynamo.reset()
    counters.clear()
    x = _leaf()
    (g,) = torch.autograd.grad(torch.compile(model, backend=backend)(x), x)
    return g, sum(counters["graph_break"].values())


# Resuming after a graph break, Dynamo reads `.grad` of the non-leaf tensors it carries over
# (`x * 2` here), which warns; a plain function with `torch._dynamo.graph_break()` does the same.
@pytest.mark.slow
@pytest.mark.filterwarnings(
    "ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning"
)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_recompute_matches_eager(backend):
    x = _leaf()
    (g_eager,) = torch.autograd.grad(model(x), x)
    g, breaks = _compiled_gradient(backend)
    torch.testing.assert_close(g, g_eager)
    _, breaks_again = _compiled_gradient(backend)
    assert breaks >= 0
    assert breaks_again == breaks
    torch._dynamo.reset()


ROUND = grad_pass_through(torch.round)


def rounded_model(x):
    return (ROUND(x * 3) * W).sum()


@pytest.mark.slow
@pytest.mark.traced_compile
def test_compiled_pass_through_fullgraph():
    torch._dynamo.reset()
    counters.clear()
    x = _leaf()
    y = torch.compile(rounded_model, backend="aot_eager", fullgraph=True)(x)
    (g,) = torch.autograd.grad(y, x)
    torch.testing.assert_close(y, rounded_model(X))
    torch.testing.assert_close(g, 3 * W)
    assert counters["stats"]["unique_graphs"] == 1
    assert sum(counters["graph_break"].values()) == 0
    torch._dynamo.reset()


def _scaled_sine(x, k):
    return torch.sin(x) * k


def test_inputs_are_freed_after_backward_while_the_output_lives():
    """The block keeps its inputs only as saved tensors: freed by backward (found in review:
    a closure over the flattened arguments kept them for as long as the output)."""
    a = torch.randn(1000, dtype=D, requires_grad=True)
    h = a * 2
    y = recompute_grad(_scaled_sine)(h, 3.0)
    alive = weakref.ref(h)
    del h
    assert alive() is not None  # saved for backward
    y.sum().backward()
    assert alive() is None
    torch.testing.assert_close(a.grad, 6.0 * torch.cos(2 * a.detach()))


def test_saved_tensor_hooks_see_the_inputs():
    """Under saved-tensor hooks that offload (here: copy), the input itself is released at
    once, as for any saved tensor."""
    a = torch.randn(1000, dtype=D, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        h = a * 2
        y = recompute_grad(_scaled_sine)(h, 3.0)
    alive = weakref.ref(h)
    del h
    assert alive() is None
    y.sum().backward()
    torch.testing.assert_close(a.grad, 6.0 * torch.cos(2 * a.detach()))


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda lin: lin, id="module"),
        pytest.param(lambda lin: lin.forward, id="bound forward"),
        pytest.param(
            lambda lin: functools.partial(F.linear, weight=lin.weight, bias=lin.bias),
            id="partial with Parameter keywords",
        ),
        pytest.param(lambda lin: lambda t: lin(t), id="lambda"),
    ],
)
def test_recompute_of_a_module_gives_its_parameters_their_gradients(wrap):
    # functools.wraps copies `__module__` from what it wraps: a module's says torch, and the
    # wrapper was once taken for torch's own code, which reads no Parameter (all None).
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2).double()
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    sources = [x, *lin.parameters()]
    got = torch.autograd.grad(recompute_grad(wrap(lin))(x).pow(2).sum(), sources)
    want = torch.autograd.grad(lin(x).pow(2).sum(), sources)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
