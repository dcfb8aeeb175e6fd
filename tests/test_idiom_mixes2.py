"""Differential tests of state that changes between calls of one decorated function, where the
eager path keeps what it learned (its plans per call shape, Note [plans]; the reach proof's
answer, Note [Parameters of f's own]): tensors made under `torch.inference_mode` passed after
ordinary ones. Each call is compared with plain autograd of the same math, or must be refused
by a library error that names f. `tests/test_idiom_mixes.py` covers the idioms around one
call."""

import dataclasses
import functools
import threading
import types

import pytest
import torch
from helpers import D
from torch import nn
from torch.nn.utils import parametrize
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import custom_gradient


def _inference(tensor, requires_grad=False):
    """A copy of tensor made under `torch.inference_mode` (it has no version counter)."""
    with torch.inference_mode():
        return tensor.detach().clone().requires_grad_(requires_grad)


@custom_gradient
def scaled(x, k):  # runs unrecorded: grad_fn reads only the arguments
    def grad(dy):
        return dy * k, None

    return x * k, grad


@custom_gradient
def softplus(x):  # runs unrecorded and again for a second derivative: grad_fn reads e
    e = torch.exp(x)

    def grad(dy):
        return dy * e / (1 + e)

    return torch.log1p(e), grad


class Shift(nn.Module):
    """`x + w` with a Parameter read by f: watched, w among the variables."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([0.5, -1.0], dtype=D))

    @custom_gradient
    def forward(self, x):
        def grad(dy, variables=None):
            return dy, [dy for _ in variables]

        return x + self.w, grad


SHIFT = Shift()

# (the decorated call, the same math for plain autograd, the Parameters it reads)
CALLS = {
    "unrecorded": (lambda x: scaled(x, 1.5), lambda x: x * 1.5, ()),
    "run again": (softplus, lambda x: torch.log1p(torch.exp(x)), ()),
    "watched method": (SHIFT, lambda x: x + SHIFT.w, (SHIFT.w,)),
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("grad_mode", [True, False])
def test_an_inference_mode_argument_after_ordinary_ones_matches_plain_autograd(name, grad_mode):
    # An inference tensor has no version counter, which a call reads to refuse an edit in
    # place of an argument: the general code and the plans (learned from the ordinary calls
    # first) must take it as torch does, a constant outside inference mode.
    decorated, plain, parameters = CALLS[name]
    x = torch.tensor([0.3, -0.7], dtype=D)
    for given in (x.requires_grad_(), x.detach(), _inference(x), x.detach(), _inference(x)):
        with torch.set_grad_enabled(grad_mode):
            out = decorated(given)
            expected = plain(given)
        torch.testing.assert_close(out, expected)
        assert out.requires_grad == expected.requires_grad
        if expected.requires_grad:
            found = torch.autograd.grad(out.sum(), parameters or given)
            torch.testing.assert_close(
                found, torch.autograd.grad(expected.sum(), parameters or given)
            )


def test_an_inference_mode_leaf_that_requires_grad_gets_grad_fns_gradient():
    # Outside inference mode torch records no op of such a leaf but a Function's, as here;
    # the gradient with `create_graph=True` runs f again (Note [f run again]) on it.
    x = torch.tensor([0.3, -0.7], dtype=D, requires_grad=True)
    for given in (x, _inference(x, True), x, _inference(x, True)):
        (found,) = torch.autograd.grad(softplus(given).sum(), given, create_graph=True)
        torch.testing.assert_close(found, torch.sigmoid(x.detach()))


class Symmetric(nn.Module):
    def forward(self, m):
        return m + m.T


class Layer(nn.Module):
    """`x @ (w + w.T)` with w parametrized (Symmetric); `meanwhile` runs while f runs."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([[1.0, 2.0], [0.5, -1.0]], dtype=D))
        parametrize.register_parametrization(self, "weight", Symmetric())
        self.meanwhile = lambda: None

    @custom_gradient
    def forward(self, x):
        self.meanwhile()
        w = self.weight

        def grad(dy, variables=()):
            return dy @ w.T, [x.T @ dy if v is w else None for v in variables]

        return x @ w, grad


def _in_another_thread(work):
    """Run `work` in a thread of its own, to its end; what it returned."""
    out = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join()
    return out[0]


