"""Under `torch.compile`, the route and the inside node's checks are read from what Dynamo holds
of the call (its trackers, in `comptime` callbacks: Note [compile guards] in `_compile.py`).
Where that cannot be read (another kind of tracker, or Dynamo's internals changed), the same
checks are traced instead: the same values, gradients and refusals, at the cost of guards."""

import pytest
import torch

from tf_compat_grad import _compile, _compile_node, _compile_outputs, _watcher, custom_gradient
from tf_compat_grad._errors import PREFIX
from tf_compat_grad._structure import flatten

pytestmark = pytest.mark.traced_compile

D = torch.float64


@custom_gradient
def _one(x):
    e = torch.exp(x)
    return torch.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))


@custom_gradient
def _two(a, b):
    return (a * b, a - b), lambda da, db: (da * b + db, da * a - db)


@custom_gradient
def _nested(a, b):  # a tree: rebuilt from its plan, its leaves read by their paths
    def grad_fn(dp, ds, dd):
        return dp * b + ds + dd, dp * a + ds - dd

    return {"p": a * b, "q": [a + b, (a - b,)]}, grad_fn


@custom_gradient
def _itself(x):  # an output that is the input: copied, as in eager mode
    return x, lambda dy: dy * 2


@custom_gradient
def _view(x):  # an output that is a view of the input: copied too
    return x[1:], lambda dy: torch.cat([dy[:1] * 0, dy * 3])


@custom_gradient
def _not_a_pair(x):
    return x * 2


@custom_gradient
def _too_few_upstreams(a, b):
    return (a * b, a - b), lambda da: (da * b, da * a)


@custom_gradient
def _edits(x):
    x.mul_(2)
    return x * 1, lambda dy: dy


CASES = {
    "one output": (_one, 1),
    "two outputs": (_two, 2),
    "nested outputs": (_nested, 2),
    "the input itself": (_itself, 1),
    "a view of the input": (_view, 1),
}


def _unread(monkeypatch):
    """Dynamo's trackers read as nothing: the traced checks run instead."""
    for module in (_compile, _compile_node, _compile_outputs, _watcher):
        for name in ("traced_items", "traced_tree", "traced_function", "traced_cells"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, lambda ctx, name: None)


def _flat(out):
    return flatten(out)[0]


def _inputs(n):
    return [torch.linspace(-1, 1, 4, dtype=D).add(i).requires_grad_() for i in range(n)]


def _run(fn, n):
    """fn compiled (one graph, no recompile over two calls), its outputs and gradients."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(gm, example_inputs)

    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    for _ in range(2):
        inputs = _inputs(n)
        out = compiled(*inputs)
        outs = _flat(out)
        assert type(out) is type(fn(*inputs))
        grads = torch.autograd.grad(sum(o.sum() for o in outs), inputs)
    assert len(graphs) == 1
    values = [o.detach().clone() for o in outs]
    with torch.no_grad():
        for o in outs:
            o.add_(100)
    unchanged = all(torch.equal(t, u) for t, u in zip(inputs, _inputs(n), strict=True))
    return values, grads, unchanged


@pytest.mark.parametrize("case", CASES)
def test_unread_trackers_give_the_same_outputs_and_gradients(dynamo, monkeypatch, case):
    fn, n = CASES[case]
    inputs = _inputs(n)
    expected = _flat(fn(*inputs))
    expected_grads = torch.autograd.grad(sum(o.sum() for o in expected), inputs)
    read = _run(fn, n)
    _unread(monkeypatch)
    unread = _run(fn, n)
    for outs, grads, unchanged in (read, unread):
        torch.testing.assert_close(outs, [o.detach() for o in expected])
        torch.testing.assert_close(grads, expected_grads)
        assert unchanged  # an edit of the output did not reach the input


def _guards(fn, n):
    torch._dynamo.reset()
    return len(torch._dynamo.explain(fn)(*_inputs(n)).out_guards)


def test_read_trackers_spare_guards(dynamo, monkeypatch):
    read = _guards(_two, 2)
    _unread(monkeypatch)
    assert _guards(_two, 2) > read + 5


def _refusal(fn, n):
    """The refusal's message, as Dynamo's error under fullgraph=True shows it."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="eager", fullgraph=True)
    with pytest.raises(Exception) as info:  # (clones: an edit of a leaf is torch's error)
        compiled(*[t.clone() for t in _inputs(n)])
    return [line for line in str(info.value).splitlines() if PREFIX in line]


@pytest.mark.parametrize(
    ("fn", "n"),
    [(_not_a_pair, 1), (_too_few_upstreams, 2), (_edits, 1)],
    ids=["not a pair", "too few upstreams", "an edit in place"],
)
def test_unread_trackers_refuse_as_read_ones(dynamo, monkeypatch, fn, n):
    read = _refusal(fn, n)
    assert read
    _unread(monkeypatch)
    assert _refusal(fn, n) == read


