"""Decorated functions composed with torch's own machinery: `torch.compile` (Note [compile]),
autocast (grad_fn runs in the forward's autocast state), activation checkpointing and
saved-tensor hooks (Note [saved closures]), the name of the generated node, `torch.jit.trace`
(refused) and `torch.export`.

`mix` and `Scale` have gradients that autodiff would not give, so a path that silently fell back
to differentiating f itself fails the comparisons below.
"""

import collections
import copy
import functools
import inspect
import pickle
import re
import subprocess
import sys
import types

import messages
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from helpers import D
from messages import exactly, within
from torch import nn
from torch._dynamo.utils import counters
from torch.utils.checkpoint import checkpoint

import tf_compat_grad
import tf_compat_grad._autocast
import tf_compat_grad._compile
import tf_compat_grad._decoration
import tf_compat_grad._decorator
from tf_compat_grad import CustomGradientTypeError, custom_gradient, examples, recompute_grad
from tf_compat_grad._torch_internals import DYNAMO_TRACES_WATCHER, TORCH_RELEASE


@custom_gradient
def mix(a, b):
    """Two inputs, two outputs: `(a * b, a + b)` with a made-up gradient."""

    def grad(du, dv):
        return 3 * du + dv, du - 2 * dv * b

    return (a * b, a + b), grad


class Scale(nn.Module):
    """`x * self.weight`; the decorated forward reads `self.weight`, so grad_fn gets it as
    `variables`. Both gradients are scaled away from autodiff's (2x for x, 3x for weight)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, 3, dtype=D))

    @custom_gradient
    def forward(self, x):
        def grad_fn(dy, variables=None):
            return 2 * dy * self.weight, [3 * (dy * x).sum(0)]

        return x * self.weight, grad_fn


def inputs(seed: int, n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [(2 * torch.randn(4, 3, generator=g, dtype=D)).requires_grad_() for _ in range(n)]


def fresh(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_() for t in tensors]


# --- torch.compile --------------------------------------------------------------------------


def several_ops(scale: Scale):
    """Four different decorated functions in one region: a closure over an intermediate, a
    Python float argument, two inputs and two outputs, and a Module reading its Parameter."""

    def fn(x, y):
        a = examples.log1pexp(x)
        b = examples.clipped_relu(x, 1.5)
        u, v = mix(a, y)
        return scale(u) + b * v

    return fn, 2


def module_forward(scale: Scale):
    return scale, 1


COMPILE_CASES = [
    pytest.param(several_ops, "eager", id="several_ops-eager"),
    pytest.param(several_ops, "aot_eager", id="several_ops-aot_eager"),
    pytest.param(several_ops, "inductor", id="several_ops-inductor"),
    pytest.param(module_forward, "eager", id="module_forward-eager"),
    pytest.param(module_forward, "aot_eager", id="module_forward-aot_eager"),
]


@pytest.mark.slow
@pytest.mark.traced_compile
@pytest.mark.parametrize(("case", "backend"), COMPILE_CASES)
def test_compile_matches_eager_in_one_graph(dynamo, case, backend):
    scale = Scale()
    fn, n_inputs = case(scale)
    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for call in range(10):
            args = inputs(call, n_inputs)
            upstream = torch.linspace(-1, 2, 12, dtype=D).reshape(4, 3)
            scale.weight.grad = None
            out = compiled(*args)
            out.backward(upstream)
            grads = [a.grad for a in args] + [scale.weight.grad]

            eager_args = fresh(args)
            scale.weight.grad = None
            eager_out = fn(*eager_args)
            eager_out.backward(upstream)
            eager_grads = [a.grad for a in eager_args] + [scale.weight.grad]

            torch.testing.assert_close(out, eager_out)
            assert all(g is not None for g in grads)
            torch.testing.assert_close(grads, eager_grads)
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]


@custom_gradient
def returns_input(x):
    return x, lambda dy: 2 * dy


@custom_gradient
def returns_twice(x):
    y = x * 3
    return (y, y), lambda a, b: 3 * (a + 10 * b)


@custom_gradient
def returns_view_of_input(x):
    return x[:2], lambda dy: torch.cat([5 * dy, torch.zeros_like(x[2:])])


@pytest.mark.traced_compile
@pytest.mark.parametrize("fn", [returns_input, returns_twice, returns_view_of_input])
def test_compiled_outputs_that_alias_are_copies_as_in_eager(dynamo, fn):
    """An output that is an input, a view of one or an earlier output is a copy (Note [outputs
    that alias an input] in `_run.py`): edited in place, it leaves the input and the other
    outputs as they were, with the gradients of eager mode."""

    def edits(x):
        out = fn(x)
        outs = out if isinstance(out, tuple) else (out,)
        outs[0].mul_(7)
        return sum((i + 1) * o.sum() for i, o in enumerate(outs)), [o.clone() for o in outs]

    results = []
    for run in (edits, torch.compile(edits, backend="aot_eager", fullgraph=True)):
        x = torch.arange(4.0, dtype=D, requires_grad=True)
        loss, outs = run(x)
        loss.backward()
        results.append((outs, x.grad, x.detach()))
    torch.testing.assert_close(results[1], results[0])
    torch.testing.assert_close(results[0][2], torch.arange(4.0, dtype=D))


Pair = collections.namedtuple("Pair", "first second")


@custom_gradient
def tree_out(a, b):
    """Nested outputs in dict key order other than sorted, with a Python number among them."""

    def grad(q_sum, q_diff, q_two, p):  # upstreams in flattened order: keys sorted
        return 2 * p * b + q_sum + 5 * q_diff, 3 * p * a + q_sum - q_diff

    return {"q": (a + b, [a - b, 2.0]), "p": a * b}, grad


@custom_gradient
def namedtuple_out(a, b):
    return {"n": Pair(a * b, a + b)}, lambda u, v: (3 * u * b + v, u * a - v)


@pytest.mark.traced_compile
@pytest.mark.parametrize("fn", [tree_out, namedtuple_out])
def test_compiled_tree_outputs_match_eager(dynamo, fn):
    """The compile path rebuilds outputs in their containers, dict keys in their order."""
    results = []
    for run in (fn, torch.compile(fn, backend="aot_eager", fullgraph=True)):
        a, b = inputs(3, 2)
        out = run(a, b)
        leaves = [t for t in _leaves(out) if t.requires_grad]
        sum((i + 1) * t.sum() for i, t in enumerate(leaves)).backward()
        results.append((out, a.grad, b.grad))
    (eager, *eager_grads), (compiled, *compiled_grads) = results
    assert _shape(compiled) == _shape(eager)
    torch.testing.assert_close(_leaves(compiled), _leaves(eager))
    torch.testing.assert_close(compiled_grads, eager_grads)


def _leaves(tree):
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _leaves(v)]
    if isinstance(tree, (list, tuple)):
        return [t for v in tree for t in _leaves(v)]
    return [tree]


def _shape(tree):
    """The containers of tree, their types and keys in order, without the leaves."""
    if isinstance(tree, dict):
        return type(tree), [(k, _shape(v)) for k, v in tree.items()]
    if isinstance(tree, (list, tuple)):
        return type(tree), [_shape(v) for v in tree]
    return None


@custom_gradient
def scaled_by_keyword(x, scale=1.0):
    return x * scale, lambda dy: 3 * dy * scale  # 3x autodiff's gradient


def _inside_calls(x, y):
    """A keyword, a Python number, two outputs and a tree of outputs: calls whose f runs inside
    the compile node (Note [f inside the compile node] in `_compile_node.py`)."""
    u, v = mix(x, y)
    tree = tree_out(u, examples.clipped_relu(v, 1.5))
    return scaled_by_keyword(tree["p"], scale=1.5) + tree["q"][1][0] * tree["q"][0]


@pytest.mark.traced_compile
def test_compiled_calls_inside_the_node_match_eager_in_the_functions_graph(dynamo):
    """One graph, no recompile, eager's values and gradients; and the forward graph AOT
    autograd makes has no `detach`: f's outputs are the node's own, as a Function's are."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    ops: list[str] = []

    def forward_compiler(gm, example_inputs):
        ops.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return make_boxed_func(gm.forward)

    def backward_compiler(gm, example_inputs):
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=forward_compiler, bw_compiler=backward_compiler)
    compiled = torch.compile(_inside_calls, backend=backend, fullgraph=True)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for call in range(2):
            args = inputs(call, 2)
            out = compiled(*args)
            out.backward(torch.ones_like(out))
            eager_args = fresh(args)
            eager_out = _inside_calls(*eager_args)
            eager_out.backward(torch.ones_like(eager_out))
            torch.testing.assert_close(out, eager_out)
            torch.testing.assert_close([a.grad for a in args], [a.grad for a in eager_args])
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]
    assert ops and not [op for op in ops if "detach" in op], ops


