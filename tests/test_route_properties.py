"""Differential tests of the eager routes that run f with grad recording off and rely on a
static proof about f's code (Note [f unrecorded] in `_unrecorded.py`, Note [Parameters of f's
own] in `_reach.py`, Note [f run again] in `_rerun.py`, Note [a proof per code] in
`_reach_check.py`): for generated functions that mix the idioms those proofs read (numbers and
tensors as arguments, keyword arguments, nested outputs, closures over numbers, tensors and
Parameters, globals, helpers, grad_fn reading f's intermediates or outputs, cells rebound,
arguments edited in place), the decorated function's value and its derivatives to the second
(third where cheap) order, with respect to the arguments and the Parameters f reads, are plain
autograd's of the same math, on the first call (the general code), on the planned calls after
it, and for a new decoration of the same code; or the call is refused by a library error that
names f."""

import math
import textwrap
import types

import pytest
import torch
from helpers import D, derandomized, flatten
from hypothesis import given
from hypothesis import strategies as st

from tf_compat_grad import CustomGradientError, custom_gradient
from tf_compat_grad._reach import ParameterReach

# The math of f: y = OP(u), u = x * S + B; (the value of OP, its derivative from u, from y).
OPS = {
    "exp": ("torch.exp({u})", "torch.exp({u})", "{y}"),
    "sin": ("torch.sin({u})", "torch.cos({u})", None),
    "square": ("{u} * {u}", "2 * {u}", None),
    "tanh": ("torch.tanh({u})", "1 - torch.tanh({u}) ** 2", "1 - {y} * {y}"),
}
# Where f reads its scale S: (the expression, whether it is a Parameter, the argument it takes).
SCALES = {
    "tensor argument": ("a", False, "a"),
    "number argument": ("k", False, "k"),
    "keyword number": ("kw", False, None),
    "cell number": ("c", False, None),
    "cell tensor": ("t", False, None),
    "cell Parameter": ("p", True, None),
    "global Parameter": ("P", True, None),
    "Parameter in a cell's list": ("box[0]", True, None),
    "Parameter of a cell's ModuleList": ("layers[0].weight", True, None),
    "Parameter through a global helper": ("helper()", True, None),
    "Parameter through a nested helper": ("inner()", True, None),
}
BIASES = {"none": "0.0", "constant": "0.5", "cell Parameter": "q"}
# What grad_fn reads for OP's derivative.
READS = ["recomputed", "intermediate", "output", "made by a nested factory", "argument cell"]
OUTS = ["tensor", "tuple", "nested dict"]


def _source(op, scale, bias, reads, out):
    """The source of `make(c, t, p, q, box, layers)`, which defines and returns f."""
    s, _, extra = SCALES[scale]
    b = BIASES[bias]
    value, deriv_u, deriv_y = OPS[op]
    u = f"(x * {s} + {b})"
    args = "x" + (f", {extra}" if extra else "") + (", *, kw=1.5" if scale == "keyword number" else "")  # fmt: skip
    if reads == "output" and deriv_y is None:
        reads = "recomputed"
    d = {
        "recomputed": deriv_u.format(u=u),
        "intermediate": "e",
        "output": deriv_y.format(y="y") if deriv_y else "",
        "made by a nested factory": "held",
        "argument cell": deriv_u.format(u=f"(z * {s} + {b})"),
    }[reads]
    # The gradients of the arguments and of the variables (by identity), from du = dy * OP'(u).
    grads = "du * " + s
    if extra == "a":
        grads = f"({grads}, du * x)"
    elif extra == "k":
        grads = f"({grads}, None)"
    params = [] if not SCALES[scale][1] else [(s, "du * x")]
    if bias == "cell Parameter":
        params.append(("q", "du"))
    pick = "du"
    for expr, g in reversed(params):
        pick = f"({g} if v is {expr} else {pick})"
    dys, dy = ("dy", "dy") if out == "tensor" else ("dy, dy2", "dy + 2 * dy2")
    if out == "nested dict":
        dys, dy = "dy, dy2", "dy + 2 * dy2"
    outs = {"tensor": "y", "tuple": "(y, 2 * y)", "nested dict": '{"a": y, "b": (2 * y,)}'}[out]
    grad = [
        f"def grad({dys}, variables=None):",
        f"    du = ({dy}) * ({d})",
        "    if variables is None:",
        f"        return {grads}",
        "    found = []",  # a loop: a comprehension would close over du on Python 3.11
        "    for v in variables:",
        f"        found.append({pick})",
        f"    return {grads}, found",
    ]
    lines = [f"def f({args}):"]
    if scale.endswith("nested helper"):
        lines += ["    def inner():", "        return p"]
    lines.append(f"    y = {value.format(u=u)}")
    if reads == "intermediate":
        lines.append(f"    e = {deriv_u.format(u=u)}")
    if reads in ("made by a nested factory", "argument cell"):
        held, given = ("held", deriv_u.format(u=u)) if reads != "argument cell" else ("z", "x")
        lines.append(f"    def factory({held}):")
        lines += ["        " + line for line in grad]
        lines += ["        return grad", f"    return {outs}, factory({given})"]
    else:
        lines += ["    " + line for line in grad]
        lines.append(f"    return {outs}, grad")
    f = "\n".join(lines) + "\n"
    return "def make(c, t, p, q, box, layers):\n" + textwrap.indent(f, "    ") + "    return f\n"


