"""A function whose only Parameters are its own closure cells' and globals' (Note [Parameters
of f's own] in `_reach.py`): the proof answers "own" and never "none" for it, the watcher still
says which it reads, and its plan skips the lost-gradient walk only while nothing else f can
name requires grad."""

import contextlib

import pytest
import torch
import torch.nn.functional as F
from helpers import D, reach_of

from tf_compat_grad import custom_gradient
from tf_compat_grad._reach import prove
from tf_compat_grad._watcher import ParameterWatcher

G = torch.nn.Parameter(torch.randn(4, dtype=D))  # a module-level Parameter


def parameters():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(4, 3, dtype=D))
    b = torch.nn.Parameter(torch.randn(4, dtype=D))
    return w, b


def helper(t):
    return t * 2


def forms(w, b):
    """Functions of x (shape [2, 3]) that read w and b in the ways straight-line code does."""

    def linear(x):
        def grad(dy, variables=None):  # closes over w and b, but f does not call it
            return dy @ w, [dy.t() @ x, b * 0]

        return F.linear(x, w, b), grad

    def operators(x):
        return x @ w.t() + b, None

    def keywords(x):
        return F.linear(x, weight=w, bias=b), None

    def bias_first(x):
        return torch.mul(F.linear(x, w.detach()), 1) + b + (w > 0).sum(), None

    def through_a_local(x):
        v = b
        return F.linear(x, w, v), None

    def metadata_only(x):
        return x * w.shape[0] + w.size(1) + b.dim(), None

    def unary_and_subscript(x):
        return (x + (-w[0])) @ w.T + b[0], None

    def module_global(x):
        return F.linear(x, w) + G, None

    def twice(x):
        return F.linear(F.linear(x[:, :3], w, b), w.t()) + b.sum(), None

    def method_order(x):
        # `b.add` is looked up before `w.sum()` runs, but torch sees w first
        return b.add(w.sum()) + x @ w.t(), None

    def aliases_of_metadata(x):
        return x * w.nelement() + w.ndimension() + b.sum(), None

    def loaded_and_dropped(x):
        w  # noqa: B018 (a bare name: no torch call sees it)
        return x * 2, None

    return [linear, operators, keywords, bias_first, through_a_local, metadata_only,
            unary_and_subscript, module_global, twice, method_order, aliases_of_metadata,
            loaded_and_dropped]  # fmt: skip


def refused(w, b):
    """Functions the analysis must not answer for: what they read depends on more than their
    own straight-line code shows."""

    def branch(x):
        if x.sum() > 0:
            return x @ w.t(), None
        return x * 1, None

    def loop(x):
        for p in (w,):
            x = x @ p.t()
        return x, None

    def with_block(x):
        with torch.no_grad():
            y = x * 2
        return y @ w.t(), None

    def helper_call(x):
        return helper(w), None

    def container(x):
        return sum([w, w]), None

    def returned(x):
        return w, None

    def nested_call(x):
        def inner():
            return x @ w.t()

        return inner(), None

    def builtin_call(x):
        return x * len(w), None

    def dunder(x):
        return x * (w.__class__ is torch.Tensor), None

    def slice_bound(x):
        return x[w:], None  # a slice holding the Parameter itself

    def method_handed_on(x):
        return torch.func.grad(w.sum)(), None  # a Parameter's method called elsewhere

    def nested_handed_on(x):
        return next(map(lambda t: t * w, [x])), None  # the lambda runs inside `map`

    def returns_itself(x):
        v = w.requires_grad_()  # metadata to the watcher, and the Parameter again
        return x @ v.t(), None

    def not_an_op(x):
        return x * torch.to_dlpack(w).__class__.__name__.__len__(), None  # no __torch_function__

    def python_op(x):
        return F.relu(w), None  # a Python function of torch's: not followed

    def stored_in_a_cell(x):
        v = w

        def inner():
            return v

        return x * 2, inner

    return [branch, loop, with_block, helper_call, container, returned, nested_call,
            builtin_call, dunder, slice_bound, method_handed_on, nested_handed_on, returns_itself,
            not_an_op, python_op, stored_in_a_cell]  # fmt: skip


def watched(f, x):
    """The Parameters the watcher sees f read (up to where f fails, if it does)."""
    watcher = ParameterWatcher()
    with watcher, contextlib.suppress(Exception):
        f(x)
    return watcher.variables(exclude=[x])


@pytest.mark.parametrize("index", range(28))
def test_the_proof_never_says_none_for_a_function_that_reads_its_own_parameters(index):
    w, b = parameters()
    f = [*forms(w, b), *refused(w, b)][index]
    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    answer, _ = prove(f)
    assert answer in ("own", None), f.__name__
    if answer == "own":
        # nothing but its own Parameters: whatever the watcher sees is among them
        assert all(p is w or p is b or p is G for p in watched(f, x)), f.__name__


