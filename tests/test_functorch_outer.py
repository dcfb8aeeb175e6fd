"""Differential tests of an ordinary backward taken outside a `torch.func` transform, through
its result, to the Parameters a decorated function reads from its closure or its module (TF's
`variables`): a gradient penalty (`torch.func.grad` of a critic, then the penalty's backward),
a vmapped or jvp'd forward, nested transforms. Under a transform f runs inside the node's
`forward`, so those Parameters are found only while it runs (Note [transforms] in
`_functorch.py`). Each case is compared with plain autograd of the same math, to the second
order, with and without the input itself requiring grad outside the transform."""

import pytest
import torch
from helpers import D
from torch import nn
from torch.autograd import forward_ad as fwAD

from tf_compat_grad import custom_gradient
from tf_compat_grad._torch_internals import VMAP_TAKES_NO_UPSTREAM

w = nn.Parameter(torch.tensor([0.7, 1.2, 0.9], dtype=D))
b = nn.Parameter(torch.tensor([0.1, -0.2, 0.3], dtype=D))
calls = {"grad_fn": 0}


@custom_gradient
def two(x):
    """`(sin(x w) + b x, exp(x w / 2))`: two outputs, two Parameters read from the module."""
    t = x * w
    y = torch.sin(t) + b * x
    z = torch.exp(t * 0.5)

    def grad_fn(dy, dz, variables=None):
        calls["grad_fn"] += 1
        c = dy * torch.cos(t) + dz * 0.5 * z
        by_id = {id(w): c * x, id(b): dy * x}
        return c * w + dy * b, [by_id[id(v)] for v in variables]

    return (y, z), grad_fn


def plain(x):
    t = x * w
    return torch.sin(t) + b * x, torch.exp(t * 0.5)


def _loss(fn):
    return lambda x: fn(x)[0].pow(2).sum() + fn(x)[1].sum()


def _batch(x):
    return torch.stack([x, 2 * x])


OUTER = {
    "grad": lambda fn, x: torch.func.grad(_loss(fn))(x),
    "grad_and_value": lambda fn, x: torch.func.grad_and_value(_loss(fn))(x)[1],
    "vmap": lambda fn, x: torch.func.vmap(lambda x: fn(x)[0] * fn(x)[1])(_batch(x)),
    "jvp primal": lambda fn, x: torch.func.jvp(lambda x: fn(x)[0], (x,), (torch.ones_like(x),))[0],
    "jvp tangent": lambda fn, x: torch.func.jvp(lambda x: fn(x)[1], (x,), (torch.ones_like(x),))[1],
    "vjp primal": lambda fn, x: torch.func.vjp(lambda x: fn(x)[0], x)[0],
    "vjp": lambda fn, x: torch.func.vjp(lambda x: fn(x)[0], x)[1](torch.ones_like(x))[0],
    "jacrev": lambda fn, x: torch.func.jacrev(lambda x: fn(x)[0])(x),
    "jacfwd": lambda fn, x: torch.func.jacfwd(lambda x: fn(x)[0])(x),
    "grad of grad": lambda fn, x: torch.func.grad(lambda x: torch.func.grad(_loss(fn))(x).sum())(x),
    "vmap of grad": lambda fn, x: torch.func.vmap(torch.func.grad(_loss(fn)))(_batch(x)),
    "hessian": lambda fn, x: torch.func.hessian(_loss(fn))(x),
}


def _first_and_second(fn, transform, x_needs_grad):
    """The transform's result, then the gradients of a loss of it to w, b (and x), then the
    gradients of their squared norm: plain autograd outside the transform."""
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=x_needs_grad)
    out = OUTER[transform](fn, x)
    sources = (w, b, x) if x_needs_grad else (w, b)
    first = _grad(out.pow(2).sum() + w.sum(), sources, create_graph=True)
    second = _grad(sum(g.pow(2).sum() for g in first), sources)
    return [out.detach(), *first, *second]


def _grad(total, sources, create_graph=False):
    """`torch.autograd.grad`, zeros for a source that `total` does not depend on."""
    found = torch.autograd.grad(total, sources, create_graph=create_graph, allow_unused=True)
    return [torch.zeros_like(s) if g is None else g for g, s in zip(found, sources, strict=True)]