class Log1pexpFunction(torch.autograd.Function):
    """`examples.log1pexp` written by hand: the reference for the guards of a compiled call."""

    @staticmethod
    def forward(ctx, x):
        e = torch.exp(x)
        ctx.save_for_backward(e)
        return torch.log(1 + e)

    @staticmethod
    def backward(ctx, dy):
        (e,) = ctx.saved_tensors
        return dy * (1 - 1 / (1 + e))


def explained_guards(fn, *args) -> int:
    """The guards of fn's compiled frame, which must be one graph (Note [compile guards])."""
    torch._dynamo.reset()
    explained = torch._dynamo.explain(fn)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    return len(explained.out_guards)


@custom_gradient
def cast_gradient(x):
    return x * 2, lambda dy: (2 * dy).float()  # repaired: cast back to float64


@custom_gradient
def broadcast_gradient(x):
    return x.sum(0), lambda dy: torch.ones(2, *x.shape, dtype=D) * dy  # summed down


@custom_gradient
def number_gradient(x, clip):
    return x.clamp(max=clip), lambda dy: (0.5, 7.0)  # a number expanded; 7.0 for `clip` dropped


def _repaired_calls(x, w):
    return cast_gradient(x) + broadcast_gradient(x) + number_gradient(x, 1.5) + cast_gradient(w)


@pytest.mark.traced_compile
def test_compiled_gradients_unlike_their_inputs_are_repaired_as_in_eager(dynamo):
    """The inside node's backward passes on as they are only gradients like their inputs (Note
    [f inside the compile node]); a cast, a broadcast, a number and a Parameter's gradient take
    the record's checks, in the one graph, with eager's values."""
    compiled = torch.compile(_repaired_calls, backend="aot_eager", fullgraph=True)
    x, w = inputs(0, 2)
    w = torch.nn.Parameter(w.detach())
    compiled(x, w).sum().backward()
    ex, ew = fresh([x, w])
    ew = torch.nn.Parameter(ew.detach())
    _repaired_calls(ex, ew).sum().backward()
    torch.testing.assert_close([x.grad, w.grad], [ex.grad, ew.grad])
    assert x.grad.dtype is D and w.grad.dtype is D
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]


# How many more Dynamo guards a compiled decorated call may have than the same op written as a
# hand-written Function: a fence against regressions, not the goal. log1pexp, counted here:
# torch 2.13, 29 against 22 (it was 107, then 90, 70, 63, 57, 46, 42, 39, 31, against 22-25); torch
# 2.15, 31 against 23; the linear layer below, 29 against 24 (2.13), 30 against 25 (2.15). The
# fence is 2.15's 8 over, with one to spare for what ran before in the process. f runs without
# the watcher, inside the node's forward here (Notes [compile unwatched] in `_compile.py`, [f
# inside the compile node] in `_compile_node.py`); what is left is listed in Note [compile
# guards].
EXTRA_GUARDS = 9


@pytest.mark.traced_compile
def test_compiled_call_has_guards_near_a_hand_written_functions(dynamo):
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    function = explained_guards(lambda t: Log1pexpFunction.apply(t), x)
    decorated = explained_guards(lambda t: examples.log1pexp(t), x)
    assert decorated <= function + EXTRA_GUARDS, (decorated, function)


