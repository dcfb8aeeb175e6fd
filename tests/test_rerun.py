"""f run unrecorded and run again, recorded, for a second derivative (Note [f run again] in
`_rerun.py`): which code qualifies, that such calls record nothing of f's and keep no more than
a hand-written Function, and that values and first, second and third derivatives are plain
autograd's and the recorded path's, on the first call (the general code) and on the planned
calls after it."""

import gc
import math
import textwrap
import weakref

import pytest
import torch
from helpers import D, cyclic_garbage_of, saved_while_called, where
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import _reach, custom_gradient
from tf_compat_grad._errors import CustomGradientValueError
from tf_compat_grad._unrecorded import rerunnable, unrecorded


def _made(body: str, **namespace):
    """The function `f` that body defines, in a namespace of torch, math and `namespace`; each
    call makes a new code object."""
    scope = {"torch": torch, "math": math, **namespace}
    exec(compile(textwrap.dedent(body), "<rerun test>", "exec"), scope)
    return scope["f"]


# Functions that run again: grad_fn reads what f computed. Each grad_fn is the true derivative
# of f's outputs (`_plain`).
AGAIN = {
    "log1pexp": """
        def f(x):
            e = torch.exp(x)
            def grad(dy):
                return dy * e / (1 + e)
            return torch.log(1 + e), grad
        """,
    "sigmoid, grad_fn reads its output": """
        def f(x):
            y = torch.sigmoid(x)
            def grad(dy):
                return dy * y * (1 - y)
            return y, grad
        """,
    "two inputs, two outputs, a number by keyword": """
        def f(a, b, c=2.0):
            s, t = torch.sin(a * b), torch.exp(c * b)
            def grad(du, dv):
                return du * torch.cos(a * b) * b, du * torch.cos(a * b) * a + dv * c * t
            return (s, t), grad
        """,
    "a list of intermediates in a cell, a helper made in f": """
        def f(x):
            def square(u):
                return u * u
            parts = [torch.exp(x), square(x)]
            def grad(dy):
                return dy * (parts[0] + 2 * x)
            return parts[0] + parts[1], grad
        """,
}
# Functions that keep recording. Each draws random numbers a run again would draw anew: `n`
# does not depend on x, so the second derivative of `exp(x * n)` is `n * n * exp(x * n)` at
# the call's draw...
DRAWS = {
    "rand_like": "n = torch.rand_like(x)",
    "randn": "n = torch.randn(x.shape, dtype=x.dtype)",
    "dropout": "n = torch.nn.functional.dropout(torch.ones_like(x), 0.5) + 1",
    "bernoulli": "n = torch.bernoulli(torch.full_like(x, 0.5)) + 1",
    "normal": "n = torch.normal(torch.zeros_like(x), 1.0)",
    "poisson": "n = torch.poisson(torch.ones_like(x))",
    "multinomial": "n = torch.multinomial(torch.ones(5, dtype=x.dtype), 5).to(x.dtype)",
    "a generator by keyword": "n = torch.rand(x.shape, generator=None, dtype=x.dtype)",
    "rrelu": "n = torch.nn.functional.rrelu(-torch.ones_like(x), training=True)",
}
# ... or names what a run again could not repeat, or keeps what it computed beyond the call.
RECORDED = {
    **DRAWS,
    "uninitialised memory": "n = torch.empty_like(x)",
    "printing": "n = x * 1; print(n)",
    "a custom op": "n = torch.ops.aten.sin(x)",
    "the seed": "n = x * torch.initial_seed()",
    "attention": "n = torch.nn.functional.scaled_dot_product_attention(x[None, None, :, None], x[None, None, :, None], x[None, None, :, None])[0, 0, :, 0]",
    "batch statistics": "n = torch.nn.functional.batch_norm(x[None], None, None, training=True)[0]",
    "torch.save": "n = x * 1; torch.save(n, 'never')",
    "atomics on CUDA": "n = torch.zeros_like(x).scatter_add(0, torch.zeros(5, dtype=torch.long), x)",
    "a global store": "global KEPT; KEPT = n = x * 1",
    "an attribute store": "x.kept = n = x * 1",
    "in place": "n = x * 1; n += 1",
    "an in-place method": "n = x * 1; n.mul_(1)",
    "grad mode set": "n = x * 1; torch.set_grad_enabled(True)",
}


