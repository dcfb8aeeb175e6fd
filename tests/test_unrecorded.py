"""f run with grad recording off where grad_fn can read nothing f computed (Note [f unrecorded]
in `_unrecorded.py`): which code qualifies, that such calls record nothing of f's, and that
their values, gradients and second derivatives are plain autograd's, on the first call (the
general code) and on the planned calls after it, whatever the code does."""

import functools
import math
import textwrap
import types

import pytest
import torch
from helpers import D, derandomized, saved_while_called
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import custom_gradient
from tf_compat_grad._unrecorded import unrecorded


def _made(body: str, **namespace):
    """The function `f` that body defines, in a namespace of torch, math and `namespace`."""
    scope = {"torch": torch, "math": math, "functools": functools, **namespace}
    exec(textwrap.dedent(body), scope)
    return scope["f"]


# Each: (source, whether f may run unrecorded). The true derivative is grad_fn's rule in all.
CODES = {
    "two outputs, grad_fn closes over the arguments": (
        """
        def f(a, b):
            def grad(du, dv):
                return du * b + dv, du * a - dv
            return (a * b, a - b), grad
        """,
        True,
    ),
    "nested outputs": (
        """
        def f(a, b):
            def grad(dp, ds, dd):
                return dp * b + ds + dd, dp * a + ds - dd
            return {"p": a * b, "q": (a + b, a - b)}, grad
        """,
        True,
    ),
    "a number argument, a keyword method call, a constant default": (
        """
        def f(x, c=2.0):
            def grad(dy, variables=None):
                return dy * c * torch.cos(x) * (x.clamp(min=-5.0, max=5.0) == x)
            return c * torch.sin(x), grad
        """,
        True,
    ),
    "a lambda, a comprehension, a helper made in f": (
        """
        def f(x):
            def square(t):
                return t * t
            parts = [square(x) * k for k in range(3)]
            return sum(parts), lambda dy: dy * 6 * x
        """,
        True,
    ),
    "grad_fn closes over an intermediate": (
        """
        def f(x):
            e = torch.exp(x)
            def grad(dy):
                return dy * e / (1 + e)
            return torch.log(1 + e), grad
        """,
        False,
    ),
    "grad_fn closes over f's output": (
        """
        def f(x):
            y = torch.sigmoid(x)
            def grad(dy):
                return dy * y * (1 - y)
            return y, grad
        """,
        False,
    ),
    "an intermediate as a default value": (
        """
        def f(x):
            c = torch.cos(x)
            def grad(dy, c=c):
                return dy * c
            return torch.sin(x), grad
        """,
        False,
    ),
    "an intermediate's bound method as grad_fn": (
        """
        def f(x):
            c = torch.cos(x)
            return torch.sin(x), c.mul
        """,
        False,
    ),
    "functools.partial over an intermediate": (
        """
        def f(x):
            c = torch.cos(x)
            return torch.sin(x), functools.partial(torch.mul, c)
        """,
        False,
    ),
    "an intermediate kept on an argument": (
        """
        def f(x):
            x.kept = torch.cos(x)
            return torch.sin(x), lambda dy: dy * x.kept
        """,
        False,
    ),
    "an intermediate kept in a global": (
        """
        def f(x):
            global KEPT
            KEPT = torch.cos(x)
            return torch.sin(x), lambda dy: dy * KEPT
        """,
        False,
    ),
    "in place on an intermediate": (
        """
        def f(x):
            y = x * 1.0
            y += 1
            return torch.sin(y), lambda dy: dy * torch.cos(x + 1)
        """,
        False,
    ),
    "an in-place method": (
        """
        def f(x):
            y = torch.sin(x)
            y.mul_(1.0)
            return y, lambda dy: dy * torch.cos(x)
        """,
        False,
    ),
    "a tensor made to require grad": (
        """
        def f(x):
            w = torch.ones(x.shape, dtype=x.dtype, requires_grad=True)
            return torch.sin(x) * w.detach(), lambda dy: dy * torch.cos(x)
        """,
        False,
    ),
    "grad mode read or set in f": (
        """
        def f(x):
            with torch.enable_grad():
                y = torch.sin(x)
            return y, lambda dy: dy * torch.cos(x)
        """,
        False,
    ),
}


