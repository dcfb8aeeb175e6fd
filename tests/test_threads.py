"""Threads: decorated functions run concurrently with their own Parameters, forward and backward.

8 threads step in lockstep (a barrier before each forward and each backward, so the calls really
overlap) through many iterations. Each checks, every time, its outputs, that grad_fn received
exactly its own Parameters as `variables` (by identity, in order of first use) and the custom
gradients of its inputs and Parameters. Parameters are found by a TorchFunctionMode, whose stack
torch keeps per thread; these tests are what shows no thread sees another's Parameters.
"""

import threading
from collections import namedtuple

import pytest
import torch
from helpers import D
from torch import nn

from tf_compat_grad import custom_gradient

THREADS = 8
ITERATIONS = 250
Pair = namedtuple("Pair", ["main", "aux"])


class Case:
    """One thread's decorated function, its Parameters, and what its gradients must be."""

    def __init__(self, k):
        self.k = k
        self.w = nn.Parameter(torch.linspace(-1, 1, 3, dtype=D) + k)
        self.b = nn.Parameter(torch.tensor(0.1 * k, dtype=D))
        self.seen_variables = []
        self.call = self._make(k % 4)

    def _grad_fn(self, x, dy, variables):
        self.seen_variables.append(variables)
        k = self.k
        return dy * (k + 1) * self.w, [dy * x * (k + 2), dy.sum() * (k + 3)]

    def _make(self, style):
        case = self
        if style == 0:  # a plain function reading closed-over Parameters

            @custom_gradient
            def op(x):
                y = x * case.w + case.b

                def grad_fn(dy, variables=None):
                    return case._grad_fn(x, dy, variables)

                return y, grad_fn

            return op
        if style == 1:  # nn.Module.forward

            class Layer(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w, self.b = case.w, case.b

                @custom_gradient
                def forward(self, x):
                    y = x * self.w + self.b

                    def grad_fn(dy, variables=None):
                        return case._grad_fn(x, dy, variables)

                    return y, grad_fn

            return Layer()
        if style == 2:  # nested input and a namedtuple output with an unused part

            @custom_gradient
            def op(inputs):
                x = inputs["x"][0]
                y = x * case.w + case.b

                def grad_fn(d_main, d_aux, variables=None):
                    assert torch.count_nonzero(d_aux) == 0  # unused output: zeros
                    dx, dvars = case._grad_fn(x, d_main, variables)
                    return {"x": (dx, None)}, dvars

                return Pair(main=y, aux=y.sum() * 0), grad_fn

            return lambda x: op({"x": (x, "label")}).main
        # style 3: a keyword argument and a Python scalar, grad_fn taking **kwargs

        @custom_gradient
        def op(x, scale, *, offset):
            y = (x * case.w + case.b) * scale + offset

            def grad_fn(dy, **kwargs):
                dx, dvars = case._grad_fn(x, dy * scale, kwargs["variables"])
                return (dx, None), dvars

            return y, grad_fn

        return lambda x: op(x, 1.0, offset=torch.zeros((), dtype=D))

    def expected(self, x):
        k = self.k
        return (k + 1) * self.w.detach(), x * (k + 2), torch.tensor(3.0 * (k + 3), dtype=D)


def run_threads(cases, body, iterations=ITERATIONS):
    """`body(case, i, barrier)` for i in range(iterations), one thread per case."""
    barrier = threading.Barrier(len(cases), timeout=60)
    errors = []

    def worker(case):
        try:
            for i in range(iterations):
                body(case, i, barrier)
        except BaseException as error:  # reported below, with the thread's index
            errors.append((case.k, repr(error)))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(case,)) for case in cases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert errors == [], errors


def step(case, i, barrier):
    x = torch.linspace(0, 1, 3, dtype=D).add(i % 7).requires_grad_()
    barrier.wait()  # all forwards together
    y = case.call(x)
    torch.testing.assert_close(y, x.detach() * case.w.detach() + case.b.detach())
    case.w.grad = case.b.grad = None
    barrier.wait()  # all backwards together
    y.sum().backward()
    dx, dw, db = case.expected(x.detach())
    torch.testing.assert_close(x.grad, dx)
    torch.testing.assert_close(case.w.grad, dw)
    torch.testing.assert_close(case.b.grad, db)
    variables = case.seen_variables.pop()
    assert case.seen_variables == []
    assert len(variables) == 2 and variables[0] is case.w and variables[1] is case.b
    assert torch._C._len_torch_function_stack() == 0


@pytest.mark.slow
def test_eight_threads_different_functions_own_parameters():
    cases = [Case(k) for k in range(THREADS)]
    run_threads(cases, step)
    assert torch._C._len_torch_function_stack() == 0


@pytest.mark.slow
def test_eight_threads_share_one_decorated_function():
    """One decorated object called from every thread, each with its own Parameters (read in f
    through a keyword argument, so they are variables, not inputs)."""

    @custom_gradient
    def shared(x, *, case):
        y = x * case.w + case.b

        def grad_fn(dy, variables=None):
            return case._grad_fn(x, dy, variables)

        return y, grad_fn

    cases = [Case(k) for k in range(THREADS)]
    for case in cases:
        case.call = lambda x, case=case: shared(x, case=case)
    run_threads(cases, step)


@pytest.mark.slow
@pytest.mark.parametrize("grad_enabled", [False, True], ids=["no_grad", "grad"])
def test_eight_threads_first_calls_race(grad_enabled):
    """Fresh decorated functions whose first calls (the `variables` check, the no_grad cache)
    happen at once in every thread."""
    functions = []
    cases = [Case(k) for k in range(THREADS)]
    for _ in range(40):
        w = nn.Parameter(torch.ones(2, dtype=D))

        @custom_gradient
        def fresh(x, w=w):
            def grad_fn(dy, variables=None):
                assert len(variables) == 1 and variables[0] is w
                return dy * 5, [dy * 0]

            return x * w, grad_fn

        functions.append(fresh)

    def first_call(case, i, barrier):
        x = torch.ones(2, dtype=D, requires_grad=grad_enabled)
        barrier.wait()
        with torch.set_grad_enabled(grad_enabled):
            y = functions[i](x)
        torch.testing.assert_close(y.detach(), torch.ones(2, dtype=D))
        if grad_enabled:
            y.sum().backward()
            torch.testing.assert_close(x.grad, torch.full((2,), 5.0, dtype=D))

    run_threads(cases, first_call, iterations=len(functions))