@pytest.mark.parametrize("x_needs_grad", [False, True], ids=["x constant", "x needs grad"])
@pytest.mark.parametrize("transform", OUTER)
def test_an_outer_backward_gets_the_term_through_fs_output(transform, x_needs_grad):
    want = _first_and_second(plain, transform, x_needs_grad)
    torch.testing.assert_close(_first_and_second(two, transform, x_needs_grad), want)


class Critic(nn.Module):
    """`tanh(x a) b`, a and b read through `self`."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.tensor([0.5, -1.0, 2.0], dtype=D))
        self.b = nn.Parameter(torch.tensor([0.3, 0.2, 0.1], dtype=D))

    @custom_gradient
    def forward(self, x):
        y = torch.tanh(x * self.a) * self.b

        def grad_fn(dy, variables=None):
            c = dy * self.b * (1 - torch.tanh(x * self.a) ** 2)
            by_id = {id(self.a): c * x, id(self.b): dy * torch.tanh(x * self.a)}
            return c * self.a, [by_id[id(v)] for v in variables]

        return y, grad_fn


class PlainCritic(Critic):
    def forward(self, x):
        return torch.tanh(x * self.a) * self.b


def _penalties(critic):
    """A gradient penalty's gradients to the critic's Parameters: by `torch.func.grad` of the
    critic, and by `functional_call` with only `a` passed (b read from the module)."""
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D)
    g = torch.func.grad(lambda x: critic(x).sum())(x)
    found = list(torch.autograd.grad((g.norm() - 1) ** 2, (critic.a, critic.b)))
    a = critic.a.detach().clone().requires_grad_()

    def partial(a, x):
        return torch.func.functional_call(critic, {"a": a}, (x,)).pow(2).sum()

    g = torch.func.grad(partial)(a, x)
    found += torch.autograd.grad(g.pow(2).sum(), (a, critic.b))
    return found


def test_a_gradient_penalty_of_a_critic_reaches_its_parameters():
    torch.testing.assert_close(_penalties(Critic()), _penalties(PlainCritic()))


def test_input_gradients_without_an_outer_backward_leave_the_parameters_alone():
    """`torch.func.grad(model)(x)` for input gradients: the same numbers, no `.grad` written."""
    critic, plain_critic = Critic(), PlainCritic()
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D)
    got = torch.func.grad(lambda x: critic(x).sum())(x)
    torch.testing.assert_close(got, torch.func.grad(lambda x: plain_critic(x).sum())(x))
    assert critic.a.grad is None and critic.b.grad is None
    with torch.no_grad():
        assert not torch.func.vmap(critic)(x[None]).requires_grad


@pytest.mark.parametrize("x_needs_grad", [False, True], ids=["x constant", "x needs grad"])
@pytest.mark.skipif(
    not VMAP_TAKES_NO_UPSTREAM, reason="torch < 2.7: the node calls grad_fn again with zeros"
)
def test_an_outer_backward_calls_grad_fn_once(x_needs_grad):
    """The Parameters' gradients and the input's come from one call of grad_fn."""
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=x_needs_grad)
    out = torch.func.vmap(lambda x: two(x)[0])(_batch(x))
    before = calls["grad_fn"]
    out.sum().backward()
    assert calls["grad_fn"] == before + 1
    w.grad = b.grad = None


@custom_gradient
def with_index(x):
    """`sin(x w)` and the index of its largest element: an integer output."""
    y = torch.sin(x * w)

    def grad_fn(dy, di, variables=None):
        c = dy * torch.cos(x * w)
        return c * w, [c * x]

    return (y, torch.argmax(y)), grad_fn


def test_an_integer_output_passes_through():
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D)
    found = []
    for fn in (with_index, lambda x: (torch.sin(x * w), torch.argmax(torch.sin(x * w)))):
        y, i = torch.func.vmap(fn)(x[None])
        assert i.tolist() == [2]
        found.append(torch.autograd.grad(y.pow(2).sum(), w)[0])
    torch.testing.assert_close(found[0], found[1])


def _dual(fn, x_needs_grad):
    """Dual tensors of `forward_ad` outside any transform, with grad mode on: the tangent, and
    first and second gradients of a loss of primal and tangent."""
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=x_needs_grad)
    sources = (w, b, x) if x_needs_grad else (w, b)
    with fwAD.dual_level():
        primal, tangent = fwAD.unpack_dual(fn(fwAD.make_dual(x, torch.ones_like(x)))[0])
        first = torch.autograd.grad(
            (primal * primal + primal * tangent).sum(), sources, create_graph=True
        )
        second = torch.autograd.grad(sum(g.pow(2).sum() for g in first), sources)
        return [fwAD.unpack_dual(t).primal.detach() for t in (tangent, *first, *second)]


@pytest.mark.parametrize("x_needs_grad", [False, True], ids=["x constant", "x needs grad"])
def test_dual_tensors_with_grad_mode_on_reach_the_parameters(x_needs_grad):
    torch.testing.assert_close(_dual(two, x_needs_grad), _dual(plain, x_needs_grad))


v = nn.Parameter(torch.tensor([0.2, 0.4, 0.6], dtype=D))


@custom_gradient
def passed_and_read(x, u):
    """`sin(x u) w + v x`, called with u = w: w is an input, so only v is a variable (as in
    TensorFlow), and u's gradient is grad_fn's input gradient."""
    y = torch.sin(x * u) * w + v * x

    def grad_fn(dy, variables=None):
        c = dy * torch.cos(x * u) * w
        return (c * u + dy * v, c * x + dy * torch.sin(x * u)), [dy * x for _ in variables]

    return y, grad_fn


def _penalty(by_transform, x_needs_grad):
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=x_needs_grad)
    sources = (w, v, x) if x_needs_grad else (w, v)
    if by_transform:
        g = torch.func.grad(lambda x: passed_and_read(x, w).pow(2).sum())(x)
    else:
        x_ = x if x_needs_grad else x.detach().requires_grad_()
        (g,) = torch.autograd.grad(passed_and_read(x_, w).pow(2).sum(), x_, create_graph=True)
    return torch.autograd.grad(g.pow(2).sum(), sources)


@pytest.mark.parametrize("x_needs_grad", [False, True], ids=["x constant", "x needs grad"])
def test_a_parameter_passed_and_read_is_an_input_when_f_runs_again(x_needs_grad):
    """Where backward runs f again (an enclosing level differentiates x), the argument is that
    level's wrapper of w and the watcher sees w itself read: still an input, not a variable.
    The penalty by `torch.func.grad` matches the one by `torch.autograd.grad`."""
    torch.testing.assert_close(_penalty(True, x_needs_grad), _penalty(False, x_needs_grad))


def test_under_torch_compile_the_outer_backward_reaches_them():
    """The call runs outside the compiled graph (Note [compile under torch.func] in
    `_compile.py`), and so does `_Reads`."""
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D)
    step = torch.compile(lambda x: torch.func.grad(_loss(two))(x), backend="aot_eager")
    got = torch.autograd.grad(step(x).pow(2).sum(), (w, b))
    want = torch.autograd.grad(torch.func.grad(_loss(plain))(x).pow(2).sum(), (w, b))
    torch.testing.assert_close(got, want)


def _vmapped_functional_call(critic):
    """`functional_call` under `vmap` alone, `a` not batched: a plain tensor in its slot."""
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=True)
    a = critic.a.detach().clone().requires_grad_()

    def call(a, x):
        return torch.func.functional_call(critic, {"a": a}, (x,))

    out = torch.func.vmap(call, in_dims=(None, 0))(a, torch.stack([x, 2 * x]))
    first = torch.autograd.grad(out.pow(2).sum(), (a, critic.b, x), create_graph=True)
    return [*first, *torch.autograd.grad(sum(g.pow(2).sum() for g in first), (a, critic.b, x))]


def test_a_plain_tensor_that_functional_call_puts_in_a_slot_under_vmap_gets_its_gradient():
    """Not wrapped by any transform, it is still the call's variable (as eagerly), not lost."""
    want = _vmapped_functional_call(PlainCritic())
    torch.testing.assert_close(_vmapped_functional_call(Critic()), want)