def _function(name):
    source, _ = CODES[name]
    return _made(source)


@pytest.mark.parametrize("name", CODES)
def test_which_code_runs_unrecorded(name):
    assert unrecorded(_function(name)) is CODES[name][1]


def test_a_closure_or_a_global_other_than_torch_and_math_is_recorded():
    scale = 2.0

    def closed(x):
        return x * scale, lambda dy: dy * scale

    assert not unrecorded(closed)
    helper = _made("def f(x):\n    return x * 2, lambda dy: dy * 2\n")
    calls_helper = _made("def f(x):\n    return helper(x), lambda dy: dy * 2\n", helper=helper)
    assert unrecorded(helper) and not unrecorded(calls_helper)
    reads_t = "def f(x):\n    return T.sin(x), lambda dy: dy * T.cos(x)\n"
    assert unrecorded(_made(reads_t, T=torch))
    assert not unrecorded(_made(reads_t, T=types.SimpleNamespace(sin=torch.sin, cos=torch.cos)))


def _inputs(name):
    g = torch.Generator().manual_seed(0)
    arity = _function(name).__code__.co_argcount - len(_function(name).__defaults__ or ())
    return [torch.rand(5, generator=g, dtype=D, requires_grad=True) + 0.5 for _ in range(arity)]


def _flat_sum(out):
    if isinstance(out, dict):
        return sum(_flat_sum(v) for v in out.values())
    if isinstance(out, (list, tuple)):
        return sum(_flat_sum(v) for v in out)
    return (out * torch.arange(1, out.numel() + 1, dtype=out.dtype)).sum()


def _plain(name):
    """f's forward as plain autograd (grad_fn is the true derivative in every case)."""
    f = _function(name)
    return lambda *xs: f(*xs)[0]


@pytest.mark.parametrize("name", CODES)
def test_values_gradients_and_second_derivatives_are_plain_autograds(name):
    decorated = custom_gradient(_function(name))
    for _ in range(3):  # the general code, then the plan it learned
        xs = _inputs(name)
        want_xs = [x.detach().requires_grad_() for x in xs]
        got, want = _flat_sum(decorated(*xs)), _flat_sum(_plain(name)(*want_xs))
        torch.testing.assert_close(got, want)
        grads = torch.autograd.grad(got, xs, create_graph=True)
        want_grads = torch.autograd.grad(want, want_xs, create_graph=True)
        torch.testing.assert_close(grads, want_grads)
        second = torch.autograd.grad(sum(g.sin().sum() for g in grads), xs, allow_unused=True)
        want_second = torch.autograd.grad(
            sum(g.sin().sum() for g in want_grads), want_xs, allow_unused=True
        )
        for s, w in zip(second, want_second, strict=True):
            torch.testing.assert_close(s, w)


@pytest.mark.parametrize("name", [n for n, (_, quiet) in CODES.items() if quiet])
def test_an_unrecorded_call_saves_only_grad_fns_tensors(name):
    """Recorded, `a * b` alone would save a and b for its own backward; unrecorded, the only
    tensors saved are those grad_fn closes over, on every call."""
    decorated = custom_gradient(_function(name))
    xs = _inputs(name)
    cells = _function(name)(*xs)[1].__closure__ or ()
    closed = sum(isinstance(cell.cell_contents, torch.Tensor) for cell in cells)
    assert [saved_while_called(decorated, *xs) for _ in range(3)] == [closed] * 3


def test_a_global_rebound_away_from_torch_records_again():
    namespace = {"T": torch}
    source = """
        def f(x):
            return T.sin(x), lambda dy: dy * T.cos(x)
        """
    decorated = custom_gradient(_made(source, **namespace))
    scope = decorated.__wrapped__.__globals__
    x = torch.rand(4, dtype=D, requires_grad=True)
    assert [saved_while_called(decorated, x) for _ in range(2)] == [1, 1]
    kept = []

    class Keeping:
        def sin(self, t):
            kept.append(torch.cos(t))
            return torch.sin(t)

        cos = staticmethod(torch.cos)

    scope["T"] = Keeping()
    assert saved_while_called(decorated, x) > 1  # sin's own backward saves x: recorded
    assert kept[-1].requires_grad  # what f kept has its history