@pytest.mark.parametrize("grad_mode", [False, True])
def test_a_parametrized_weight_read_by_another_thread_while_f_runs_is_neither_threads(grad_mode):
    # A watched call turns parametrize's cache on to find the weight f read (Note [lost
    # gradients]); torch has one cache for all threads. A weight another thread computes
    # meanwhile (without grad: no history to the originals) must not be the one f reads, nor
    # f's the one that thread gets.
    layer = Layer()
    original = layer.parametrizations.weight.original
    x = torch.tensor([[1.0, 2.0], [-0.5, 0.25]], dtype=D, requires_grad=True)
    w = original.detach().clone().requires_grad_()
    expected = torch.autograd.grad((x @ (w + w.T)).pow(2).sum(), (x, w))
    seen = []

    def read():
        with torch.set_grad_enabled(grad_mode):
            return layer.weight

    layer.meanwhile = lambda: seen.append(_in_another_thread(read))
    for _ in range(3):  # the general code, then the plan
        found = torch.autograd.grad(layer(x).pow(2).sum(), (x, original))
        torch.testing.assert_close(found, expected)
        assert seen.pop().requires_grad == grad_mode
        assert parametrize._cache == {} and not parametrize._cache_enabled


def _kept_in_a_list(x):
    kept = [torch.exp(x)]
    return kept[0], lambda dy: dy * kept[0]


def _kept_in_a_dict(x):
    kept = {"e": torch.exp(x)}
    return kept["e"], lambda dy: dy * kept["e"]


def _kept_in_a_tuple_of_lists(x):
    kept = ([torch.exp(x)], 2.0)
    return kept[0][0], lambda dy: dy * kept[0][0]


def _the_argument_kept_in_a_list(x):  # the output is not what grad_fn keeps
    kept = [x]
    return torch.exp(x), lambda dy: dy * torch.exp(kept[0])


class _Box:
    pass


def _kept_as_an_attribute(x):
    kept = _Box()
    kept.e = torch.exp(x)
    return kept.e, lambda dy: dy * kept.e


def _kept_in_a_namespace(x):
    kept = types.SimpleNamespace(e=torch.exp(x), scale=1.0)
    return kept.e, lambda dy: dy * kept.e * kept.scale


def _kept_in_a_list_attribute(x):
    kept = types.SimpleNamespace(es=[torch.exp(x)])
    return kept.es[0], lambda dy: dy * kept.es[0]


def _kept_in_a_dict_attribute(x):
    kept = types.SimpleNamespace(d={"e": torch.exp(x)})
    return kept.d["e"], lambda dy: dy * kept.d["e"]


class _Slotted:
    __slots__ = ("e", "unset")


def _kept_in_a_slot(x):
    kept = _Slotted()
    kept.e = torch.exp(x)
    return kept.e, lambda dy: dy * kept.e


@dataclasses.dataclass(frozen=True, slots=True)
class _Frozen:
    e: torch.Tensor


def _kept_in_a_slotted_dataclass(x):
    kept = _Frozen(torch.exp(x))
    return kept.e, lambda dy: dy * kept.e


KEEPERS = [
    _kept_in_a_list,
    _kept_in_a_dict,
    _kept_in_a_tuple_of_lists,
    _kept_as_an_attribute,
    _kept_in_a_namespace,
    _kept_in_a_list_attribute,
    _kept_in_a_dict_attribute,
    _kept_in_a_slot,
    _kept_in_a_slotted_dataclass,
]