# A layer reading its Parameters from the closure takes the watched route (Note [compile]):
# the watcher's scan of each op's arguments is read from the trackers, and the node's backward
# passes gradients like their inputs on as they are; any other form goes through the record's
# checks, which repair or refuse as eager does.
_LW = torch.nn.Parameter(torch.linspace(0.5, 1.5, 12, dtype=D).reshape(4, 3))
_LB = torch.nn.Parameter(torch.linspace(-0.5, 0.5, 4, dtype=D))
_FORMS = {
    "as they are": lambda dy, x: (dy @ _LW, [dy.t() @ x, dy.sum(0)]),
    "a list pair, a tuple of variables": lambda dy, x: [dy @ _LW, (dy.t() @ x, dy.sum(0))],
    "cast and None": lambda dy, x: (dy @ _LW, [(dy.t() @ x).float(), None]),
    "a number": lambda dy, x: (dy @ _LW, [dy.t() @ x, 1.0]),
}


def _closure_layer(form):
    @custom_gradient
    def layer(x):
        return torch.nn.functional.linear(x, _LW, _LB), lambda dy, variables=None: form(dy, x)

    return layer


def _layer_grads(fn):
    x = torch.linspace(-1, 1, 6, dtype=D).reshape(2, 3).requires_grad_()
    _LW.grad = _LB.grad = None
    fn(x).pow(2).sum().backward()
    return [x.grad, _LW.grad, _LB.grad]


def _counting(graphs):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend


@pytest.mark.parametrize("form", _FORMS)
def test_unread_trackers_give_closure_parameters_the_same_gradients(dynamo, monkeypatch, form):
    layer = _closure_layer(_FORMS[form])
    expected = _layer_grads(layer)
    for unread in (False, True):
        if unread:
            _unread(monkeypatch)
        torch._dynamo.reset()
        graphs: list = []
        compiled = torch.compile(layer, backend=_counting(graphs), fullgraph=True)
        for _ in range(2):
            grads = _layer_grads(compiled)
            torch.testing.assert_close(grads, expected, msg=f"{form}, unread: {unread}")
        assert len(graphs) == 1
        assert (grads[2] is None) == (expected[2] is None)


def test_closure_parameters_wrong_count_refused_as_in_eager(dynamo):
    layer = _closure_layer(lambda dy, x: (dy @ _LW, [dy.t() @ x]))
    with pytest.raises(Exception) as eager:
        _layer_grads(layer)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:
        _layer_grads(torch.compile(layer, backend="aot_eager"))
    assert PREFIX in str(eager.value)
    assert str(eager.value) in str(compiled.value)


@custom_gradient
def _parameter_view(x):  # one output, a view of a variable f read: copied, as in eager mode
    return _LW.view(-1), lambda dy, variables=None: (x * 0, [dy.view(4, 3)])


@custom_gradient
def _input_and_parameter(x):  # one output, the input itself, while f reads a variable
    _LW.sum()
    return x, lambda dy, variables=None: (dy * 2, [None])


@pytest.mark.parametrize("fn", [_parameter_view, _input_and_parameter])
def test_unread_trackers_copy_an_aliasing_output_on_the_watched_route(dynamo, monkeypatch, fn):
    x = torch.linspace(-1, 1, 12, dtype=D).requires_grad_()
    _LW.grad = None
    eager = fn(x)
    eager.pow(2).sum().backward()
    expected = [x.grad, _LW.grad]
    for unread in (False, True):
        if unread:
            _unread(monkeypatch)
        torch._dynamo.reset()
        x.grad = _LW.grad = None
        out = torch.compile(fn, backend="aot_eager", fullgraph=True)(x)
        torch.testing.assert_close(out, eager, msg=f"unread: {unread}")
        assert out.data_ptr() not in (x.data_ptr(), _LW.data_ptr()), unread
        out.pow(2).sum().backward()
        torch.testing.assert_close([x.grad, _LW.grad], expected, msg=f"unread: {unread}")


@custom_gradient
def _cast_for_a_parameter(x, w):  # w's gradient cast: not taken as it is, repaired as in eager
    return x @ w.t(), lambda dy: (dy @ w, (dy.t() @ x).float())


def test_parameter_arguments_gradients_repaired_as_in_eager(dynamo):
    """A Parameter argument's gradient is taken as it is only where it is a plain tensor with
    the Parameter's metadata; a cast one goes through the record's checks, as in eager mode."""
    x = torch.linspace(-1, 1, 6, dtype=D).reshape(2, 3).requires_grad_()
    w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 12, dtype=D).reshape(4, 3))
    _cast_for_a_parameter(x, w).pow(2).sum().backward()
    expected = [x.grad, w.grad]
    x.grad = w.grad = None
    compiled = torch.compile(_cast_for_a_parameter, backend="aot_eager", fullgraph=True)
    compiled(x, w).pow(2).sum().backward()
    torch.testing.assert_close([x.grad, w.grad], expected)
    assert w.grad.dtype is D and type(w.grad) is torch.Tensor
