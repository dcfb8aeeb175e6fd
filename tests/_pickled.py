"""The decorated functions and modules that `test_pickle.py` pickles, and its worker's function.

A module of its own: pickle saves a function by reference, as its module and qualified name,
and the spawned worker imports this module by its plain name (`test_pickle.py` loads it so and
puts this folder on `sys.path`). Every gradient here differs from what autodiff of f would give,
so a copy that fell back to differentiating f fails the comparisons.
"""

import torch
from torch import nn
from torch.utils.data import Dataset

from tf_compat_grad import custom_gradient, grad_pass_through, recompute_grad

D = torch.float64


@custom_gradient
def triple(x):
    """`3 * x` with the gradient `5 * dy`."""

    def grad(dy):
        return 5 * dy

    return 3 * x, grad


def tanh2(x):
    return torch.tanh(x) * 2


recomputed = recompute_grad(tanh2)  # this module's `tanh2` stays the plain function


@recompute_grad
def sin_block(x):
    return torch.sin(x)


rounded = grad_pass_through(torch.round)  # the gradient 1 where autodiff of round gives 0


class Layer(nn.Module):
    """A decorated forward that reads its Parameter, a `recompute_grad` block bound to the
    instance, and the static and class method forms of the decorator (`@classmethod` above it
    works on Python <= 3.12 only, see test_wrapping.py)."""

    FACTOR = 4.0

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([2.0, -1.0], dtype=D))
        self.block = recompute_grad(self._block)

    def _block(self, x):
        return torch.tanh(x * self.weight)

    @custom_gradient
    def forward(self, x):
        def grad(dy, variables=None):
            return 7 * dy, [11 * dy * x]

        return x * self.weight, grad

    @staticmethod
    @custom_gradient
    def double(x):
        return 2 * x, lambda dy: 6 * dy

    @custom_gradient
    @staticmethod
    def halve(x):
        return x / 2, lambda dy: 6 * dy

    @custom_gradient
    @classmethod
    def shrink(cls, x):
        return x / cls.FACTOR, lambda dy: 6 * dy


class Gradients(Dataset):
    """Item i: `gradients(fns[i], x)`, computed in a `DataLoader` worker: the dataset carries the
    decorated functions and modules to it."""

    def __init__(self, fns, x):
        self.fns, self.x = fns, x

    def __len__(self):
        return len(self.fns)

    def __getitem__(self, i):
        return gradients(self.fns[i], self.x)


def make_closure():
    @custom_gradient
    def closure(x):
        return x, lambda dy: dy

    return closure


def gradients(fn, x):
    """`fn(x).sum()` differentiated: the gradient of x, then those of the Parameters of fn (a
    module or a method bound to one)."""
    x = x.detach().requires_grad_()
    fn(x).sum().backward()
    owner = getattr(fn, "__self__", fn)
    parameters = list(owner.parameters()) if isinstance(owner, nn.Module) else []
    return [x.grad, *(p.grad for p in parameters)]