def _recorded_source(line: str) -> str:
    return f"def f(x):\n    {line}\n    e = torch.exp(x * n)\n    return e, lambda dy: dy * n * e\n"


@pytest.mark.parametrize("name", AGAIN)
def test_functions_that_read_what_they_computed_run_again(name):
    f = _made(AGAIN[name])
    assert rerunnable(f) and not unrecorded(f)


@pytest.mark.parametrize("name", RECORDED)
def test_functions_with_randomness_or_side_effects_keep_recording(name):
    assert not rerunnable(_made(_recorded_source(RECORDED[name])))


def test_a_free_variable_or_another_global_keeps_recording():
    scale = torch.tensor(2.0)

    def closed(x):
        e = torch.exp(x * scale)
        return e, lambda dy: dy * scale * e

    assert not rerunnable(closed)
    source = "def f(x):\n    e = T.exp(x)\n    return e, lambda dy: dy * e\n"
    assert rerunnable(_made(source, T=torch))
    assert not rerunnable(_made(source, T=type("T", (), {"exp": staticmethod(torch.exp)})))


def _recorded_copy(source, monkeypatch):
    """A decoration of a new copy of f's code that keeps recording: `rerunnable` answers False
    while it makes its first call (the question is asked once per analysis)."""
    decorated = custom_gradient(_made(source))
    x = torch.rand(3, dtype=D, requires_grad=True)
    with monkeypatch.context() as patched:
        patched.setattr(_reach, "rerunnable", lambda f: False)
        decorated(*[x] * _arity(decorated))
    return decorated


def _arity(decorated):
    f = decorated.__wrapped__
    return f.__code__.co_argcount - len(f.__defaults__ or ())


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


def _derivatives(fn, xs, how):
    """Values, then first, second and third derivatives of a weighted sum of fn's outputs,
    each as a list over xs; `how`: through `torch.autograd.grad` or `.backward`."""
    outs = _flat(fn(*xs))
    loss = sum(((o * o).sum() + o.sum() * (i + 1)) for i, o in enumerate(outs))
    found = [outs]
    for order in range(3):
        create = order < 2
        if how == "grad":
            grads = torch.autograd.grad(loss, xs, create_graph=create, allow_unused=True)
        else:
            for x in xs:
                x.grad = None
            loss.backward(create_graph=create, inputs=list(xs))
            grads = [x.grad for x in xs]
            for x in xs:
                x.grad = None
        grads = [torch.zeros_like(x) if g is None else g for g in grads]
        found.append(grads)
        loss = sum((g * torch.arange(1, g.numel() + 1, dtype=g.dtype)).sum() for g in grads)
    return found


def _leaves(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(5, generator=g, dtype=D) + 0.25).requires_grad_() for _ in range(n)]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("how", ["grad", "backward"])
@pytest.mark.parametrize("name", AGAIN)
def test_derivatives_to_the_third_are_plain_autograds_and_the_recorded_paths(
    name, how, monkeypatch
):
    decorated = custom_gradient(_made(AGAIN[name]))
    recorded = _recorded_copy(AGAIN[name], monkeypatch)
    f = _made(AGAIN[name])

    def plain(*xs):
        return f(*xs)[0]

    for call in range(3):  # the general code, then the plan it learned
        n = _arity(decorated)
        # Unrecorded, the call saves grad_fn's tensors alone; recorded, its ops save theirs.
        saved = [saved_while_called(fn, *_leaves(n, call)) for fn in (decorated, recorded)]
        assert saved[0] < saved[1]
        got = _derivatives(decorated, _leaves(n, call), how)
        for reference in (recorded, plain):
            want = _derivatives(reference, _leaves(n, call), how)
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w)