def _plain(op, scale, bias, out):
    """The same math, differentiated by autograd: (x, extra, values) -> outputs."""
    s_name = SCALES[scale][0]

    def run(x, extra, v):
        s = {
            "a": extra,
            "k": extra,
            "kw": 1.5,
            "c": v["c"],
            "t": v["t"],
            "P": P,
            "helper()": P,
        }.get(s_name, v["p"])
        b = {"none": 0.0, "constant": 0.5}.get(bias, v["q"])
        u = x * s + b
        y = {"exp": torch.exp, "sin": torch.sin, "square": lambda u: u * u, "tanh": torch.tanh}[op](
            u
        )
        return {"tensor": y, "tuple": (y, 2 * y), "nested dict": {"a": y, "b": (2 * y,)}}[out]

    return run


def _derivatives(call, inputs, order, twice=False):
    """The value of call() and its derivatives to `order` w.r.t. `inputs` (weighted sums, so
    each order is one backward): a flat list of tensors, zeros where a derivative is None.
    `twice`: a first-order backward that retains the graph comes first."""
    outs = flatten(call())
    found = [o.detach() for o in outs]
    total = sum(((o * (i + 1) * 0.3).sum() for i, o in enumerate(outs)), torch.zeros((), dtype=D))
    if twice:
        found += _zeros(torch.autograd.grad(total, inputs, retain_graph=True, allow_unused=True))
    for n in range(order):
        last = n == order - 1
        grads = torch.autograd.grad(total, inputs, create_graph=not last, allow_unused=True)
        found += _zeros(grads)
        total = sum(
            ((g * (j + 2) * 0.7).sum() for j, g in enumerate(grads) if g is not None),
            torch.zeros((), dtype=D),
        )
        if not last and not total.requires_grad:
            return found + [torch.zeros(2, dtype=D)] * len(inputs) * (order - n - 1)
    return found


def _zeros(grads):
    return [torch.zeros(2, dtype=D) if g is None else g.detach() for g in grads]


P = torch.nn.Parameter(torch.tensor([0.7, -1.1], dtype=D))


def helper():
    return P


def _values(seed):
    g = torch.Generator().manual_seed(seed)

    def r():
        return torch.rand(2, generator=g, dtype=D) + 0.25

    p = torch.nn.Parameter(r())
    layers = torch.nn.ModuleList([torch.nn.Linear(2, 2, bias=False)]).to(D)
    layers[0].weight = p
    t = r().requires_grad_(seed == 2)  # f's outputs may then depend on it: a refusal
    return {"c": 0.8, "t": t, "p": p, "q": torch.nn.Parameter(r()), "box": [p], "layers": layers}


def _accepted(error, f):
    """A refusal the rules allow: a library error that names f."""
    return isinstance(error, CustomGradientError) and "`make.<locals>.f`" in str(error)


class _Torch(types.ModuleType):
    """A module of torch's name that is not torch, to rebind f's global `torch` with."""

    def __getattr__(self, name):
        return getattr(torch, name)


BETWEEN = [
    "nothing",
    "rebind the cell number between calls",
    "edit x in place and restore it after the call",
    "rebind the global torch after the call",
    "backward twice",
]


