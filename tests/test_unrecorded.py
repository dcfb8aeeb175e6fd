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
from helpers import D, closure_layer, derandomized, saved_while_called
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
    scale, plain, weight = 2.0, torch.ones(3), torch.nn.Parameter(torch.ones(3))
    kinds = {"number": scale, "tensor": plain, "Parameter": weight, "function": torch.sin}
    kinds |= {"list": [weight], "tuple": (weight,), "module": torch.nn.Linear(3, 3)}
    for kind, held in kinds.items():

        def closed(x, held=held):
            def f(x):
                return x * held, lambda dy: dy * held

            return f

        expected = kind in ("number", "tensor", "Parameter")
        assert unrecorded(closed(None)) is expected, kind
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


# --- f that reads Parameters of its own closure cells (Note [Parameters of f's own]) ---------


def _layer_values():
    g = torch.Generator().manual_seed(1)
    w = torch.nn.Parameter(torch.randn(3, 4, generator=g, dtype=D))
    b = torch.nn.Parameter(torch.randn(3, generator=g, dtype=D))
    return w, b


def test_a_layer_of_closure_parameters_differentiates_twice_as_plain_autograd():
    w, b = _layer_values()
    layer = closure_layer(w, b)
    for _ in range(3):  # the general code, then its plan
        x = torch.rand(2, 4, dtype=D, requires_grad=True)
        y = layer(x)
        want = torch.nn.functional.linear(x, w, b)
        torch.testing.assert_close(y, want)
        got_grads = torch.autograd.grad((y * y).sum(), (x, w, b), create_graph=True)
        want_grads = torch.autograd.grad((want * want).sum(), (x, w, b), create_graph=True)
        torch.testing.assert_close(got_grads, want_grads)
        got_second = torch.autograd.grad(sum(g.sin().sum() for g in got_grads), (x, w, b))
        want_second = torch.autograd.grad(sum(g.sin().sum() for g in want_grads), (x, w, b))
        torch.testing.assert_close(got_second, want_second)


def test_a_layer_of_closure_parameters_saves_only_grad_fns_tensors():
    """Recorded, `F.linear` would save x and w for its own backward as well."""
    layer = closure_layer(*_layer_values())
    x = torch.rand(2, 4, dtype=D, requires_grad=True)
    assert [saved_while_called(layer, x) for _ in range(3)] == [2, 2, 2]


def test_the_parameters_a_call_reads_are_its_variables_on_every_call():
    """Unrecorded and watched: which of its cells' Parameters f reads differs per call."""
    w, b = _layer_values()

    @custom_gradient
    def f(x, shifted):
        def grad_fn(dy, variables=None):
            return (dy @ w, None), ([dy.t() @ x, dy.sum(0)] if shifted else [dy.t() @ x])

        y = x @ w.t()
        return (y + b if shifted else y), grad_fn

    for shifted in (1, 0, 1, 0, 1):
        x = torch.rand(2, 4, dtype=D, requires_grad=True)
        w.grad = b.grad = None
        f(x, shifted).sum().backward()
        torch.testing.assert_close(w.grad, torch.ones(2, 3, dtype=D).t() @ x)
        assert (b.grad is not None) is bool(shifted)
        assert saved_while_called(f, x, shifted) == 2  # x and w


def test_a_plain_tensor_that_requires_grad_in_a_cell_is_still_refused():
    """Unrecorded, the outputs would not show that they depend on it: such a call records and
    is refused (Note [lost gradients]), whether the cell held it from the start or since."""
    w, b = _layer_values()
    layer = closure_layer(w, b)
    x = torch.rand(2, 4, dtype=D, requires_grad=True)
    layer(x), layer(x)  # planned
    cell = layer.__wrapped__.__closure__[[c.cell_contents is b for c in layer.__wrapped__.__closure__].index(True)]  # fmt: skip
    cell.cell_contents = b.detach().clone().requires_grad_()
    for _ in range(2):
        with pytest.raises(Exception, match="gradient"):
            layer(x)


def test_checkpointed_closure_parameter_calls_save_the_same_tensors_when_recomputed():
    w, b = _layer_values()
    layer = closure_layer(w, b)
    for _ in range(3):
        x = torch.rand(2, 4, dtype=D, requires_grad=True)
        w.grad = b.grad = None
        checkpoint(layer, x, use_reentrant=False).sum().backward()
        torch.testing.assert_close(w.grad, torch.ones(2, 3, dtype=D).t() @ x)
        torch.testing.assert_close(b.grad, torch.full((3,), 2.0, dtype=D))


# Generated closures: f multiplies x by what its cells hold (two Parameters, a number, a plain
# tensor) in a drawn order, reading some of them twice and some not at all; its grad_fn is the
# true derivative, with the Parameters as `variables` in the order f first read them. Whether
# f runs recorded or not, every derivative must be plain autograd's.
CELL_TERMS = ("w1", "w2", "c", "t")


@pytest.mark.slow
@given(st.lists(st.sampled_from(CELL_TERMS), min_size=1, max_size=4))
@derandomized(40)
def test_generated_closures_over_parameters_differentiate_as_plain_autograd(terms):
    g = torch.Generator().manual_seed(len(terms))
    w1, w2 = (torch.nn.Parameter(torch.rand(3, generator=g, dtype=D) + 0.5) for _ in range(2))
    c, t = 1.5, torch.rand(3, generator=g, dtype=D)
    read = list(dict.fromkeys(n for n in terms if n in ("w1", "w2")))
    scale = " + ".join(terms)
    source = f"""
        def make(w1, w2, c, t):
            def f(x):
                def grad(dy, variables=None):
                    return dy * ({scale}), [{", ".join(f"(dy * x) * {terms.count(n)}" for n in read)}]
                return x * ({scale}), grad
            return f
        """
    scope = {"torch": torch}
    exec(textwrap.dedent(source), scope)
    decorated = custom_gradient(scope["make"](w1, w2, c, t))
    for _ in range(2):  # the general code, then its plan
        x = torch.rand(3, generator=g, dtype=D, requires_grad=True)
        leaves = (x, w1, w2)
        got = (decorated(x) ** 2).sum()
        want = ((x * eval(scale, {}, {"w1": w1, "w2": w2, "c": c, "t": t})) ** 2).sum()
        torch.testing.assert_close(got, want)
        got_grads = torch.autograd.grad(got, leaves, create_graph=True, allow_unused=True)
        want_grads = torch.autograd.grad(want, leaves, create_graph=True, allow_unused=True)
        for a, b in zip(got_grads, want_grads, strict=True):
            torch.testing.assert_close(a, b, msg=source)
        used = [(a, b) for a, b in zip(got_grads, want_grads, strict=True) if b is not None]
        got_second = torch.autograd.grad(sum(a.sin().sum() for a, _ in used), leaves, allow_unused=True)  # fmt: skip
        want_second = torch.autograd.grad(sum(b.sin().sum() for _, b in used), leaves, allow_unused=True)  # fmt: skip
        for a, b in zip(got_second, want_second, strict=True):
            if b is None:
                assert a is None or not a.any(), source
            else:
                torch.testing.assert_close(a, b, msg=source)