@pytest.mark.parametrize(
    "keeper",
    [
        *KEEPERS,
        _the_argument_kept_in_a_list,
    ],
)
def test_an_output_grad_fn_keeps_in_a_container_edited_in_place_is_torchs_version_error(keeper):
    # Plain autograd of exp saves its output: editing it before backward is torch's version
    # error. A grad_fn reading the output from a container f made must not compute the
    # gradient from the edited values instead, in the general code or a plan.
    decorated = custom_gradient(keeper)
    for _ in range(3):
        x = torch.tensor([0.5, 1.0], dtype=D, requires_grad=True)
        y = decorated(x)
        y.mul_(10)
        if keeper is _the_argument_kept_in_a_list:
            y.sum().backward()  # grad_fn keeps x, unedited: the gradient is right
            torch.testing.assert_close(x.grad, torch.exp(x.detach()) * 10)
            continue
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("keeper", KEEPERS)
def test_an_output_grad_fn_keeps_in_a_container_matches_plain_autograd_to_the_second_order(
    keeper,
):
    decorated = custom_gradient(keeper)
    x = torch.tensor([0.5, 1.0], dtype=D, requires_grad=True)
    for _ in range(3):
        (g,) = torch.autograd.grad(decorated(x).sum(), x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        torch.testing.assert_close((g, h), (torch.exp(x.detach()), torch.exp(x.detach())))


@custom_gradient
def _kept_when_large(x, k):  # the object f makes holds its output where k > 2
    y = torch.exp(x) * k
    made = types.SimpleNamespace(y=y if k > 2 else None, k=k)

    def grad(dy):
        return dy * (torch.exp(x) * made.k if made.y is None else made.y), None

    return y, grad


def test_an_object_f_made_that_holds_a_tensor_is_saved_not_planned():
    # Calls whose object holds no tensor take a plan (the object shared as it is); a call of
    # the same shape whose object holds f's output leaves it to the general code, which
    # saves that: an edit of the output before backward is torch's version error, as in
    # plain autograd of `exp(x) * k`, not a gradient computed from the edited values.
    x = torch.tensor([1.0, 2.0], dtype=D, requires_grad=True)
    for _ in range(3):
        y = _kept_when_large(x, 1.5)
        (found,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(found, torch.exp(x.detach()) * 1.5)
    assert hasattr(y.grad_fn, "plan")  # a plan's node (tests/test_plans.py's `planned`)
    y = _kept_when_large(x, 3.0)
    assert not hasattr(y.grad_fn, "plan")
    (found,) = torch.autograd.grad(y.sum(), x, retain_graph=True)
    torch.testing.assert_close(found, torch.exp(x.detach()) * 3.0)
    y.mul_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


class _NormedByRunningStatistics(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(2, affine=False, dtype=D)

    @custom_gradient
    def forward(self, x):
        bn = self.bn  # a module f did not make, in a cell of f's own
        return bn(x), lambda dy: dy / torch.sqrt(bn.running_var + bn.eps)


def test_a_modules_buffers_grad_fn_reads_through_a_local_name_are_read_when_backward_runs():
    # The module's buffers are its own, not saved as an object f made would have them: a
    # second forward updates the running statistics in place before backward, and grad_fn's
    # rule reads them then, as it would read `self.bn.running_var` (no version error).
    model = _NormedByRunningStatistics()
    for _ in range(2):
        x1, x2 = (torch.randn(4, 2, dtype=D, requires_grad=True) for _ in range(2))
        (model(x1).sum() + model(x2).sum()).backward()
        expected = 1 / torch.sqrt(model.bn.running_var + model.bn.eps)
        torch.testing.assert_close((x1.grad, x2.grad), (expected.expand(4, 2),) * 2)


class _ScaledByARunningStatistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.state = types.SimpleNamespace(scale=torch.ones(2, dtype=D))

    @custom_gradient
    def forward(self, x):
        state = self.state  # an object f did not make, in a cell of f's own
        with torch.no_grad():
            state.scale.mul_(2)  # each forward updates it in place
        return x * 1.0, lambda dy: dy * state.scale


def test_an_object_f_did_not_make_in_a_cell_of_its_own_is_read_when_backward_runs():
    # As `self.state.scale` read in grad_fn would be (the migration guide: an object f did
    # not make is read when backward runs): a second forward's in-place update before
    # backward is no version error, and grad_fn's rule reads the statistic then.
    model = _ScaledByARunningStatistic()
    for call in range(2):
        x1, x2 = (torch.ones(2, dtype=D, requires_grad=True) for _ in range(2))
        (model(x1).sum() + model(x2).sum()).backward()
        expected = torch.full((2,), 4.0**call * 4, dtype=D)
        torch.testing.assert_close((x1.grad, x2.grad), (expected, expected))


def test_a_list_from_outside_f_that_grad_fn_adds_to_is_shared_and_not_saved():
    # A list that outlives the call (a log grad_fn appends to) is f's caller's: saving what
    # it holds would save every earlier upstream again, and a non-reentrant checkpoint would
    # find more tensors saved in its recomputation than in the forward.
    log = []

    @custom_gradient
    def logged(x):
        def grad(dy):
            log.append(dy)
            return dy * 2

        return x * 2, grad

    x = torch.tensor([0.5, 1.0], dtype=D, requires_grad=True)
    for n in range(1, 4):
        y = checkpoint(logged, x, use_reentrant=False)
        (g,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(g, torch.full_like(x, 2.0))
        assert len(log) == n


@custom_gradient
def _exp_kept(x):
    e = torch.exp(x)
    return e, lambda dy: dy * e


@custom_gradient
def _exp_kept_in_a_tuple(x):
    e = torch.exp(x)
    kept = (e, 2.0)
    return e, lambda dy: dy * kept[0]


@custom_gradient
def _mul_kept(x, w):  # grad_fn keeps the arguments
    return x * w, lambda dy: (dy * w, dy * x)


class _KeepsExp(nn.Module):  # a method: the compile route of Note [compile]
    @custom_gradient
    def forward(self, x):
        e = torch.exp(x)
        return e, lambda dy: dy * e


KEEPS_EXP = _KeepsExp()


@custom_gradient
def _exp_not_kept(x):  # grad_fn computes exp again: the output is not kept
    return torch.exp(x), lambda dy: dy * torch.exp(x)


# (a decorated call of x and w, and the tensor edited after it: "y" its output, "w")
KEPT_EDITS = {
    "output": (lambda x, w: _exp_kept(x), "y"),
    "output in a tuple": (lambda x, w: _exp_kept_in_a_tuple(x), "y"),
    "argument": (_mul_kept, "w"),
    "output, a method": (lambda x, w: KEEPS_EXP(x), "y"),
}


@pytest.mark.slow
@pytest.mark.traced_compile
@pytest.mark.parametrize("case", KEPT_EDITS)
def test_a_compiled_tensor_grad_fn_keeps_edited_in_place_is_torchs_version_error(dynamo, case):
    # As in eager mode and plain autograd (Note [tensors grad_fn keeps, under compile]): the
    # tensors grad_fn keeps that the caller holds are saved for backward, one graph.
    call, edited = KEPT_EDITS[case]
    compiled = torch.compile(call, backend="aot_eager", fullgraph=True)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(2):
            x = torch.tensor([0.5, 1.0], dtype=D, requires_grad=True)
            w = torch.tensor([2.0, 3.0], dtype=D, requires_grad=True)
            y = compiled(x, w)
            with torch.no_grad():
                (y if edited == "y" else w).mul_(10)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()


@pytest.mark.slow
@pytest.mark.traced_compile
@pytest.mark.xfail(
    strict=True,
    reason="under torch.compile, the tensors grad_fn reads through an object f made (an "
    "attribute of a SimpleNamespace or of an instance of a class) are not among those "
    "traced_cells finds: an in-place edit of f's output before backward gives a gradient of "
    "the edited value where eager mode and plain autograd raise torch's version error",
)
@pytest.mark.parametrize("keeper", [_kept_as_an_attribute, _kept_in_a_namespace])
def test_a_compiled_output_kept_in_an_object_f_made_edited_in_place_is_a_version_error(
    dynamo, keeper
):
    compiled = torch.compile(custom_gradient(keeper), backend="aot_eager")
    x = torch.tensor([0.5, 1.0], dtype=D, requires_grad=True)
    y = compiled(x)
    with torch.no_grad():
        y.mul_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.slow
@pytest.mark.traced_compile
def test_a_compiled_output_grad_fn_does_not_keep_edited_in_place_matches_plain_autograd(dynamo):
    # Nothing is saved that grad_fn does not keep: the edit is recorded after the node, as
    # plain autograd records it after an op that saves no output (here `x * 1`).
    compiled = torch.compile(_exp_not_kept, backend="aot_eager", fullgraph=True)
    x = torch.tensor([0.5, 1.0], dtype=D, requires_grad=True)
    found = compiled(x)
    expected = torch.exp(x) * 1
    for y in (found, expected):
        y.mul_(10)
    torch.testing.assert_close(
        torch.autograd.grad(found.sum(), x), torch.autograd.grad(expected.sum(), x)
    )


class Scaled(nn.Module):
    """`x * scale` with a buffer that grad_fn reads through `self` when backward runs."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0], dtype=D))

    @custom_gradient
    def forward(self, x):
        return x * self.scale, lambda dy: dy * self.scale


SCALE = torch.tensor([2.0], dtype=D)


@custom_gradient
def _globally_scaled(x):
    return x * SCALE, lambda dy: dy * SCALE


@pytest.mark.xfail(
    strict=True,
    reason="a tensor grad_fn reads through an attribute or a global is read when backward "
    "runs, not saved: edited in place between forward and backward (a running statistic, an "
    "optimizer step), it gives a gradient of the edited value where plain autograd raises "
    "torch's version error",
)
@pytest.mark.parametrize("through", ["attribute", "global"])
def test_a_tensor_grad_fn_reads_by_name_edited_before_backward_is_torchs_version_error(through):
    scaled = Scaled() if through == "attribute" else _globally_scaled
    scale = scaled.scale if through == "attribute" else SCALE
    x = torch.tensor([1.5], dtype=D, requires_grad=True)
    y = scaled(x)
    with torch.no_grad():
        scale.mul_(5)
    try:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    finally:
        with torch.no_grad():
            scale.div_(5)


# grad_fns of `2 * x` that edit their upstream in place, as TensorFlow code writes `dy *= 2`
# (there a new tensor): Note [upstreams edited in place].
def _augmented(dy):
    dy *= 2
    return dy


def _in_place_method(dy):
    return dy.mul_(2)


def _indexed(dy):
    dy[...] = dy * 2
    return dy


def _into_out(dy):
    return torch.mul(dy, 2, out=dy)


def _through_varargs(*upstream):
    upstream[0].mul_(2)
    return upstream[0]


def _in_a_helper(dy):
    def double(t):
        t += t
        return t

    return double(dy)


def _scaled_in_place(dy, k):
    dy *= k
    return dy


class _Doubling:
    def __call__(self, dy):
        return dy.mul_(2)


EDITS = [
    _augmented,
    _in_place_method,
    _indexed,
    _into_out,
    _through_varargs,
    _in_a_helper,
    functools.partial(_scaled_in_place, k=2),  # grad_fns with no `__code__` of their own
    _Doubling(),
]


@pytest.mark.parametrize("grad", EDITS)
def test_a_grad_fn_editing_its_upstream_in_place_leaves_the_other_gradients_alone(grad):
    # The upstream of `x * 3 + f(x)` is one tensor, handed to both terms' nodes, and the
    # caller's `grad_outputs`; a `.sum()`'s upstream is an expanded tensor, which an in-place
    # op cannot even write.
    @custom_gradient
    def doubled(x):
        return x * 2, grad

    weights = torch.tensor([1.0, 10.0], dtype=D)
    for _ in range(3):  # the general code, then a plan if one took it
        x = torch.tensor([1.0, 2.0], dtype=D, requires_grad=True)
        given = weights.clone()
        (found,) = torch.autograd.grad(x * 3 + doubled(x), x, given)
        torch.testing.assert_close(found, 5 * weights)
        torch.testing.assert_close(given, weights)
        (found,) = torch.autograd.grad((x * 3 + doubled(x)).sum(), x)
        torch.testing.assert_close(found, torch.full_like(x, 5.0))


def test_a_grad_fn_editing_a_tensor_of_its_own_keeps_its_plan():
    @custom_gradient
    def doubled(x):
        def grad(dy):
            g = dy * 1
            g += dy  # a new tensor of grad_fn's own: the upstream is not edited
            return g

        return x * 2, grad

    x = torch.tensor([1.0, 2.0], dtype=D, requires_grad=True)
    doubled(x)
    y = doubled(x)
    assert hasattr(y.grad_fn, "plan")  # a plan's node (tests/test_plans.py's `planned`)
    (found,) = torch.autograd.grad(x * 3 + y, x, torch.ones_like(x))
    torch.testing.assert_close(found, torch.full_like(x, 5.0))


class _Doubler(nn.Module):
    """`x * 2` as a method (the compile route of Note [compile], f under the watcher)."""

    def __init__(self, grad):
        super().__init__()
        self.grad = grad

    @custom_gradient
    def forward(self, x):
        return x * 2, self.grad


class _Scaled(nn.Module):
    """`x * 2 * k` (k a Parameter, 1.0), its grad_fn scaling the upstream in place."""

    def __init__(self):
        super().__init__()
        self.k = nn.Parameter(torch.tensor(1.0, dtype=D))

    @custom_gradient
    def forward(self, x):
        def grad_fn(dy, variables=None):
            dy *= 2 * self.k.detach()
            return dy, [(dy * x).sum()]

        return x * 2 * self.k, grad_fn


@pytest.mark.slow
@pytest.mark.traced_compile
@pytest.mark.parametrize(
    ("grad", "route"),
    [
        *[(grad, "inside the node") for grad in EDITS],
        *[(grad, "a method") for grad in EDITS],
        (None, "a Parameter among the variables"),
    ],
)
def test_a_compiled_grad_fn_editing_its_upstream_leaves_the_other_gradients_alone(
    dynamo, grad, route
):
    # As in eager mode: a grad_fn that edits an upstream in place gets copies (Note [upstreams
    # edited in place]), read from its code while Dynamo traces the node's backward, in one
    # graph, without a recompile.
    from torch._dynamo.utils import counters

    if route == "inside the node":

        @custom_gradient
        def doubled(x):
            return x * 2, grad

    else:
        doubled = _Doubler(grad) if grad else _Scaled()
    compiled = torch.compile(lambda x: x * 3 + doubled(x), backend="aot_eager", fullgraph=True)
    weights = torch.tensor([1.0, 10.0], dtype=D)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(3):
            x = torch.tensor([1.0, 2.0], dtype=D, requires_grad=True)
            given = weights.clone()
            (found,) = torch.autograd.grad(compiled(x), x, given)
            torch.testing.assert_close(found, 5 * weights)
            torch.testing.assert_close(given, weights)
    assert counters["stats"]["unique_graphs"] == 1