class LinearFunction(torch.autograd.Function):
    """`_linear` written by hand."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return F.linear(x, w, b)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        return dy @ w, dy.t() @ x, dy.sum(0)


@custom_gradient
def _linear(x, w, b):
    return F.linear(x, w, b), lambda dy: (dy @ w, dy.t() @ x, dy.sum(0))


@pytest.mark.traced_compile
def test_compiled_parameters_as_arguments_have_guards_near_a_hand_written_functions(dynamo):
    """A Parameter passed as an argument gets a plain tensor from grad_fn: passed on as it is
    by the inside node's backward (`EXACT_LIKE_INPUT`), not through the record's checks, whose
    globals cost about 30 guards; the gradients are eager's."""
    x = torch.linspace(-1, 1, 6, dtype=D).reshape(2, 3).requires_grad_()
    w = nn.Parameter(torch.linspace(0.5, 1.5, 12, dtype=D).reshape(4, 3))
    b = nn.Parameter(torch.linspace(-0.5, 0.5, 4, dtype=D))
    function = explained_guards(lambda *a: LinearFunction.apply(*a), x, w, b)
    decorated = explained_guards(lambda *a: _linear(*a), x, w, b)
    assert decorated <= function + EXTRA_GUARDS, (decorated, function)
    torch.compile(_linear, backend="aot_eager", fullgraph=True)(x, w, b).sum().backward()
    ex, ew, eb = fresh([x, w, b])
    LinearFunction.apply(ex, ew, eb).sum().backward()
    torch.testing.assert_close([x.grad, w.grad, b.grad], [ex.grad, ew.grad, eb.grad])
    assert type(w.grad) is torch.Tensor


_CW = nn.Parameter(torch.linspace(0.5, 1.5, 12, dtype=D).reshape(4, 3))
_CB = nn.Parameter(torch.linspace(-0.5, 0.5, 4, dtype=D))


@custom_gradient
def _closure_linear(x):
    return F.linear(x, _CW, _CB), lambda dy, variables=None: (dy @ _CW, [dy.t() @ x, dy.sum(0)])


# A call whose f reads Parameters takes the watched route (Note [compile] in `_compile.py`):
# besides the way in, `call_compiled` and the node class with its methods, read once per frame
# (Note [compile guards]; torch 2.13: 30 against 23, 2.15: 32 against 24; it was 47, 51, 37 and
# 39). The fence is 2.15's 8 over, with one to spare.
WATCHED_EXTRA_GUARDS = 9


@pytest.mark.traced_compile
def test_compiled_closure_parameters_have_guards_near_a_hand_written_functions(dynamo):
    """Parameters read from the closure are found by the watcher, their scan read from
    Dynamo's trackers (no guard per Parameter), and their plain-tensor gradients go out as they
    are from the node's generated backward; the gradients are the Function's."""
    x = torch.linspace(-1, 1, 6, dtype=D).reshape(2, 3).requires_grad_()
    function = explained_guards(lambda t: LinearFunction.apply(t, _CW, _CB), x)
    decorated = explained_guards(lambda t: _closure_linear(t), x)
    assert decorated <= function + WATCHED_EXTRA_GUARDS, (decorated, function)
    torch._dynamo.reset()
    _CW.grad = _CB.grad = None
    torch.compile(_closure_linear, backend="aot_eager", fullgraph=True)(x).sum().backward()
    got = [x.grad, _CW.grad, _CB.grad]
    ex, ew, eb = fresh([x, _CW, _CB])
    LinearFunction.apply(ex, ew, eb).sum().backward()
    torch.testing.assert_close(got, [ex.grad, ew.grad, eb.grad])
    assert type(_CW.grad) is torch.Tensor


@pytest.mark.traced_compile
def test_compiled_closure_parameters_under_no_grad(dynamo):
    """Called under `no_grad` in a compiled function (where Dynamo failed inside the node's
    `forward`), a layer reading closure Parameters returns eager's values, none requiring grad,
    and grad mode is as the caller set it before and after; called with grad in the same
    frame, its gradients are the Function's."""

    def step(t):
        with torch.no_grad():
            quiet = _closure_linear(t)
            inner = torch.is_grad_enabled()
        return quiet, _closure_linear(t), inner, torch.is_grad_enabled()

    x = torch.linspace(-1, 1, 6, dtype=D).reshape(2, 3).requires_grad_()
    _CW.grad = _CB.grad = None
    quiet, y, inner, outer = torch.compile(step, backend="aot_eager", fullgraph=True)(x)
    assert (quiet.requires_grad, y.requires_grad, inner, outer) == (False, True, False, True)
    torch.testing.assert_close(quiet, F.linear(x, _CW, _CB).detach())
    y.sum().backward()
    got = [x.grad, _CW.grad, _CB.grad]
    ex, ew, eb = fresh([x, _CW, _CB])
    LinearFunction.apply(ex, ew, eb).sum().backward()
    torch.testing.assert_close(got, [ex.grad, ew.grad, eb.grad])


# --- a decorated function wrapped, copied, transformed (Note [the inline mark]) ---------------

NOTED_CALLS: list[int] = []


@functools.wraps(mix)
def mix_doubled(a, b):
    """A user's wrapper that changes the result: `functools.wraps` copies the decorated
    function's attributes into it, and Dynamo must still trace this body."""
    u, v = mix(a, b)
    return u * 2, v


@functools.wraps(mix)
def mix_noted(a, b):
    """A user's wrapper that adds a side effect."""
    NOTED_CALLS.append(1)
    return mix(a, b)


def _called(wrapper):
    """A frame that reads the wrapper as a global, as Dynamo's builder sees it."""
    return {mix_doubled: lambda a, b: sum(mix_doubled(a, b)), mix_noted: lambda a, b: sum(mix_noted(a, b))}[wrapper]  # fmt: skip


