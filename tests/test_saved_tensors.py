"""Tensors grad_fn closes over go through `ctx.save_for_backward` (Note [saved closures]).

Each case below is a decorated function whose grad_fn closes over tensors in a different way.
Its f appends the tensors grad_fn closes over to `store` as the last thing before returning, so
a test can find them (and a pack hook can tell f's own saves from the node's).
"""

import gc
import weakref
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from helpers import D

from tf_compat_grad import custom_gradient


def over_input(store, calls):
    @custom_gradient
    def square(x):
        def grad(dy):
            calls.append(1)
            return dy * 2 * x

        y = x * x
        store.append(x)
        return y, grad

    return square


def over_intermediate(store, calls):
    @custom_gradient
    def log1pexp(x):
        e = torch.exp(x)

        def grad(dy):
            calls.append(1)
            return dy * (1 - 1 / (1 + e))

        y = torch.log(1 + e)
        store.append(e)
        return y, grad

    return log1pexp


def over_output(store, calls):
    @custom_gradient
    def exp(x):
        y = torch.exp(x)

        def grad(dy):
            calls.append(1)
            return dy * y

        store.append(y)
        return y, grad

    return exp


def over_tuple(store, calls):
    @custom_gradient
    def exp_plus_sin(x):
        pair = (torch.exp(x), torch.cos(x))

        def grad(dy):
            calls.append(1)
            return dy * (pair[0] + pair[1])

        y = torch.exp(x) + torch.sin(x)
        store.extend(pair)
        return y, grad

    return exp_plus_sin


Parts = namedtuple("Parts", ["exp", "cos"])


def over_namedtuple(store, calls):
    @custom_gradient
    def exp_plus_sin(x):
        parts = Parts(exp=torch.exp(x), cos=torch.cos(x))

        def grad(dy):
            calls.append(1)
            assert type(parts) is Parts
            return dy * (parts.exp + parts.cos)

        y = torch.exp(x) + torch.sin(x)
        store.extend([parts.cos, parts.exp])
        return y, grad

    return exp_plus_sin


def over_nested_tuple(store, calls):
    @custom_gradient
    def exp_plus_sin(x):
        e = torch.exp(x)
        parts = ((e, 1.0), ((torch.cos(x),), e))  # a non-tensor leaf, and e twice

        def grad(dy):
            calls.append(1)
            (exp, one), ((cos,), again) = parts
            assert one == 1.0
            assert again is exp
            return dy * (exp + cos)

        y = torch.exp(x) + torch.sin(x)
        store.extend([e, parts[1][0][0]])
        return y, grad

    return exp_plus_sin


def over_default(store, calls):
    @custom_gradient
    def expm1(x):
        e = torch.exp(x)

        def grad(dy, e=e):  # no closure cell: the tensor is only a default argument
            calls.append(1)
            return dy * e

        y = torch.expm1(x)
        store.append(e)
        return y, grad

    return expm1


def over_keyword_default(store, calls):
    @custom_gradient
    def expm1(x):
        e = torch.exp(x)

        def grad(dy, *, e=e):
            calls.append(1)
            return dy * e

        y = torch.expm1(x)
        store.append(e)
        return y, grad

    return expm1


def over_helper(store, calls):
    @custom_gradient
    def expm1(x):
        e = torch.exp(x)

        def helper(dy):
            return dy * e

        def grad(dy):
            calls.append(1)
            return helper(dy)

        y = torch.expm1(x)
        store.append(e)
        return y, grad

    return expm1


@dataclass
class Case:
    make: Callable[[list, list], Any]
    expected: Callable[[torch.Tensor], torch.Tensor]  # the gradient of y.sum()