class _Exps(TorchDispatchMode):
    """Counts the exponentials computed, which log1pexp's f makes once per run (a dispatch
    mode, unlike a function mode, stays active in backward)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten.exp.default
        return func(*args, **(kwargs or {}))


def test_f_runs_unrecorded_once_and_again_only_for_a_second_derivative():
    decorated = custom_gradient(_made(AGAIN["log1pexp"]))
    for _ in range(3):
        x = torch.rand(4, dtype=D, requires_grad=True)
        assert saved_while_called(decorated, x) == 1  # e alone: exp and log record nothing
        with _Exps() as exps:
            y = decorated(x)
            (g,) = torch.autograd.grad(y.sum(), x, retain_graph=True)
            assert exps.count == 1
            (g2,) = torch.autograd.grad(y.sum(), x, create_graph=True)
            assert exps.count == 2
        torch.testing.assert_close((g, g2), (torch.sigmoid(x),) * 2)


@pytest.mark.parametrize("args", ["x * 1", "x, c", "x, x * 1"])
def test_a_call_whose_tensors_are_not_all_leaves_that_require_grad_records(args, monkeypatch):
    source = """
        def f(a, b=None):
            e = torch.exp(a) if b is None else torch.exp(a * b)
            def grad(dy):
                return (dy * e * b, dy * e * a) if b is not None else dy * e
            return e, grad
        """
    decorated = custom_gradient(_made(source))
    recorded = _recorded_copy(source, monkeypatch)
    assert rerunnable(decorated.__wrapped__)
    for _ in range(3):
        x = torch.rand(4, dtype=D, requires_grad=True)
        c = torch.rand(4, dtype=D)
        seconds = []
        for fn in (decorated, recorded):
            call = eval(f"lambda x, c: fn({args})", {"fn": fn})
            assert saved_while_called(call, x, c) > 1  # exp's own backward saved its result
            (g,) = torch.autograd.grad(call(x, c).sum(), x, create_graph=True)
            seconds.append(torch.autograd.grad(g.sum(), x))
        torch.testing.assert_close(*seconds)


def _first_order_only(y, x, s):
    """The message of the refusal of the second derivative of `y = sigmoid(x)` (its value at the
    call `s`), after checking that the first-order backward still works."""
    (g,) = torch.autograd.grad(y.sum(), x, retain_graph=True)
    torch.testing.assert_close(g, s * (1 - s))
    with pytest.raises(CustomGradientValueError) as error:
        torch.autograd.grad(y.sum(), x, create_graph=True)
    return str(error.value)


def test_a_second_derivative_after_an_edit_in_place_of_an_argument_is_refused():
    decorated = custom_gradient(_made(AGAIN["sigmoid, grad_fn reads its output"]))
    for _ in range(3):
        x = torch.rand(4, dtype=D, requires_grad=True)
        y = decorated(x)
        before = torch.sigmoid(x.detach().clone())
        with torch.no_grad():
            x.add_(1.0)  # an optimizer step between forward and backward
        message = _first_order_only(y, x, before)  # first order: as recorded
        assert where(decorated) in message and "`x`" in message
        assert "edited in place" in message and "version 0 then, 1 now" in message
        assert "x.clone()" in message


def _rebind_default(f, scope):
    f.__defaults__ = (2.0,)


def _rebind_global(f, scope):
    scope["torch"] = _Tanh()


def _rebind_code(f, scope):
    f.__code__ = _made("def f(x, k=1.0):\n    return torch.tanh(x), lambda dy: dy\n").__code__


class _Tanh:
    """A global `torch` rebound to something whose `sigmoid` is another function."""

    def __getattr__(self, name):
        return torch.tanh if name == "sigmoid" else getattr(torch, name)


@pytest.mark.parametrize(
    "rebind",
    [_rebind_default, _rebind_global, _rebind_code],
    ids=["a default", "a global name", "its code"],
)
def test_a_second_derivative_after_what_f_reads_was_rebound_is_refused(rebind):
    """Run again, f would run with what it reads now, not what the call read: refused. A
    first-order backward uses grad_fn as saved and is unaffected."""
    for call in range(2):  # the general code, then the plan
        scope = {"torch": torch}
        exec(
            "def f(x, k=1.0):\n"
            "    y = torch.sigmoid(x) * k\n"
            "    def grad(dy):\n"
            "        return dy * y * (1 - y / k)\n"
            "    return y, grad\n",
            scope,
        )
        decorated = custom_gradient(scope["f"])
        x = torch.rand(4, dtype=D, requires_grad=True)
        for _ in range(call):
            decorated(x)
        y = decorated(x)
        rebind(scope["f"], scope)
        message = _first_order_only(y, x, torch.sigmoid(x.detach()))
        assert where(decorated) in message and "rebound after the call" in message
        assert "before rebinding" in message and "x.clone()" in message


@pytest.mark.parametrize("leaf", [True, False])
def test_checkpointed_calls_save_the_same_tensors_when_recomputed(leaf):
    decorated = custom_gradient(_made(AGAIN["log1pexp"]))
    for _ in range(3):
        x = torch.rand(4, dtype=D, requires_grad=True)
        y = checkpoint(decorated, x if leaf else x * 1, use_reentrant=False)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (g2,) = torch.autograd.grad(g.sum(), x)
        s = torch.sigmoid(x)
        torch.testing.assert_close((g, g2), (s, s * (1 - s)))
        y = checkpoint(decorated, x if leaf else x * 1, use_reentrant=False)
        (g,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(g, s)


def test_retained_graphs_take_first_and_second_derivatives_in_any_order():
    decorated = custom_gradient(_made(AGAIN["sigmoid, grad_fn reads its output"]))
    for _ in range(3):
        x = torch.rand(4, dtype=D, requires_grad=True)
        y = decorated(x)
        s = torch.sigmoid(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True, retain_graph=True)
        (g_again,) = torch.autograd.grad(y.sum(), x, retain_graph=True)
        (g2,) = torch.autograd.grad(g.sum(), x)
        (h,) = torch.autograd.grad(y.sum(), x, create_graph=True, retain_graph=False)
        (h2,) = torch.autograd.grad(h.sum(), x)
        torch.testing.assert_close((g, g_again, h), (s * (1 - s),) * 3)
        torch.testing.assert_close((g2, h2), (s * (1 - s) * (1 - 2 * s),) * 2)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            torch.autograd.grad(y.sum(), x, create_graph=True)  # freed, as recorded


def test_a_backward_under_autocast_runs_f_again_as_the_call_ran():
    decorated = custom_gradient(_made(AGAIN["log1pexp"]))
    for _ in range(3):
        x = torch.rand(4, 4, requires_grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert saved_while_called(decorated, x) > 1  # under autocast: recorded
        x = torch.rand(4, 4, requires_grad=True)
        y = decorated(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (g2,) = torch.autograd.grad(g.sum(), x)
        s = torch.sigmoid(x)
        torch.testing.assert_close(g2, s * (1 - s))
        assert g2.dtype == torch.float32


class _Census(TorchDispatchMode):
    """The storages of what each aten op returned, weakly (as benchmarks/_memory.py counts)."""

    def __init__(self):
        super().__init__()
        self.made = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.made.append(StorageWeakRef(t.untyped_storage()))
        return out

    def kept(self):
        return len({ref.cdata for ref in self.made if not ref.expired()})


class _Sigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return dy * y * (1 - y)


@pytest.mark.parametrize("name", ["sigmoid, grad_fn reads its output", "log1pexp"])
def test_the_graph_keeps_what_a_hand_written_function_keeps_and_frees_the_arguments(name):
    """The storages the graph keeps alive: sigmoid's output, as the hand-written Function's;
    log1pexp's output and e (recorded, also `1 + e`, which log saves)."""
    decorated = custom_gradient(_made(AGAIN[name]))
    kept = {}
    # The first call, on the general code, makes what goes with f's code (the plan, the node
    # classes), which may push another code's out of their bounded caches: garbage for the
    # collector, whatever the call. It runs before the collector is turned off, as does the
    # first entry of a mode, which leaves cycles that hold the frames (Dynamo's import).
    for impl, fn in (("first call", decorated), ("Function", _Sigmoid.apply)):
        x = torch.rand(100, requires_grad=True)
        with _Census() as census:
            y = fn(x)
        kept[impl] = census.kept()
    for impl, fn in (("Function", _Sigmoid.apply), *(("decorated", decorated),) * 3):
        x = torch.rand(100, requires_grad=True)
        gone = weakref.ref(x)
        while gc.collect():  # what one collection frees can free more (a code's node classes)
            pass
        gc.disable()
        try:
            with _Census() as census:
                y = fn(x)
            del x
            kept[impl] = census.kept()
            assert gone() is not None  # the graph holds the leaf, as any node's edge does
            (g,) = torch.autograd.grad(y.sum(), gone(), create_graph=impl == "decorated")
            if impl == "decorated":  # f run again: the leaf is the argument
                torch.autograd.grad(g.sum(), gone())
            del y, g
            assert gone() is None  # ... and nothing else does, no reference cycle either
            assert cyclic_garbage_of(__name__) == []
        finally:
            gc.enable()
    assert kept["Function"] == 1
    assert kept["decorated"] == kept["first call"] == (1 if name.startswith("sigmoid") else 2)