def test_checkpointed_calls_save_the_same_tensors_when_recomputed():
    """Non-reentrant checkpointing recomputes the call in backward and requires the same saved
    tensors: the first call (general code) and the plan's recomputation agree."""
    decorated = custom_gradient(_function("two outputs, grad_fn closes over the arguments"))
    for _ in range(3):
        a, b = (torch.rand(4, dtype=D, requires_grad=True) for _ in range(2))
        u, v = checkpoint(decorated, a, b, use_reentrant=False)
        ga, gb = torch.autograd.grad((u * 2 + v * 3).sum(), (a, b))
        torch.testing.assert_close(ga, 2 * b + 3)
        torch.testing.assert_close(gb, 2 * a - 3)


# Generated functions: grad_fn (the true derivative of sin of what f computes) reads each
# value in one of several ways; whatever `unrecorded` and `rerunnable` answer (f run again,
# Note [f run again] in `_rerun.py`), derivatives to the third must be plain autograd's.
READS = {
    "argument": ("", "x"),
    "intermediate": ("    s = x * 1.5\n", "s / 1.5"),
    "default": ("    s = x * 1.5\n", "s / 1.5"),
    "kept on x": ("    x.k = x * 1.5\n", "x.k / 1.5"),
    "nested": ("    s = [x * 1.5]\n", "s[0] / 1.5"),
    "tuple": ("    s = (x * 1.5, 2)\n", "s[0] / 1.5"),
    "helper": ("    def h(u):\n        return u * 1.5\n    s = h(x)\n", "s / 1.5"),
    "in place": ("    s = x * 1.0\n    s *= 1.5\n", "s / 1.5"),
}


@pytest.mark.slow
@given(st.lists(st.sampled_from(sorted(READS)), min_size=1, max_size=3))
@derandomized(60)
def test_generated_functions_differentiate_twice_as_plain_autograd(reads):
    body, terms, params = "", [], []
    for i, read in enumerate(reads):
        setup, expr = READS[read]
        body += setup.replace("s", f"s{i}").replace("x.k", f"x.k{i}").replace("h", f"h{i}")
        expr = expr.replace("s", f"s{i}").replace("x.k", f"x.k{i}")
        if read == "default":
            params.append(f"s{i}=s{i}")
        terms.append(f"torch.cos({expr})")
    signature = ", ".join(["dy", *params])
    source = (
        f"def f(x):\n{body}"
        f"    def grad({signature}):\n"
        f"        return dy * ({' + '.join(terms)})\n"
        f"    return {' + '.join('torch.sin(x)' for _ in terms)}, grad\n"
    )
    decorated = custom_gradient(_made(source))
    for _ in range(2):
        x = torch.rand(3, dtype=D, requires_grad=True)
        (g,) = torch.autograd.grad(decorated(x).sum(), x, create_graph=True)
        (second,) = torch.autograd.grad(g.sum(), x, create_graph=True)
        (third,) = torch.autograd.grad(second.sum(), x)
        torch.testing.assert_close(g, len(terms) * torch.cos(x))
        torch.testing.assert_close(second, -len(terms) * torch.sin(x), msg=source)
        torch.testing.assert_close(third, -len(terms) * torch.cos(x), msg=source)


@pytest.mark.parametrize(
    "call", ["torch.nn.functional.relu(x, inplace=True)", "torch.sin(x, out=x)", "x.sin_()"]
)
def test_an_op_in_place_on_an_argument_is_recorded(call):
    """Recorded, torch refuses an edit in place of a leaf that requires grad before it happens;
    unrecorded, the edit would happen before the call's own check refuses it."""
    assert not unrecorded(_made(f"def f(x):\n    return {call}, lambda dy: dy\n"))