@given(
    op=st.sampled_from(sorted(OPS)),
    scale=st.sampled_from(list(SCALES)),
    bias=st.sampled_from(list(BIASES)),
    reads=st.sampled_from(READS),
    out=st.sampled_from(OUTS),
    leaves=st.lists(st.booleans(), min_size=3, max_size=3),
    decorations=st.sampled_from(["once", "anew", "anew with new cells"]),
    between=st.sampled_from(BETWEEN),
)
@derandomized(60)
def test_generated_functions_match_plain_autograd_on_every_route(
    op, scale, bias, reads, out, leaves, decorations, between
):
    source = _source(op, scale, bias, reads, out)
    namespace = {"torch": torch, "math": math, "P": P, "helper": helper}
    exec(source, namespace)
    make = namespace["make"]
    plain = _plain(op, scale, bias, out)
    v = _values(0)
    decorated = custom_gradient(make(v["c"], v["t"], v["p"], v["q"], v["box"], v["layers"]))
    for call, leaf in enumerate(leaves):
        if decorations != "once":
            if decorations == "anew with new cells":
                v = _values(call)
            decorated = custom_gradient(make(v["c"], v["t"], v["p"], v["q"], v["box"], v["layers"]))  # fmt: skip
        if between == BETWEEN[1] and call == 2:
            v["c"] = 0.3
            for name, cell in zip(
                decorated.__wrapped__.__code__.co_freevars,
                decorated.__wrapped__.__closure__ or (),
                strict=True,
            ):
                if name == "c":
                    cell.cell_contents = 0.3
        g = torch.Generator().manual_seed(call)
        x0 = (torch.rand(2, generator=g, dtype=D) + 0.25).requires_grad_()
        a = (torch.rand(2, generator=g, dtype=D) + 0.25).requires_grad_()
        extra = {"a": a, "k": 1.3}.get(SCALES[scale][2])
        inputs = [x0] + ([a] if SCALES[scale][2] == "a" else []) + [v["p"], v["q"], P]

        def run(fn, edit, extra=extra, x0=x0, leaf=leaf, call=call):
            def called():
                x = x0 if leaf else x0 * 1
                if extra is not None:
                    result = fn(x, extra)
                elif scale == "keyword number" and call % 2:  # passed, or left to its default
                    result = fn(x, kw=1.5)
                else:
                    result = fn(x)
                if edit and between == BETWEEN[2]:
                    with torch.no_grad():
                        x0.add_(1.0)
                        x0.sub_(1.0)
                if edit and between == BETWEEN[3]:
                    namespace["torch"] = _Torch("torch")
                return result

            return called

        twice = between == BETWEEN[4]
        want = _derivatives(
            run(lambda x, *_, e=extra, v=v, **__: plain(x, e, v), False), inputs, 3, twice
        )
        try:
            got = _derivatives(run(decorated, True), inputs, 3, twice)
        except CustomGradientError as error:
            assert _accepted(error, decorated), str(error)
            continue
        except RuntimeError as error:  # autograd's own check of the tensors grad_fn saved
            assert between == BETWEEN[2], str(error)
            assert "modified by an inplace operation" in str(error)
            continue
        finally:
            namespace["torch"] = torch
        for w_, g_ in zip(want, got, strict=True):
            torch.testing.assert_close(g_, w_, msg=lambda m: f"{m}\n{source}")


# One generated function per route, and the proof's answer for it: (the proof, f unrecorded, f
# run again), so that the property above keeps exercising each route.
ROUTES = [
    (("exp", "tensor argument", "none", "recomputed"), ("none", True, False)),
    (("tanh", "cell number", "constant", "recomputed"), ("none", True, False)),
    (("exp", "tensor argument", "none", "intermediate"), ("none", False, True)),
    (("tanh", "number argument", "none", "output"), ("none", False, True)),
    (("sin", "cell Parameter", "cell Parameter", "recomputed"), ("own", True, False)),
    (("sin", "cell Parameter", "cell Parameter", "argument cell"), ("own", False, False)),
    (("exp", "tensor argument", "cell Parameter", "intermediate"), ("own", False, False)),
    (("exp", "cell number", "none", "intermediate"), ("none", False, False)),
    (("exp", "Parameter in a cell's list", "none", "recomputed"), (None, False, False)),
    (("exp", "tensor argument", "none", "made by a nested factory"), ("none", False, True)),
    (("exp", "cell number", "none", "made by a nested factory"), ("none", False, False)),
]