def test_a_decoration_inside_forward_differentiates_to_the_third():
    class Module(torch.nn.Module):
        def forward(self, x):
            @custom_gradient
            def softplus(x):
                e = torch.exp(x)

                def grad(dy):
                    return dy * e / (1 + e)

                return torch.log(1 + e), grad

            return softplus(x)

    module = Module()
    for call in range(3):
        (x,) = _leaves(1, call)
        got = _derivatives(module, [x], "grad")
        want = _derivatives(lambda t: torch.log(1 + torch.exp(t)), _leaves(1, call), "grad")
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("name", DRAWS)
def test_a_function_that_draws_differentiates_twice_at_its_draw(name):
    """Run again, the draw would differ from the call's, and so would the second derivative;
    recorded, it is the one at the draw the call made."""
    source = _recorded_source(DRAWS[name])
    decorated = custom_gradient(_made(source))
    for call in range(3):
        (x,) = _leaves(1, call)
        torch.manual_seed(call)
        y = decorated(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (g2,) = torch.autograd.grad(g.sum(), x)
        n = torch.log(y.detach()) / x.detach()  # the call's draw: y = exp(x * n)
        torch.testing.assert_close(g2, n * n * y.detach(), msg=source)


def test_a_function_that_prints_prints_once_per_call(capsys):
    decorated = custom_gradient(_made(_recorded_source("n = x * 1; print('called')")))
    for call in range(3):
        (x,) = _leaves(1, call)
        (g,) = torch.autograd.grad(decorated(x).sum(), x, create_graph=True)
        torch.autograd.grad(g.sum(), x)
        assert capsys.readouterr().out == "called\n"


def test_a_closure_changed_between_forward_and_backward_differentiates_as_recorded():
    """Recorded, what grad_fn reads of f's work is at the value the closure held at the call,
    as f ran then; a run again would read what it holds now."""
    scale = [2.0]

    @custom_gradient
    def scaled_exp(x):
        e = torch.exp(x * scale[0])

        def grad(dy):
            return dy * scale[0] * e

        return e, grad

    for call in range(3):
        (x,) = _leaves(1, call)
        y = scaled_exp(x)
        was = scale[0]
        scale[0] += 1.0
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (g2,) = torch.autograd.grad(g.sum(), x)
        torch.testing.assert_close(g2, scale[0] * was * torch.exp(x.detach() * was))


def test_torch_func_takes_its_own_route():
    """Under a `torch.func` transform the call takes the transform node (Note [transforms]),
    which runs f inside it: the second derivative is the same."""
    decorated = custom_gradient(_made(AGAIN["log1pexp"]))
    x = torch.rand(4, dtype=D)
    for _ in range(2):
        second = torch.func.grad(lambda t: torch.func.grad(lambda u: decorated(u).sum())(t).sum())
        s = torch.sigmoid(x)
        torch.testing.assert_close(second(x), s * (1 - s))


def test_a_call_that_leaves_its_plan_after_f_ran_still_runs_again():
    """f returns another structure than the plan learned: the general code finishes the call
    whose f ran unrecorded, and a second derivative still runs it again."""
    source = """
        def f(x):
            e = torch.exp(x)
            def grad(dy):
                return dy * e / (1 + e)
            def grad2(dy, dz):
                return (dy + 2 * dz) * e / (1 + e)
            if x.dim() == 1:
                return torch.log(1 + e), grad
            return (torch.log(1 + e), 2 * torch.log(1 + e)), grad2
        """
    decorated = custom_gradient(_made(source))
    for shape in [(4,), (4,), (2, 2), (2, 2)]:  # the first call learns one output
        x = torch.rand(shape, dtype=D, requires_grad=True)
        assert saved_while_called(decorated, x) == 1
        y = _flat(decorated(x))
        (g,) = torch.autograd.grad(sum(o.sum() for o in y), x, create_graph=True)
        (g2,) = torch.autograd.grad(g.sum(), x)
        s, k = torch.sigmoid(x), len(y) ** 2 - len(y) + 1  # 1 output: 1; (y, 2y): 3
        torch.testing.assert_close((g, g2), (k * s, k * s * (1 - s)))