CASES = {
    "input": Case(over_input, lambda x: 2 * x),
    "intermediate": Case(over_intermediate, torch.sigmoid),
    "output": Case(over_output, torch.exp),
    "tuple": Case(over_tuple, lambda x: torch.exp(x) + torch.cos(x)),
    "namedtuple": Case(over_namedtuple, lambda x: torch.exp(x) + torch.cos(x)),
    "nested tuple": Case(over_nested_tuple, lambda x: torch.exp(x) + torch.cos(x)),
    "default argument": Case(over_default, torch.exp),
    "keyword-only default": Case(over_keyword_default, torch.exp),
    "helper": Case(over_helper, torch.exp),
}
# The closed-over tensors of these are made by f, so only the node can keep them alive.
MADE_IN_F = [name for name in CASES if name != "input"]


def make_x():
    return torch.tensor([-1.0, 0.5, 2.0], dtype=D, requires_grad=True)


@pytest.mark.parametrize("name", CASES)
def test_gradient(name):
    store = []
    f = CASES[name].make(store, [])
    x = make_x()
    f(x).sum().backward()
    torch.testing.assert_close(x.grad, CASES[name].expected(x.detach()))


@pytest.mark.parametrize("name", CASES)
def test_pack_hook_sees_the_closure_tensors(name):
    store = []
    f = CASES[name].make(store, [])
    x = make_x()
    packed_by_node = []
    unpacked = []

    def pack(t):
        if store:  # f has returned: what is saved now is saved by the node
            packed_by_node.append(t)
        return t

    def unpack(t):
        unpacked.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = f(x)
    assert sorted(map(id, packed_by_node)) == sorted(map(id, store))
    y.sum().backward()
    assert sorted(map(id, unpacked)) == sorted(map(id, store))
    torch.testing.assert_close(x.grad, CASES[name].expected(x.detach()))


@pytest.mark.parametrize("name", CASES)
def test_save_on_cpu_gives_the_same_gradient(name):
    f = CASES[name].make([], [])
    x = make_x()
    with torch.autograd.graph.save_on_cpu():
        y = f(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, CASES[name].expected(x.detach()))


@pytest.mark.parametrize("name", CASES)
def test_inplace_edit_of_a_closure_tensor_raises(name):
    store = []
    f = CASES[name].make(store, [])
    x = make_x()
    y = f(x)
    with torch.no_grad():
        store[0].add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("name", MADE_IN_F)
def test_closure_tensors_freed_after_backward(name):
    store = []
    f = CASES[name].make(store, [])
    x = make_x()
    y = f(x)
    refs = [weakref.ref(t) for t in store]
    store.clear()
    assert all(r() is not None for r in refs)  # the node keeps them until backward
    y.sum().backward()
    assert [r() for r in refs] == [None] * len(refs)
    assert y.grad_fn is not None  # the output and its node are still alive


@pytest.mark.parametrize("name", MADE_IN_F)
def test_dropping_the_output_frees_everything_without_gc(name):
    store = []
    f = CASES[name].make(store, [])
    x = make_x()
    gc.disable()
    try:
        y = f(x)
        refs = [weakref.ref(t) for t in store]
        node = weakref.ref(y.grad_fn)
        store.clear()
        del y
        assert node() is None
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()


@pytest.mark.parametrize("name", CASES)
def test_second_backward_without_retain_graph_raises(name):
    f = CASES[name].make([], [])
    y = f(make_x()).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