def closure_layer(w, b):
    @custom_gradient
    def layer(x):
        def grad(dy, variables=None):
            if not variables:  # no Parameter needs a gradient: grad_fn gets no `variables`
                return dy @ w
            return dy @ w, [dy.t() @ x, dy.sum(0)][: len(variables)]

        return F.linear(x, w, b), grad

    return layer


def grads(y, *inputs):
    return torch.autograd.grad(y.sum(), inputs, allow_unused=True)


def test_a_layer_with_closure_parameters_takes_a_watched_plan_that_does_not_walk(monkeypatch):
    w, b = parameters()
    layer = closure_layer(w, b)
    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    layer(x)  # the general code, which makes the plan
    for _ in range(2):
        y = layer(x)
        assert y.grad_fn.plan[1] == [w, b]
    assert "watched plan" in layer.__tf_compat_grad__()._entry.__code__.co_filename
    assert reach_of(layer).reads_own()
    walked = []
    import tf_compat_grad._captures as captures

    monkeypatch.setattr(captures, "walk", lambda *a: walked.append(1) or ([], set()))
    y = layer(x)
    assert not walked, "the lost-gradient walk ran"
    gx, gw, gb = grads(y, x, w, b)
    dy = torch.ones(2, 4, dtype=D)
    torch.testing.assert_close(gx, dy @ w)
    torch.testing.assert_close(gw, dy.t() @ x)
    torch.testing.assert_close(gb, dy.sum(0))


def test_a_closure_tensor_that_comes_to_require_grad_is_still_refused_by_the_plan():
    w, _ = parameters()
    u = torch.randn(4, dtype=D)

    @custom_gradient
    def layer(x):
        def grad(dy, variables=None):
            return dy @ w, [dy.t() @ x]

        return F.linear(x, w) + u, grad

    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    layer(x)  # the plan, which does not walk
    assert reach_of(layer).reads_own()
    u.requires_grad_()  # now the outputs would lose u's gradient
    assert not reach_of(layer).reads_own()
    with pytest.raises(ValueError, match="gradient") as caught:
        layer(x)
    assert "layer" in str(caught.value)


def test_a_frozen_parameter_is_not_a_variable_of_a_watched_plan():
    w, b = parameters()
    layer = closure_layer(w, b)
    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    layer(x)  # the plan
    b.requires_grad_(False)
    y = layer(x)
    assert y.grad_fn.plan[1] == [w]
    _, gw = grads(y, x, w)
    torch.testing.assert_close(gw, torch.ones(2, 4, dtype=D).t() @ x)
    w.requires_grad_(False)  # no variable left, and x needs a gradient: the general code
    (gx,) = grads(layer(x), x)
    torch.testing.assert_close(gx, torch.ones(2, 4, dtype=D) @ w)


def test_a_rebound_closure_parameter_is_followed():
    w, _ = parameters()
    w2 = torch.nn.Parameter(torch.randn(4, 3, dtype=D))

    def make():
        weight = w

        @custom_gradient
        def layer(x):
            def grad(dy, variables=None):
                return dy @ weight, [dy.t() @ x]

            return F.linear(x, weight), grad

        def rebind(new):
            nonlocal weight
            weight = new

        return layer, rebind

    layer, rebind = make()
    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    layer(x)  # the general code, which makes the plan
    assert layer(x).grad_fn.plan[1] == [w]
    rebind(w2)
    y = layer(x)
    assert y.grad_fn.plan[1] == [w2]
    _, g1, g2 = grads(y, x, w, w2)
    assert g1 is None
    torch.testing.assert_close(g2, torch.ones(2, 4, dtype=D).t() @ x)


def test_a_watched_plan_gives_the_variables_in_order_of_first_use():
    # b is read first, w next, b again; only on some calls w at all (the watcher keeps each
    # Parameter where it first saw it, and sees each call afresh).
    w, b = parameters()

    @custom_gradient
    def layer(x):
        h = x.sum(1, keepdim=True) * b
        if x.sum() > 0:
            h = h + F.linear(x, w, b)

        def grad(dy, variables=None):
            gx = (dy @ b).unsqueeze(1).expand_as(x)
            gb = (dy * x.sum(1, keepdim=True)).sum(0)
            if len(variables) == 1:
                return gx, [gb]
            return gx + dy @ w, [gb + dy.sum(0), dy.t() @ x]

        return h, grad

    def reference(x):  # the same math by plain autograd
        h = x.sum(1, keepdim=True) * b
        return h + F.linear(x, w, b) if x.sum() > 0 else h

    positive = torch.rand(2, 3, dtype=D) + 0.5
    for call, sign in enumerate((1, 1, 1, -1, 1, -1)):  # the first call makes the plan
        x = (sign * positive).requires_grad_()
        y = layer(x)
        if call:
            expected = [b, w] if sign > 0 else [b]
            assert [id(v) for v in y.grad_fn.plan[1]] == [id(v) for v in expected]
        got = grads(y, x, w, b)
        x2 = x.detach().requires_grad_()
        want = grads(reference(x2), x2, w, b)
        for g, r in zip(got, want, strict=True):
            if r is None:
                assert g is None
            else:
                torch.testing.assert_close(g, r)
    assert "watched plan" in layer.__tf_compat_grad__()._entry.__code__.co_filename


