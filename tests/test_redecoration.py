"""Decorating the same code again, as a `forward` that defines its custom gradient does on every
call: what is made once per code object (the reach proof's reading of the code, the
`torch.func` node class) serves each decoration with that decoration's own closure, and keeps
no earlier decoration alive."""

import gc
import weakref

import pytest
import torch
from helpers import D
from torch import nn

from tf_compat_grad import _reach, _record, custom_gradient


def scaled_by(scale):
    """A new decoration of the same code, closing over `scale` (a number, a tensor or a
    Parameter): the gradient is 5 * scale, not autodiff's."""

    @custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return 5 * dy * scale, [7 * (dy * x).sum() for _ in variables or ()]

        return x * scale, grad

    return scaled


def test_each_decoration_of_one_code_follows_its_own_closure_under_torch_func():
    x = torch.linspace(-1, 1, 3, dtype=D)
    for scale in (2.0, 3.0, 2.0):
        f = scaled_by(torch.tensor(scale, dtype=D))
        grad = torch.func.grad(lambda t, f=f: f(t).sum())(x)
        torch.testing.assert_close(grad, torch.full((3,), 5 * scale, dtype=D))


def test_each_decoration_of_one_code_finds_its_own_parameters():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    weight = nn.Parameter(torch.tensor(2.0, dtype=D))
    for scale in (weight, torch.tensor(2.0, dtype=D), weight):
        weight.grad = None
        scaled_by(scale)(x).sum().backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 10.0, dtype=D))
        x.grad = None
        if scale is weight:
            torch.testing.assert_close(weight.grad, 7 * x.detach().sum())
        else:
            assert weight.grad is None


def _func_grad(f, x):
    return torch.func.grad(lambda t: f(t).sum())(x)


def test_a_decoration_is_not_kept_alive_by_the_next_one():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    first = scaled_by(2.0)
    _func_grad(first, x.detach())  # makes the torch.func node class
    first(x).sum().backward()
    gone = weakref.ref(first.__wrapped__)
    del first
    second = scaled_by(3.0)
    torch.testing.assert_close(_func_grad(second, x.detach()), torch.full((3,), 15.0, dtype=D))
    gc.collect()
    assert gone() is None


def exp_scaled_by(scale):
    """`scale * exp(x)` with its true gradient, decorated anew per call; `scale` a tensor or a
    Parameter, whose gradient grad_fn then gives."""

    @custom_gradient
    def exp_scaled(x):
        e = torch.exp(x)

        def grad(dy, variables=None):
            if variables is None:
                return dy * scale * e
            return dy * scale * e, [(dy * e).sum()]

        return scale * e, grad

    return exp_scaled


def test_a_new_decoration_starts_on_the_plan_and_node_an_earlier_one_learned():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    first = exp_scaled_by(torch.tensor(2.0, dtype=D))
    first(x)  # the general code: learns the plan
    node = type(first(x).grad_fn)
    for scale in (3.0, 4.0):
        y = exp_scaled_by(torch.tensor(scale, dtype=D))(x)  # its first call
        assert hasattr(y.grad_fn, "plan") and type(y.grad_fn) is node
        (gx,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(gx, scale * torch.exp(x.detach()))


def test_interleaved_decorations_of_one_code_match_plain_autograd():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    w1, w2 = nn.Parameter(torch.tensor(2.0, dtype=D)), nn.Parameter(torch.tensor(3.0, dtype=D))
    plain = torch.tensor(5.0, dtype=D)
    decorations = [exp_scaled_by(s) for s in (plain, w1, w2)]
    for _ in range(3):
        for f, scale in zip([*decorations, exp_scaled_by(w2)], (plain, w1, w2, w2), strict=True):
            y = f(x)
            sources = (x, scale) if isinstance(scale, nn.Parameter) else (x,)
            got = torch.autograd.grad(y.sum(), sources)
            expected = torch.autograd.grad((scale * torch.exp(x)).sum(), sources)
            torch.testing.assert_close(got, expected)


def test_a_plan_learned_without_parameters_serves_a_decoration_that_reads_one():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    for _ in range(2):
        exp_scaled_by(torch.tensor(2.0, dtype=D))(x)  # a plan that reads no Parameter
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    for _ in range(2):
        y = exp_scaled_by(w)(x)
        gx, gw = torch.autograd.grad(y.sum(), (x, w))
        torch.testing.assert_close(gx, 3.0 * torch.exp(x.detach()))
        torch.testing.assert_close(gw, torch.exp(x.detach()).sum())


def reading_by(scale):
    @custom_gradient
    def scaled_without_variables(x):
        def grad(dy):
            return dy * scale

        return x * scale, grad

    return scaled_without_variables


def test_a_new_decoration_without_grad_is_checked_for_variables():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    for _ in range(2):
        reading_by(2.0)(x)  # the plan of a decoration that reads no Parameter
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    with torch.no_grad(), pytest.raises(TypeError, match="variables"):
        reading_by(w)(x)
    with pytest.raises(TypeError, match="variables"):
        reading_by(w)(x)


def test_planned_decorations_are_not_kept_alive():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    gone = []
    for scale in (2.0, 3.0, 4.0):
        w = nn.Parameter(torch.tensor(scale, dtype=D))
        f = exp_scaled_by(w)
        for _ in range(2):
            f(x).sum().backward()
        gone += [weakref.ref(f.__wrapped__), weakref.ref(w)]
    del f, w
    gc.collect()
    assert [ref() for ref in gone] == [None] * len(gone)


def test_what_is_made_per_code_goes_with_its_code():
    """Nothing made per code object keeps the code alive (the reach proof's reading, a bounded
    cache, holds it until evicted: cleared here), and its entry goes with it."""
    namespace: dict = {"custom_gradient": custom_gradient, "torch": torch}
    exec(
        "def make():\n"
        "    @custom_gradient\n"
        "    def doubled(x):\n"
        "        return 2 * x, lambda dy: 3 * dy\n"
        "    return doubled\n",
        namespace,
    )
    x = torch.ones(2, dtype=D, requires_grad=True)
    for _ in range(3):
        (gx,) = torch.autograd.grad(namespace["make"]()(x).sum(), x)
        torch.testing.assert_close(gx, torch.full((2,), 3.0, dtype=D))
    inner = namespace["make"]().__wrapped__.__code__
    (entry,) = [key for key in _record._PER_CODE if key() is inner]  # a weak reference
    del namespace, inner
    _reach._read.cache_clear()
    gc.collect()
    assert entry() is None
    assert entry not in _record._PER_CODE