@pytest.mark.parametrize("name", CASES)
def test_retain_graph_calls_grad_fn_twice(name):
    calls = []
    f = CASES[name].make([], calls)
    x = make_x()
    y = f(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert len(calls) == 2
    torch.testing.assert_close(x.grad, 2 * CASES[name].expected(x.detach()))


def test_grad_fn_sees_and_updates_nonlocal_state():
    siblings = []

    @custom_gradient
    def scaled_exp(x):
        e = torch.exp(x)
        scale = 1.0
        calls = 0

        def grad(dy):
            nonlocal calls
            calls += 1
            return dy * e * scale

        def set_scale(value):
            nonlocal scale
            scale = value

        def read_calls():
            return calls

        siblings.extend([set_scale, read_calls])
        return e, grad

    x = make_x()
    y = scaled_exp(x).sum()
    set_scale, read_calls = siblings
    set_scale(3.0)  # after the call, before backward: grad_fn reads the new value
    y.backward(retain_graph=True)
    assert read_calls() == 1
    y.backward()
    assert read_calls() == 2
    torch.testing.assert_close(x.grad, 2 * 3.0 * torch.exp(x.detach()))


def test_sibling_closure_sharing_the_cell_keeps_working():
    siblings = []

    @custom_gradient
    def log1pexp(x):
        e = torch.exp(x)

        def grad(dy):
            return dy * (1 - 1 / (1 + e))

        def peek():
            return e

        siblings.append(peek)
        return torch.log(1 + e), grad

    x = make_x()
    y = log1pexp(x)
    (peek,) = siblings
    torch.testing.assert_close(peek(), torch.exp(x.detach()))
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.sigmoid(x.detach()))
    torch.testing.assert_close(peek(), torch.exp(x.detach()))


def test_grad_fn_appends_to_a_closed_over_list_on_every_call():
    log = []

    @custom_gradient
    def identity(x):
        def grad(dy):
            log.append(dy)
            return dy

        return x * 1, grad

    x = make_x()
    for calls in range(1, 4):
        identity(x).sum().backward()
        assert len(log) == calls


# Lists and dicts are shared with grad_fn as they are (Note [saved closures]): grad_fn may add
# to them, so the tensors they hold stay on the node and are not saved for backward.


def test_appends_to_a_closed_over_list_persist_across_backward_calls():
    seen = []
    store = []

    @custom_gradient
    def exp(x):
        e = torch.exp(x)
        history = [e]

        def grad(dy):
            seen.append(len(history))
            history.append(dy)
            return dy * history[0]

        store.append(history)
        return e * 1, grad

    x = make_x()
    y = exp(x).sum()
    for _ in range(3):
        y.backward(retain_graph=True)
    (history,) = store
    assert seen == [1, 2, 3]
    assert len(history) == 4  # f's tensor, then one upstream gradient per call
    torch.testing.assert_close(x.grad, 3 * torch.exp(x.detach()))


def test_closed_over_dict_holds_the_very_tensors_f_put_there_saved_too():
    seen = []
    made = []

    @custom_gradient
    def exp_plus_sin(x):
        parts = {"exp": torch.exp(x), "cos": torch.cos(x)}

        def grad(dy):
            seen.append(parts)
            return dy * (parts["exp"] + parts["cos"])

        y = torch.exp(x) + torch.sin(x)
        made.append(parts)
        return y, grad

    x = make_x()
    packed = []

    def pack(t):
        if made:  # f has returned: what is saved now is saved by the node
            packed.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = exp_plus_sin(x)
    (parts,) = made
    tensors = dict(parts)
    # Saved for backward too (torch's version check, Note [saved closures]), yet shared.
    assert sorted(map(id, packed)) == sorted(map(id, parts.values()))
    y.sum().backward()
    assert seen[0] is parts
    assert parts["exp"] is tensors["exp"]
    assert parts["cos"] is tensors["cos"]
    torch.testing.assert_close(x.grad, torch.exp(x.detach()) + torch.cos(x.detach()))