@pytest.mark.parametrize(("case", "route"), ROUTES)
def test_the_generated_functions_take_each_route(case, route):
    namespace = {"torch": torch, "math": math, "P": P, "helper": helper}
    exec(_source(*case, "tuple"), namespace)
    v = _values(0)
    reach = ParameterReach(namespace["make"](v["c"], v["t"], v["p"], v["q"], v["box"], v["layers"]))  # fmt: skip
    reach.possible(())
    assert (reach.proof, reach.unrecorded, reach.rerun) == route


# A function made in f that keeps its own argument in a closure: f hands it what it computed.
KEPT_BY_A_MADE_FUNCTION = {
    "nested def": """
        def f(x):
            def keep(e):
                return lambda dy: dy * e
            return torch.exp(x), keep(torch.exp(x))
        """,
    "lambda of a lambda": """
        def f(x):
            return torch.exp(x), (lambda e: lambda dy: dy * e)(torch.exp(x))
        """,
    "star arguments, a number cell": """
        def f(x):
            def keep(*es):
                def grad(dy):
                    return dy * es[0] * c
                return grad
            return c * torch.exp(x), keep(torch.exp(x))
        """,
    "a lambda made in a comprehension": """
        def f(x):
            def keep(e):
                return [lambda dy: dy * e for _ in range(1)][0]
            return torch.exp(x), keep(torch.exp(x))
        """,
    "a cell Parameter": """
        def f(x):
            def keep(e):
                def grad(dy, variables=None):
                    return dy * e * p, [dy * e * x]
                return grad
            return torch.exp(x * p), keep(torch.exp(x * p))
        """,
}


def test_a_comprehension_over_grad_fns_arguments_keeps_f_unrecorded():
    """A comprehension keeps nothing (on Python 3.11 it is a function closing over `dy`): the
    line of the test below is drawn no wider."""
    scope = {"torch": torch}
    exec("def f(x):\n    def grad(dy):\n        return sum([dy * k for k in (1, 2)]) * x\n    return x * x * 1.5, grad\n", scope)  # fmt: skip
    reach = ParameterReach(scope["f"])
    reach.possible(())
    assert reach.unrecorded


@pytest.mark.parametrize("name", KEPT_BY_A_MADE_FUNCTION)
def test_what_f_hands_to_a_function_made_in_it_keeps_its_history(name):
    """Bug: a function made in f that closes over its own argument was taken to hold only f's
    arguments, so f ran unrecorded and grad_fn read `exp(x)` with no history: the second
    derivative lost its term through it (0 in place of exp(x) for the first two)."""
    p = torch.nn.Parameter(torch.tensor([0.5, 1.5], dtype=D))
    scope = {"torch": torch, "c": 2.0, "p": p}
    source = "def make(c, p):\n" + textwrap.indent(textwrap.dedent(KEPT_BY_A_MADE_FUNCTION[name]), "    ") + "    return f\n"  # fmt: skip
    exec(source, scope)
    f = scope["make"](2.0, p)
    reach = ParameterReach(f)
    reach.possible(())
    assert not reach.unrecorded
    decorated = custom_gradient(f)
    for call in range(3):  # the general code, then the plan
        x = torch.tensor([0.3, -0.2 + call], dtype=D, requires_grad=True)
        inputs = [x, p] if "Parameter" in name else [x]

        def plain(x=x):
            return f(x)[0]

        for got, want in zip(
            _derivatives(lambda x=x: decorated(x), inputs, 3),
            _derivatives(plain, inputs, 3),
            strict=True,
        ):
            torch.testing.assert_close(got, want)


@custom_gradient
def _sigmoid(x):
    s = torch.sigmoid(x)
    return s, lambda dy: dy * s * (1 - s)


T = torch.tensor([0.5, 2.0], dtype=D, requires_grad=True)


def _t_helper():
    return T


# Hand-written functions whose grad_fn is the true gradient: plain autograd of f's own outputs
# (undecorated) is the reference, for its arguments and the Parameters it reads.
IDIOMS = {
    "calls a decorated function": """
        def f(x):
            s = _sigmoid(x * p)
            def grad(dy, variables=None):
                d = dy * s * (1 - s)
                return d * p, [d * x]
            return s, grad
        """,
    "no_grad and enable_grad inside": """
        def f(x):
            with torch.no_grad():
                k = 2.0
            with torch.enable_grad():
                y = torch.exp(x * p) * k
            def grad(dy, variables=None):
                return dy * y * p, [dy * y * x]
            return y, grad
        """,
    "a Parameter through a dict": """
        def f(x):
            w = params["w"]
            return torch.sin(x * w), lambda dy, variables=None: (
                dy * torch.cos(x * w) * w, [dy * torch.cos(x * w) * x]
            )
        """,
    "returns its argument and a view of it": """
        def f(x, *, scale=1.0):
            def grad(da, db):
                return da + torch.cat([db * scale, torch.zeros_like(x[1:])])
            return (x, x[:1] * scale), grad
        """,
    "a helper reads a tensor that requires grad": """
        def f(x):
            return x * _t_helper(), lambda dy: dy * _t_helper()
        """,
    "a cell tensor that requires grad": """
        def f(x):
            return x * t, lambda dy: dy * t
        """,
}