@pytest.mark.skipif(not DYNAMO_TRACES_WATCHER, reason="no compile closure before torch 2.13")
def test_decorations_share_only_the_compile_closure_cells_that_hold_the_same_value_for_all():
    """Dynamo guards a cell it meets again in one frame through the first closure alone, so the
    compile closures of two decorations (one code, both rules) share only the cells whose value
    every compile closure holds (Note [one frame per decoration] in `_compile.py`), each its own
    f, rule, eager path and route question."""

    def decorate(captured):
        return custom_gradient(
            types.FunctionType(mix.__wrapped__.__code__, globals()), captured=captured
        )

    first, second, other = decorate("refuse"), decorate("refuse"), decorate("constant")
    closures = [inspect.getattr_static(g, "_torchdynamo_inline") for g in (first, second, other)]
    assert len({c.__code__ for c in closures}) == 1
    names = closures[0].__code__.co_freevars
    for a, b in [(closures[0], closures[1]), (closures[0], closures[2])]:
        shared = {n for n, x, y in zip(names, a.__closure__, b.__closure__, strict=True) if x is y}
        assert shared == {"inside", "rebuilt_outputs"}


@pytest.mark.traced_compile
@pytest.mark.parametrize("fullgraph", [True, False], ids=["fullgraph", "graph"])
@pytest.mark.parametrize("wrapper", [mix_doubled, mix_noted], ids=["doubled", "noted"])
@pytest.mark.parametrize("reached", ["compiled", "called"])
def test_a_users_wraps_of_a_decorated_function_runs_its_own_body_compiled(
    dynamo, reached, wrapper, fullgraph
):
    """Compiled, a user's `functools.wraps` wrapper of a decorated function returns what it
    returns eagerly (doubled), keeps its side effect and gets eager's gradients (grad_fn's rule),
    in one graph: it carries none of Dynamo's marks (Note [the inline mark] in `_decoration.py`)."""
    fn = wrapper if reached == "compiled" else _called(wrapper)
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=fullgraph)
    assert wrapper.__wrapped__ is mix and wrapper.__tf_compat_grad__ is mix.__tf_compat_grad__
    marked = inspect.getattr_static(mix, "_torchdynamo_inline", None)  # as Dynamo reads it
    assert (marked is not None) == DYNAMO_TRACES_WATCHER
    assert inspect.getattr_static(wrapper, "_torchdynamo_inline", None) is None
    for call in range(3):
        args, upstream = inputs(call, 2), inputs(call + 10, 1)[0].detach()
        NOTED_CALLS.clear()
        out = compiled(*args)
        compiled_calls = len(NOTED_CALLS)
        eager_args = fresh(args)
        eager_out = fn(*eager_args)
        assert compiled_calls == len(NOTED_CALLS) - compiled_calls == (wrapper is mix_noted)
        torch.testing.assert_close(out, eager_out)
        torch.autograd.backward(out, [upstream] * len(out) if type(out) is tuple else upstream)
        torch.autograd.backward(
            eager_out, [upstream] * len(out) if type(out) is tuple else upstream
        )
        torch.testing.assert_close([a.grad for a in args], [a.grad for a in eager_args])
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]


def test_copies_of_a_decorated_functions_attributes_leave_dynamos_mark_out():
    """Every way to copy a decorated function's attributes leaves the inline mark out, and
    they are still shared with its wrapper object, whatever is set on either."""

    @custom_gradient
    def local(x):
        return x * 2, lambda dy: dy * 3

    attributes, wrapper = vars(local), local.__tf_compat_grad__()
    shown = {name: attributes[name] for name in attributes}
    copies = [
        dict(attributes), {**attributes}, attributes.copy(), copy.copy(attributes),
        attributes | {}, {} | attributes, dict(attributes.items()),
        dict(zip(attributes.keys(), attributes.values(), strict=True)),
    ]  # fmt: skip
    assert all(c == shown for c in copies), [set(c) ^ set(shown) for c in copies]
    assert "_torchdynamo_inline" not in shown and "_torchdynamo_inline" not in repr(attributes)
    assert "_torchdynamo_inline" not in dir(local)
    assert len(attributes) == len(shown)
    local.note = 1
    wrapper.other = 2
    assert (wrapper.note, local.other) == (1, 2) and vars(wrapper) is attributes
    assert shown.keys() | {"note", "other"} == attributes.keys()


