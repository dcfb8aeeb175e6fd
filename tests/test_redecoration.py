"""Decorating the same code again, as a `forward` that defines its custom gradient does on every
call: what is made once per code object (the reach proof's reading of the code, the
`torch.func` node class) serves each decoration with that decoration's own closure, and keeps
no earlier decoration alive."""

import gc
import weakref

import torch
from helpers import D
from torch import nn

from tf_compat_grad import custom_gradient


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