@pytest.mark.slow
def test_closed_over_dict_tensors_live_as_long_as_the_node():
    made = []

    @custom_gradient
    def exp(x):
        parts = {"exp": torch.exp(x)}
        made.append(weakref.ref(parts["exp"]))
        return parts["exp"] * 1, lambda dy: dy * parts["exp"]

    y = exp(make_x())
    (ref,) = made
    y.sum().backward()
    assert ref() is not None  # not freed by backward: the node keeps the dict
    del y
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("mutable", [[], {}], ids=["list", "dict"])
def test_tensor_default_beside_a_mutable_default_is_saved(mutable):
    store = []

    @custom_gradient
    def exp(x):
        e = torch.exp(x)

        def grad(dy, e=e, log=mutable):
            return dy * e

        store.append(e)
        return e * 1, grad

    y = exp(make_x())
    with torch.no_grad():
        store[0].add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_the_engine_calls_the_eager_backward_directly():
    """`call_backward_directly` skips torch's `BackwardCFunction.apply` lookup; the node still
    answers a direct `grad_fn.apply` as torch's own nodes do."""

    @custom_gradient
    def double(x):
        return x * 2, lambda dy: dy * 3

    x = torch.ones(2, requires_grad=True)
    y = double(x)
    node = y.grad_fn
    assert type(node).apply is type(node)._forward_cls.backward
    returned = node.apply(torch.ones(2))
    assert returned[:2] == (None, None)
    torch.testing.assert_close(returned[2], torch.full((2,), 3.0))


def test_save_for_backward_sets_the_attribute_the_plans_set():
    """A plan's node saves its tensors by assigning `SAVED_TENSORS` as torch's
    `ctx.save_for_backward` does; the saved tensors are then torch's own (hooks see them)."""
    from tf_compat_grad._torch_internals import SAVED_TENSORS

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, x)
            assert getattr(ctx, SAVED_TENSORS) == (x, x)
            return x * 1

        @staticmethod
        def backward(ctx, dy):
            return dy

    Probe.apply(torch.ones(1, requires_grad=True))

    @custom_gradient
    def log1pexp(x):
        e = torch.exp(x)
        return torch.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))

    x = torch.ones(3, requires_grad=True)
    for _ in range(2):  # the first call learns the plan, the second takes it
        x.grad = None
        # A pack hook that stands 7 in for every saved tensor: grad_fn sees e == 7 only if
        # the node saved e through torch.
        with torch.autograd.graph.saved_tensors_hooks(
            lambda t: torch.full_like(t, 7.0), lambda t: t
        ):
            y = log1pexp(x)
        y.sum().backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 1 - 1 / 8))


def test_a_tensor_in_two_cells_is_saved_once():
    """A copying pack hook (as `save_on_cpu` copies) sees each tensor once, and the two cells
    hold one tensor again in backward."""
    packed: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        packed.append(tensor)
        return tensor.clone()

    @custom_gradient
    def product(x, y):
        def grad_fn(dy):
            assert x is y  # both cells hold the one tensor unpacked
            return dy * y, dy * x

        return x + y, grad_fn  # an addition saves nothing of its own

    x = torch.arange(1.0, 4.0, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = product(x, x)
    assert len(packed) == 1
    y.sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())


def test_default_values_are_those_of_the_forward():
    """grad_fn's default values (and keyword defaults) are read when f returns it, as the
    closure is: changing them before backward changes nothing."""

    def scale_grad(dy, scale=2.0, *, shift=0.0):
        return dy * scale + shift

    @custom_gradient
    def identity(x):
        return x * 1, scale_grad

    x = torch.ones(2, requires_grad=True)
    y = identity(x)
    scale_grad.__defaults__ = (5.0,)
    scale_grad.__kwdefaults__["shift"] = 1.0
    try:
        y.sum().backward()
    finally:
        scale_grad.__defaults__, scale_grad.__kwdefaults__ = (2.0,), {"shift": 0.0}
    torch.testing.assert_close(x.grad, torch.full((2,), 2.0))


def test_the_rebuilt_grad_fn_keeps_its_name():
    """A grad_fn renamed (here by `functools.wraps`) is made again under that name."""
    import functools

    from tf_compat_grad._closure import capture

    def template(dy):
        raise NotImplementedError

    e = torch.ones(2)

    @functools.wraps(template)
    def grad_fn(dy):
        return dy * e

    captured, saved = capture(grad_fn, "", None)
    assert saved == [e]
    rebuilt = captured.rebuild(saved)
    assert (rebuilt.__name__, rebuilt.__qualname__) == ("template", template.__qualname__)