@pytest.mark.traced_compile
@pytest.mark.parametrize(
    "copied",
    [copy.copy, copy.deepcopy, lambda f: pickle.loads(pickle.dumps(f))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_copied_decorated_function_compiles_as_the_original(dynamo, copied):
    """A decorated function is copied and pickled as the function it is (Note [a decorated
    function is a function] in `_decoration.py`); compiled, its gradients are eager's, in one
    graph."""
    fn = copied(mix)
    assert fn is mix
    args = inputs(0, 2)
    compiled = torch.compile(lambda a, b: sum(fn(a, b)), backend="aot_eager", fullgraph=True)
    compiled(*args).sum().backward()
    eager_args = fresh(args)
    sum(mix(*eager_args)).sum().backward()
    torch.testing.assert_close([a.grad for a in args], [a.grad for a in eager_args])
    assert counters["stats"]["unique_graphs"] == 1


@custom_gradient
def _with_attribute(x):
    return x * 2, lambda dy: dy * 3


_with_attribute.scale = 5.0  # set after decoration, as users do


def _scaled_by_attribute(x):
    return _with_attribute(x) * _with_attribute.scale


@pytest.mark.traced_compile
def test_a_decorated_functions_attribute_read_while_compiled_is_its_value(dynamo):
    """An attribute set on a decorated function, read in a compiled frame: eager's values and
    gradients, whether Dynamo reads it (torch 2.14 on) or, reading the compile closure's attributes
    (2.13: Note [the inline mark] in `_decoration.py`), gives the frame up to Python."""
    x = inputs(0, 1)[0]
    out = torch.compile(_scaled_by_attribute, backend="aot_eager")(x)
    out.sum().backward()
    (ex,) = fresh([x])
    expected = _scaled_by_attribute(ex)
    expected.sum().backward()
    torch.testing.assert_close([out, x.grad], [expected, ex.grad])


# Known limits of the inline mark (Note [the inline mark] in `_decoration.py`): Dynamo reads a
# decorated function's `__code__` from the compile closure it traces in its place, and on torch
# 2.13 its other attributes too, refusing under `fullgraph=True` the read
# of one set on the function (torch 2.14 and 2.15 read those from the function itself).
FULLGRAPH_READS = [
    pytest.param(
        "attribute",
        marks=pytest.mark.xfail(
            DYNAMO_TRACES_WATCHER and TORCH_RELEASE < (2, 14),
            strict=True,
            reason="known limitation (torch 2.13): Dynamo reads the attribute from the compile "
            "closure, which lacks it",
        ),
    ),
    pytest.param(
        "__code__",
        marks=pytest.mark.xfail(
            DYNAMO_TRACES_WATCHER,
            strict=True,
            reason="known limitation: Dynamo reads `__code__` from the compile closure",
        ),
    ),
]


@pytest.mark.traced_compile
@pytest.mark.parametrize("read", FULLGRAPH_READS)
def test_a_decorated_functions_attribute_read_under_fullgraph(dynamo, read):
    def step(x):
        if read == "attribute":
            return _scaled_by_attribute(x)
        return _with_attribute(x), _with_attribute.__code__.co_name

    x = inputs(0, 1)[0]
    got = torch.compile(step, backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(got, step(x))


TRANSFORMS = {
    "grad": lambda loss: torch.func.grad(loss),
    "vmap of grad": lambda loss: torch.func.vmap(torch.func.grad(loss)),
}


@pytest.mark.parametrize("transform", TRANSFORMS.values(), ids=TRANSFORMS.keys())
@pytest.mark.parametrize("called", [mix, mix_doubled], ids=["decorated", "wrapped"])
def test_compiled_transforms_of_a_decorated_function_follow_its_rule(dynamo, transform, called):
    """A `torch.func` transform of a decorated function (or of the user's wrapper of one),
    compiled, gives what it gives eagerly: grad_fn's rule (Note [compile under torch.func])."""
    y = inputs(1, 1)[0].detach()
    x = inputs(0, 1)[0].detach()

    def loss(t):
        u, v = called(t, y[0])
        return (u * v).sum()

    expected = transform(loss)(x)
    torch.testing.assert_close(torch.compile(transform(loss), backend="aot_eager")(x), expected)


_W = nn.Parameter(torch.full((3,), 3.0, dtype=D))  # read by the functions below, not passed


@custom_gradient
def _no_variables(x):
    return x * _W, lambda dy: dy * _W


@custom_gradient
def _named_variables(x):
    return x * _W, lambda dy, variables=None: (dy * _W, [dy * x])


@custom_gradient
def _any_keyword(x):
    return x * _W, lambda dy, **more: (dy * _W, [dy * x])


# After the refusal Dynamo compiles the eager path's frames one by one and warns that it cannot
# trace a functorch builtin there (as at c49b7a9): a warning, not the test's subject.
@pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin")
@pytest.mark.traced_compile
def test_compiled_grad_fn_without_variables_is_refused_as_in_eager(dynamo):
    """Whether grad_fn takes `variables=` is read from its code while Dynamo traces (Note
    [compile guards]): one without it is refused with eager's error, one with it or with
    `**kwargs` gets the Parameter's gradient."""
    x = torch.ones(3, dtype=D, requires_grad=True)
    with pytest.raises(CustomGradientTypeError, match="must accept keyword argument 'variables'"):
        torch.compile(_no_variables, backend="aot_eager")(x)
    for f in (_named_variables, _any_keyword):
        torch._dynamo.reset()
        _W.grad = None
        torch.compile(f, backend="aot_eager", fullgraph=True)(x).sum().backward()
        torch.testing.assert_close(_W.grad, torch.ones(3, dtype=D))


SCALE = torch.full((3,), 2.0, dtype=D)  # rebound to a Parameter by the tests below
SCALES = types.ModuleType("scales")  # a user module: its attribute is rebound too
SCALES.scale = SCALE


def _grad_with_scale(x):
    def grad(dy, variables=None):
        return 5 * dy, [7 * (dy * x).sum(0) for _ in variables or ()]

    return grad


def _breaks(how, x):
    """A graph break inside f, of kind how, or none."""
    if how == "item":
        return x.sum().item()
    if how == "graph_break":
        torch._dynamo.graph_break()
    elif how == "print":
        print("f runs")
    return 0.0


def _scaled_by(where, how):
    """A decorated f that reads its scale from a global, a closure cell or a user module's
    attribute; and the function that rebinds that name to a value."""
    scale = SCALE

    def f(x):
        shift = _breaks(how, x)
        if where == "global":
            return x * SCALE + shift, _grad_with_scale(x)
        if where == "cell":
            return x * scale + shift, _grad_with_scale(x)
        return x * SCALES.scale + shift, _grad_with_scale(x)

    def rebind(value, monkeypatch):
        nonlocal scale
        if where == "global":
            monkeypatch.setattr(sys.modules[__name__], "SCALE", value)
        elif where == "cell":
            scale = value
        else:
            monkeypatch.setattr(SCALES, "scale", value)

    return custom_gradient(f), rebind


@pytest.mark.slow
@pytest.mark.parametrize(
    ("where", "how"),
    [
        pytest.param("global", None, marks=pytest.mark.traced_compile, id="global, one graph"),
        pytest.param("global", "item", id="global, .item() in f"),
        pytest.param("cell", "graph_break", id="closure cell, graph_break() in f"),
        pytest.param("module", "print", id="module attribute, print in f"),
    ],
)
def test_compile_notices_a_name_rebound_to_a_parameter(dynamo, monkeypatch, where, how):
    """f reads no Parameter on the first calls, which run it without the watcher where the
    call is one graph; after a name it reads is rebound to a Parameter it reads one, and the
    compiled call must find it (Note [compile unwatched]: with a graph break in f, nothing in
    the calling frame guards the name)."""
    fn, rebind = _scaled_by(where, how)
    compiled = torch.compile(lambda x: fn(x), backend="eager", fullgraph=how is None)
    x = inputs(0, 1)[0]
    for _ in range(2):
        x.grad = None
        compiled(x).sum().backward()  # a plain tensor: no variables
        torch.testing.assert_close(x.grad, torch.full_like(x, 5.0))
    weight = nn.Parameter(SCALE.clone())
    rebind(weight, monkeypatch)
    for _ in range(2):
        x.grad = weight.grad = None
        compiled(x).sum().backward()
        torch.testing.assert_close(x.grad, torch.full_like(x, 5.0))
        assert weight.grad is not None, "the Parameter read after the rebinding got no gradient"
        torch.testing.assert_close(weight.grad, 7 * x.detach().sum(0))


@pytest.fixture
def older_torch(monkeypatch):
    """The path taken where Dynamo cannot trace a decorated call (Note [compile on older
    torch]), on every torch."""
    monkeypatch.setattr(tf_compat_grad._decorator, "DYNAMO_TRACES_WATCHER", False)
    monkeypatch.setattr(tf_compat_grad._compile, "DYNAMO_TRACES_WATCHER", False)
    monkeypatch.setattr(tf_compat_grad._decoration, "DYNAMO_TRACES_WATCHER", False)


# Dynamo reads `.grad` of the non-leaf tensors live across a graph break (torch's own warning).
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf Tensor")
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_on_older_torch_matches_eager_with_graph_breaks(dynamo, older_torch, backend):
    scale = Scale()
    fn, n_inputs = several_ops(scale)
    compiled = torch.compile(fn, backend=backend)
    depth = torch._C._len_torch_function_stack()
    for call in range(3):
        args = inputs(call, n_inputs)
        scale.weight.grad = None
        out = compiled(*args)
        out.sum().backward()
        grads = [a.grad for a in args] + [scale.weight.grad]
        eager_args = fresh(args)
        scale.weight.grad = None
        eager_out = fn(*eager_args)
        eager_out.sum().backward()
        torch.testing.assert_close(out, eager_out)
        torch.testing.assert_close(grads, [a.grad for a in eager_args] + [scale.weight.grad])
    assert torch._C._len_torch_function_stack() == depth
    assert counters["graph_break"], "each decorated call should be a graph break"


def test_fullgraph_on_older_torch_names_the_version_and_leaves_no_mode(dynamo, older_torch):
    scale = Scale()
    compiled = torch.compile(scale, backend="eager", fullgraph=True)
    depth = torch._C._len_torch_function_stack()
    message = messages.older_torch_reason(Scale.forward)
    for _ in range(3):
        with pytest.raises(Exception, match=within(message)):
            compiled(inputs(0, 1)[0])
        assert torch._C._len_torch_function_stack() == depth


@pytest.mark.slow
def test_importing_the_library_does_not_import_dynamo():
    code = "import sys, tf_compat_grad; assert 'torch._dynamo' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- autocast -------------------------------------------------------------------------------


class Linear(nn.Module):
    """`x @ W.T` with an fp32 weight; grad_fn's `dy @ W` mixes dtypes unless it runs under the
    forward's autocast."""

    def __init__(self, device: str) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = nn.Parameter(torch.randn(5, 4, generator=g).to(device))

    @custom_gradient
    def forward(self, x):
        def grad_fn(dy, variables=None):
            return dy @ self.weight, [dy.T @ x]

        return x @ self.weight.T, grad_fn


def linear_grads(device: str, autocast_dtype: torch.dtype | None):
    linear = Linear(device)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, generator=g).to(device).requires_grad_()
    upstream = torch.linspace(-1, 1, 15).reshape(3, 5).to(device)
    if autocast_dtype is None:
        y = linear(x)
    else:
        with torch.autocast(device, dtype=autocast_dtype):
            y = linear(x)
    y.backward(upstream.to(y.dtype))
    return y, x.grad, linear.weight.grad


AUTOCAST_CASES = [
    pytest.param("cpu", torch.bfloat16, id="cpu-bfloat16"),
    pytest.param(
        "cuda",
        torch.float16,
        id="cuda-float16",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    ),
]


@pytest.mark.parametrize(("device", "dtype"), AUTOCAST_CASES)
def test_autocast_grad_fn_runs_in_forward_autocast_state(device, dtype):
    y, x_grad, w_grad = linear_grads(device, dtype)
    _, x_ref, w_ref = linear_grads(device, None)
    assert y.dtype == dtype  # autocast did apply to f
    assert x_grad.dtype == w_grad.dtype == torch.float32
    torch.testing.assert_close(x_grad, x_ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(w_grad, w_ref, rtol=2e-2, atol=2e-2)


def test_autocast_case_needs_the_fix(monkeypatch):
    # The test above is not vacuous: with grad_fn run outside autocast, torch's matmul raises.
    monkeypatch.setattr(tf_compat_grad._autocast, "current", lambda: ())
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        linear_grads("cpu", torch.bfloat16)


# --- activation checkpointing and saved-tensor hooks ----------------------------------------


def block(scale: Scale):
    """log1pexp closes over `e = exp(x)`, computed in f; `scale` reads its Parameter."""

    def fn(x):
        return scale(examples.log1pexp(x) * x).sin()

    return fn


def on_cpu(fn, x):
    with torch.autograd.graph.save_on_cpu():
        return fn(x)


WRAPPERS = [
    pytest.param(lambda fn, x: checkpoint(fn, x, use_reentrant=False), id="checkpoint"),
    pytest.param(lambda fn, x: checkpoint(fn, x, use_reentrant=True), id="checkpoint_reentrant"),
    pytest.param(on_cpu, id="save_on_cpu"),
]


def block_grads(wrap):
    scale = Scale()
    (x,) = inputs(0, 1)
    wrap(block(scale), x).sum().backward()
    return x.grad, scale.weight.grad


@pytest.mark.parametrize("wrap", WRAPPERS)
def test_saved_tensor_machinery_gives_the_same_gradients(wrap):
    x_grad, w_grad = block_grads(wrap)
    x_ref, w_ref = block_grads(lambda fn, x: fn(x))
    assert x_grad is not None and w_grad is not None
    torch.testing.assert_close((x_grad, w_grad), (x_ref, w_ref))


def second_derivative(fn):
    x = torch.linspace(-2, 2, 5, dtype=D, requires_grad=True)
    (dx,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    (ddx,) = torch.autograd.grad(dx.sum(), x)
    return ddx


def log1pexp_block(x):
    return (examples.log1pexp(x) * x).sin()


def test_second_order_through_non_reentrant_checkpoint():
    # softplus is log1pexp by autodiff: its second derivative includes the term through `e`.
    expected = second_derivative(lambda x: (F.softplus(x) * x).sin())
    torch.testing.assert_close(second_derivative(log1pexp_block), expected)
    checkpointed = second_derivative(lambda x: checkpoint(log1pexp_block, x, use_reentrant=False))
    torch.testing.assert_close(checkpointed, expected)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
@pytest.mark.parametrize(
    "fn", [log1pexp_block, lambda x: (F.softplus(x) * x).sin()], ids=["log1pexp", "torch"]
)
def test_second_order_through_reentrant_checkpoint_is_torchs_error(fn):
    # Reentrant checkpointing has no double backward in torch itself; the library's op must
    # give torch's error, as plain torch ops do, not a silently wrong value.
    x = torch.linspace(-2, 2, 5, dtype=D, requires_grad=True)
    checkpoint(fn, x, use_reentrant=True).sum().backward(create_graph=True)
    with pytest.raises(RuntimeError, match=re.escape("does not require grad")):
        x.grad.sum().backward()


# --- naming ---------------------------------------------------------------------------------


def test_node_is_named_after_the_function():
    y = examples.log1pexp(torch.ones(2, dtype=D, requires_grad=True))
    assert type(y.grad_fn).__name__ == "log1pexpBackward"


# --- torch.jit.trace and torch.export ---------------------------------------------------------


class Softplus(nn.Module):
    def forward(self, x):
        return 2 * examples.log1pexp(x)


def sine(x):
    return torch.sin(x)


# (what is traced, the function the user decorated in it)
TRACED = [
    pytest.param(Softplus, examples.log1pexp, id="module calls a decorated function"),
    pytest.param(Scale, Scale.forward, id="decorated forward"),
    pytest.param(lambda: examples.log1pexp, examples.log1pexp, id="decorated function"),
    pytest.param(lambda: recompute_grad(sine), sine, id="recompute_grad"),
]


# torch 2.13 warns with DeprecationWarning, 2.15 with FutureWarning.
@pytest.mark.filterwarnings("ignore:`torch.jit.trace(_method)?` is deprecated")
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize(("make", "decorated"), TRACED)
def test_jit_trace_is_refused_by_name(make, decorated, requires_grad):
    """A traced graph keeps f's ops without grad_fn: refused, not traced with autodiff's
    gradient (the trace used to fail its sanity check, or trace f's ops with no input
    requiring grad)."""
    x = torch.linspace(-1, 1, 3, dtype=D).requires_grad_(requires_grad)
    with pytest.raises(
        tf_compat_grad.CustomGradientNotImplementedError,
        match=exactly(messages.jit_trace(decorated)),
    ):
        torch.jit.trace(make(), (x,))


# torch 2.15's strict export warns that the traced forward had side effects (the Parameter
# watcher's list of what f read, made and dropped inside the call).
# torch 2.13 warns with DeprecationWarning, 2.15 with FutureWarning.
@pytest.mark.filterwarnings("ignore:`torch.jit.trace(_method)?` is deprecated")
def test_jit_trace_refusal_names_a_partial_as_the_user_wrote_it():
    partial = functools.partial(torch.round, decimals=1)
    rounded = tf_compat_grad.grad_pass_through(partial)
    with pytest.raises(
        tf_compat_grad.CustomGradientNotImplementedError,
        match=exactly(messages.jit_trace(partial)),
    ):
        torch.jit.trace(rounded, torch.ones(2, dtype=D, requires_grad=True))


class Residual(nn.Module):
    """`x + 2 * log1pexp(x)`: a path around the decorated call, whose gradient an exported
    program gave alone (1 where the true gradient is `1 + 2 * sigmoid(x)`)."""

    def forward(self, x):
        return x + 2 * examples.log1pexp(x)


EXPORTED = [
    pytest.param(Softplus, examples.log1pexp, id="module calls a decorated function"),
    pytest.param(Scale, Scale.forward, id="decorated forward reading a Parameter"),
    pytest.param(Residual, examples.log1pexp, id="a path around the decorated call"),
]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:While compiling, we found certain side effects")
@pytest.mark.parametrize("strict", [False, pytest.param(True, marks=pytest.mark.traced_compile)])
@pytest.mark.parametrize(("make", "decorated"), EXPORTED)
def test_export_computes_the_forward_and_refuses_a_backward(make, decorated, strict):
    """What the refusal above points to: the exported program computes the outputs (Note
    [export]); a backward through the decorated call, whose grad_fn export does not record, is
    refused by name, wherever the gradient would come from (an input, a Parameter)."""
    x = torch.linspace(-1, 1, 3, dtype=D)
    model = make()
    exported = torch.export.export(model, (x,), strict=strict).module()
    with torch.no_grad():
        torch.testing.assert_close(exported(x), model(x))
    torch.testing.assert_close(exported(x.clone().requires_grad_()), model(x))
    refused = pytest.raises(
        tf_compat_grad.CustomGradientNotImplementedError,
        match=exactly(messages.exported_backward(decorated)),
    )
    with refused:
        exported(x.clone().requires_grad_()).sum().backward()
    if list(exported.parameters()):  # the Parameter alone needs a gradient
        with refused:
            exported(x).sum().backward()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:While compiling, we found certain side effects")
# torch 2.4's `torch.export.load` calls `torch.load` without `weights_only`.
@pytest.mark.filterwarnings("ignore:You are using `torch.load` with `weights_only=False`")
def test_a_saved_exported_program_loads_and_runs(tmp_path):
    """The op that guards the exported call (Note [export]) is torch's to serialize."""
    x = torch.linspace(-1, 1, 3, dtype=D)
    path = tmp_path / "residual.pt2"
    torch.export.save(torch.export.export(Residual(), (x,), strict=False), path)
    loaded = torch.export.load(path).module()
    torch.testing.assert_close(loaded(x), Residual()(x))
    with pytest.raises(
        tf_compat_grad.CustomGradientNotImplementedError,
        match=exactly(messages.exported_backward(examples.log1pexp)),
    ):
        loaded(x.clone().requires_grad_()).sum().backward()


@pytest.mark.skipif(DYNAMO_TRACES_WATCHER, reason="strict export traces the call from torch 2.13")
@pytest.mark.parametrize(("make", "decorated"), TRACED[:2])
def test_strict_export_on_older_torch_names_the_version_and_the_way_out(make, decorated):
    x = torch.linspace(-1, 1, 3, dtype=D)
    # The version, and `strict=False` as the way out, are in the message.
    with pytest.raises(Exception, match=within(messages.older_torch_reason(decorated))):
        torch.export.export(make(), (x,), strict=True)
    assert torch._C._len_torch_function_stack() == 0


# --- decorating inside a compiled region ------------------------------------------------------


class DecoratesInside(nn.Module):
    """Decorates in `forward`, on every call, as TensorFlow code defines `@tf.custom_gradient`
    inside `call` (and `port` translates it): the decorated function reads the module's
    Parameter, so grad_fn gets it as `variables`."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(3.0, dtype=D))

    def forward(self, x):
        @custom_gradient
        def inner(t):
            def grad(dy, variables=None):  # untrue gradients: the rule must be followed
                return dy * 5, [7 * dy.sum()]

            return t * 2 * self.weight, grad

        return inner(x)


class RecomputesInside(nn.Module):
    """`recompute_grad(block)(x)` inside forward, as TensorFlow code writes it."""

    def forward(self, x):
        def block(t):
            return torch.sin(t) * 2

        return recompute_grad(block)(x)


class CountingBackend:
    """The eager backend, counting the graphs Dynamo hands it."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm


@pytest.mark.traced_compile
@pytest.mark.parametrize("fullgraph", [True, False])
def test_decorating_inside_compile_is_one_graph_that_follows_the_rule(dynamo, fullgraph):
    module = DecoratesInside()
    backend = CountingBackend()
    compiled = torch.compile(module, backend=backend, fullgraph=fullgraph)
    for _ in range(3):  # a new decoration on each call: no recompile
        x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
        module.weight.grad = None
        out = compiled(x)
        torch.testing.assert_close(out, 6 * x.detach())
        out.sum().backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 5.0, dtype=D))
        torch.testing.assert_close(module.weight.grad, torch.tensor(21.0, dtype=D))
    assert backend.graphs == 1
    assert not counters["graph_break"]


@pytest.mark.traced_compile
def test_a_decoration_made_while_compiling_and_called_in_eager_mode_takes_the_eager_path(dynamo):
    kept = []

    def forward(x):
        @custom_gradient
        def exp(t):
            e = torch.exp(t)
            return e, lambda dy: dy * e  # second order flows through e's own graph

        kept.append(exp)
        return exp(x)

    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    torch.compile(forward, backend="eager", fullgraph=True)(x)
    (dx,) = torch.autograd.grad(kept[0](x).sum(), x, create_graph=True)  # outside Dynamo
    (ddx,) = torch.autograd.grad(dx.sum(), x)
    torch.testing.assert_close(ddx, torch.exp(x.detach()))  # the compile node would give 0


@pytest.mark.traced_compile
def test_recompute_inside_fullgraph_compile_names_the_function_and_the_fix(dynamo):
    compiled = torch.compile(RecomputesInside(), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="custom_gradient decorates") as info:
        compiled(torch.ones(2, dtype=D))
    line = RecomputesInside.forward.__code__.co_firstlineno + 1  # the line after `def forward`
    inner = f"`RecomputesInside.forward.<locals>.block` ({__file__.rsplit('/', 1)[-1]}:{line})"
    assert messages.decorated_while_compiling(inner) in str(info.value)


# Simulated on a torch whose Dynamo shows the graph break's message (before 2.13 it shows its own).
@pytest.mark.traced_compile
@pytest.mark.parametrize("make", [DecoratesInside, RecomputesInside])
def test_decorating_inside_fullgraph_compile_on_older_torch_names_the_function(
    dynamo, older_torch, make
):
    compiled = torch.compile(make(), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="custom_gradient decorates") as info:
        compiled(torch.ones(2, dtype=D))
    assert f"{make.__name__}.forward.<locals>." in str(info.value)


@pytest.mark.traced_compile
# On Python 3.13, Dynamo notes that it cannot trace the C constructor with which the wrapper's
# nodes mark their code skipped, and graph-breaks there (as the test shows, the rule is followed).
@pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin")
def test_recompute_inside_compile_is_a_graph_break_that_follows_the_rule(dynamo):
    recomputed = torch.compile(RecomputesInside(), backend="eager")
    for _ in range(2):
        x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
        (custom,) = torch.autograd.grad(recomputed(x).sum(), x)
        torch.testing.assert_close(custom, 2 * torch.cos(x.detach()))  # plain autograd's


# --- torch.jit.script -------------------------------------------------------------------------


class ScaleSubclass(Scale):
    """Inherits the decorated forward."""


@custom_gradient
def untyped_double(x):
    return 2 * x, lambda dy: 5 * dy  # an untrue gradient: the rule must be followed


class CallsDecorated(nn.Module):
    def forward(self, x):
        return untyped_double(x) * 3


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize(
    ("make", "decorated"),
    [
        pytest.param(lambda: examples.log1pexp, examples.log1pexp, id="decorated function"),
        pytest.param(Scale, Scale.forward, id="decorated forward"),
        pytest.param(ScaleSubclass, Scale.forward, id="inherited decorated forward"),
        pytest.param(
            lambda: nn.Sequential(nn.Identity(), Scale()), Scale.forward, id="as a submodule"
        ),
    ],
)
def test_jit_script_is_refused_by_name(make, decorated):
    """TorchScript failed inside the library's own file, naming neither f nor the way out."""
    with pytest.raises(
        tf_compat_grad.CustomGradientNotImplementedError, match=exactly(messages.script(decorated))
    ):
        torch.jit.script(make())


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_jit_script_of_a_module_calling_a_decorated_function_keeps_the_rule():
    """TorchScript keeps the call as a call to Python: the custom gradient, as in eager mode."""
    scripted = torch.jit.script(CallsDecorated())
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    (custom,) = torch.autograd.grad(scripted(x).sum(), x)
    x2 = x.detach().requires_grad_()
    (eager,) = torch.autograd.grad(CallsDecorated()(x2).sum(), x2)
    torch.testing.assert_close(custom, eager)
    torch.testing.assert_close(custom, torch.full((3,), 15.0, dtype=D))