@pytest.mark.parametrize("wrap", ["plain", "checkpoint", "autocast"])
@pytest.mark.parametrize("name", IDIOMS)
def test_idioms_match_plain_autograd(name, wrap):
    p = torch.nn.Parameter(torch.tensor([0.5, 1.5], dtype=D))
    t = torch.tensor([0.25, 4.0], dtype=D, requires_grad=True)
    scope = {"torch": torch, "_sigmoid": _sigmoid, "_t_helper": _t_helper}
    source = "def make(p, t, params):\n" + textwrap.indent(textwrap.dedent(IDIOMS[name]), "    ") + "    return f\n"  # fmt: skip
    exec(source, scope)
    f = scope["make"](p, t, {"w": p})
    for call in range(3):
        decorated = custom_gradient(f) if call < 2 else custom_gradient(scope["make"](p, t, {"w": p}))  # fmt: skip
        x = torch.tensor([0.3, -0.2 + call], dtype=D, requires_grad=True)
        inputs = [x, p, t, T]

        def called(fn, x=x):
            if wrap == "checkpoint":
                return torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)
            if wrap == "autocast":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return fn(x)
            return fn(x)

        want = _derivatives(lambda: called(lambda u: f(u)[0]), inputs, 3)
        try:
            got = _derivatives(lambda d=decorated: called(d), inputs, 3)
        except CustomGradientError as error:
            assert "requires grad" in name, str(error)
            assert _accepted(error, decorated), str(error)
            continue
        assert "requires grad" not in name
        torch.testing.assert_close(got, want)


_MARK = object()  # a global f reads only to take the recorded route


@given(
    op=st.sampled_from(sorted(OPS)),
    scale=st.sampled_from(["cell number", "cell tensor", "cell Parameter", "tensor argument"]),
    bias=st.sampled_from(list(BIASES)),
    reads=st.sampled_from(READS),
    out=st.sampled_from(OUTS),
)
@derandomized(30)
def test_cells_rebound_between_forward_and_backward_as_on_the_recorded_route(
    op, scale, bias, reads, out
):
    """grad_fn reads a cell when it runs: after a rebind, the rebound value, on every route
    (here the recorded one, which `_MARK` forces, is the reference)."""
    source = _source(op, scale, bias, reads, out)
    results = []
    head, rest = source.split("\n    def f(", 1)
    for mark in ("", "        _MARK\n"):
        namespace = {"torch": torch, "math": math, "_MARK": _MARK}
        exec(head + "\n    def f(" + rest.replace("\n", "\n" + mark, 1), namespace)
        v = _values(0)
        f = namespace["make"](v["c"], v["t"], v["p"], v["q"], v["box"], v["layers"])
        decorated = custom_gradient(f)
        found = []
        for call in range(3):
            g = torch.Generator().manual_seed(call)
            x = (torch.rand(2, generator=g, dtype=D) + 0.25).requires_grad_()
            a = (torch.rand(2, generator=g, dtype=D) + 0.25).requires_grad_()
            extra = a if SCALES[scale][2] == "a" else None

            def called(x=x, extra=extra, f=f, decorated=decorated, call=call):
                out = decorated(x) if extra is None else decorated(x, extra)
                for name, cell in zip(f.__code__.co_freevars, f.__closure__ or (), strict=True):
                    if name in ("c", "t"):
                        cell.cell_contents = cell.cell_contents * (1.5 + call)
                    if name in ("p", "q"):
                        cell.cell_contents = torch.nn.Parameter(cell.cell_contents * 2.0)
                return out

            inputs = [x] + ([a] if extra is not None else []) + [v["p"], v["q"]]
            found.append(_derivatives(called, inputs, 2))
        results.append(found)
    torch.testing.assert_close(*results, msg=lambda m: f"{m}\n{source}")