def test_a_watched_plan_hands_what_it_cannot_take_to_the_general_code(monkeypatch):
    # A view as the output (`out[:]`) leaves the plan after f ran (`unplanned`): f's Parameters
    # are still its variables, and with nothing else f can name requiring grad, nothing walks.
    w, b = parameters()

    @custom_gradient
    def layer(x):
        out = F.linear(x, w, b)

        def grad(dy, variables=None):
            return dy @ w, [dy.t() @ x, dy.sum(0)]

        return (out if x.sum() > 0 else out[:]), grad

    positive = torch.rand(2, 3, dtype=D) + 0.5
    layer(positive.requires_grad_())  # the general code, which makes the plan
    import tf_compat_grad._captures as captures

    walked = []
    monkeypatch.setattr(captures, "walk", lambda *a: walked.append(1) or ([], set()))
    x = (-positive).detach().requires_grad_()
    y = layer(x)
    assert y._base is None and not walked
    gx, gw, gb = grads(y, x, w, b)
    dy = torch.ones(2, 4, dtype=D)
    torch.testing.assert_close(gx, dy @ w)
    torch.testing.assert_close(gw, dy.t() @ x)
    torch.testing.assert_close(gb, dy.sum(0))


def test_the_watcher_finds_the_parameters_of_each_argument_form_in_order_of_first_use():
    # positional, by keyword, both, inside lists and tuples, a subclass, one that needs no
    # gradient, and metadata reads (no read): what `__torch_function__`'s short path for plain
    # positional arguments and its keyword path must both see
    w, b = parameters()
    frozen = torch.nn.Parameter(torch.ones(3, dtype=D), requires_grad=False)
    sub = type("Sub", (torch.nn.Parameter,), {})(torch.ones(3, dtype=D))
    cases = [
        (lambda x: F.linear(x, w, b), [w, b]),
        (lambda x: F.linear(x, weight=w, bias=b), [w, b]),
        (lambda x: F.linear(x, w, bias=b), [w, b]),
        (lambda x: F.linear(input=x, bias=b, weight=w), [b, w]),
        (lambda x: torch.cat([x[0], b[:3]]), [b]),
        (lambda x: torch.stack((x[0], sub, frozen)), [sub]),
        (lambda x: x[0] + sub, [sub]),
        (lambda x: b.add(w.sum(), alpha=2), [w, b]),
        (lambda x: x * w.shape[0] + b.size(0) + frozen, []),
        (lambda x: torch.add(x, x, out=None), []),
    ]
    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    for i, (f, expected) in enumerate(cases):
        assert [id(p) for p in watched(f, x)] == [id(p) for p in expected], i


def test_a_watched_plan_called_inside_its_own_f_gives_each_call_its_variables():
    # The inner call runs on its plan while the outer call's watcher watches: each has a watcher
    # of its own, and the outer one also sees what the inner f reads (t, then s), as
    # TensorFlow's tape does.
    s = torch.nn.Parameter(torch.tensor(1.5, dtype=D))
    t = torch.nn.Parameter(torch.tensor(0.5, dtype=D))

    @custom_gradient
    def layer(x, depth):
        if depth:
            e = torch.exp(layer(x, depth - 1) * s)  # grad reads e: f runs recorded

            def grad(dy, variables=None):
                g = dy * e
                return (g * t * s, None), [(g * x * s).sum(), (g * x * t).sum()]

            return e, grad

        def grad0(dy, variables=None):
            return (dy * t, None), [(dy * x).sum()]

        return x * t, grad0

    for _ in range(4):  # the inner calls (depth 0) take their plan from the second call on
        x = torch.randn(3, dtype=D, requires_grad=True)
        y = layer(x, 1)
        outer = y.grad_fn.plan[1] if hasattr(y.grad_fn, "plan") else y.grad_fn.record.variables
        assert [id(v) for v in outer] == [id(t), id(s)]
        got = grads(y, x, t, s)
        x2 = x.detach().requires_grad_()
        want = grads(torch.exp(x2 * t * s), x2, t, s)
        for g, r in zip(got, want, strict=True):
            torch.testing.assert_close(g, r)
    assert "watched plan" in layer.__tf_compat_grad__()._entry.__code__.co_filename
